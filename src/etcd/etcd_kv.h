/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd v3 calls the lock needs, each one request over etcd_http.c:
 * leases (grant with our own ID, keep-alive, revoke, time-to-live), the
 * lock's transactions, and a watch for one key's deletion. Requests are
 * built and replies read with jansson; keys travel base64-encoded. */
#ifndef DLOCK_ETCD_KV_H
#define DLOCK_ETCD_KV_H

#include <stdint.h>

#include "etcd_http.h"

/* One key-value as a range reply gives it (value not kept). */
typedef struct dlock__etcd_kv {
    char *key; /* decoded; NULL when there was none */
    size_t key_len;
    char *value; /* decoded, NUL-terminated; NULL unless asked for */
    size_t value_len;
    int64_t create_rev, mod_rev, lease;
} dlock__etcd_kv;

void dlock__etcd_kv_clear(dlock__etcd_kv *kv);

/* A request for the calls here (etcd_kv.c, etcd_lease.c): body req
 * (taken, NULL: DLOCK_ENOMEM) POSTed as dlock__etcd_post() does it; and
 * the message and code of a reply that is not what etcd sends. */
int dlock__etcd_kv_post(dlock__etcd *e, const char *path, json_t *req, json_t **rep,
                        int64_t deadline_ns, int cancel_fd, dlock__errbuf *err, long *code,
                        int *unknown_before);
int dlock__etcd_kv_proto(dlock__errbuf *err, const char *what);

/* A waiter's line: the keys of [begin, end) it waits behind, less the
 * gap [gap_begin, gap_end) when gap_begin is set (a reader's: the other
 * readers' keys, etcd_lock.h). A line with a gap is read as two ranges. */
typedef struct dlock__etcd_line {
    const char *begin, *end;
    size_t begin_len, end_len;
    const char *gap_begin, *gap_end;
    size_t gap_len; /* of both */
} dlock__etcd_line;

/* Grant lease `id` (chosen by us, so that a grant whose reply was lost can
 * be sent again: etcd answers "lease already exists" to the copy) for
 * ttl_s seconds. *granted_s: the TTL etcd gave (it may raise it to its
 * minimum). */
int dlock__etcd_lease_grant(dlock__etcd *e, int64_t id, int64_t ttl_s,
                            int64_t *granted_s, int64_t deadline_ns,
                            int cancel_fd, dlock__errbuf *err);

/* The grant in two halves, for a request on a loop (etcd_wait.c): its
 * body (NULL out of memory), and the outcome of the request (rc, the gRPC
 * code of an error reply, the reply on DLOCK_OK). */
json_t *dlock__etcd_grant_body(int64_t id, int64_t ttl_s);
int dlock__etcd_grant_reply(int rc, long code, json_t *rep, int64_t ttl_s, int64_t *granted_s,
                            dlock__errbuf *err);

/* The body of the requests that name one lease (keep-alive, revoke,
 * time-to-live): {"ID": id}. */
json_t *dlock__etcd_lease_body(int64_t id);

/* Refresh the lease to its granted TTL. *ttl_s: that TTL. DLOCK_EEXPIRED
 * when the lease is gone.
 *
 * Every call here that takes cancel_fd (-1: none) ends with
 * DLOCK_ECANCELED as soon as it is readable (dlock__etcd_post()). */
int dlock__etcd_lease_keepalive(dlock__etcd *e, int64_t id, int64_t *ttl_s,
                                int64_t deadline_ns, int cancel_fd, dlock__errbuf *err);
/* The same in two halves, for a request on a loop (etcd_renew.c): its
 * body (NULL out of memory), and what its reply says. */
json_t *dlock__etcd_keepalive_body(int64_t id);
int dlock__etcd_keepalive_reply(json_t *rep, int64_t id, int64_t *ttl_s, dlock__errbuf *err);

/* Revoke the lease, deleting every key attached. DLOCK_EEXPIRED when it
 * was gone already; *unknown_before (may be NULL) as dlock__etcd_post()'s:
 * then "gone" may be the work of our own earlier copy. */
int dlock__etcd_lease_revoke(dlock__etcd *e, int64_t id, int64_t deadline_ns,
                             int cancel_fd, dlock__errbuf *err, int *unknown_before);

/* Remaining TTL of a lease in ms; -1 when it is gone. *granted_s (may be
 * NULL): the TTL it was granted. */
int dlock__etcd_lease_ttl_ms(dlock__etcd *e, int64_t id, int64_t *ttl_ms,
                             int64_t *granted_s, int64_t deadline_ns, int cancel_fd,
                             dlock__errbuf *err);
/* A time-to-live request that lists the lease's keys too, and how many
 * its reply lists (0 for a plain one's). */
json_t *dlock__etcd_ttl_keys_body(int64_t id);
size_t dlock__etcd_ttl_key_count(json_t *rep);
/* What a time-to-live reply says (as dlock__etcd_lease_ttl_ms()). */
int dlock__etcd_ttl_reply(json_t *rep, int64_t *ttl_ms, int64_t *granted_s, dlock__errbuf *err);

/* Create `key` (value: `value`, the holder identity, or NULL: the key
 * itself; lease attached) if it does not exist, and read the first key of
 * [begin, end) by create revision, in one transaction. *my_rev: the
 * create revision of key (ours now or from an earlier copy of this
 * request); *first: the owner. */
int dlock__etcd_create_and_first(dlock__etcd *e, const char *key, size_t key_len,
                                 const char *value, size_t value_len,
                                 int64_t lease, const char *begin, size_t begin_len,
                                 const char *end, size_t end_len, int64_t *my_rev,
                                 dlock__etcd_kv *first, int64_t deadline_ns,
                                 int cancel_fd, dlock__errbuf *err);

/* The create transaction in two halves, for a request on a loop; it
 * reads the first `permits` keys of the line (a semaphore's holders), and
 * *ours (may be NULL) says whether fewer than permits of them are older
 * than key (key is one of them; a reader, whose key is in the line's gap:
 * no key it waits behind is older). *first: the oldest key of the line
 * (none for a reader with nobody to wait for). */
json_t *dlock__etcd_create_body(const char *key, size_t key_len, const char *value,
                                size_t value_len, int64_t lease, const dlock__etcd_line *line,
                                int64_t permits);
int dlock__etcd_create_reply(json_t *rep, int64_t lease, int64_t permits, int64_t *my_rev,
                             dlock__etcd_kv *first, int *ours, dlock__errbuf *err);

/* Move key from lease old to lease new, keeping its value and its create
 * revision (a put changes neither), only while old holds it: the
 * transaction of an extend to a new TTL (etcd_relet.h). Its failure
 * branch reads the key, so that a copy sent again after a lost reply
 * finds the first copy's work (the key already on new). The reply:
 * DLOCK_OK (the key is on new), DLOCK_ENOTOWNER (it is gone, or on
 * another lease), DLOCK_EPROTO. */
json_t *dlock__etcd_relet_body(const char *key, size_t key_len, int64_t old_lease,
                               int64_t new_lease);
int dlock__etcd_relet_reply(json_t *rep, int64_t new_lease, dlock__errbuf *err);

/* dlock__etcd_first() with the first key's value too (first->value). */
int dlock__etcd_first_value(dlock__etcd *e, const char *begin, size_t begin_len,
                            const char *end, size_t end_len, dlock__etcd_kv *first,
                            int64_t deadline_ns, dlock__errbuf *err);

/* If key still has create revision my_rev, read the key of [begin, end)
 * created last before it (*pred; no key when there is none) and the
 * revision of the read (*rev). DLOCK_EEXPIRED when key is gone or newer. */
int dlock__etcd_predecessor(dlock__etcd *e, const char *key, size_t key_len,
                            int64_t my_rev, const char *begin, size_t begin_len,
                            const char *end, size_t end_len, dlock__etcd_kv *pred,
                            int64_t *rev, int64_t deadline_ns, int cancel_fd,
                            dlock__errbuf *err);

/* The predecessor read in two halves, for a request on a loop: up to
 * limit keys of the line created before key (a semaphore's N), per range
 * of the line, *n_ahead (may be NULL) how many came, one more per range
 * where etcd said there are more ("more"), *pred the one just before key. */
json_t *dlock__etcd_predecessor_body(const char *key, size_t key_len, int64_t my_rev,
                                     const dlock__etcd_line *line, int64_t limit);
int dlock__etcd_predecessor_reply(json_t *rep, dlock__etcd_kv *pred, int64_t *rev,
                                  size_t *n_ahead, dlock__errbuf *err);

/* A read-write line's holders, in one transaction (etcd_inspect.c):
 * *writer, the oldest key of the line outside its gap (none: no key
 * there), and *readers, the first `limit` keys of the gap (the readers')
 * by create revision (*n of them; free each with dlock__etcd_kv_clear and
 * the array with dlock__free). line has a gap. */
int dlock__etcd_rw_read(dlock__etcd *e, const dlock__etcd_line *line, int64_t limit,
                        dlock__etcd_kv *writer, dlock__etcd_kv **readers, size_t *n,
                        int64_t deadline_ns, dlock__errbuf *err);

/* Read the first key of [begin, end) by create revision (no key: free). */
int dlock__etcd_first(dlock__etcd *e, const char *begin, size_t begin_len,
                      const char *end, size_t end_len, dlock__etcd_kv *first,
                      int64_t deadline_ns, dlock__errbuf *err);

/* The holder identity a kv's value carries (etcd_lock.c writes it), or
 * NULL with *len 0: our key's value is the key itself without an identity
 * (and so is an older dlock's), `etcdctl lock`'s is empty. */
const char *dlock__etcd_kv_identity(const dlock__etcd_kv *kv, size_t *len);

/* One page of the keys of [begin, end) in key order, values too: at most
 * limit kvs in *out (*n of them; free each with dlock__etcd_kv_clear and
 * the array with dlock__free), *more set when keys follow the last one. */
int dlock__etcd_range_page(dlock__etcd *e, const char *begin, size_t begin_len,
                           const char *end, size_t end_len, int64_t limit,
                           dlock__etcd_kv **out, size_t *n, int *more, int64_t deadline_ns,
                           dlock__errbuf *err);

/* Delete key if its create revision is still rev (the same owner's key):
 * DLOCK_OK, or DLOCK_ENOTOWNER when it is gone or was made again. */
int dlock__etcd_delete_if_created(dlock__etcd *e, const char *key, size_t key_len, int64_t rev,
                                  int64_t deadline_ns, dlock__errbuf *err);

/* The same for n keys at once, in one transaction (a compare per key):
 * all of them go, or none (DLOCK_ENOTOWNER: one was gone or made again).
 * etcd caps a transaction's operations (--max-txn-ops, 128 by default):
 * n is at most that. */
int dlock__etcd_delete_all_if_created(dlock__etcd *e, const dlock__etcd_kv *kvs, size_t n,
                                      int64_t deadline_ns, dlock__errbuf *err);

/* Delete key if it is still on lease (a hold on a session, whose lease
 * is not the hold's to revoke: etcd_session.h): its body, and what the
 * reply says: DLOCK_OK, or DLOCK_EEXPIRED when the key is gone or on
 * another lease. */
json_t *dlock__etcd_key_delete_body(const char *key, size_t key_len, int64_t lease);
int dlock__etcd_key_delete_reply(json_t *rep, dlock__errbuf *err);

/* Read one key (no key when absent). */
int dlock__etcd_get(dlock__etcd *e, const char *key, size_t key_len,
                    dlock__etcd_kv *kv, int64_t deadline_ns, int cancel_fd,
                    dlock__errbuf *err);
/* Its two halves, as the keep-alive's. */
json_t *dlock__etcd_get_body(const char *key, size_t key_len);
int dlock__etcd_get_reply(json_t *rep, dlock__etcd_kv *kv, dlock__errbuf *err);
/* A read's request ended with rc (its reply out on DLOCK_OK, released
 * here): rc, or what the reply says, as dlock__etcd_get_reply(). */
int dlock__etcd_get_answer(int rc, json_t *out, dlock__etcd_kv *kv, dlock__errbuf *err);

/* The watch's request body (key, or [key, end) when end is not NULL:
 * deletions only, from revision from_rev on; 0: from the member's
 * current revision, the start that etcd never catches up later), and what one
 * message of its stream (the "result" object) says: 1 look again (the key
 * was deleted, or the watch was cancelled: compaction), 0 nothing yet. */
json_t *dlock__etcd_watch_body(const char *key, size_t key_len, const char *end,
                               size_t end_len, int64_t from_rev);
int dlock__etcd_watch_says_look(json_t *result);

#endif
