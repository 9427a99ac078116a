/* SPDX-License-Identifier: BSD-3-Clause */
/* A release and an extend of an etcd hold as requests on a loop
 * (etcd_release.h). */
#include <inttypes.h>

#include "clock.h"
#include "common.h"
#include "etcd_kv.h"
#include "etcd_release.h"
#include "etcd_renew.h"
#include "etcd_request.h"

/* ---- release: revoke the lease ------------------------------------------- */

typedef struct revoke {
    void (*done)(struct revoke *r); /* once, from the loop */
    int rc;
    int64_t valid_until_ns, sent_ns;
    dlock__op *op; /* the engine's request, or NULL */
    dlock__etcd_req q;
} revoke;

static void revoked(dlock__etcd_req *q)
{
    revoke *r = DLOCK__OWNER(q, revoke, q);
    int rc = q->rc;
    json_decref(q->out);
    /* "Not found" after a copy of this revoke went unanswered: the lease
     * cannot have ended by itself while it was valid when we sent, so that
     * copy revoked it (it reached a member that answered too late). */
    if (rc == DLOCK_EEXPIRED && q->unknown_before && r->valid_until_ns != INT64_MIN &&
        r->sent_ns < r->valid_until_ns) {
        rc = DLOCK_OK;
        if (q->err)
            dlock__err_clear(q->err);
    }
    r->rc = rc;
    r->done(r);
}

static int revoke_start(revoke *r, dlock__etcd *e, const dlock__etcd_hold *h,
                        dlock__loop *loop, dlock__errbuf *err)
{
    r->valid_until_ns = h->valid_until_ns;
    r->sent_ns = dlock__now_ns();
    r->q.err = err;
    r->q.done = revoked;
    json_t *body = dlock__etcd_lease_body(h->lease);
    int rc = body ? dlock__etcd_req_start(&r->q, e, loop, "/v3/lease/revoke", body,
                                          dlock__etcd_call_deadline(e),
                                          dlock__etcd_io_timeout_ms(e))
                  : DLOCK_ENOMEM;
    json_decref(body);
    return rc;
}

static void release_answered(revoke *r)
{
    dlock__op *op = r->op;
    op->v.code = r->rc;
    dlock__free(r);
    dlock__op_complete(op);
}

int dlock__etcd_release_op(dlock__op *op, dlock__etcd *e, const dlock__etcd_hold *h,
                           dlock__errbuf *err)
{
    if (!h) {
        dlock__op_complete_soon(op, DLOCK_OK); /* nothing held: nothing to revoke */
        return DLOCK_OK;
    }
    revoke *r = dlock__malloc(sizeof *r);
    if (!r)
        return DLOCK_ENOMEM;
    r->done = release_answered;
    r->op = op;
    int rc = revoke_start(r, e, h, op->loop, err);
    if (rc != DLOCK_OK)
        dlock__free(r);
    return rc;
}

/* The blocking release: the revoke on a private loop (nothing cancels it). */
typedef struct call {
    dlock__etcd_blocking b;
    revoke r;
} call;

static void call_done(revoke *r)
{
    DLOCK__OWNER(r, call, r)->b.over = 1;
}

static void call_cancelled(dlock__etcd_blocking *b)
{
    dlock__etcd_req_cancel(&DLOCK__OWNER(b, call, b)->r.q);
}

int dlock__etcd_release(dlock__etcd *e, dlock__etcd_hold *h, dlock__errbuf *err)
{
    call k;
    dlock__etcd_blocking_open(&k.b, -1, call_cancelled);
    k.r.done = call_done;
    k.r.op = NULL;
    int rc = revoke_start(&k.r, e, h, &k.b.lp.loop, err);
    if (rc == DLOCK_OK) {
        dlock__etcd_blocking_wait(&k.b);
        rc = k.r.rc;
    }
    dlock__etcd_blocking_close(&k.b);
    dlock__etcd_hold_clear(h);
    return rc;
}

/* ---- extend: (learn the TTL,) keep the lease alive, read the key --------- */

typedef struct extend {
    dlock__op *op;
    dlock__etcd *e;
    dlock__etcd_hold *h; /* the caller's: its ttl_s is learned here */
    int64_t ttl_ms;
    dlock__errbuf *err;
    void (*ended)(void *arg);
    void *arg;
    dlock__etcd_req q;       /* the TTL lookup of an adopted hold */
    dlock__etcd_renew_req r; /* then the renewal */
} extend;

static void extend_answered(extend *x, int rc)
{
    dlock__op *op = x->op;
    op->v.code = rc;
    dlock__free(x);
    dlock__op_complete(op);
}

/* Would etcd grant a lease of ttl_ms the TTL this one has? Its TTL in
 * whole seconds does; when etcd raised our grant to its minimum lease, any
 * TTL up to that minimum does too (it would be raised the same way). */
static int same_lease_ttl(const dlock__etcd_hold *h, int64_t ttl_ms)
{
    int64_t want_s = dlock__etcd_ttl_s(ttl_ms);
    int raised = h->asked_s > 0 && h->ttl_s > h->asked_s;
    return want_s == h->ttl_s || (raised && want_s < h->ttl_s);
}

/* ttl_ms 0: renew to the granted TTL, whatever etcd made of ours. */
static int ttl_refused(extend *x)
{
    const dlock__etcd_hold *h = x->h;
    if (x->ttl_ms == 0 || h->ttl_s <= 0 || same_lease_ttl(h, x->ttl_ms))
        return DLOCK_OK;
    if (x->err)
        dlock__err_set(x->err, "etcd: a lease keeps the TTL it was granted (%" PRId64
                       " s); extend renews it to that (ttl_ms 0)", h->ttl_s);
    return DLOCK_ENOTSUP;
}

static void renewed(dlock__etcd_renew_req *r)
{
    extend *x = DLOCK__OWNER(r, extend, r);
    if (r->rc == DLOCK_OK) {
        x->op->v.until_ns = r->valid_until_ns;
        x->op->v.renew_ttl_ms = x->h->ttl_s * 1000;
    } else if (r->rc == DLOCK_EEXPIRED || r->rc == DLOCK_ENOTOWNER) {
        x->ended(x->arg);
    }
    extend_answered(x, r->rc);
}

/* Each member gets its io_timeout_ms, also near the end of our validity:
 * etcd, not our estimate, says whether the lease lives (the keep-alive of
 * a lease that ended is "not found", and an ended lease never comes back),
 * so a late answer is still true. Cutting the call at the estimate's end
 * kept it from failing over past a silent member. */
static int renew_begin(extend *x)
{
    x->r.err = x->err;
    x->r.done = renewed;
    return dlock__etcd_renew_start(&x->r, x->e, x->h, dlock__etcd_call_deadline(x->e),
                                   x->op->loop);
}

/* An adopted hold's lease: the TTL it was granted is now known. */
static void ttl_learned(dlock__etcd_req *q)
{
    extend *x = DLOCK__OWNER(q, extend, q);
    int rc = q->rc;
    if (rc == DLOCK_OK) {
        int64_t left, granted = 0;
        rc = dlock__etcd_ttl_reply(q->out, &left, &granted, x->err);
        json_decref(q->out);
        if (rc == DLOCK_OK)
            x->h->ttl_s = granted; /* 0 if the lease is gone: the renewal says so */
    }
    if (rc == DLOCK_OK)
        rc = ttl_refused(x);
    if (rc == DLOCK_OK)
        rc = renew_begin(x);
    if (rc != DLOCK_OK)
        extend_answered(x, rc); /* from the loop: the lookup's done */
}

static int ttl_lookup(extend *x)
{
    x->q.err = x->err;
    x->q.done = ttl_learned;
    json_t *body = dlock__etcd_lease_body(x->h->lease);
    int rc = body ? dlock__etcd_req_start(&x->q, x->e, x->op->loop, "/v3/lease/timetolive",
                                          body, dlock__etcd_call_deadline(x->e),
                                          dlock__etcd_io_timeout_ms(x->e))
                  : DLOCK_ENOMEM;
    json_decref(body);
    return rc;
}

int dlock__etcd_extend_op(dlock__op *op, dlock__etcd *e, dlock__etcd_hold *h, int64_t ttl_ms,
                          dlock__errbuf *err, void (*ended)(void *arg), void *arg)
{
    extend *x = dlock__malloc(sizeof *x);
    if (!x)
        return DLOCK_ENOMEM;
    *x = (extend){.op = op, .e = e, .h = h, .ttl_ms = ttl_ms, .err = err, .ended = ended,
                  .arg = arg};
    int rc;
    if (h->ttl_s == 0) /* adopted: learn the TTL the lease was granted */
        rc = ttl_lookup(x);
    else if ((rc = ttl_refused(x)) == DLOCK_OK)
        rc = renew_begin(x);
    if (rc != DLOCK_OK)
        dlock__free(x);
    return rc;
}
