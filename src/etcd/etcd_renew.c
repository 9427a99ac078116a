/* SPDX-License-Identifier: BSD-3-Clause */
/* Renewing a hold as a request on a loop (etcd_renew.h). */
#include <string.h>

#include "clock.h"
#include "common.h"
#include "etcd_kv.h"
#include "etcd_renew.h"
#include "etcd_session.h"

typedef dlock__etcd_renew_req renew;

static void end(renew *r, int rc);

/* The companion's keep-alive is back: best effort, as it outlives the
 * hold's lease by the delay (the next renewal tries again). */
static void companion_kept(dlock__etcd_req *q)
{
    renew *r = DLOCK__OWNER(q, renew, q);
    if (q->rc == DLOCK_OK)
        json_decref(q->out);
    end(r, DLOCK_OK);
}

static void end(renew *r, int rc)
{
    /* A hold with a lock-delay keeps its companion's lease alive too, but
     * only once its own lease is confirmed alive: a late renewal of a
     * lease that ended must not move the delay's end (etcd_delay.h). */
    int64_t companion = r->delay_lease;
    r->delay_lease = 0;
    if (rc == DLOCK_OK && companion) {
        r->q.done = companion_kept;
        r->q.err = NULL;
        if (dlock__etcd_req_post(&r->q, r->e, r->loop, "/v3/lease/keepalive",
                                 dlock__etcd_keepalive_body(companion),
                                 r->deadline_ns) == DLOCK_OK)
            return;
    }
    if (rc == DLOCK_OK)
        r->valid_until_ns = r->sent_ns + r->ttl_s * 1000 * DLOCK__NS_PER_MS;
    dlock__free(r->key);
    r->key = NULL;
    r->rc = rc;
    r->done(r);
}

/* The key's read: still there, with our create revision? */
static void read_done(dlock__etcd_req *q)
{
    renew *r = DLOCK__OWNER(q, renew, q);
    dlock__etcd_kv kv;
    int rc = dlock__etcd_get_answer(q->rc, q->out, &kv, r->err);
    /* (an adopted hold, its revision unknown, reads first: adopted_read) */
    if (rc == DLOCK_OK && kv.create_rev != r->rev) {
        rc = DLOCK_ENOTOWNER;
        if (r->err)
            dlock__err_set(r->err, "etcd: the lock key was deleted or replaced");
    }
    dlock__etcd_kv_clear(&kv);
    end(r, rc);
}

/* The lease lives (or not); then is our key still there (nobody deleted
 * it)? */
static void keepalive_done(dlock__etcd_req *q)
{
    renew *r = DLOCK__OWNER(q, renew, q);
    int rc = q->rc;
    if (rc == DLOCK_OK) {
        rc = dlock__etcd_keepalive_reply(q->out, r->lease, &r->ttl_s, r->err);
        json_decref(q->out);
    }
    if (rc == DLOCK_OK) {
        q->done = read_done;
        rc = dlock__etcd_req_post(q, r->e, r->loop, "/v3/kv/range",
                                  dlock__etcd_get_body(r->key, r->key_len), r->deadline_ns);
    }
    if (rc != DLOCK_OK)
        end(r, rc); /* from the loop: the keep-alive's done */
}

/* An adopted hold's keep-alive is back: the key was there before it. */
static void adopted_kept(dlock__etcd_req *q)
{
    renew *r = DLOCK__OWNER(q, renew, q);
    int rc = q->rc;
    if (rc == DLOCK_OK) {
        rc = dlock__etcd_keepalive_reply(q->out, r->lease, &r->ttl_s, r->err);
        json_decref(q->out);
    }
    end(r, rc);
}

/* An adopted hold (rev 0: it came as a token) names its key, whose lease
 * may have moved since the token was printed (an extend to a new TTL,
 * etcd_relet.h): the key is read first, and the lease it is on kept
 * alive. The same two requests as a held one's, in the other order. */
static void adopted_read(dlock__etcd_req *q)
{
    renew *r = DLOCK__OWNER(q, renew, q);
    dlock__etcd_kv kv;
    int rc = dlock__etcd_get_answer(q->rc, q->out, &kv, r->err);
    if (rc == DLOCK_OK && (!kv.key || (r->named_rev && kv.create_rev != r->named_rev))) {
        rc = DLOCK_ENOTOWNER;
        if (r->err)
            dlock__err_set(r->err, "etcd: the lock key was deleted or replaced");
    }
    if (rc == DLOCK_OK && kv.lease)
        r->lease = kv.lease;
    dlock__etcd_kv_clear(&kv);
    if (rc == DLOCK_OK) {
        q->done = adopted_kept;
        r->sent_ns = dlock__now_ns();
        rc = dlock__etcd_req_post(q, r->e, r->loop, "/v3/lease/keepalive",
                                  dlock__etcd_keepalive_body(r->lease), r->deadline_ns);
    }
    if (rc != DLOCK_OK)
        end(r, rc); /* from the loop: the read's done */
}

/* What both starts copy from the hold; DLOCK_ENOMEM: nothing to undo. */
static int setup(renew *r, dlock__etcd *e, const dlock__etcd_hold *h, int64_t deadline_ns,
                 dlock__loop *loop)
{
    r->e = e;
    r->loop = loop;
    r->lease = h->lease;
    r->rev = h->rev;
    r->named_rev = h->named_rev;
    r->delay_lease = h->delay_lease;
    r->deadline_ns = deadline_ns;
    r->ttl_s = 0;
    r->valid_until_ns = INT64_MIN;
    r->joined = 0;
    r->key_len = h->key_len;
    if (!(r->key = dlock__malloc(h->key_len + 1)))
        return DLOCK_ENOMEM;
    memcpy(r->key, h->key, h->key_len + 1);
    r->q.err = r->err;
    return DLOCK_OK;
}

int dlock__etcd_renew_start(renew *r, dlock__etcd *e, const dlock__etcd_hold *h,
                            int64_t deadline_ns, dlock__loop *loop)
{
    if (setup(r, e, h, deadline_ns, loop) != DLOCK_OK)
        return DLOCK_ENOMEM;
    int adopted = r->rev == 0;
    json_t *body = adopted ? dlock__etcd_get_body(r->key, r->key_len)
                           : dlock__etcd_keepalive_body(r->lease);
    r->q.done = adopted ? adopted_read : keepalive_done;
    r->sent_ns = dlock__now_ns();
    int rc = dlock__etcd_req_post(&r->q, e, loop, adopted ? "/v3/kv/range" : "/v3/lease/keepalive",
                                  body, deadline_ns);
    if (rc != DLOCK_OK) {
        dlock__free(r->key);
        r->key = NULL;
    }
    return rc;
}

/* The session's keep-alive is back: the lease lives (or not); then is our
 * key still there? */
static void joined_kept(dlock__etcd_ka_join *j)
{
    renew *r = DLOCK__OWNER(j, renew, j);
    r->joined = 0;
    r->sent_ns = j->sent_ns;
    r->ttl_s = j->ttl_s;
    int rc = j->rc;
    if (rc == DLOCK_OK) {
        r->q.done = read_done;
        rc = dlock__etcd_req_post(&r->q, r->e, r->loop, "/v3/kv/range",
                                  dlock__etcd_get_body(r->key, r->key_len), r->deadline_ns);
    }
    if (rc != DLOCK_OK)
        end(r, rc); /* from the loop: the keep-alive's done */
}

int dlock__etcd_renew_start_shared(renew *r, dlock__etcd *e, const dlock__etcd_hold *h,
                                   struct dlock__etcd_session *s, int64_t deadline_ns,
                                   dlock__loop *loop)
{
    /* an adopted hold reads its key first (its lease may have moved) */
    if (!s || h->rev == 0 || h->lease != s->lease)
        return dlock__etcd_renew_start(r, e, h, deadline_ns, loop);
    if (setup(r, e, h, deadline_ns, loop) != DLOCK_OK)
        return DLOCK_ENOMEM;
    r->j.err = r->err;
    r->j.deadline_ns = deadline_ns;
    r->j.done = joined_kept;
    if (dlock__etcd_keepalive_join(&r->j, s, e, loop) == DLOCK_OK) {
        r->joined = 1;
        return DLOCK_OK;
    }
    dlock__free(r->key); /* no keeper for us: a keep-alive of our own */
    r->key = NULL;
    return dlock__etcd_renew_start(r, e, h, deadline_ns, loop);
}

void dlock__etcd_renew_cancel(renew *r)
{
    if (r->joined) { /* waiting for the session's keep-alive */
        dlock__etcd_keepalive_leave(&r->j);
        r->joined = 0;
        end(r, DLOCK_ECANCELED);
        return;
    }
    dlock__etcd_req_cancel(&r->q); /* its done ends r */
}

/* ---- the blocking renewal ------------------------------------------------ */

typedef struct call {
    dlock__etcd_blocking b;
    renew r;
} call;

static void call_done(renew *r)
{
    DLOCK__OWNER(r, call, r)->b.over = 1;
}

static void call_cancelled(dlock__etcd_blocking *b)
{
    dlock__etcd_renew_cancel(&DLOCK__OWNER(b, call, b)->r);
}

int dlock__etcd_renew(dlock__etcd *e, dlock__etcd_hold *h, int64_t deadline_ns,
                      int cancel_fd, dlock__errbuf *err)
{
    call k;
    dlock__etcd_blocking_open(&k.b, cancel_fd, call_cancelled);
    k.r.err = err;
    k.r.done = call_done;
    int rc = dlock__etcd_renew_start(&k.r, e, h, deadline_ns, &k.b.lp.loop);
    if (rc == DLOCK_OK) {
        dlock__etcd_blocking_wait(&k.b);
        rc = k.r.rc;
        if (rc == DLOCK_OK)
            h->valid_until_ns = k.r.valid_until_ns;
    }
    dlock__etcd_blocking_close(&k.b);
    return rc;
}
