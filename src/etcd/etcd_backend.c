/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd backend (backend.h): its operations table, a handle's hold of
 * an etcd lock (one lease and key, shared by an owner's handles in
 * reentrant mode; acquire, release, extend, adopt, the watchdog's
 * renewal), and opening and closing a client's etcd side. What a client
 * asks about a name without a handle (status, break, list) is
 * etcd_inspect.c's. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "call.h"
#include "client.h"
#include "clock.h"
#include "engine.h"
#include "etcd_client.h"
#include "etcd_inspect.h"
#include "etcd_kv.h"
#include "etcd_lock.h"
#include "etcd_release.h"
#include "etcd_renew.h"
#include "etcd_url.h"
#include "handle.h"
#include "kinds.h"
#include "loop_poll.h"
#include "observe.h"
#include "rand.h"
#include "watchdog.h"

/* One hold of the lock in etcd (one lease, one key), shared by the
 * handles of one owner in reentrant mode, a handle's own otherwise. */
typedef struct shared_hold {
    dlock__etcd_hold h;
    unsigned holds; /* counted over the handles (under the client's mu) */
    unsigned long thread_no; /* reentrant: the owner's thread (dlock__thread_no) */
    int listed; /* in the client's reentrant list */
    struct shared_hold *next;
} shared_hold;

/* The etcd part of a handle. */
struct dlock__etcd_lockdata {
    struct dlock__etcd_client *ec;
    dlock__etcd_name range; /* KEY NUL .. KEY \1 */
    shared_hold *sh;        /* while held */
};

/* The etcd parts of a client and of a handle: their `store` (client.h,
 * handle.h), which only this backend reads. */
#define EC(c) ((struct dlock__etcd_client *)(c)->store)
#define LD(l) ((struct dlock__etcd_lockdata *)(l)->store)

/* The lock side's part of the client: made on first use, freed by the
 * client's close through ec->lock_side_free. */
static void lock_side_free(struct dlock__etcd_client *ec, int forked)
{
    (void)forked;
    while (ec->reentrant) {
        shared_hold *s = ec->reentrant;
        ec->reentrant = s->next;
        dlock__etcd_hold_clear(&s->h);
        dlock__free(s);
    }
}

/* ---- handles (state and validity under the handle's mutex: handle.c) ------- */

#define get_state dlock__lock_get_state

/* ---- auto-renew: the client's watchdog keeps the lease alive --------------
 * The watchdog starts renew_start() for each due etcd lock, a request on
 * its loop (a keep-alive and a read of our key, etcd_renew.h), each in a
 * round of its own; its vote goes to settle(), then lost() for a lock
 * settle() found lost: the same rules as for Redis, with a majority of
 * one (etcd's own majority is behind each answer). */

/* One renewal in flight: the request and the round's record of it. */
typedef struct renewing {
    dlock__etcd_renew_req r;
    dlock__renew_req *q;
} renewing;

static void renewed(dlock__etcd_renew_req *r)
{
    renewing *g = DLOCK__OWNER(r, renewing, r);
    dlock__renew_req *q = g->q;
    int rc = r->rc;
    dlock__free(g);
    q->done(q, rc == DLOCK_OK ? 1 : rc == DLOCK_EEXPIRED || rc == DLOCK_ENOTOWNER ? 0 : -1);
}

static int renew_start(void *owner, int64_t deadline_ns, dlock__loop *loop, dlock__renew_req *q,
                       int *vote)
{
    dlock_lock *l = owner;
    *vote = -1;
    if (deadline_ns == INT64_MAX) /* validity unknown (adopted) */
        deadline_ns = dlock__etcd_call_deadline(LD(l)->ec->e);
    if (dlock__now_ns() >= deadline_ns)
        return 0; /* a confirmation after the lease ended proves nothing */
    renewing *g = dlock__calloc(1, sizeof *g);
    if (!g)
        return 0;
    g->q = q;
    g->r.done = renewed;
    /* the hold is stable while the record is registered; the request
     * copies it, since the record may be let go while it is in flight */
    if (dlock__etcd_renew_start(&g->r, LD(l)->ec->e, &LD(l)->sh->h, deadline_ns, loop) !=
        DLOCK_OK) {
        dlock__free(g);
        return 0;
    }
    return 1;
}

static const dlock__renewal_ops etcd_renewal_ops = {
    dlock__lock_renew_lease_end, dlock__engine_renew_settle, dlock__engine_renew_lost,
    renew_start};

static int lock_init(dlock_lock *l)
{
    struct dlock__etcd_client *ec = EC(l->client);
    struct dlock__etcd_lockdata *d = dlock__calloc(1, sizeof *d);
    if (!d || dlock__etcd_name_init(&d->range, l->name, l->name_len) != DLOCK_OK) {
        dlock__free(d);
        return DLOCK_ENOMEM;
    }
    d->ec = ec;
    d->range.identity = l->client->identity; /* the client outlives its handles */
    l->store = d;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
    ec->lock_side_free = lock_side_free;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    return DLOCK_OK;
}

static int is_reentrant(const dlock_lock *l)
{
    return (l->opts.flags & DLOCK_REENTRANT) != 0;
}

/* Take the handle's hold over: token, fence, its lease end for the
 * engine (which makes the handle HELD). */
static void hold_taken(dlock_lock *l, shared_hold *s)
{
    LD(l)->sh = s;
    memcpy(l->token_inline, s->h.token, sizeof s->h.token);
    l->token = l->token_inline;
    l->token_len = strlen(s->h.token);
    l->fence = (l->opts.flags & DLOCK_NO_FENCE) ? 0 : (uint64_t)s->h.rev;
    l->holds = 1;
    dlock__lock_granted(l, s->h.valid_until_ns);
}

/* Take s off the client's reentrant list (under ec->mu): nobody enters
 * it any more. */
static void unlist_locked(struct dlock__etcd_client *ec, shared_hold *s)
{
    if (!s->listed)
        return;
    shared_hold **p = (shared_hold **)&ec->reentrant;
    while (*p != s)
        p = &(*p)->next;
    *p = s->next;
    s->listed = 0;
}

static void unlist(struct dlock__etcd_client *ec, shared_hold *s)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
    unlist_locked(ec, s);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
}

/* Drop n holds of s; 1 if they were the last (the caller then revokes the
 * lease or lets it run out, and frees). */
static int drop_of(struct dlock__etcd_client *ec, shared_hold *s, unsigned n)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
    s->holds = s->holds > n ? s->holds - n : 0;
    int last = s->holds == 0;
    if (last)
        unlist_locked(ec, s);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    return last;
}

/* Drop the handle's share of its hold. */
static int hold_drop(dlock_lock *l, unsigned n)
{
    return drop_of(LD(l)->ec, LD(l)->sh, n);
}

static void hold_free(shared_hold *s)
{
    dlock__etcd_hold_clear(&s->h);
    dlock__free(s);
}

/* Reentrant: another handle of this owner (client x thread) holds it;
 * counted as one more hold of it. */
static shared_hold *reentrant_find(dlock_lock *l)
{
    struct dlock__etcd_client *ec = LD(l)->ec;
    shared_hold *found = NULL;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
    for (shared_hold *s = ec->reentrant; s; s = s->next)
        if (s->thread_no == dlock__thread_no() && s->h.key_len == LD(l)->range.len + 16 &&
            memcmp(s->h.key, LD(l)->range.begin, LD(l)->range.len) == 0) {
            s->holds++;
            found = s;
            break;
        }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    return found;
}

/* A re-entry: one more hold of the owner's live hold, through this handle
 * (it holds already) or through another handle of the owner. One
 * keep-alive of the lease and a read of our key, so that the handle's
 * validity counts from its own operation and a hold that ended is not
 * re-entered: when the lease is gone or the key was deleted, that hold is
 * taken off the owner's list (the handles that share it learn at their
 * release or extend), this handle drops its holds of it, and *fresh is
 * set: the caller gets in line for a new hold, as Redis's acquire does
 * when the owner's key is gone. *fresh is also set when there is nothing
 * to re-enter. A handle whose own hold ended looks for another live hold
 * of the owner. */
static int reenter(dlock_lock *l, int cancel_fd, int *fresh)
{
    struct dlock__etcd_client *ec = LD(l)->ec;
    int own = LD(l)->sh != NULL; /* HELD through this handle */
    shared_hold *s = own ? LD(l)->sh : reentrant_find(l);
    *fresh = 0;
    if (!s) {
        *fresh = 1;
        return DLOCK_OK;
    }
    if (own) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
        s->holds++;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    }
    dlock__etcd_hold copy = s->h; /* its fields change only while unshared */
    int rc = dlock__etcd_renew(ec->e, &copy, dlock__etcd_call_deadline(ec->e), cancel_fd,
                               &l->err);
    if (rc == DLOCK_OK) {
        if (own)
            l->holds++; /* (a handle found lost meanwhile stays LOST: fsm.c) */
        else
            hold_taken(l, s);
        dlock__lock_granted(l, copy.valid_until_ns);
        return DLOCK_OK;
    }
    int ended = rc == DLOCK_EEXPIRED || rc == DLOCK_ENOTOWNER;
    if (ended)
        unlist(ec, s); /* that hold has ended: not one to enter */
    if (own) {
        (void)drop_of(ec, s, 1); /* the hold counted above; ours remain */
        if (ended) /* the lease is gone or going: nothing to tell etcd */
            dlock__engine_ended(l, rc);
    } else if (drop_of(ec, s, 1)) { /* its other handles let go meanwhile */
        hold_free(s);
    }
    if (!ended)
        return rc;
    dlock__err_clear(&l->err);
    if (own) /* the owner may hold it anew through another handle */
        return reenter(l, cancel_fd, fresh);
    *fresh = 1;
    return DLOCK_OK;
}

/* A re-entry inside a wait rides out what the wait for a new hold rides
 * out (dlock.h): a keep-alive that fails with EBUSY, EIO or EUNKNOWN is
 * tried again with the lock's backoff until the deadline, or until a
 * cancel. A try-once re-entry returns the error at once. A hold found
 * ended sets *fresh as before (reenter()); one the watchdog found lost
 * while we retried was reported, and the handle starts over as an
 * acquire of a lost handle does. */
static int reenter_waiting(dlock_lock *l, int64_t wait_ms, int cancel_fd, int *fresh)
{
    int64_t deadline_ns = wait_ms < 0 ? INT64_MAX : dlock__deadline_after_ms(wait_ms);
    for (unsigned failures = 0;; failures++) {
        int rc = reenter(l, cancel_fd, fresh);
        if (wait_ms == 0 || !(rc == DLOCK_EBUSY || rc == DLOCK_EIO || rc == DLOCK_EUNKNOWN))
            return rc;
        int64_t left = dlock__ms_until(deadline_ns);
        if (left <= 0) {
            dlock__err_append(&l->err, "gave up after %" PRId64 " ms", wait_ms);
            return rc;
        }
        int64_t pause = DLOCK__MIN(
            dlock__backoff_ms(failures, l->opts.retry_min_ms, l->opts.retry_max_ms), left);
        if (dlock__loop_poll_sleep(dlock__deadline_after_ms(pause), cancel_fd))
            return DLOCK_ECANCELED;
        if (get_state(l) == DLOCK_STATE_LOST)
            /* reported: start over, as a lost handle's acquire */
            dlock__engine_ended(l, DLOCK_ELOST);
    }
}

/* The wait's reads of the line and wake-ups, for the observer. */
static void on_tried(void *arg)
{
    ((dlock_lock *)arg)->obs_attempts++;
}

static void on_woke(void *arg, int pushed)
{
    dlock__obs_wakeup(arg, pushed);
}

/* A new hold: a place in line (etcd_lock.c), first key owns. A reentrant
 * handle first tries to re-enter a live hold of its owner. */
static int acquire(dlock_lock *l, int64_t wait_ms, int64_t deadline_ns)
{
    (void)deadline_ns; /* etcd_lock.c counts wait_ms itself */
    struct dlock__etcd_client *ec = LD(l)->ec;
    int cancel_fd = l->cancel_fd[0];
    int rc = DLOCK_OK;
    dlock__err_clear(&l->err);
    int fresh = 1;
    if (is_reentrant(l))
        rc = reenter_waiting(l, wait_ms, cancel_fd, &fresh);
    shared_hold *s = NULL;
    int64_t holder_ttl = -1;
    if (fresh && !(s = dlock__calloc(1, sizeof *s)))
        rc = DLOCK_ENOMEM;
    if (s)
        rc = dlock__etcd_acquire(ec->e, &LD(l)->range, l->opts.ttl_ms, wait_ms,
                                 l->opts.retry_max_ms, cancel_fd,
                                 &(dlock__etcd_events){on_tried, on_woke, l}, &s->h,
                                 &holder_ttl, &l->err);
    if (rc == DLOCK_ECANCELED) /* that cancel is used up: not the next wait's */
        dlock__lock_take_cancel(l);
    if (!fresh || !s) { /* re-entered (or refused), or out of memory */
        if (rc == DLOCK_ECANCELED)
            dlock__err_set(&l->err, "cancelled while waiting for \"%s\"", l->name);
        return rc;
    }
    atomic_store(&l->holder_ttl_ms, holder_ttl);
    if (rc != DLOCK_OK) {
        if (rc == DLOCK_ETIMEDOUT)
            dlock__err_append(&l->err, "gave up after %" PRId64 " ms", wait_ms);
        else if (rc == DLOCK_ECANCELED)
            dlock__err_set(&l->err, "cancelled while waiting for \"%s\"", l->name);
        dlock__free(s);
        return rc;
    }
    s->holds = 1;
    if (is_reentrant(l)) {
        s->thread_no = dlock__thread_no();
        s->listed = 1;
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
        s->next = ec->reentrant;
        ec->reentrant = s;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    }
    hold_taken(l, s);
    dlock__err_clear(&l->err);
    return DLOCK_OK;
}

/* The last hold revokes the lease when no other handle of the owner shares
 * it; another is only counted down (the lease is the owner's). Either is a
 * request on the engine's loop (etcd_release.h). */
static int release_start(dlock_lock *l, int last, dlock__op *op)
{
    struct dlock__etcd_client *ec = LD(l)->ec;
    shared_hold *s = LD(l)->sh;
    if (!last) {
        hold_drop(l, 1); /* others remain: never the last */
        return dlock__etcd_release_op(op, ec->e, NULL, &l->err);
    }
    LD(l)->sh = NULL; /* the engine lets the holds go */
    if (!drop_of(ec, s, l->holds))
        return dlock__etcd_release_op(op, ec->e, NULL, &l->err);
    int rc = dlock__etcd_release_op(op, ec->e, &s->h, &l->err); /* copies what it sends */
    hold_free(s);
    return rc;
}

/* The hold an extend found ended is gone: the owner's other handles do not
 * re-enter it (the engine lets this handle's holds go). */
static void extend_ended(void *arg)
{
    dlock_lock *l = arg;
    unlist(LD(l)->ec, LD(l)->sh);
}

static int extend_start(dlock_lock *l, int64_t ttl_ms, int64_t deadline_ns, dlock__op *op)
{
    (void)deadline_ns; /* late_answer_counts: etcd's answer is the truth */
    return dlock__etcd_extend_op(op, LD(l)->ec->e, &LD(l)->sh->h, ttl_ms, &l->err, extend_ended,
                                 l);
}

static int adopt_check(dlock_lock *l, const char *token, size_t len)
{
    if (len != 16 || strspn(token, "0123456789abcdef") != 16) {
        dlock__err_set(&l->err, "etcd: a token is the lease ID in 16 hex digits");
        return DLOCK_EINVAL;
    }
    unsigned long long id = strtoull(token, NULL, 16);
    if (id == 0 || id > INT64_MAX) {
        dlock__err_set(&l->err, "etcd: a token is the lease ID in 16 hex digits");
        return DLOCK_EINVAL;
    }
    return DLOCK_OK;
}

/* The hold an adopted token names: its lease, TTL unknown (extend asks). */
static int adopt(dlock_lock *l, const char *token, size_t len)
{
    (void)len;
    shared_hold *s = dlock__calloc(1, sizeof *s);
    if (!s)
        return DLOCK_ENOMEM;
    s->h.lease = (int64_t)strtoull(token, NULL, 16); /* checked by adopt_check */
    memcpy(s->h.token, token, 17);
    s->h.ttl_s = 0; /* unknown: extend asks etcd */
    s->h.key_len = LD(l)->range.len + 16;
    if (!(s->h.key = dlock__malloc(s->h.key_len + 1))) {
        dlock__free(s);
        return DLOCK_ENOMEM;
    }
    memcpy(s->h.key, LD(l)->range.begin, LD(l)->range.len);
    memcpy(s->h.key + LD(l)->range.len, token, 17);
    s->h.valid_until_ns = INT64_MIN; /* unknown until an extend */
    s->holds = 1;
    LD(l)->sh = s; /* the engine takes the token, fence 0, holds and state */
    return DLOCK_OK;
}

/* The handle lets go of its share of the hold without a word to etcd
 * (lost, ended, forgotten): the lease runs on until its TTL, or the owner's
 * other handles keep it. */
static void drop(dlock_lock *l)
{
    if (!LD(l) || !LD(l)->sh)
        return;
    if (hold_drop(l, l->holds))
        hold_free(LD(l)->sh);
    LD(l)->sh = NULL;
}

/* Before the token changes (adopt) and after a loss: nothing is owed to
 * etcd; a lost lease is gone or going by itself. */
static void nothing_owed(dlock_lock *l)
{
    (void)l;
}

/* dlock_lock_free(): a held lock is released, best effort: the release's
 * request (release_start) on a private loop. */
static void cleanup(dlock_lock *l)
{
    if (LD(l) && LD(l)->sh && get_state(l) == DLOCK_STATE_HELD)
        (void)dlock__call_release(l, 1);
    drop(l);
}

static void lock_clear(dlock_lock *l, int forked)
{
    (void)forked; /* the store's side is cleanup()'s */
    struct dlock__etcd_lockdata *d = LD(l);
    if (!d)
        return;
    dlock__etcd_name_clear(&d->range);
    dlock__free(d);
    l->store = NULL;
}

static const dlock__kind *kind_for(const dlock_client *c, const dlock__kind *k)
{
    (void)c;
    return dlock__kind_in_line(k);
}

static int64_t lease_ttl_ms(dlock_lock *l)
{
    return LD(l)->sh->h.ttl_s * 1000;
}

static int64_t no_drift(dlock_lock *l, int64_t ttl_ms)
{
    (void)l, (void)ttl_ms;
    return 0; /* etcd's lease is counted by etcd, from our keep-alive's send */
}
/* ---- the client --------------------------------------------------------- */

static int open_client(dlock_client *c, const char *const *urls, size_t n_urls,
                       const dlock_client_options *opts, char *err, size_t err_len)
{
    if (opts->cluster) {
        snprintf(err, err_len, "the cluster option is for Redis Cluster, not etcd:// URLs");
        return DLOCK_EINVAL;
    }
    c->quorum = 1;
    struct dlock__etcd_client *ec = NULL;
    int rc = dlock__etcd_client_open(&ec, urls, n_urls, opts, err, err_len);
    c->store = ec;
    return rc;
}

static void close_client(dlock_client *c, int forked)
{
    dlock__etcd_client_close(EC(c), forked);
    c->store = NULL;
}

static size_t one_node(const dlock_client *c)
{
    (void)c;
    return 1; /* the cluster is one node to the caller */
}

static const char *node_name(const dlock_client *c, size_t i)
{
    return i == 0 && EC(c) ? EC(c)->name : NULL;
}

const dlock__backend dlock__etcd_backend = {
    .name = "etcd",
    .wants = dlock__etcd_wanted,
    .open = open_client,
    .close = close_client,
    .node_count = one_node,
    .node_name = node_name,
    .status = dlock__etcd_status,
    .identity = dlock__etcd_identity,
    .list = dlock__etcd_list_names,
    .break_holds = dlock__etcd_break_holds,
    .late_answer_counts = 1,
    .renewal = &etcd_renewal_ops,
    .kind_for = kind_for,
    .lock_init = lock_init,
    .lock_clear = lock_clear,
    .acquire = acquire,
    .release_start = release_start,
    .extend_start = extend_start,
    .lease_ttl_ms = lease_ttl_ms,
    .drift_ns = no_drift,
    .adopt_check = adopt_check,
    .adopt = adopt,
    .settle = nothing_owed,
    .release_lost = nothing_owed,
    .drop = drop,
    .cleanup = cleanup,
};
