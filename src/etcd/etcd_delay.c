/* SPDX-License-Identifier: BSD-3-Clause */
/* Lock-delay on etcd: the companion's layout, its requests' bodies and
 * replies, and dlock_client_lock_delay() (etcd_delay.h). */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "etcd_client.h"
#include "etcd_delay.h"
#include "etcd_hold.h"
#include "etcd_kv.h"

#define EC DLOCK__ETCD_EC

/* Mixed into a hold key's ID to name its companion lease: any fixed
 * pattern does, as IDs are random 63-bit numbers (etcd_lock.h). */
#define COMPANION_MIX INT64_C(0x2545f4914f6cdd1d)

/* How many dead companions a status reads the TTL of; more are counted
 * but not read (a name has that many only after that many crashes within
 * one delay). */
#define STATUS_DEAD_MAX 16

int64_t dlock__etcd_delay_lease(int64_t id)
{
    int64_t lease = (id ^ COMPANION_MIX) & INT64_MAX;
    return lease ? lease : COMPANION_MIX;
}

int64_t dlock__etcd_delay_lease_of_token(const char *token)
{
    return dlock__etcd_delay_lease((int64_t)(strtoull(token, NULL, 16) & INT64_MAX));
}

int dlock__etcd_delay_key(const char *key, size_t klen, size_t prefix_len, const char *token,
                          int end, char **out, size_t *out_len)
{
    static const char tag[] = "\0delay\0"; /* 7 bytes */
    size_t tlen = token ? strlen(token) : 0, name_len = klen - prefix_len;
    size_t n = prefix_len + 7 + name_len + 1 + tlen;
    char *p = dlock__malloc(n + 1);
    if (!p)
        return DLOCK_ENOMEM;
    memcpy(p, key, prefix_len);
    memcpy(p + prefix_len, tag, 7);
    memcpy(p + prefix_len + 7, key + prefix_len, name_len);
    /* the name's end: NUL, which no name holds; \1 ends the range */
    p[prefix_len + 7 + name_len] = end ? '\1' : '\0';
    if (tlen)
        memcpy(p + prefix_len + 8 + name_len, token, tlen);
    p[n] = '\0';
    *out = p;
    *out_len = n;
    return DLOCK_OK;
}

int64_t dlock__etcd_delay_ttl_s(const dlock__etcd_hold *h, int64_t delay_ms)
{
    int64_t ttl_s = h->ttl_s > 0 ? h->ttl_s : dlock__etcd_ttl_s(h->asked_s * 1000);
    int64_t s = ttl_s + (delay_ms + 999) / 1000;
    if (h->on_session)
        s += (ttl_s + 2) / 3;
    return s;
}

json_t *dlock__etcd_delay_put_body(const char *ckey, size_t clen, const dlock__etcd_hold *h,
                                   int64_t lease)
{
    return json_pack("{s:o, s:o, s:o}", "key", dlock__etcd_json_b64(ckey, clen), "value",
                     dlock__etcd_json_b64(h->key, h->key_len), "lease",
                     dlock__etcd_json_of_i64(lease));
}

json_t *dlock__etcd_delay_check_body(const char *cbegin, const char *cend, size_t clen,
                                     const char *lbegin, const char *lend, size_t llen)
{
    return json_pack("{s:[{s:{s:o, s:o}}, {s:{s:o, s:o, s:b}}]}", "success", "request_range",
                     "key", dlock__etcd_json_b64(cbegin, clen), "range_end",
                     dlock__etcd_json_b64(cend, clen), "request_range", "key",
                     dlock__etcd_json_b64(lbegin, llen), "range_end",
                     dlock__etcd_json_b64(lend, llen), "keys_only", 1);
}

/* The kvs of the n-th range of a txn reply (NULL: none). */
static json_t *range_kvs(json_t *rep, size_t n)
{
    json_t *part = json_array_get(json_object_get(rep, "responses"), n);
    return json_object_get(json_object_get(part, "response_range"), "kvs");
}

/* Is key (len bytes) among the line's kvs? (base64 compared: both are
 * the gateway's encoding of the same bytes) */
static int in_line(json_t *line, const char *b64key)
{
    size_t i;
    json_t *kv;
    json_array_foreach(line, i, kv)
    {
        const char *k = json_string_value(json_object_get(kv, "key"));
        if (k && strcmp(k, b64key) == 0)
            return 1;
    }
    return 0;
}

int dlock__etcd_delay_check_reply(json_t *rep, int64_t my_rev, size_t *ahead, size_t *dead,
                                  int64_t *dead_leases, size_t cap, int64_t *rev)
{
    json_t *comps = range_kvs(rep, 0), *line = range_kvs(rep, 1), *kv;
    size_t i;
    *ahead = *dead = 0;
    if (dlock__etcd_json_i64(json_object_get(rep, "header"), "revision", rev))
        return DLOCK_EPROTO;
    json_array_foreach(line, i, kv)
    {
        int64_t r;
        if (dlock__etcd_json_i64(kv, "create_revision", &r))
            return DLOCK_EPROTO;
        *ahead += r < my_rev;
    }
    json_array_foreach(comps, i, kv)
    {
        /* the value is the hold key, in the same encoding as the line's keys */
        const char *v = json_string_value(json_object_get(kv, "value"));
        int64_t lease = 0;
        if (!v || dlock__etcd_json_i64(kv, "lease", &lease))
            return DLOCK_EPROTO;
        if (in_line(line, v))
            continue;
        if (*dead < cap)
            dead_leases[*dead] = lease;
        (*dead)++;
    }
    return DLOCK_OK;
}

int64_t dlock__etcd_delay_left_ms(int64_t ttl_ms)
{
    return ttl_ms < 0 ? 0 : ttl_ms + 999;
}

/* ---- an extend's move ------------------------------------------------------ */

static void move_end(dlock__etcd_delay_move *m, int rc)
{
    dlock__free(m->ckey);
    m->ckey = NULL;
    dlock__etcd_hold_clear(&m->hold);
    m->rc = rc;
    m->done(m);
}

static void moved(dlock__etcd_req *q)
{
    dlock__etcd_delay_move *m = DLOCK__OWNER(q, dlock__etcd_delay_move, q);
    if (q->rc == DLOCK_OK)
        json_decref(q->out);
    move_end(m, q->rc);
}

static void move_granted(dlock__etcd_req *q)
{
    dlock__etcd_delay_move *m = DLOCK__OWNER(q, dlock__etcd_delay_move, q);
    int64_t got = 0;
    json_t *rep = q->rc == DLOCK_OK ? q->out : NULL;
    int rc = dlock__etcd_grant_reply(q->rc, q->server_code, rep, m->ttl_s, &got, NULL);
    json_decref(rep);
    if (rc == DLOCK_OK) {
        q->done = moved;
        rc = dlock__etcd_req_post(q, m->e, m->loop, "/v3/kv/put",
                                  dlock__etcd_delay_put_body(m->ckey, m->ckey_len, &m->hold,
                                                             m->lease),
                                  dlock__etcd_call_deadline(m->e));
    }
    if (rc != DLOCK_OK)
        move_end(m, rc);
}

/* The old companion lease is gone (revoked, or it had lapsed): the new. */
static void move_revoked(dlock__etcd_req *q)
{
    dlock__etcd_delay_move *m = DLOCK__OWNER(q, dlock__etcd_delay_move, q);
    if (q->rc == DLOCK_OK)
        json_decref(q->out);
    q->done = move_granted;
    int rc = q->rc == DLOCK_OK || q->rc == DLOCK_EEXPIRED
                 ? dlock__etcd_req_post(q, m->e, m->loop, "/v3/lease/grant",
                                        dlock__etcd_grant_body(m->lease, m->ttl_s),
                                        dlock__etcd_call_deadline(m->e))
                 : q->rc;
    if (rc != DLOCK_OK)
        move_end(m, rc);
}

int dlock__etcd_delay_move_start(dlock__etcd_delay_move *m, dlock__etcd *e, dlock__loop *loop,
                                 const char *key, size_t klen, size_t prefix_len,
                                 const dlock__etcd_hold *h, int64_t delay_ms)
{
    m->e = e;
    m->loop = loop;
    m->lease = h->delay_lease;
    m->ttl_s = dlock__etcd_delay_ttl_s(h, delay_ms);
    m->hold = (dlock__etcd_hold){.key_len = h->key_len};
    m->ckey = NULL;
    if (!(m->hold.key = dlock__malloc(h->key_len + 1)) ||
        dlock__etcd_delay_key(key, klen, prefix_len, h->token, 0, &m->ckey, &m->ckey_len) !=
            DLOCK_OK) {
        dlock__etcd_hold_clear(&m->hold);
        return DLOCK_ENOMEM;
    }
    memcpy(m->hold.key, h->key, h->key_len + 1);
    m->q.err = NULL;
    m->q.done = move_revoked;
    int rc = dlock__etcd_req_post(&m->q, e, loop, "/v3/lease/revoke",
                                  dlock__etcd_lease_body(m->lease), dlock__etcd_call_deadline(e));
    if (rc != DLOCK_OK) {
        dlock__free(m->ckey);
        m->ckey = NULL;
        dlock__etcd_hold_clear(&m->hold);
    }
    return rc;
}

/* ---- status ------------------------------------------------------------------ */

int dlock__etcd_delay_left_of(dlock__etcd *e, const char *key, size_t klen, size_t prefix_len,
                              int64_t *left_ms, dlock__errbuf *err)
{
    dlock__etcd_name line;
    char *cb = NULL, *ce = NULL;
    size_t clen = 0, ahead = 0, dead = 0;
    int64_t leases[STATUS_DEAD_MAX], rev = 0;
    json_t *rep = NULL;
    *left_ms = 0;
    int rc = dlock__etcd_name_init(&line, key, klen);
    if (rc == DLOCK_OK)
        rc = dlock__etcd_delay_key(key, klen, prefix_len, NULL, 0, &cb, &clen);
    if (rc == DLOCK_OK)
        rc = dlock__etcd_delay_key(key, klen, prefix_len, NULL, 1, &ce, &clen);
    if (rc == DLOCK_OK) {
        json_t *body = dlock__etcd_delay_check_body(cb, ce, clen, line.begin, line.end, line.len);
        rc = body ? dlock__etcd_post(e, "/v3/kv/txn", body, &rep, dlock__etcd_call_deadline(e),
                                     -1, err, NULL, NULL)
                  : DLOCK_ENOMEM;
        json_decref(body);
    }
    if (rc == DLOCK_OK)
        rc = dlock__etcd_delay_check_reply(rep, INT64_MAX, &ahead, &dead, leases,
                                           STATUS_DEAD_MAX, &rev);
    json_decref(rep);
    dlock__free(cb);
    dlock__free(ce);
    dlock__etcd_name_clear(&line);
    for (size_t i = 0; rc == DLOCK_OK && i < DLOCK__MIN(dead, (size_t)STATUS_DEAD_MAX); i++) {
        int64_t ms = -1;
        rc = dlock__etcd_lease_ttl_ms(e, leases[i], &ms, NULL, dlock__etcd_call_deadline(e), -1,
                                      err);
        *left_ms = DLOCK__MAX(*left_ms, dlock__etcd_delay_left_ms(ms));
    }
    return rc;
}

int dlock__etcd_delay_left(dlock_client *c, const char *key, size_t klen, size_t node,
                           int64_t *left_ms)
{
    (void)node; /* the cluster answers as one node */
    size_t plen = c->key_prefix ? strlen(c->key_prefix) : 0;
    return dlock__etcd_delay_left_of(EC(c)->e, key, klen, plen, left_ms, NULL);
}
