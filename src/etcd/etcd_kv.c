/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdint.h>
#include <string.h>

#include "clock.h"
#include "common.h"
#include "etcd_kv.h"

void dlock__etcd_kv_clear(dlock__etcd_kv *kv)
{
    dlock__free(kv->key);
    dlock__free(kv->value);
    memset(kv, 0, sizeof *kv);
}

/* json_pack with "o" steals references and fails on NULL ones, so one NULL
 * from an allocation makes the whole request NULL: checked once. */
static json_t *b64(const char *p, size_t n)
{
    return dlock__etcd_json_b64(p, n);
}

static json_t *i64(int64_t v)
{
    return dlock__etcd_json_of_i64(v);
}

int dlock__etcd_kv_post(dlock__etcd *e, const char *path, json_t *req, json_t **rep,
                        int64_t deadline_ns, int cancel_fd, dlock__errbuf *err, long *code,
                        int *unknown_before)
{
    if (!req)
        return DLOCK_ENOMEM;
    int rc = dlock__etcd_post(e, path, req, rep, deadline_ns, cancel_fd, err, code,
                              unknown_before);
    json_decref(req);
    return rc;
}

static int post(dlock__etcd *e, const char *path, json_t *req, json_t **rep,
                int64_t deadline_ns, int cancel_fd, dlock__errbuf *err,
                long *code)
{
    return dlock__etcd_kv_post(e, path, req, rep, deadline_ns, cancel_fd, err, code, NULL);
}

int dlock__etcd_kv_proto(dlock__errbuf *err, const char *what)
{
    if (err)
        dlock__err_append(err, "etcd: unexpected reply to %s", what);
    return DLOCK_EPROTO;
}

static int proto(dlock__errbuf *err, const char *what)
{
    return dlock__etcd_kv_proto(err, what);
}

/* Read a kv object (key decoded). */
static int read_kv(json_t *j, dlock__etcd_kv *kv)
{
    memset(kv, 0, sizeof *kv);
    json_t *k = json_object_get(j, "key");
    if (!json_is_string(k) ||
        dlock__etcd_json_i64(j, "create_revision", &kv->create_rev) ||
        dlock__etcd_json_i64(j, "mod_revision", &kv->mod_rev) ||
        dlock__etcd_json_i64(j, "lease", &kv->lease))
        return DLOCK_EPROTO;
    if (!(kv->key = dlock__etcd_b64_decode(json_string_value(k), &kv->key_len)))
        return DLOCK_ENOMEM; /* or bad base64: both end the call */
    json_t *v = json_object_get(j, "value"); /* absent with keys_only */
    if (json_is_string(v) &&
        !(kv->value = dlock__etcd_b64_decode(json_string_value(v), &kv->value_len)))
        return DLOCK_ENOMEM;
    return DLOCK_OK;
}

const char *dlock__etcd_kv_identity(const dlock__etcd_kv *kv, size_t *len)
{
    *len = 0;
    if (!kv->key || !kv->value || kv->value_len == 0 ||
        (kv->value_len == kv->key_len && memcmp(kv->value, kv->key, kv->key_len) == 0))
        return NULL;
    *len = kv->value_len;
    return kv->value;
}

/* The first kv of a range response (kv left empty when it has none). */
static int first_kv(json_t *range, dlock__etcd_kv *kv)
{
    memset(kv, 0, sizeof *kv);
    json_t *kvs = json_object_get(range, "kvs");
    if (!kvs || json_array_size(kvs) == 0)
        return DLOCK_OK;
    return read_kv(json_array_get(kvs, 0), kv);
}

/* The first `limit` keys of [begin, end) by create revision in order,
 * only those created up to max_create_rev (0: all). (The reply's "count"
 * ignores that filter, so callers count the keys returned.) */
static json_t *range_req(const char *begin, size_t blen, const char *end,
                         size_t elen, const char *order, int64_t max_create_rev,
                         int64_t limit)
{
    json_t *r = json_pack("{s:o, s:o, s:s, s:s, s:o, s:b}", "key", b64(begin, blen),
                          "range_end", b64(end, elen), "sort_order", order,
                          "sort_target", "CREATE", "limit", i64(limit), "keys_only", 1);
    if (r && max_create_rev > 0 &&
        json_object_set_new(r, "max_create_revision", i64(max_create_rev))) {
        json_decref(r);
        return NULL;
    }
    return r;
}

/* The n-th response of a txn reply, as the object inside it. */
static json_t *txn_part(json_t *rep, size_t n, const char *kind)
{
    json_t *parts = json_object_get(rep, "responses");
    return json_object_get(json_array_get(parts, n), kind);
}

/* How many kvs of a txn reply's range responses from the from-th on
 * have a create revision below rev. */
static int64_t count_below(json_t *rep, size_t from, int64_t rev)
{
    int64_t n = 0, r;
    size_t parts = json_array_size(json_object_get(rep, "responses")), i;
    for (size_t p = from; p < parts; p++) {
        json_t *kvs = json_object_get(txn_part(rep, p, "response_range"), "kvs"), *kv;
        json_array_foreach(kvs, i, kv)
        {
            if (dlock__etcd_json_i64(kv, "create_revision", &r) == 0 && r < rev)
                n++;
        }
    }
    return n;
}

/* The line's ranges as requests (one, or two around a gap), each for the
 * first `limit` keys in order, created up to max_create_rev (0: all),
 * appended to ops as {"request_range": ...}. 0, or -1 out of memory. */
static int line_ranges(json_t *ops, const dlock__etcd_line *line, const char *order,
                       int64_t max_create_rev, int64_t limit)
{
    const char *b[2] = {line->begin, line->gap_end}, *e[2] = {line->gap_begin, line->end};
    size_t bl[2] = {line->begin_len, line->gap_len}, el[2] = {line->gap_len, line->end_len};
    if (!line->gap_begin) {
        e[0] = line->end;
        el[0] = line->end_len;
    }
    for (int i = 0; i < (line->gap_begin ? 2 : 1); i++) {
        json_t *r = range_req(b[i], bl[i], e[i], el[i], order, max_create_rev, limit);
        if (!ops || json_array_append_new(ops, json_pack("{s:o}", "request_range", r)))
            return -1;
    }
    return 0;
}

json_t *dlock__etcd_create_body(const char *key, size_t key_len, const char *value,
                                size_t value_len, int64_t lease, const dlock__etcd_line *line,
                                int64_t permits)
{
    /* Create-if-absent makes the request idempotent: a copy sent again
     * after a lost reply reads the key the first copy made. */
    json_t *body = json_pack(
        "{s:[{s:o, s:s, s:s, s:o}], s:[{s:{s:o, s:o, s:o}}], s:[{s:{s:o}}]}",
        "compare", "key", b64(key, key_len), "target", "CREATE", "result", "EQUAL",
        "create_revision", i64(0),
        "success", "request_put", "key", b64(key, key_len), "value",
        value ? b64(value, value_len) : b64(key, key_len), "lease", i64(lease),
        "failure", "request_range", "key", b64(key, key_len));
    if (body && (line_ranges(json_object_get(body, "success"), line, "ASCEND", 0, permits) ||
                 line_ranges(json_object_get(body, "failure"), line, "ASCEND", 0, permits))) {
        json_decref(body);
        return NULL;
    }
    return body;
}

/* The kv of a txn reply's range responses [from, to) whose create
 * revision is the lowest of their first kvs (last: the highest), left
 * empty when they hold none. */
static int pick_kv_of(json_t *rep, size_t from, size_t to, int last, dlock__etcd_kv *out)
{
    memset(out, 0, sizeof *out);
    size_t parts = json_array_size(json_object_get(rep, "responses"));
    for (size_t p = from; p < parts && p < to; p++) {
        dlock__etcd_kv kv;
        int rc = first_kv(txn_part(rep, p, "response_range"), &kv);
        if (rc != DLOCK_OK) {
            dlock__etcd_kv_clear(&kv);
            dlock__etcd_kv_clear(out);
            return rc;
        }
        if (kv.key && (!out->key || (last ? kv.create_rev > out->create_rev
                                          : kv.create_rev < out->create_rev))) {
            dlock__etcd_kv_clear(out);
            *out = kv;
        } else {
            dlock__etcd_kv_clear(&kv);
        }
    }
    return DLOCK_OK;
}

/* The same over the responses from the from-th on. */
static int pick_kv(json_t *rep, size_t from, int last, dlock__etcd_kv *out)
{
    return pick_kv_of(rep, from, SIZE_MAX, last, out);
}

int dlock__etcd_create_reply(json_t *rep, int64_t lease, int64_t permits, int64_t *my_rev,
                             dlock__etcd_kv *first, int *ours, dlock__errbuf *err)
{
    memset(first, 0, sizeof *first);
    int succeeded = json_is_true(json_object_get(rep, "succeeded"));
    json_t *header = json_object_get(rep, "header");
    int64_t rev = 0;
    int rc = DLOCK_OK;
    if (succeeded) {
        if (dlock__etcd_json_i64(header, "revision", &rev) || rev <= 0)
            rc = DLOCK_EPROTO;
    } else {
        dlock__etcd_kv mine;
        rc = first_kv(txn_part(rep, 0, "response_range"), &mine);
        rev = mine.create_rev;
        if (rc == DLOCK_OK && (!mine.key || mine.lease != lease))
            rc = DLOCK_EPROTO; /* a key of our lease's name with another lease */
        dlock__etcd_kv_clear(&mine);
    }
    if (rc == DLOCK_OK)
        rc = pick_kv(rep, 1, 0, first);
    /* at least our own key is there, unless it is in the line's gap (a
     * reader's: two ranges, around it) */
    if (rc == DLOCK_OK && !first->key && json_array_size(json_object_get(rep, "responses")) < 3)
        rc = DLOCK_EPROTO;
    if (rc == DLOCK_EPROTO)
        return proto(err, "the lock's create transaction");
    *my_rev = rev;
    if (ours)
        *ours = count_below(rep, 1, rev) < permits;
    return rc;
}

json_t *dlock__etcd_relet_body(const char *key, size_t key_len, int64_t old_lease,
                               int64_t new_lease)
{
    /* ignore_value: the put keeps the holder identity the key carries */
    return json_pack("{s:[{s:o, s:s, s:s, s:o}], s:[{s:{s:o, s:o, s:b}}], s:[{s:{s:o}}]}",
                     "compare", "key", b64(key, key_len), "target", "LEASE", "result",
                     "EQUAL", "lease", i64(old_lease), "success", "request_put", "key",
                     b64(key, key_len), "lease", i64(new_lease), "ignore_value", 1,
                     "failure", "request_range", "key", b64(key, key_len));
}

int dlock__etcd_relet_reply(json_t *rep, int64_t new_lease, dlock__errbuf *err)
{
    if (json_is_true(json_object_get(rep, "succeeded")))
        return DLOCK_OK;
    dlock__etcd_kv kv;
    int rc = first_kv(txn_part(rep, 0, "response_range"), &kv);
    if (rc == DLOCK_EPROTO)
        return proto(err, "the lease move's transaction");
    if (rc == DLOCK_OK && !(kv.key && kv.lease == new_lease)) {
        rc = DLOCK_ENOTOWNER;
        if (err)
            dlock__err_set(err, "etcd: the lock key was deleted or replaced");
    }
    dlock__etcd_kv_clear(&kv);
    return rc;
}

int dlock__etcd_create_and_first(dlock__etcd *e, const char *key, size_t key_len,
                                 const char *value, size_t value_len,
                                 int64_t lease, const char *begin, size_t begin_len,
                                 const char *end, size_t end_len, int64_t *my_rev,
                                 dlock__etcd_kv *first, int64_t deadline_ns,
                                 int cancel_fd, dlock__errbuf *err)
{
    memset(first, 0, sizeof *first);
    dlock__etcd_line line = {.begin = begin, .end = end, .begin_len = begin_len,
                             .end_len = end_len};
    json_t *req = dlock__etcd_create_body(key, key_len, value, value_len, lease, &line, 1);
    json_t *rep = NULL;
    int rc = post(e, "/v3/kv/txn", req, &rep, deadline_ns, cancel_fd, err, NULL);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__etcd_create_reply(rep, lease, 1, my_rev, first, NULL, err);
    json_decref(rep);
    return rc;
}

json_t *dlock__etcd_predecessor_body(const char *key, size_t key_len, int64_t my_rev,
                                     const dlock__etcd_line *line, int64_t limit)
{
    json_t *body = json_pack("{s:[{s:o, s:s, s:s, s:o}], s:[], s:[]}", "compare", "key",
                             b64(key, key_len), "target", "CREATE", "result", "EQUAL",
                             "create_revision", i64(my_rev), "success", "failure");
    if (body &&
        line_ranges(json_object_get(body, "success"), line, "DESCEND", my_rev - 1, limit)) {
        json_decref(body);
        return NULL;
    }
    return body;
}

int dlock__etcd_predecessor_reply(json_t *rep, dlock__etcd_kv *pred, int64_t *rev,
                                  size_t *n_ahead, dlock__errbuf *err)
{
    memset(pred, 0, sizeof *pred);
    if (!json_is_true(json_object_get(rep, "succeeded"))) {
        if (err)
            dlock__err_append(err, "etcd: our waiter key is gone (lease expired)");
        return DLOCK_EEXPIRED;
    }
    int rc;
    if (dlock__etcd_json_i64(json_object_get(rep, "header"), "revision", rev))
        rc = DLOCK_EPROTO;
    else
        rc = pick_kv(rep, 0, 1, pred);
    if (n_ahead) {
        /* "more": keys before ours past the limit (etcd prunes by create
         * revision before it cuts at the limit), so n is exact up to it */
        size_t parts = json_array_size(json_object_get(rep, "responses"));
        *n_ahead = 0;
        for (size_t p = 0; p < parts; p++) {
            json_t *range = txn_part(rep, p, "response_range");
            *n_ahead += json_array_size(json_object_get(range, "kvs")) +
                        (json_is_true(json_object_get(range, "more")) ? 1 : 0);
        }
    }
    return rc == DLOCK_EPROTO ? proto(err, "the predecessor read") : rc;
}

int dlock__etcd_predecessor(dlock__etcd *e, const char *key, size_t key_len,
                            int64_t my_rev, const char *begin, size_t begin_len,
                            const char *end, size_t end_len, dlock__etcd_kv *pred,
                            int64_t *rev, int64_t deadline_ns, int cancel_fd,
                            dlock__errbuf *err)
{
    memset(pred, 0, sizeof *pred);
    dlock__etcd_line line = {.begin = begin, .end = end, .begin_len = begin_len,
                             .end_len = end_len};
    json_t *req = dlock__etcd_predecessor_body(key, key_len, my_rev, &line, 1);
    json_t *rep = NULL;
    int rc = post(e, "/v3/kv/txn", req, &rep, deadline_ns, cancel_fd, err, NULL);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__etcd_predecessor_reply(rep, pred, rev, NULL, err);
    json_decref(rep);
    return rc;
}

int dlock__etcd_rw_read(dlock__etcd *e, const dlock__etcd_line *line, int64_t limit,
                        dlock__etcd_kv *writer, dlock__etcd_kv **readers, size_t *n,
                        int64_t deadline_ns, dlock__errbuf *err)
{
    memset(writer, 0, sizeof *writer);
    *readers = NULL;
    *n = 0;
    json_t *req = json_pack("{s:[], s:[], s:[]}", "compare", "success", "failure");
    json_t *ops = req ? json_object_get(req, "success") : NULL;
    if (ops && (line_ranges(ops, line, "ASCEND", 0, 1) ||
                json_array_append_new(
                    ops, json_pack("{s:o}", "request_range",
                                   range_req(line->gap_begin, line->gap_len, line->gap_end,
                                             line->gap_len, "ASCEND", 0, limit))))) {
        json_decref(req);
        req = NULL;
    }
    json_t *rep = NULL;
    int rc = post(e, "/v3/kv/txn", req, &rep, deadline_ns, -1, err, NULL);
    if (rc != DLOCK_OK)
        return rc;
    rc = pick_kv_of(rep, 0, 2, 0, writer);
    json_t *kvs = json_object_get(txn_part(rep, 2, "response_range"), "kvs");
    size_t m = json_array_size(kvs);
    if (rc == DLOCK_OK && m > 0 && !(*readers = dlock__calloc(m, sizeof **readers)))
        rc = DLOCK_ENOMEM;
    for (size_t i = 0; i < m && rc == DLOCK_OK; i++) {
        if ((rc = read_kv(json_array_get(kvs, i), &(*readers)[i])) == DLOCK_OK)
            (*n)++;
        else
            dlock__etcd_kv_clear(&(*readers)[i]);
    }
    json_decref(rep);
    if (rc != DLOCK_OK) {
        dlock__etcd_kv_clear(writer);
        for (size_t i = 0; i < *n; i++)
            dlock__etcd_kv_clear(&(*readers)[i]);
        dlock__free(*readers);
        *readers = NULL;
        *n = 0;
    }
    return rc == DLOCK_EPROTO ? proto(err, "the read-write line's read") : rc;
}

int dlock__etcd_first(dlock__etcd *e, const char *begin, size_t begin_len,
                      const char *end, size_t end_len, dlock__etcd_kv *first,
                      int64_t deadline_ns, dlock__errbuf *err)
{
    memset(first, 0, sizeof *first);
    json_t *rep = NULL;
    int rc = post(e, "/v3/kv/range",
                  range_req(begin, begin_len, end, end_len, "ASCEND", 0, 1), &rep,
                  deadline_ns, -1, err, NULL);
    if (rc != DLOCK_OK)
        return rc;
    rc = first_kv(rep, first);
    json_decref(rep);
    return rc == DLOCK_EPROTO ? proto(err, "range") : rc;
}

int dlock__etcd_first_value(dlock__etcd *e, const char *begin, size_t begin_len,
                            const char *end, size_t end_len, dlock__etcd_kv *first,
                            int64_t deadline_ns, dlock__errbuf *err)
{
    memset(first, 0, sizeof *first);
    json_t *req = range_req(begin, begin_len, end, end_len, "ASCEND", 0, 1);
    if (req && json_object_set_new(req, "keys_only", json_false())) {
        json_decref(req);
        req = NULL;
    }
    json_t *rep = NULL;
    int rc = post(e, "/v3/kv/range", req, &rep, deadline_ns, -1, err, NULL);
    if (rc != DLOCK_OK)
        return rc;
    rc = first_kv(rep, first);
    json_decref(rep);
    return rc == DLOCK_EPROTO ? proto(err, "range") : rc;
}

int dlock__etcd_range_page(dlock__etcd *e, const char *begin, size_t begin_len,
                           const char *end, size_t end_len, int64_t limit,
                           dlock__etcd_kv **out, size_t *n, int *more, int64_t deadline_ns,
                           dlock__errbuf *err)
{
    *out = NULL;
    *n = 0;
    *more = 0;
    json_t *rep = NULL;
    int rc = post(e, "/v3/kv/range",
                  json_pack("{s:o, s:o, s:o}", "key", b64(begin, begin_len), "range_end",
                            b64(end, end_len), "limit", i64(limit)),
                  &rep, deadline_ns, -1, err, NULL);
    if (rc != DLOCK_OK)
        return rc;
    json_t *kvs = json_object_get(rep, "kvs");
    size_t m = json_array_size(kvs);
    if (m > 0 && !(*out = dlock__calloc(m, sizeof **out)))
        rc = DLOCK_ENOMEM;
    for (size_t i = 0; i < m && rc == DLOCK_OK; i++) {
        if ((rc = read_kv(json_array_get(kvs, i), &(*out)[i])) == DLOCK_OK)
            (*n)++;
    }
    /* "more" is left out when false (proto3 JSON). */
    *more = json_is_true(json_object_get(rep, "more"));
    json_decref(rep);
    if (rc != DLOCK_OK) {
        for (size_t i = 0; i < *n; i++)
            dlock__etcd_kv_clear(&(*out)[i]);
        dlock__free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc == DLOCK_EPROTO ? proto(err, "range") : rc;
}

int dlock__etcd_delete_if_created(dlock__etcd *e, const char *key, size_t key_len, int64_t rev,
                                  int64_t deadline_ns, dlock__errbuf *err)
{
    dlock__etcd_kv kv = {.key = (char *)key, .key_len = key_len, .create_rev = rev};
    return dlock__etcd_delete_all_if_created(e, &kv, 1, deadline_ns, err);
}

int dlock__etcd_delete_all_if_created(dlock__etcd *e, const dlock__etcd_kv *kvs, size_t n,
                                      int64_t deadline_ns, dlock__errbuf *err)
{
    /* One transaction: every key goes, or none (one made again or gone
     * since the read fails its compare). */
    json_t *req = json_pack("{s:[], s:[], s:[]}", "compare", "success", "failure");
    json_t *cmp = req ? json_object_get(req, "compare") : NULL;
    json_t *ops = req ? json_object_get(req, "success") : NULL;
    for (size_t i = 0; req && i < n; i++) {
        if (json_array_append_new(cmp, json_pack("{s:o, s:s, s:s, s:o}", "key",
                                                 b64(kvs[i].key, kvs[i].key_len), "target",
                                                 "CREATE", "result", "EQUAL", "create_revision",
                                                 i64(kvs[i].create_rev))) ||
            json_array_append_new(ops, json_pack("{s:{s:o}}", "request_delete_range", "key",
                                                 b64(kvs[i].key, kvs[i].key_len)))) {
            json_decref(req);
            req = NULL;
        }
    }
    json_t *rep = NULL;
    int rc = post(e, "/v3/kv/txn", req, &rep, deadline_ns, -1, err, NULL);
    if (rc != DLOCK_OK)
        return rc;
    rc = json_is_true(json_object_get(rep, "succeeded")) ? DLOCK_OK : DLOCK_ENOTOWNER;
    json_decref(rep);
    return rc;
}

json_t *dlock__etcd_key_delete_body(const char *key, size_t key_len, int64_t lease)
{
    return json_pack("{s:[{s:o, s:s, s:s, s:o}], s:[{s:{s:o}}], s:[]}", "compare", "key",
                     b64(key, key_len), "target", "LEASE", "result", "EQUAL", "lease",
                     i64(lease), "success", "request_delete_range", "key", b64(key, key_len),
                     "failure");
}

int dlock__etcd_key_delete_reply(json_t *rep, dlock__errbuf *err)
{
    if (json_is_true(json_object_get(rep, "succeeded")))
        return DLOCK_OK;
    if (err)
        dlock__err_set(err, "etcd: the lock key was gone (its lease ended, or it was broken)");
    return DLOCK_EEXPIRED;
}

json_t *dlock__etcd_get_body(const char *key, size_t key_len)
{
    return json_pack("{s:o, s:b}", "key", b64(key, key_len), "keys_only", 1);
}

int dlock__etcd_get_reply(json_t *rep, dlock__etcd_kv *kv, dlock__errbuf *err)
{
    int rc = first_kv(rep, kv);
    return rc == DLOCK_EPROTO ? proto(err, "range") : rc;
}

int dlock__etcd_get_answer(int rc, json_t *out, dlock__etcd_kv *kv, dlock__errbuf *err)
{
    memset(kv, 0, sizeof *kv);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__etcd_get_reply(out, kv, err);
    json_decref(out);
    return rc;
}

int dlock__etcd_get(dlock__etcd *e, const char *key, size_t key_len,
                    dlock__etcd_kv *kv, int64_t deadline_ns, int cancel_fd,
                    dlock__errbuf *err)
{
    memset(kv, 0, sizeof *kv);
    json_t *rep = NULL;
    int rc = post(e, "/v3/kv/range", dlock__etcd_get_body(key, key_len), &rep, deadline_ns,
                  cancel_fd, err, NULL);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__etcd_get_reply(rep, kv, err);
    json_decref(rep);
    return rc;
}

int dlock__etcd_watch_says_look(json_t *result)
{
    /* A cancelled watch (compaction) also ends the wait: the caller reads
     * the keys again, which is always right. */
    if (json_is_true(json_object_get(result, "canceled")))
        return 1;
    json_t *events = json_object_get(result, "events");
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        json_t *type = json_object_get(ev, "type");
        if (json_is_string(type) && strcmp(json_string_value(type), "DELETE") == 0)
            return 1;
    }
    return 0;
}

json_t *dlock__etcd_watch_body(const char *key, size_t key_len, const char *end,
                               size_t end_len, int64_t from_rev)
{
    json_t *body = json_pack("{s:{s:o}}", "create_request", "key", b64(key, key_len));
    json_t *req = body ? json_object_get(body, "create_request") : NULL;
    if (req && from_rev > 0 && json_object_set_new(req, "start_revision", i64(from_rev))) {
        json_decref(body);
        return NULL;
    }
    if (!body || !end)
        return body;
    /* a range: its deletions only (NOPUT), or every put in the line
     * (a newcomer, a lease moved) would wake each watcher */
    if (json_object_set_new(req, "range_end", b64(end, end_len)) ||
        json_object_set_new(req, "filters", json_pack("[s]", "NOPUT"))) {
        json_decref(body);
        return NULL;
    }
    return body;
}
