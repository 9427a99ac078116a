/* SPDX-License-Identifier: BSD-3-Clause */
/* A release and an extend of an etcd hold as requests on a loop
 * (etcd_release.h). */
#include <inttypes.h>

#include "clock.h"
#include "common.h"
#include "etcd_delay.h"
#include "etcd_json.h"
#include "etcd_kv.h"
#include "etcd_relet.h"
#include "etcd_release.h"
#include "etcd_renew.h"
#include "etcd_request.h"

/* ---- release: revoke the lease, or delete the key on a session ----------- */

typedef struct revoke {
    void (*done)(struct revoke *r); /* once, from the loop */
    int rc;
    int64_t valid_until_ns, sent_ns;
    dlock__op *op; /* the engine's request, or NULL */
    int key_only;  /* a key on a session: its delete, not a revoke */
    /* A key on a session whose fence is known: the key is the hold's
     * own (no other live hold has its ID; a later one may take it only
     * after this release removed it, etcd_session.h), so its release is a
     * plain DeleteRange judged by the deleted key's create revision, this
     * (etcd_kv.h); 0: the transaction on the lease. */
    int64_t drop_rev;
    dlock__etcd_deleted dropped; /* its DeleteRange's reply */
    dlock__etcd_req q;
    /* An adopted hold's: its token's lease, and what the key read needs;
     * then its key, while its lease's keys are counted */
    int64_t lease, named_rev;
    dlock__etcd *e;
    dlock__etcd_hold key;
    /* The hold's lock-delay companion lease (etcd_delay.h), revoked
     * once the hold's own release went through; 0: none. */
    int64_t delay_lease;
    int on_heap; /* allocated here, not in the op's scratch (op.h) */
} revoke;
_Static_assert(sizeof(revoke) <= DLOCK__OP_SCRATCH, "a release must fit a blocking call's scratch");

/* Delete a hold's own key (a hold on a session: no other live hold has
 * its ID, and a later one takes it again only after this delete removed
 * it, sent once: etcd_session.h) with one DeleteRange,
 * as Go's Mutex does, and judge the hold from the key it deleted: its
 * body, and what the reply says: DLOCK_OK when the key deleted was made
 * at rev (the hold's fence), DLOCK_EEXPIRED when there was none (the
 * lease ended, or it was broken) or it was made again (at another
 * revision: a late copy of a create whose hold was lost). */
static json_t *key_drop_body(const char *key, size_t key_len)
{
    return json_pack("{s:o, s:b}", "key", dlock__etcd_json_b64(key, key_len), "prev_kv", 1);
}

static int key_drop_reply(const dlock__etcd_deleted *d, int64_t rev, dlock__errbuf *err)
{
    if (d->bad)
        return dlock__etcd_kv_proto(err, "deleterange");
    if (d->deleted == 1 && d->has_prev && d->prev_create_rev == rev)
        return DLOCK_OK;
    if (err)
        dlock__err_set(err, d->deleted ? "etcd: the lock key had been made again (its hold was "
                                         "lost)"
                                       : "etcd: the lock key was gone (its lease ended, or it "
                                         "was broken)");
    return DLOCK_EEXPIRED;
}

static void revoked(dlock__etcd_req *q)
{
    revoke *r = DLOCK__OWNER(q, revoke, q);
    int rc = q->rc;
    if (rc == DLOCK_OK && r->key_only)
        rc = r->drop_rev ? key_drop_reply(&r->dropped, r->drop_rev, q->err)
                         : dlock__etcd_key_delete_reply(q->out, q->err);
    json_decref(q->out);
    /* "Not found" after a copy of this revoke (or delete) went unanswered:
     * the lease cannot have ended by itself while it was valid when we
     * sent, so that copy revoked it (or deleted the key: it reached a
     * member that answered too late). */
    if (rc == DLOCK_EEXPIRED && q->unknown_before && r->valid_until_ns != INT64_MIN &&
        r->sent_ns < r->valid_until_ns) {
        rc = DLOCK_OK;
        if (q->err)
            dlock__err_clear(q->err);
    }
    if (q->unknown_before && r->op)
        r->op->v.flags |= DLOCK__V_RESENT; /* a copy may land late: the key is not reused */
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
    r->key_only = h->on_session;
    r->drop_rev = h->on_session ? h->rev : 0;
    if (r->drop_rev) /* one write, as Go's Mutex's Unlock */
        return dlock__etcd_req_post_delete(&r->q, e, loop, key_drop_body(h->key, h->key_len),
                                           dlock__etcd_call_deadline(e), &r->dropped);
    if (h->on_session) /* the session's lease is not this hold's to revoke */
        return dlock__etcd_req_post(&r->q, e, loop, "/v3/kv/txn",
                                    dlock__etcd_json_if_created(
                                        dlock__etcd_key_delete_body(h->key, h->key_len, h->lease),
                                        h->key, h->key_len, h->named_rev),
                                    dlock__etcd_call_deadline(e));
    return dlock__etcd_req_post(&r->q, e, loop, "/v3/lease/revoke",
                                dlock__etcd_lease_body(h->lease), dlock__etcd_call_deadline(e));
}

static void release_answered(revoke *r)
{
    dlock__op *op = r->op;
    op->v.code = r->rc;
    if (r->on_heap)
        dlock__free(r);
    dlock__op_complete(op);
}

/* The companion's revoke is back: its outcome changes nothing (a
 * companion left lapses by its TTL, a lock-delay for nothing). */
static void companion_revoked(dlock__etcd_req *q)
{
    revoke *r = DLOCK__OWNER(q, revoke, q);
    if (q->rc == DLOCK_OK)
        json_decref(q->out);
    release_answered(r);
}

/* A clean release (the hold's key went while its lease lived) frees the
 * name at once: its lock-delay companion goes too, after the key, so a
 * release that finds the lease ended (DLOCK_EEXPIRED: not clean) leaves
 * the delay, and so does a holder that dies between the two. */
static void released(revoke *r)
{
    int64_t companion = r->delay_lease;
    r->delay_lease = 0;
    if (r->rc == DLOCK_OK && companion) {
        r->q.err = NULL;
        r->q.done = companion_revoked;
        if (dlock__etcd_req_post(&r->q, r->e, r->op->loop, "/v3/lease/revoke",
                                 dlock__etcd_lease_body(companion),
                                 dlock__etcd_call_deadline(r->e)) == DLOCK_OK)
            return;
    }
    release_answered(r);
}

static void lease_keys_read(dlock__etcd_req *q);

/* An adopted hold's key is read: the lease it is on now is revoked (the
 * token's, unless an extend to a new TTL moved it: etcd_relet.h); no
 * key, the token's lease, whose revoke says whether it had ended. A key
 * whose ID is not its lease's was moved, or is on a session
 * (etcd_session.h), whose other keys are not ours: its lease's keys are
 * counted first. */
static void key_read(dlock__etcd_req *q)
{
    revoke *r = DLOCK__OWNER(q, revoke, q);
    dlock__etcd_kv kv;
    int rc = dlock__etcd_get_answer(q->rc, q->out, &kv, q->err);
    dlock__etcd_hold h = {.lease = kv.key && kv.lease ? kv.lease : r->lease,
                          .valid_until_ns = r->valid_until_ns};
    /* a token that names its hold's fence: that hold is over when its key
     * is gone or made again (the session gave it to a later hold) */
    if (rc == DLOCK_OK && r->named_rev && (!kv.key || kv.create_rev != r->named_rev)) {
        rc = DLOCK_EEXPIRED;
        if (q->err)
            dlock__err_set(q->err, "etcd: the token's hold is over (its key is gone or was "
                                   "made again)");
    }
    if (rc == DLOCK_OK && kv.key && kv.lease &&
        !dlock__etcd_key_names_lease(kv.key, kv.key_len, kv.lease)) {
        r->key = (dlock__etcd_hold){.lease = kv.lease, .key = kv.key, .key_len = kv.key_len,
                                    .valid_until_ns = r->valid_until_ns, .on_session = 1,
                                    .named_rev = r->named_rev};
        r->q.done = lease_keys_read;
        rc = dlock__etcd_req_post(&r->q, r->e, r->op->loop, "/v3/lease/timetolive",
                                  dlock__etcd_ttl_keys_body(kv.lease),
                                  dlock__etcd_call_deadline(r->e));
        if (rc == DLOCK_OK)
            return; /* the key is r's now */
        kv.key = NULL;
        dlock__etcd_hold_clear(&r->key);
    }
    if (rc == DLOCK_OK)
        rc = revoke_start(r, r->e, &h, r->op->loop, q->err);
    dlock__etcd_kv_clear(&kv);
    if (rc != DLOCK_OK) {
        r->rc = rc;
        r->done(r);
    }
}

/* A lease that holds our key alone is ours to revoke (an extend moved
 * the key to it); one that holds others is a session's: our key goes. */
static void lease_keys_read(dlock__etcd_req *q)
{
    revoke *r = DLOCK__OWNER(q, revoke, q);
    int rc = q->rc;
    if (rc == DLOCK_OK) {
        if (dlock__etcd_ttl_key_count(q->out) <= 1)
            r->key.on_session = 0;
        json_decref(q->out);
    }
    if (rc == DLOCK_OK)
        rc = revoke_start(r, r->e, &r->key, r->op->loop, q->err);
    dlock__etcd_hold_clear(&r->key);
    if (rc != DLOCK_OK) {
        r->rc = rc;
        r->done(r);
    }
}

/* An adopted hold (its create revision unknown: it came as a token) names
 * its key; the key's lease is read before the revoke. */
static int adopted_start(revoke *r, dlock__etcd *e, const dlock__etcd_hold *h,
                         dlock__errbuf *err)
{
    r->lease = h->lease;
    r->named_rev = h->named_rev;
    r->e = e;
    r->valid_until_ns = h->valid_until_ns;
    r->q.err = err;
    r->q.done = key_read;
    return dlock__etcd_req_post(&r->q, e, r->op->loop, "/v3/kv/range",
                                dlock__etcd_get_body(h->key, h->key_len),
                                dlock__etcd_call_deadline(e));
}

int dlock__etcd_release_op(dlock__op *op, dlock__etcd *e, const dlock__etcd_hold *h,
                           dlock__errbuf *err)
{
    if (!h) {
        dlock__op_complete_soon(op, DLOCK_OK); /* nothing held: nothing to revoke */
        return DLOCK_OK;
    }
    /* In what a blocking release lends (op.h): a record of 2 KB
     * allocated per release made malloc consolidate its fast bins. */
    int on_heap = op->scratch_len < sizeof(revoke);
    revoke *r = on_heap ? dlock__malloc(sizeof *r) : op->scratch;
    if (!r)
        return DLOCK_ENOMEM;
    r->on_heap = on_heap;
    r->done = released;
    r->op = op;
    r->e = e;
    r->delay_lease = h->delay_lease;
    int rc = h->rev == 0 && h->key ? adopted_start(r, e, h, err)
                                   : revoke_start(r, e, h, op->loop, err);
    if (rc != DLOCK_OK && on_heap)
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

/* ---- extend: (learn the TTL,) keep the lease alive and read the key, or
 * move the key to a new lease of the new TTL (etcd_relet.h) ------------- */

typedef struct extend {
    dlock__op *op;
    dlock__etcd *e;
    dlock__etcd_hold *h; /* the caller's: its ttl_s is learned here */
    int64_t ttl_ms;
    dlock__errbuf *err;
    void (*ended)(void *arg);
    void (*off_session)(void *arg);
    void *arg;
    int64_t *owed;           /* the handle's owed lease (etcd_hold.h) */
    int shared;              /* the owner's other handles share the lease */
    dlock__etcd_req q;       /* the TTL lookup of an adopted hold */
    dlock__etcd_renew_req r; /* then the renewal, */
    dlock__etcd_relet m;     /* or the move to a new lease */
    const char *key;         /* a lock-delay's: what its companion's move needs */
    size_t key_len, prefix_len;
    int64_t delay_ms;
    dlock__etcd_delay_move dm;
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

/* A renewal does (1), or a move to a new lease (0); ttl_ms 0: renew to
 * the granted TTL, whatever etcd made of ours. A lease whose TTL is still
 * unknown (ttl_s 0: an adopted one that is gone) is renewed, which says
 * that it is gone. */
static int renewal_does(const extend *x)
{
    const dlock__etcd_hold *h = x->h;
    return x->ttl_ms == 0 || h->ttl_s <= 0 || same_lease_ttl(h, x->ttl_ms);
}

/* A lease the owner's other handles share is theirs too: moving their
 * key would leave their renewals on a revoked lease. */
static int move_refused(extend *x)
{
    if (!x->shared)
        return DLOCK_OK;
    if (x->err)
        dlock__err_set(x->err, "etcd: the owner's other handles share this lease (%" PRId64
                       " s); extend renews it to that TTL (ttl_ms 0)", x->h->ttl_s);
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

/* The companion's move is back: best effort, the extend stands (a
 * companion left on its old lease ends its delay early). */
static void companion_moved(dlock__etcd_delay_move *dm)
{
    extend_answered(DLOCK__OWNER(dm, extend, dm), DLOCK_OK);
}

/* The key is on the new lease (the hold's now), or the move failed; a
 * lease whose revoke did not go through is the handle's to revoke later.
 * A hold with a lock-delay moves its companion to the new TTL too. */
static void relet_done(dlock__etcd_relet *m)
{
    extend *x = DLOCK__OWNER(m, extend, m);
    dlock__etcd_hold *h = x->h;
    if (m->owed)
        *x->owed = m->owed; /* a newer owed lease replaces an older one */
    if (m->rc == DLOCK_OK) {
        /* the token stays: it names the key (the place in line), which
         * kept its create revision, the fence; a key that left a session
         * is on a lease of its own now */
        if (h->on_session && x->off_session)
            x->off_session(x->arg);
        h->on_session = 0;
        h->lease = m->lease;
        h->ttl_s = m->ttl_s;
        h->asked_s = m->asked_s;
        h->valid_until_ns = m->valid_until_ns;
        x->op->v.until_ns = m->valid_until_ns;
        x->op->v.renew_ttl_ms = m->ttl_s * 1000;
    } else if (m->rc == DLOCK_ENOTOWNER) {
        x->ended(x->arg);
    }
    x->dm.done = companion_moved;
    if (m->rc == DLOCK_OK && h->delay_lease && x->key &&
        dlock__etcd_delay_move_start(&x->dm, x->e, x->op->loop, x->key, x->key_len,
                                     x->prefix_len, h, x->delay_ms) == DLOCK_OK)
        return;
    extend_answered(x, m->rc);
}

static int relet_begin(extend *x)
{
    int rc = move_refused(x);
    if (rc != DLOCK_OK)
        return rc;
    x->m.err = x->err;
    x->m.done = relet_done;
    return dlock__etcd_relet_start(&x->m, x->e, x->h, x->ttl_ms, x->op->loop);
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
        /* a lease that holds our key alone is ours (an extend moved the
         * key to it), not a session's */
        if (rc == DLOCK_OK && dlock__etcd_ttl_key_count(q->out) <= 1)
            x->h->on_session = 0;
        json_decref(q->out);
        if (rc == DLOCK_OK)
            x->h->ttl_s = granted; /* 0 if the lease is gone: the renewal says so */
    }
    if (rc == DLOCK_OK)
        rc = renewal_does(x) ? renew_begin(x) : relet_begin(x);
    if (rc != DLOCK_OK)
        extend_answered(x, rc); /* from the loop: the lookup's done */
}

static int ttl_lookup(extend *x)
{
    x->q.err = x->err;
    x->q.done = ttl_learned;
    return dlock__etcd_req_post(&x->q, x->e, x->op->loop, "/v3/lease/timetolive",
                                dlock__etcd_ttl_keys_body(x->h->lease),
                                dlock__etcd_call_deadline(x->e));
}

/* An adopted hold's key is read: the hold's lease is the one the key is
 * on (an extend to a new TTL may have moved it since the token was
 * printed: etcd_relet.h); no key, the token's, which the renewal finds
 * gone. Then the TTL that lease was granted. */
static void lease_learned(dlock__etcd_req *q)
{
    extend *x = DLOCK__OWNER(q, extend, q);
    dlock__etcd_kv kv;
    int rc = dlock__etcd_get_answer(q->rc, q->out, &kv, x->err);
    if (rc == DLOCK_OK && x->h->named_rev && (!kv.key || kv.create_rev != x->h->named_rev)) {
        rc = DLOCK_ENOTOWNER; /* the token's hold is over: the key is a later hold's */
        if (x->err)
            dlock__err_set(x->err, "etcd: the lock key was deleted or replaced");
    }
    if (rc == DLOCK_OK && kv.key && kv.lease) {
        x->h->lease = kv.lease; /* the renewal is off during the extend */
        x->h->on_session = !dlock__etcd_key_names_lease(kv.key, kv.key_len, kv.lease);
    }
    dlock__etcd_kv_clear(&kv);
    if (rc == DLOCK_OK)
        rc = ttl_lookup(x);
    if (rc != DLOCK_OK)
        extend_answered(x, rc); /* from the loop: the read's done */
}

static int lease_lookup(extend *x)
{
    x->q.err = x->err;
    x->q.done = lease_learned;
    return dlock__etcd_req_post(&x->q, x->e, x->op->loop, "/v3/kv/range",
                                dlock__etcd_get_body(x->h->key, x->h->key_len),
                                dlock__etcd_call_deadline(x->e));
}

int dlock__etcd_extend_op(dlock__op *op, dlock__etcd *e, const dlock__etcd_extend_args *a)
{
    extend *x = dlock__malloc(sizeof *x);
    if (!x)
        return DLOCK_ENOMEM;
    *x = (extend){.op = op, .e = e, .h = a->h, .ttl_ms = a->ttl_ms, .err = a->err,
                  .ended = a->ended, .off_session = a->off_session, .arg = a->arg, .owed = a->owed, .shared = a->shared,
                  .key = a->key, .key_len = a->key_len, .prefix_len = a->prefix_len,
                  .delay_ms = a->delay_ms};
    int rc;
    if (x->h->ttl_s == 0) /* adopted: learn the key's lease and its granted TTL */
        rc = lease_lookup(x);
    else
        rc = renewal_does(x) ? renew_begin(x) : relet_begin(x);
    if (rc != DLOCK_OK)
        dlock__free(x);
    return rc;
}
