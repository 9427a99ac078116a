/* SPDX-License-Identifier: BSD-3-Clause */
/* Moving a hold's key to a new lease of a new TTL (etcd_relet.h). */
#include <string.h>

#include "clock.h"
#include "common.h"
#include "etcd_kv.h"
#include "etcd_relet.h"

typedef dlock__etcd_relet relet;

static void end(relet *r, int rc)
{
    dlock__free(r->key);
    r->key = NULL;
    r->rc = rc;
    r->done(r);
}

static int post(relet *r, const char *path, json_t *body, void (*next)(dlock__etcd_req *q),
                dlock__errbuf *err)
{
    r->q.err = err;
    r->q.done = next;
    return dlock__etcd_req_post(&r->q, r->e, r->loop, path, body,
                                dlock__etcd_call_deadline(r->e));
}

/* A revoke is back: a lease that may live on is owed (a lease already
 * gone is as good as revoked). */
static void revoked(dlock__etcd_req *q)
{
    relet *r = DLOCK__OWNER(q, relet, q);
    int64_t lease = r->end_rc == DLOCK_OK ? r->old : r->lease;
    if (q->rc == DLOCK_OK)
        json_decref(q->out);
    else if (q->rc != DLOCK_EEXPIRED)
        r->owed = lease;
    end(r, r->end_rc);
}

/* The move is settled (rc): revoke the lease that holds no key of ours,
 * the old one after a move, else the new one. */
static void settled(relet *r, int rc)
{
    int64_t lease = rc == DLOCK_OK ? r->old : r->lease;
    r->end_rc = rc;
    if (rc == DLOCK_OK && r->keep_old) {
        end(r, rc); /* the old lease is a session's: its other keys stay */
        return;
    }
    /* no message of the revoke's: the outcome is the move's */
    if (post(r, "/v3/lease/revoke", dlock__etcd_lease_body(lease), revoked, NULL) != DLOCK_OK) {
        r->owed = lease;
        end(r, rc);
    }
}

/* The move's outcome was unknown (move_rc): the key's lease says it. */
static void looked(dlock__etcd_req *q)
{
    relet *r = DLOCK__OWNER(q, relet, q);
    dlock__etcd_kv kv;
    int rc = dlock__etcd_get_answer(q->rc, q->out, &kv, NULL);
    if (rc != DLOCK_OK) {
        /* Still unknown: the new lease may hold our key, so it is neither
         * revoked nor owed (the owed revoke of a re-entry's begin would
         * delete a key we hold). It lapses by its TTL; if it has our key,
         * the renewal finds the key gone then and the handle lost. */
        end(r, r->end_rc);
        return;
    }
    int on_new = kv.key && kv.lease == r->lease, on_old = kv.key && kv.lease == r->old;
    dlock__etcd_kv_clear(&kv);
    if (on_new && r->err)
        dlock__err_clear(r->err);
    if (!on_new && !on_old && r->err)
        dlock__err_set(r->err, "etcd: the lock key was deleted or replaced");
    settled(r, on_new ? DLOCK_OK : on_old ? r->end_rc : DLOCK_ENOTOWNER);
}

static void moved(dlock__etcd_req *q)
{
    relet *r = DLOCK__OWNER(q, relet, q);
    int rc = q->rc;
    if (rc == DLOCK_OK) {
        rc = dlock__etcd_relet_reply(q->out, r->lease, r->err);
        json_decref(q->out);
        settled(r, rc); /* a reply: the move happened or did not */
        return;
    }
    /* No member answered the transaction in time: it may have been
     * applied. Revoking the new lease now could delete our key. */
    r->end_rc = rc;
    if (post(r, "/v3/kv/range", dlock__etcd_get_body(r->key, r->key_len), looked, NULL) !=
        DLOCK_OK)
        end(r, rc); /* unknown: as looked() says */
}

static void granted(dlock__etcd_req *q)
{
    relet *r = DLOCK__OWNER(q, relet, q);
    int rc = dlock__etcd_grant_reply(q->rc, q->server_code, q->out, r->asked_s, &r->ttl_s,
                                     r->err);
    if (q->rc == DLOCK_OK)
        json_decref(q->out);
    if (rc != DLOCK_OK) {
        /* a grant no member answered may exist: it holds no key, and a
         * revoke of a lease that does not is harmless */
        r->owed = rc == DLOCK_EREFUSED ? 0 : r->lease;
        end(r, rc);
        return;
    }
    r->valid_until_ns = r->sent_ns + r->ttl_s * 1000 * DLOCK__NS_PER_MS;
    rc = post(r, "/v3/kv/txn",
              dlock__etcd_json_if_created(dlock__etcd_relet_body(r->key, r->key_len, r->old,
                                                                 r->lease),
                                          r->key, r->key_len, r->rev),
              moved, r->err);
    if (rc != DLOCK_OK)
        settled(r, rc); /* nothing sent: the new lease goes */
}

int dlock__etcd_relet_start(relet *r, dlock__etcd *e, const dlock__etcd_hold *h, int64_t ttl_ms,
                            dlock__loop *loop)
{
    r->e = e;
    r->loop = loop;
    r->old = h->lease;
    r->rev = h->rev ? h->rev : h->named_rev;
    r->keep_old = h->on_session;
    r->owed = 0;
    r->asked_s = dlock__etcd_ttl_s(ttl_ms);
    r->valid_until_ns = INT64_MIN;
    int rc = dlock__etcd_new_lease_id(&r->lease);
    if (rc != DLOCK_OK)
        return rc;
    r->key_len = h->key_len;
    if (!(r->key = dlock__malloc(h->key_len + 1)))
        return DLOCK_ENOMEM;
    memcpy(r->key, h->key, h->key_len + 1);
    r->sent_ns = dlock__now_ns();
    rc = post(r, "/v3/lease/grant", dlock__etcd_grant_body(r->lease, r->asked_s), granted,
              r->err);
    if (rc != DLOCK_OK) {
        dlock__free(r->key);
        r->key = NULL;
    }
    return rc;
}
