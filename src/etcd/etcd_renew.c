/* SPDX-License-Identifier: BSD-3-Clause */
/* Renewing a hold as a request on a loop (etcd_renew.h). */
#include <string.h>

#include "clock.h"
#include "common.h"
#include "etcd_kv.h"
#include "etcd_renew.h"

typedef dlock__etcd_renew_req renew;

static void end(renew *r, int rc)
{
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
    int rc = q->rc;
    dlock__etcd_kv kv = {0};
    if (rc == DLOCK_OK) {
        rc = dlock__etcd_get_reply(q->out, &kv, r->err);
        json_decref(q->out);
    }
    /* rev 0: adopted, its revision unknown; the key must be there */
    if (rc == DLOCK_OK && (r->rev ? kv.create_rev != r->rev : !kv.key)) {
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
    json_t *body = rc == DLOCK_OK ? dlock__etcd_get_body(r->key, r->key_len) : NULL;
    if (rc == DLOCK_OK && !body)
        rc = DLOCK_ENOMEM;
    if (rc == DLOCK_OK) {
        q->done = read_done;
        rc = dlock__etcd_req_start(q, r->e, r->loop, "/v3/kv/range", body, r->deadline_ns,
                                   dlock__etcd_io_timeout_ms(r->e));
    }
    json_decref(body);
    if (rc != DLOCK_OK)
        end(r, rc); /* from the loop: the keep-alive's done */
}

int dlock__etcd_renew_start(renew *r, dlock__etcd *e, const dlock__etcd_hold *h,
                            int64_t deadline_ns, dlock__loop *loop)
{
    r->e = e;
    r->loop = loop;
    r->lease = h->lease;
    r->rev = h->rev;
    r->deadline_ns = deadline_ns;
    r->ttl_s = 0;
    r->valid_until_ns = INT64_MIN;
    r->key_len = h->key_len;
    if (!(r->key = dlock__malloc(h->key_len + 1)))
        return DLOCK_ENOMEM;
    memcpy(r->key, h->key, h->key_len + 1);
    json_t *body = dlock__etcd_keepalive_body(r->lease);
    r->q.err = r->err;
    r->q.done = keepalive_done;
    r->sent_ns = dlock__now_ns();
    int rc = body ? dlock__etcd_req_start(&r->q, e, loop, "/v3/lease/keepalive", body,
                                          deadline_ns, dlock__etcd_io_timeout_ms(e))
                  : DLOCK_ENOMEM;
    json_decref(body);
    if (rc != DLOCK_OK) {
        dlock__free(r->key);
        r->key = NULL;
    }
    return rc;
}

void dlock__etcd_renew_cancel(renew *r)
{
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
