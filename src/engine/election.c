/* SPDX-License-Identifier: BSD-3-Clause */
/* Elections (dlock.h, "Elections"; docs/elections.md), on the engine's
 * locks: no second state machine.
 *
 * Design. An election NAME is a DLOCK_FAIR | DLOCK_AUTO_RENEW lock on
 * NAME (the term's lock) and a value kept beside it by its holder. A
 * store that serves no fair lock for the client (a Redlock: each node's
 * line would be its own, in its own order) gets a DLOCK_AUTO_RENEW lock
 * only: its standbys contend for the term instead of queueing, the rest
 * is the same (the backend writes and reads the value on a majority).
 *   - campaign = a waiting acquire of the term's lock: standbys wait in
 *     its fair line, in arrival order, and the lock's fence is the term's
 *     fencing token (a grant raises it, so it strictly grows from term to
 *     term). On Redis the leader then writes its value with a script that
 *     checks it still holds the lock (elect_write.lua) and stamps the
 *     value with its token and fence; on etcd the value is the key's own
 *     value, written by the create that got in line (etcd's Election
 *     layout: NAME/LEASE, the leader the lowest create revision), so
 *     there is no moment without it.
 *   - proclaim = the same checked write (etcd: a transaction on the key's
 *     create revision).
 *   - resign = the lock's release: a fair release hands the lead to the
 *     next standby in the same step.
 *   - leader = one read of the holder, its fence and the value: on Redis
 *     the value counts only with the current holder's stamp
 *     (elect_read.lua), so a new term whose leader has not written yet is
 *     shown as nobody leading, never with the previous term's value.
 *   - observe = a look at the leader after every message that may mean a
 *     change, pushed by the store: Redis's wake-up channel of the lock (a
 *     resign's release message) and the election's channel (each value
 *     write publishes on it), plus one look when the leader's lease would
 *     end (a leader that died publishes nothing); etcd's watch on the
 *     prefix. The backend's elect_watch wakes the observing thread;
 *     everything else is here.
 * A term that is lost (renewals failed) is the lock's loss: on_lost, as
 * for any lock. The calls block (a looped client is refused: its
 * campaign and resign are election_loop.c's requests). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"
#include "backend.h"
#include "client.h"
#include "clock.h"
#include "common.h"
#include "election.h"
#include "engine.h"
#include "handle.h"
#include "restore_stamp.h"
#include "versioned.h"

static const size_t options_sizes[] = {
    sizeof(dlock_election_options), /* 1 */
};
DLOCK__VERSIONED_CHECK(dlock_election_options, options_sizes, DLOCK_ELECTION_OPTIONS_VERSION);

int dlock_election_options_init(dlock_election_options *opts, unsigned int version)
{
    const dlock_election_options defaults = DLOCK_ELECTION_OPTIONS_INIT;
    return dlock__versioned_init(opts, &defaults, options_sizes,
                                 DLOCK__ARRAY_LEN(options_sizes), version);
}

void dlock__elect_watch_bump(dlock__elect_watch *w)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&w->mu));
    w->woken++;
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&w->cond));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&w->mu));
}

void dlock__leader_clear(dlock__leader *ld)
{
    dlock__free(ld->value);
    *ld = (dlock__leader){0, -1, NULL, 0};
}

/* The term's lock options from the election's: a fair lock where the
 * store keeps a line (standbys served in arrival order), else (Redlock:
 * each node's order could differ, so no node's line is the line) a plain
 * one, whose standbys contend when the term ends. */
static int lock_options(const dlock_client *c, const dlock_election_options *opts,
                        dlock_lock_options *lo)
{
    dlock_election_options eo = DLOCK_ELECTION_OPTIONS_INIT;
    if (opts) {
        size_t n = dlock__versioned_size(options_sizes, DLOCK__ARRAY_LEN(options_sizes),
                                         opts->version);
        if (n == 0)
            return DLOCK_EINVAL;
        memcpy(&eo, opts, n);
    }
    *lo = (dlock_lock_options)DLOCK_LOCK_OPTIONS_INIT;
    lo->ttl_ms = eo.ttl_ms;
    lo->flags = DLOCK_AUTO_RENEW;
    if (dlock__lock_kind_served(c, DLOCK_FAIR | DLOCK_AUTO_RENEW, 0))
        lo->flags |= DLOCK_FAIR;
    lo->renew_interval_ms = eo.renew_interval_ms;
    lo->retry_min_ms = eo.retry_min_ms;
    lo->retry_max_ms = eo.retry_max_ms;
    lo->on_lost = eo.on_lost;
    lo->on_lost_arg = eo.on_lost_arg;
    lo->lock_delay_ms = eo.lock_delay_ms;
    return DLOCK_OK;
}

/* The term's lock goes as dlock_lock_free() would let it go (a term
 * held: released). */
static void free_lock(dlock_lock *l)
{
    if (!l)
        return;
    if (l->async) { /* a looped client's: let go on its loop */
        dlock__async_free(l);
        return;
    }
    if (!dlock__client_forked(l->client))
        dlock__engine_let_go(l);
    dlock__lock_destroy(l);
}

int dlock_election_new(dlock_election **out, dlock_client *client, const char *name,
                       const dlock_election_options *opts)
{
    if (out)
        *out = NULL;
    if (!out || !client || !name || dlock__client_forked(client))
        return DLOCK_EINVAL;
    dlock_lock_options lo;
    int rc = lock_options(client, opts, &lo);
    if (rc != DLOCK_OK)
        return rc;
    dlock_election *e = dlock__calloc(1, sizeof *e);
    if (!e)
        return DLOCK_ENOMEM;
    e->client = client;
    atomic_init(&e->campaigning, 0);
    rc = dlock_lock_new(&e->lock, client, name, &lo);
    if (rc == DLOCK_OK)
        e->lock->is_term = 1;
    /* The value a key put back carries (restore_stamp.h), before any
     * registration with the watchdog. */
    if (rc == DLOCK_OK && !(e->lock->renewal.stamp = dlock__restore_stamp_new()))
        rc = DLOCK_ENOMEM;
    /* Checked after the lock's own checks, so that a bad name or option
     * is DLOCK_EINVAL on every store. */
    if (rc == DLOCK_OK && !client->backend->elect_read)
        rc = DLOCK_ENOTSUP;
    if (rc != DLOCK_OK) {
        free_lock(e->lock);
        dlock__free(e);
        return rc;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&e->mu, NULL));
    *out = e;
    return DLOCK_OK;
}

void dlock_election_free(dlock_election *e)
{
    if (!e)
        return;
    dlock__election_loop_free(e); /* a looped client's pending campaign or resign */
    /* A blocking leader resigns as dlock_election_resign() does, so that
     * its observers hear of it (elect_resigned); the free's own release
     * would tell them nothing. */
    if (!e->client->loop && !dlock__client_forked(e->client) &&
        e->client->backend->elect_resigned && dlock_lock_state_get(e->lock) == DLOCK_STATE_HELD)
        (void)dlock_election_resign(e);
    free_lock(e->lock);
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&e->mu));
    dlock__free(e->value);
    dlock__free(e);
}

/* A value's length, or SIZE_MAX when it is too long. */
size_t dlock__election_value_length(const char *value)
{
    size_t n = strnlen(value, DLOCK_ELECTION_VALUE_MAX + 1);
    return n > DLOCK_ELECTION_VALUE_MAX ? SIZE_MAX : n;
}

/* Keep our value (etcd's grant writes it from the term's lock). */
int dlock__election_keep_value(dlock_election *e, const char *value, size_t len)
{
    char *copy = dlock__malloc(len + 1);
    if (!copy)
        return DLOCK_ENOMEM;
    memcpy(copy, value, len);
    copy[len] = '\0';
    dlock__free(e->value);
    e->value = copy;
    e->value_len = len;
    e->lock->elect_value = copy;
    e->lock->elect_value_len = len;
    return DLOCK_OK;
}

/* A write that found our term over in the store: let the handle go (its
 * release compares the token and changes nothing there), keeping the
 * write's message. */
static int term_over(dlock_election *e, int rc)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", dlock_lock_errmsg(e->lock));
    (void)dlock__engine_release(e->lock);
    dlock__err_set(&e->lock->err, "%s", msg);
    return rc;
}

static int campaign(dlock_election *e, const char *value, int64_t wait_ms)
{
    size_t len = dlock__election_value_length(value);
    if (len == SIZE_MAX || dlock_lock_state_get(e->lock) == DLOCK_STATE_HELD)
        return DLOCK_EINVAL;
    int rc = dlock__lock_check_wait_ms(e->lock, wait_ms);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__election_keep_value(e, value, len);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__engine_acquire(e->lock, wait_ms);
    if (rc == DLOCK_OK && !e->lock->backend->elect_value_at_grant) {
        rc = e->lock->backend->elect_write(e->lock, value, len);
        if (rc != DLOCK_OK)
            return term_over(e, rc);
    }
    return rc;
}

/* The blocking calls would block a looped client's loop. */
static int blocking_refused(const dlock_election *e)
{
    return !e || dlock__client_forked(e->client) || e->client->loop;
}

int dlock_election_campaign(dlock_election *e, const char *value, int64_t wait_ms)
{
    if (blocking_refused(e) || !value)
        return DLOCK_EINVAL;
    /* Campaigning from the first moment: a cancel from another thread
     * that comes while the checks run reaches the acquire (the lock's
     * cancel waits for it), not only an observe. */
    atomic_store(&e->campaigning, 1);
    int rc = campaign(e, value, wait_ms);
    atomic_store(&e->campaigning, 0);
    return rc;
}

int dlock_election_proclaim(dlock_election *e, const char *value)
{
    if (blocking_refused(e) || !value)
        return DLOCK_EINVAL;
    size_t len = dlock__election_value_length(value);
    if (len == SIZE_MAX)
        return DLOCK_EINVAL;
    if (dlock_lock_state_get(e->lock) != DLOCK_STATE_HELD)
        return DLOCK_ENOTHELD;
    int rc = e->lock->backend->elect_write(e->lock, value, len);
    if (rc == DLOCK_ENOTOWNER || rc == DLOCK_EEXPIRED) {
        /* The term ended in the store before the watchdog saw it: a
         * leader that stops its work in on_lost must hear it now, as it
         * would from the watchdog (once: the state leaves HELD here). */
        dlock__engine_renew_lost(e->lock, DLOCK_LOST_NOT_OWNER);
        return term_over(e, rc);
    }
    if (rc == DLOCK_OK)
        rc = dlock__election_keep_value(e, value, len);
    return rc;
}

int dlock_election_resign(dlock_election *e)
{
    if (blocking_refused(e))
        return DLOCK_EINVAL;
    int rc = dlock__engine_release(e->lock);
    if (rc == DLOCK_OK && e->client->backend->elect_resigned)
        e->client->backend->elect_resigned(e->lock);
    return rc;
}

uint64_t dlock_election_fence(const dlock_election *e)
{
    return e && dlock_lock_state_get(e->lock) == DLOCK_STATE_HELD ? dlock_lock_fence(e->lock) : 0;
}

dlock_lock *dlock_election_lock(dlock_election *e)
{
    return e ? e->lock : NULL;
}

static int read_leader(dlock_election *e, dlock__leader *ld)
{
    *ld = (dlock__leader){0, -1, NULL, 0};
    return e->client->backend->elect_read(e->client, e->lock->name, e->lock->name_len, ld);
}

int dlock_election_leader(dlock_election *e, uint64_t *fence, char *value, size_t value_len,
                          size_t *full_len)
{
    if (!e || !fence || (!value && value_len > 0))
        return DLOCK_EINVAL;
    *fence = 0;
    if (value_len > 0)
        value[0] = '\0';
    if (full_len)
        *full_len = 0;
    dlock__leader ld;
    int rc = read_leader(e, &ld);
    if (rc == DLOCK_OK) {
        *fence = ld.fence;
        if (value_len > 0) {
            size_t n = ld.value_len < value_len - 1 ? ld.value_len : value_len - 1;
            if (n)
                memcpy(value, ld.value, n);
            value[n] = '\0';
        }
        if (full_len)
            *full_len = ld.value_len;
    }
    dlock__leader_clear(&ld);
    return rc;
}

void dlock_election_cancel(dlock_election *e)
{
    if (!e)
        return;
    if (e->client->loop) { /* a looped client's: from the loop's thread */
        dlock__election_loop_cancel(e);
        return;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&e->mu));
    e->cancels++; /* an observe not registered yet finds it when it is */
    int observed = e->observes > 0;
    for (dlock__observer *o = e->observers; o; o = o->next) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&o->w->mu));
        o->w->canceled = 1;
        DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&o->w->cond));
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&o->w->mu));
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&e->mu));
    /* A cancel that ended an observe only must not end the next
     * campaign too (a lock's cancel waits for its next acquire). */
    if (atomic_load(&e->campaigning) || !observed)
        dlock__engine_cancel(e->lock);
}

/* ---- observe ---------------------------------------------------------------- */

typedef struct observe_run {
    dlock_election *e;
    dlock__elect_watch w;
    dlock__observer link;
    int64_t deadline_ns;
    unsigned cancels; /* e->cancels when the observe began */
    int reported; /* the callback has seen last_* */
    int64_t quiet_until_ns; /* a term with no value yet is not shown before this (0: none) */
    uint64_t last_fence;
    char *last_value;
    size_t last_len;
} observe_run;

static void observing(observe_run *r, int on)
{
    dlock_election *e = r->e;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&e->mu));
    if (on) {
        r->link = (dlock__observer){&r->w, e->observers};
        e->observers = &r->link;
        if (e->cancels != r->cancels) /* cancelled before it was listed */
            r->w.canceled = 1;
    } else {
        dlock__observer **pp = &e->observers;
        while (*pp != &r->link)
            pp = &(*pp)->next;
        *pp = r->link.next;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&e->mu));
}

/* Is ld another leader (or value) than the callback saw last? */
static int changed(const observe_run *r, const dlock__leader *ld)
{
    return !r->reported || ld->fence != r->last_fence || ld->value_len != r->last_len ||
           (ld->value_len && memcmp(ld->value, r->last_value, ld->value_len) != 0);
}

/* Report ld if it changed (its value is taken over): 1 when the
 * callback asks to stop, else 0. */
static int report(observe_run *r, dlock__leader *ld, dlock_leader_fn cb, void *arg)
{
    if (!changed(r, ld))
        return 0;
    dlock__free(r->last_value);
    r->last_value = ld->value; /* taken over */
    r->last_len = ld->value_len;
    r->last_fence = ld->fence;
    r->reported = 1;
    ld->value = NULL;
    return cb(arg, r->last_fence, r->last_value ? r->last_value : "", r->last_len) != 0;
}

/* Sleep until a wake-up since `seen` (only if wakes: a backoff sleeps
 * its time out whatever wakes), the cancel, until_ns or the deadline:
 * DLOCK_OK (look again), DLOCK_ECANCELED, DLOCK_ETIMEDOUT. The deadline
 * is looked at first, so that wake-ups that keep coming cannot hold a
 * timed observe past it. */
static int sleep_for_change(observe_run *r, unsigned seen, int wakes, int64_t until_ns)
{
    int64_t end = until_ns < r->deadline_ns ? until_ns : r->deadline_ns;
    struct timespec ts = dlock__timespec_of(end);
    int rc = DLOCK_OK;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&r->w.mu));
    for (;;) {
        int64_t now = dlock__now_ns();
        if (r->w.canceled) {
            rc = DLOCK_ECANCELED;
            break;
        }
        if (r->deadline_ns != INT64_MAX && now >= r->deadline_ns) {
            rc = DLOCK_ETIMEDOUT;
            break;
        }
        if (wakes && r->w.woken != seen)
            break;
        if (now >= end)
            break;
        if (end == INT64_MAX)
            DLOCK__CHECK_PTHREAD(pthread_cond_wait(&r->w.cond, &r->w.mu));
        else
            (void)pthread_cond_timedwait(&r->w.cond, &r->w.mu, &ts);
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&r->w.mu));
    return rc;
}

/* The wake-ups so far; *canceled whether a cancel came. */
static unsigned woken_now(observe_run *r, int *canceled)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&r->w.mu));
    unsigned n = r->w.woken;
    *canceled = r->w.canceled;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&r->w.mu));
    return n;
}

/* A term whose holder has not written its value yet (Redis, the moments
 * between a grant and its value's write: a holder and no fence) is shown
 * as no leader, but after a leader was shown not at once: a resign's word
 * (elect_resigned) comes as the next standby takes the term, and that
 * standby's value write follows within a round trip, so the observers go
 * from one leader to the next as on the other stores. Only a standby
 * that writes nothing within the client's I/O timeout (stopped, dead), or
 * by that term's end if sooner, is shown as no leader. 1 (not now: look
 * again by *until_ns) or 0. */
static int hold_back(observe_run *r, const dlock__leader *ld, int64_t *until_ns)
{
    if (!r->reported || r->last_fence == 0 || ld->fence != 0 || ld->ttl_ms < 0) {
        r->quiet_until_ns = 0;
        return 0;
    }
    int64_t now = dlock__now_ns();
    if (r->quiet_until_ns == 0) /* no later than that term's own end */
        r->quiet_until_ns =
            now + DLOCK__MIN(r->e->client->opts.io_timeout_ms, ld->ttl_ms + 1) * DLOCK__NS_PER_MS;
    if (now >= r->quiet_until_ns)
        return 0;
    *until_ns = r->quiet_until_ns;
    return 1;
}

/* Look, report, sleep, until the callback stops it or the wait ends. */
static int observe_loop(observe_run *r, dlock_leader_fn cb, void *arg)
{
    int64_t backoff_ms = 0;
    for (;;) {
        int wakes = 1, canceled;
        unsigned seen = woken_now(r, &canceled); /* before the look: a change after it wakes us */
        if (canceled) /* (a cancel during the watch's start: no look, no callback) */
            return DLOCK_ECANCELED;
        dlock__leader ld;
        int rc = read_leader(r->e, &ld);
        int64_t until_ns = INT64_MAX;
        if (rc == DLOCK_OK && hold_back(r, &ld, &until_ns)) {
            dlock__leader_clear(&ld);
        } else if (rc == DLOCK_OK) {
            backoff_ms = 0;
            int stop = report(r, &ld, cb, arg);
            /* A leader that dies publishes nothing: look when its lease
             * would end (a renewed lease shows a new end then). */
            if (ld.ttl_ms >= 0)
                until_ns = dlock__deadline_after_ms(ld.ttl_ms + 1);
            dlock__leader_clear(&ld);
            if (stop)
                return DLOCK_OK;
        } else if (dlock_error_is_transient(rc)) {
            dlock__leader_clear(&ld);
            backoff_ms = backoff_ms ? DLOCK__MIN(backoff_ms * 2, 1000) : 50;
            until_ns = dlock__deadline_after_ms(backoff_ms);
            wakes = 0; /* sleep the backoff out, whatever wakes */
        } else {
            dlock__leader_clear(&ld);
            return rc;
        }
        rc = sleep_for_change(r, seen, wakes, until_ns);
        if (rc != DLOCK_OK)
            return rc;
    }
}

int dlock_election_observe(dlock_election *e, int64_t wait_ms, dlock_leader_fn cb, void *arg)
{
    if (blocking_refused(e) || !cb || (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER))
        return DLOCK_EINVAL;
    observe_run r;
    memset(&r, 0, sizeof r);
    r.e = e;
    r.deadline_ns = wait_ms == DLOCK_WAIT_FOREVER ? INT64_MAX : dlock__deadline_after_ms(wait_ms);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&e->mu));
    r.cancels = e->cancels;
    e->observes++;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&e->mu));
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&r.w.mu, NULL));
    dlock__cond_init_monotonic(&r.w.cond);
    observing(&r, 1);
    dlock_client *c = e->client;
    int rc = c->backend->elect_watch(c, e->lock->name, e->lock->name_len, &r.w);
    if (rc == DLOCK_OK) {
        rc = observe_loop(&r, cb, arg);
        c->backend->elect_unwatch(c, &r.w);
    }
    observing(&r, 0);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&e->mu));
    e->observes--;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&e->mu));
    dlock__free(r.last_value);
    DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&r.w.cond));
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&r.w.mu));
    return rc;
}
