/* SPDX-License-Identifier: BSD-3-Clause */
/* An election's calls on etcd (backend.h, "elections"; the design is
 * src/engine/election.c's), in the layout of etcd's own election
 * (clientv3/concurrency/election.go), which is its lock's: each candidate
 * a key NAME/LEASE (hex) on its lease, whose value is the candidate's
 * value (etcd_enter.c writes it at the key's creation, from the term
 * lock's elect_value), the leader the key of the lowest create revision,
 * whose create revision is the term's fence. So `etcdctl elect NAME VALUE`
 * and dlock campaign in one line, and `etcdctl elect -l NAME` and
 * dlock_election_observe() each see the other's leaders.
 *   - proclaim: a put of our key, in a transaction on its create revision
 *     (etcd's Proclaim), so that only the key of our term is written;
 *   - leader: the first key of the prefix by create revision, and its
 *     value;
 *   - observe: a watch stream on the prefix that ends on any event (a put:
 *     a proclaim or a new candidate; a delete: a resign, a lease that
 *     ended), run on a loop thread of the observer's own and started again
 *     after each event; every end and every stream that starts later than
 *     the revision asked for wake the observer, who reads the leader again. */
#include <stdatomic.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "election.h"
#include "etcd_elect.h"
#include "etcd_hold.h"
#include "etcd_kv.h"
#include "etcd_watch.h"
#include "handle.h"
#include "loop_thread.h"

/* ---- proclaim ------------------------------------------------------------ */

static json_t *proclaim_body(const dlock__etcd_hold *h, const char *value, size_t len)
{
    json_t *key = dlock__etcd_json_b64(h->key, h->key_len);
    json_t *key2 = dlock__etcd_json_b64(h->key, h->key_len);
    json_t *key3 = dlock__etcd_json_b64(h->key, h->key_len);
    json_t *val = dlock__etcd_json_b64(value, len);
    json_t *rev = dlock__etcd_json_of_i64(h->rev);
    json_t *lease = dlock__etcd_json_of_i64(h->lease);
    if (!key || !key2 || !key3 || !val || !rev || !lease) {
        json_decref(key), json_decref(key2), json_decref(key3);
        json_decref(val), json_decref(rev), json_decref(lease);
        return NULL;
    }
    return json_pack("{s:[{s:o, s:s, s:s, s:o}], s:[{s:{s:o, s:o, s:o}}],"
                     " s:[{s:{s:o}}]}",
                     "compare", "key", key, "target", "CREATE", "result", "EQUAL",
                     "create_revision", rev, "success", "request_put", "key", key2, "value",
                     val, "lease", lease, "failure", "request_range", "key", key3);
}

int dlock__etcd_elect_write(dlock_lock *l, const char *value, size_t len)
{
    dlock__etcd_shared_hold *s = DLOCK__ETCD_LD(l)->sh;
    if (!s)
        return DLOCK_ENOTHELD;
    dlock__etcd *e = DLOCK__ETCD_LD(l)->ec->e;
    json_t *rep = NULL, *req = proclaim_body(&s->h, value, len);
    if (!req)
        return DLOCK_ENOMEM;
    int rc = dlock__etcd_post(e, "/v3/kv/txn", req, &rep, dlock__etcd_call_deadline(e), -1,
                              &l->err, NULL, NULL);
    json_decref(req);
    if (rc != DLOCK_OK)
        return rc;
    if (!json_is_true(json_object_get(rep, "succeeded"))) {
        /* The failure branch read our key: gone (the lease ended), or
         * made again by another term of the same lease. */
        json_t *resp = json_array_get(json_object_get(rep, "responses"), 0);
        json_t *kvs = json_object_get(json_object_get(resp, "response_range"), "kvs");
        rc = json_array_size(kvs) ? DLOCK_ENOTOWNER : DLOCK_EEXPIRED;
        dlock__err_set(&l->err, "the election's value was not written: %s",
                       rc == DLOCK_EEXPIRED ? "the term's key is gone (its lease ended)"
                                            : "the term's key was made again");
    }
    json_decref(rep);
    return rc;
}

/* ---- leader ---------------------------------------------------------------- */

int dlock__etcd_elect_read(dlock_client *c, const char *key, size_t klen, dlock__leader *out)
{
    dlock__etcd_name range;
    if (dlock__etcd_name_init(&range, key, klen) != DLOCK_OK)
        return DLOCK_ENOMEM;
    dlock__etcd *e = DLOCK__ETCD_EC(c)->e;
    dlock__etcd_kv first;
    int rc = dlock__etcd_first_value(e, range.begin, range.len, range.end, range.len, &first,
                                     dlock__etcd_call_deadline(e), NULL);
    /* etcd ends a dead leader's key with its lease and the watch tells:
     * no look at a lease's end is needed (ttl_ms -1). */
    out->ttl_ms = -1;
    if (rc == DLOCK_OK && first.key) {
        out->fence = (uint64_t)first.create_rev;
        out->value = first.value; /* taken over */
        out->value_len = first.value ? first.value_len : 0;
        first.value = NULL;
    }
    dlock__etcd_kv_clear(&first);
    dlock__etcd_name_clear(&range);
    return rc;
}

/* ---- observe --------------------------------------------------------------- */

typedef struct elect_rec {
    dlock__loop_thread lt;
    dlock__post start;
    dlock__timer again; /* a failed stream is started again after a pause */
    dlock__etcd_watch w;
    dlock__etcd *e;
    dlock__etcd_name range;
    dlock__elect_watch *ew;
    int64_t pause_ms;
    atomic_int created; /* a stream was taken once: the first look may go */
} elect_rec;

static void bump(elect_rec *r)
{
    dlock__elect_watch_bump(r->ew);
}

static void start_stream(elect_rec *r);

/* Start the stream again after a pause that doubles, 50 ms to 1 s. */
static void pause(elect_rec *r)
{
    r->pause_ms = r->pause_ms ? DLOCK__MIN(r->pause_ms * 2, 1000) : 50;
    r->again.due_ns = dlock__deadline_after_ms(r->pause_ms);
    (void)dlock__timer_set(dlock__loop_thread_loop(&r->lt), &r->again);
}

static void stream_ended(dlock__etcd_watch *w)
{
    elect_rec *r = DLOCK__OWNER(w, elect_rec, w);
    bump(r); /* an event, or a stream that broke: read again either way */
    if (w->look) { /* an event: the next one is watched at once */
        r->pause_ms = 0;
        start_stream(r);
        return;
    }
    pause(r); /* a stream that broke (a member going away): again soon */
}

/* The stream was taken later than "no revision": something may have
 * changed between the observer's last read and it. */
static void stream_moved(dlock__etcd_watch *w)
{
    elect_rec *r = DLOCK__OWNER(w, elect_rec, w);
    atomic_store(&r->created, 1);
    bump(r);
}

static void start_stream(elect_rec *r)
{
    r->w.ended = stream_ended;
    r->w.moved = stream_moved;
    r->w.every_event = 1;
    if (dlock__etcd_watch_start(&r->w, r->e, dlock__loop_thread_loop(&r->lt), r->range.begin,
                                r->range.len, r->range.end, r->range.len, 0,
                                INT64_MAX) != DLOCK_OK) {
        bump(r);
        pause(r);
    }
}

static void start_posted(dlock__post *p)
{
    start_stream(DLOCK__OWNER(p, elect_rec, start));
}

static void again_fired(dlock__timer *t)
{
    start_stream(DLOCK__OWNER(t, elect_rec, again));
}

int dlock__etcd_elect_watch(dlock_client *c, const char *key, size_t klen,
                            dlock__elect_watch *ew)
{
    elect_rec *r = dlock__calloc(1, sizeof *r);
    if (!r)
        return DLOCK_ENOMEM;
    r->e = DLOCK__ETCD_EC(c)->e;
    r->ew = ew;
    r->start.run = start_posted;
    r->again.fire = again_fired;
    atomic_init(&r->created, 0);
    int rc = dlock__etcd_name_init(&r->range, key, klen);
    /* A read first: with credentials it gets the token the stream sends. */
    dlock__etcd_kv first;
    if (rc == DLOCK_OK) {
        rc = dlock__etcd_first(r->e, r->range.begin, r->range.len, r->range.end, r->range.len,
                               &first, dlock__etcd_call_deadline(r->e), NULL);
        if (rc == DLOCK_OK)
            dlock__etcd_kv_clear(&first);
        else if (dlock_error_is_transient(rc))
            rc = DLOCK_OK; /* a member down now: the stream starts again until one answers,
                              and the observer's looks back off meanwhile (as on Redis) */
    }
    if (rc == DLOCK_OK)
        rc = dlock__loop_thread_start(&r->lt, NULL);
    if (rc != DLOCK_OK) {
        dlock__etcd_name_clear(&r->range);
        dlock__free(r);
        return rc;
    }
    ew->rec = r;
    dlock__loop_thread_post(&r->lt, &r->start);
    /* The observer's first read comes once the stream runs (or after the
     * I/O timeout: then the next stream's start wakes it again). */
    int64_t until = dlock__deadline_after_ms(dlock__etcd_io_timeout_ms(r->e));
    struct timespec ts = dlock__timespec_of(until);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ew->mu));
    while (!atomic_load(&r->created) && !ew->canceled && dlock__now_ns() < until)
        (void)pthread_cond_timedwait(&ew->cond, &ew->mu, &ts);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ew->mu));
    return DLOCK_OK;
}

void dlock__etcd_elect_unwatch(dlock_client *c, dlock__elect_watch *ew)
{
    elect_rec *r = ew->rec;
    (void)c;
    if (!r)
        return;
    (void)dlock__loop_thread_stop(&r->lt);
    /* The loop no longer turns: its records are ours to end. */
    dlock__etcd_watch_stop(&r->w);
    dlock__timer_clear(dlock__loop_thread_loop(&r->lt), &r->again);
    dlock__loop_thread_free(&r->lt);
    dlock__etcd_name_clear(&r->range);
    dlock__free(r);
    ew->rec = NULL;
}
