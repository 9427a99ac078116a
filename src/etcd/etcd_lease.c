/* SPDX-License-Identifier: BSD-3-Clause */
/* The lease calls of the etcd backend (etcd_kv.h): a grant with our own
 * ID, keep-alive, revoke and time-to-live, each one request over
 * etcd_http.c; the keys' calls and the lock's transactions are
 * etcd_kv.c's. */
#include "common.h"
#include "etcd_kv.h"

json_t *dlock__etcd_grant_body(int64_t id, int64_t ttl_s)
{
    return json_pack("{s:o, s:o}", "ID", dlock__etcd_json_of_i64(id), "TTL",
                     dlock__etcd_json_of_i64(ttl_s));
}

int dlock__etcd_grant_reply(int rc, long code, json_t *rep, int64_t ttl_s, int64_t *granted_s,
                            dlock__errbuf *err)
{
    /* Our IDs are random 63-bit numbers: an existing lease with ours is an
     * earlier copy of this grant whose reply was lost. */
    if (rc == DLOCK_EREFUSED && code == 9) {
        *granted_s = ttl_s;
        if (err)
            dlock__err_clear(err);
        return DLOCK_OK;
    }
    if (rc != DLOCK_OK)
        return rc;
    int64_t got;
    rc = dlock__etcd_json_i64(rep, "TTL", &got) || got <= 0
             ? dlock__etcd_kv_proto(err, "lease grant") : DLOCK_OK;
    *granted_s = got;
    return rc;
}

int dlock__etcd_lease_grant(dlock__etcd *e, int64_t id, int64_t ttl_s,
                            int64_t *granted_s, int64_t deadline_ns,
                            int cancel_fd, dlock__errbuf *err)
{
    json_t *rep = NULL;
    long code = 0;
    int rc = dlock__etcd_kv_post(e, "/v3/lease/grant", dlock__etcd_grant_body(id, ttl_s), &rep,
                                 deadline_ns, cancel_fd, err, &code, NULL);
    rc = dlock__etcd_grant_reply(rc, code, rep, ttl_s, granted_s, err);
    json_decref(rep);
    return rc;
}

json_t *dlock__etcd_lease_body(int64_t id)
{
    return json_pack("{s:o}", "ID", dlock__etcd_json_of_i64(id));
}

json_t *dlock__etcd_ttl_keys_body(int64_t id)
{
    return json_pack("{s:o, s:b}", "ID", dlock__etcd_json_of_i64(id), "keys", 1);
}

size_t dlock__etcd_ttl_key_count(json_t *rep)
{
    return json_array_size(json_object_get(rep, "keys"));
}

json_t *dlock__etcd_keepalive_body(int64_t id)
{
    return dlock__etcd_lease_body(id);
}

int dlock__etcd_keepalive_reply(json_t *rep, int64_t id, int64_t *ttl_s, dlock__errbuf *err)
{
    /* A stream of one: {"result":{"ID":..,"TTL":..}}; no TTL: gone. */
    json_t *res = json_object_get(rep, "result");
    int64_t ttl = 0;
    int rc = DLOCK_OK;
    if (!json_is_object(res) || dlock__etcd_json_i64(res, "TTL", &ttl))
        rc = dlock__etcd_kv_proto(err, "lease keepalive");
    else if (ttl <= 0) {
        rc = DLOCK_EEXPIRED;
        if (err)
            dlock__err_append(err, "etcd: lease %llx has expired", (unsigned long long)id);
    }
    *ttl_s = ttl;
    return rc;
}

int dlock__etcd_lease_keepalive(dlock__etcd *e, int64_t id, int64_t *ttl_s,
                                int64_t deadline_ns, int cancel_fd, dlock__errbuf *err)
{
    json_t *rep = NULL;
    int rc = dlock__etcd_kv_post(e, "/v3/lease/keepalive", dlock__etcd_keepalive_body(id), &rep,
                                 deadline_ns, cancel_fd, err, NULL, NULL);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__etcd_keepalive_reply(rep, id, ttl_s, err);
    json_decref(rep);
    return rc;
}

int dlock__etcd_lease_revoke(dlock__etcd *e, int64_t id, int64_t deadline_ns,
                             int cancel_fd, dlock__errbuf *err, int *unknown_before)
{
    json_t *rep = NULL;
    int rc = dlock__etcd_kv_post(e, "/v3/lease/revoke", dlock__etcd_lease_body(id), &rep,
                                 deadline_ns, cancel_fd, err, NULL, unknown_before);
    json_decref(rep);
    return rc;
}

int dlock__etcd_ttl_reply(json_t *rep, int64_t *ttl_ms, int64_t *granted_s, dlock__errbuf *err)
{
    int64_t ttl, granted;
    int rc = DLOCK_OK;
    *ttl_ms = -1;
    if (dlock__etcd_json_i64(rep, "TTL", &ttl) ||
        dlock__etcd_json_i64(rep, "grantedTTL", &granted))
        rc = dlock__etcd_kv_proto(err, "lease timetolive");
    else
        *ttl_ms = ttl >= 0 ? ttl * 1000 : -1; /* -1: not found */
    if (granted_s)
        *granted_s = rc == DLOCK_OK ? granted : 0;
    return rc;
}

int dlock__etcd_lease_ttl_ms(dlock__etcd *e, int64_t id, int64_t *ttl_ms,
                             int64_t *granted_s, int64_t deadline_ns, int cancel_fd,
                             dlock__errbuf *err)
{
    json_t *rep = NULL;
    *ttl_ms = -1;
    int rc = dlock__etcd_kv_post(e, "/v3/lease/timetolive", dlock__etcd_lease_body(id), &rep,
                                 deadline_ns, cancel_fd, err, NULL, NULL);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__etcd_ttl_reply(rep, ttl_ms, granted_s, err);
    json_decref(rep);
    return rc;
}
