/* SPDX-License-Identifier: BSD-3-Clause */
/* The watchdog thread.
 *
 * Every registered renewal record (a held auto-renew lock, or a fair
 * hand-over's one confirming renewal) has a next-renewal time (acquire
 * time + interval, interval = renew_interval_ms or ttl/3, where ttl is the
 * lock's renewal TTL: the lock's ttl_ms, or the TTL of the last successful
 * dlock_lock_extend() of this hold). The thread is a client loop thread
 * (loop_thread.h): a loop timer fires when the earliest record is nearly
 * due (a tenth of its interval ahead), and the thread then renews in one
 * round every lock due within half of its interval, so rounds merge
 * instead of multiplying with the number of locks. dlock__watchdog_add()
 * and a finished cluster round post a look at the schedule to the thread
 * (a post wakes its loop); the timer is set and cleared there only. A
 * round still blocks the thread while it runs (the fan-out's private loop
 * inside renew_round.c); making it a request with a completion on this
 * loop is left to the engine's requests (engine-plan.md §4.2). A round is
 * one pipelined
 * batch of renew_batch.lua calls per node, RENEW_CHUNK locks per call,
 * contacted in parallel through the fan-out. On a Cluster (one node of
 * ours, many masters) each master's locks make a round of their own, on a
 * thread of its own that the watchdog thread does not wait for
 * (run_jobs()): a stalled master's round must not hold back the others.
 *
 * Safety of release against a round in flight: a lock taking part in a
 * round is flagged in_round; dlock__watchdog_remove() waits for the round
 * to finish, so when release or free goes on, no renewal of the lock is on
 * the wire and none will be sent. Callbacks run at the end of the round,
 * before in_round is cleared, so a lock is never freed under its callback. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "fanout.h"
#include "loop_thread.h"
#include "quorum.h"
#include "replies.h"
#include "scripts.h"
#include "renew_round.h"
#include "watchdog.h"

struct item;

/* Cluster: one master's round, on a thread of its own (see run_jobs()). */
typedef struct job {
    pthread_t thread;
    int active; /* started and not joined yet */
    int done;   /* finished: the watchdog thread joins it */
    dlock_client *c;
    struct item *items;
    uint8_t *lost;
    size_t n;
} job;

typedef struct dlock__watchdog {
    dlock__loop_thread lt;
    dlock_client *c;
    pthread_mutex_t mu;
    pthread_cond_t round_done; /* a round finished */
    dlock__renewal *head;      /* registered records */
    size_t count;
    int64_t wake_at_ns;        /* when the thread plans to look */
    dlock__watchdog_stats stats;
    job jobs[DLOCK__CLUSTER_MAX_MASTERS]; /* cluster: rounds in flight */
    /* The thread's own. */
    dlock__post look_post; /* posted by add() and a finished job: look now */
    dlock__timer tick;     /* the next look */
    item *items;           /* a round's items and verdicts, reused */
    uint8_t *lost;
    size_t cap;
} dlock__watchdog;

static int64_t interval_ms(const dlock__renewal *l)
{
    /* An explicit interval that an extend to a shorter TTL outgrew would
     * let the lease lapse between rounds: a third of the TTL then. */
    int64_t iv = l->interval_ms && l->interval_ms < l->ttl_ms ? l->interval_ms : l->ttl_ms / 3;
    return iv > 0 ? iv : 1;
}

/* One round (renew_round.c), its cost added to the statistics. */
static void run_round(dlock_client *c, dlock__watchdog *wd, item *items, size_t n)
{
    dlock__round_counts k = {0, 0, 0};
    dlock__renew_round(c, items, n, &k);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    wd->stats.rounds += k.rounds;
    wd->stats.calls += k.calls;
    wd->stats.restores += k.restores;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
}

static int by_master_then_slot(const void *a, const void *b)
{
    const item *x = a, *y = b;
    if (x->master != y->master)
        return x->master < y->master ? -1 : 1;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

/* Cluster: sort a round's items by master (then slot) and return how many
 * masters they name; each master's run is items[first..] with one master. */
static size_t group_by_master(dlock_client *c, item *items, size_t n)
{
    dlock__cluster *cl = dlock__client_cluster(c);
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *l = items[i].rec;
        items[i].slot = dlock__cluster_keyslot(l->key, l->key_len);
        items[i].master = dlock__cluster_master_of(cl, items[i].slot);
    }
    qsort(items, n, sizeof *items, by_master_then_slot);
    size_t groups = 0;
    for (size_t i = 0; i < n; i++)
        groups += i == 0 || items[i].master != items[i - 1].master;
    return groups;
}

static void unlink_rec(dlock__watchdog *wd, dlock__renewal *l)
{
    if (l->prev)
        l->prev->next = l->next;
    else
        wd->head = l->next;
    if (l->next)
        l->next->prev = l->prev;
    l->prev = l->next = NULL;
    l->registered = 0;
    wd->count--;
}

/* Hand the results to the owners: new validity, or lost. Runs without
 * wd->mu. */
static void settle(dlock_client *c, item *items, size_t n, int64_t t0,
                   uint8_t *lost_reason)
{
    for (size_t i = 0; i < n; i++) {
        item *it = &items[i];
        int own = it->rec->ops->renew != NULL; /* one vote: see run_own_round() */
        dlock__renew_votes v = {own ? 1 : c->n_nodes, own ? 1 : c->quorum, it->yes, it->no,
                                it->err, t0, it->ttl_ms};
        lost_reason[i] = (uint8_t)it->rec->ops->settle(it->rec->owner, &v);
    }
}

/* The round's figures for the observer and the statistics (stats.h),
 * once its verdicts are known and before on_lost runs. */
static void report_round(dlock_client *c, const item *items, size_t n, int64_t t0,
                         const uint8_t *lost)
{
    dlock_renewal_event ev = {0};
    ev.locks = n;
    ev.duration_ns = dlock__now_ns() - t0;
    ev.lease_left_ns = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        const item *it = &items[i];
        if (lost[i])
            ev.lost++;
        else if (it->yes >= (it->rec->ops->renew ? 1 : c->quorum))
            ev.renewed++;
        if (it->lease_end_ns != INT64_MAX)
            ev.lease_left_ns = DLOCK__MIN(ev.lease_left_ns, it->lease_end_ns - t0);
    }
    ev.failed = n - ev.renewed;
    dlock__stats_renewal(&c->obs, &ev);
}

/* After a round's answers: the owners are told (settle, then on_lost
 * before in_round is cleared: a concurrent release or free waits for the
 * callbacks), then the records are rescheduled. Between the two the
 * records are settled: an on_lost of another master's round may release
 * them then (dlock__watchdog_remove()) and even take them again, which
 * bumps their hold, and this round then leaves them alone. Called without
 * wd->mu; returns with it held. */
static void finish_round(dlock_client *c, dlock__watchdog *wd, item *items, size_t n, int64_t t0,
                         uint8_t *lost)
{
    settle(c, items, n, t0, lost);
    report_round(c, items, n, t0, lost);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    for (size_t i = 0; i < n; i++)
        items[i].rec->unsettled = 0;
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&wd->round_done));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    for (size_t i = 0; i < n; i++) {
        if (!lost[i])
            continue;
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
        int same = items[i].rec->hold == items[i].hold;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
        if (same)
            items[i].rec->ops->lost(items[i].rec->owner, lost[i]);
    }

    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    int64_t done = dlock__now_ns();
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *l = items[i].rec;
        l->in_round = 0;
        if (l->hold != items[i].hold) {
            /* Released and taken again meanwhile: the new hold is
             * registered with a schedule of its own. */
        } else if (lost[i]) {
            wd->stats.lost++;
            if (l->registered)
                unlink_rec(wd, l);
        } else if (items[i].yes >= (l->ops->renew ? 1 : c->quorum)) {
            wd->stats.renewed++;
            l->next_ns = t0 + interval_ms(l) * DLOCK__NS_PER_MS;
            if (l->once && l->registered)
                unlink_rec(wd, l);
        } else {
            /* No verdict yet (nodes unreachable): try again soon, while
             * the lease lasts. */
            l->next_ns = done + DLOCK__MAX(1, interval_ms(l) / 4) * DLOCK__NS_PER_MS;
        }
    }
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&wd->round_done));
}

static void *job_main(void *arg)
{
    job *j = arg;
    dlock_client *c = j->c;
    dlock__watchdog *wd = c->watchdog;
    int64_t t0 = dlock__now_ns();
    run_round(c, wd, j->items, j->n);
    finish_round(c, wd, j->items, j->n, t0, j->lost);
    j->done = 1;
    /* The watchdog thread joins it, and looks again at the locks this
     * round held back (wd->mu before the loop thread's mutex). */
    dlock__loop_thread_post(&wd->lt, &wd->look_post);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    return NULL;
}

/* Join the finished jobs. Under wd->mu (a finished job no longer takes
 * it). */
static void reap_jobs(dlock__watchdog *wd)
{
    for (size_t k = 0; k < DLOCK__CLUSTER_MAX_MASTERS; k++) {
        job *j = &wd->jobs[k];
        if (!j->active || !j->done)
            continue;
        DLOCK__CHECK_PTHREAD(pthread_join(j->thread, NULL));
        dlock__free(j->items);
        dlock__free(j->lost);
        memset(j, 0, sizeof *j);
    }
}

/* Cluster: each master's locks make a round of their own, on a thread of
 * their own, and the watchdog thread does not wait for them: a round that
 * waits out a stalled master (its I/O timeout) must hold back neither the
 * renewals of the healthy masters nor their next rounds, or their leases
 * run out behind it (issue 19 item 4). A lock stays in_round, and out of
 * the next rounds, until its master's round is over. A group whose thread
 * cannot start (no memory, no thread) runs here, in turn. Called without
 * wd->mu; returns with it held. */
static void run_jobs(dlock_client *c, dlock__watchdog *wd, item *items, size_t n)
{
    group_by_master(c, items, n);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    for (size_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && items[b].master == items[a].master; b++)
            ;
        job *j = NULL;
        for (size_t k = 0; k < DLOCK__CLUSTER_MAX_MASTERS && !j; k++)
            if (!wd->jobs[k].active)
                j = &wd->jobs[k];
        item *ji = j ? dlock__malloc((b - a) * sizeof *ji) : NULL;
        uint8_t *jl = ji ? dlock__calloc(b - a, 1) : NULL;
        if (jl) {
            memcpy(ji, items + a, (b - a) * sizeof *ji);
            *j = (job){.active = 1, .c = c, .items = ji, .lost = jl, .n = b - a};
            /* Started under wd->mu: its thread id is set before the job
             * can reach the callbacks (dlock__watchdog_remove reads it). */
            if (pthread_create(&j->thread, NULL, job_main, j) == 0) {
                for (size_t i = a; i < b; i++)
                    items[i].rec->round_thread = j->thread;
                continue;
            }
            memset(j, 0, sizeof *j);
        }
        dlock__free(ji);
        dlock__free(jl);
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
        uint8_t *lost = dlock__calloc(b - a, 1);
        if (!lost) {
            /* Not even that: these locks are tried again shortly. */
            DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
            for (size_t i = a; i < b; i++) {
                items[i].rec->in_round = 0;
                items[i].rec->unsettled = 0;
                items[i].rec->next_ns = dlock__now_ns() + 10 * DLOCK__NS_PER_MS;
            }
            DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&wd->round_done));
            continue;
        }
        int64_t t0 = dlock__now_ns();
        run_round(c, wd, items + a, b - a);
        finish_round(c, wd, items + a, b - a, t0, lost);
        dlock__free(lost);
    }
}

/* Arm the next look at `at` (INT64_MAX: none). On the thread. */
static void look_at(dlock__watchdog *wd, int64_t at)
{
    dlock__loop *loop = dlock__loop_thread_loop(&wd->lt);
    if (at == INT64_MAX) {
        dlock__timer_clear(loop, &wd->tick);
        return;
    }
    wd->tick.due_ns = at;
    (void)dlock__timer_set(loop, &wd->tick); /* a poll loop's timers cannot fail */
}

/* Make room for n items. Under wd->mu, on the thread. */
static int reserve(dlock__watchdog *wd, size_t n)
{
    if (n <= wd->cap)
        return 1;
    item *ni = dlock__realloc(wd->items, n * sizeof *ni);
    if (ni)
        wd->items = ni;
    uint8_t *nl = ni ? dlock__realloc(wd->lost, n) : NULL;
    if (nl)
        wd->lost = nl;
    if (!ni || !nl)
        return 0;
    wd->cap = n;
    return 1;
}

/* The schedule, on the thread: run a round if one is due, else arm the
 * timer for the next look. After a round the thread looks again at its
 * next turn (the loop's stop is asked in between). */
static void look(dlock__watchdog *wd)
{
    dlock_client *c = wd->c;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    reap_jobs(wd);
    /* A round starts when some lock is due within a tenth of its
     * interval; it then takes along every lock due within half of its
     * interval. Renewing a lock a little early costs nothing, and the
     * locks of one round share their schedule from then on, so locks
     * taken at different times merge into a few groups instead of each
     * keeping a round of its own. A lock in a round still in flight (a
     * cluster master's, run_jobs()) waits for it. */
    int64_t now = dlock__now_ns(), next = INT64_MAX;
    size_t due = 0, trigger = 0;
    for (dlock__renewal *l = wd->head; l; l = l->next) {
        if (l->in_round)
            continue;
        int64_t iv = interval_ms(l) * DLOCK__NS_PER_MS;
        if (l->next_ns - iv / 10 <= now)
            trigger++;
        else if (l->next_ns - iv / 10 < next)
            next = l->next_ns - iv / 10;
        if (l->next_ns - iv / 2 <= now)
            due++;
    }
    if (trigger == 0 || due == 0) {
        wd->wake_at_ns = next;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
        look_at(wd, next);
        return;
    }
    if (!reserve(wd, due)) {
        /* Try again shortly; the leases still have 2/3 to run. */
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
        look_at(wd, now + 10 * DLOCK__NS_PER_MS);
        return;
    }
    item *items = wd->items;
    size_t n = 0;
    for (dlock__renewal *l = wd->head; l && n < due; l = l->next) {
        if (l->in_round || l->next_ns - interval_ms(l) * DLOCK__NS_PER_MS / 2 > now)
            continue;
        item *it = &items[n++];
        memset(it, 0, sizeof *it);
        it->rec = l;
        it->ttl_ms = l->ttl_ms;
        it->ttl_len = (size_t)snprintf(it->ttl, sizeof it->ttl, "%" PRId64, it->ttl_ms);
        it->hold = l->hold;
        l->in_round = 1;
        l->unsettled = 1;
        l->round_thread = pthread_self(); /* run_jobs() may hand it on */
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));

    if (dlock__client_cluster(c)) {
        run_jobs(c, wd, items, n);
    } else {
        int64_t t0 = dlock__now_ns();
        run_round(c, wd, items, n);
        finish_round(c, wd, items, n, t0, wd->lost);
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    look_at(wd, dlock__now_ns());
}

static void tick_fire(dlock__timer *t)
{
    look(DLOCK__OWNER(t, dlock__watchdog, tick));
}

static void look_posted(dlock__post *p)
{
    look(DLOCK__OWNER(p, dlock__watchdog, look_post));
}

/* Whether the caller is a thread of the watchdog's (the watchdog thread,
 * or a cluster master's round). Under wd->mu. */
static int on_watchdog_thread(dlock__watchdog *wd)
{
    pthread_t self = pthread_self();
    if (dlock__loop_thread_on_thread(&wd->lt))
        return 1;
    for (size_t k = 0; k < DLOCK__CLUSTER_MAX_MASTERS; k++)
        if (wd->jobs[k].active && pthread_equal(self, wd->jobs[k].thread))
            return 1;
    return 0;
}

/* The client's watchdog, or NULL if none was started (read under bg_mu,
 * which guards starting it). */
static dlock__watchdog *current(dlock_client *c)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->bg_mu));
    dlock__watchdog *wd = c->watchdog;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->bg_mu));
    return wd;
}

static const dlock__bg_ops bg_ops = {dlock__watchdog_stop, dlock__watchdog_forget};

int dlock__watchdog_start(dlock_client *c)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->bg_mu));
    if (!c->watchdog) {
        dlock__watchdog *wd = dlock__calloc(1, sizeof *wd);
        if (!wd) {
            DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->bg_mu));
            return DLOCK_ENOMEM;
        }
        DLOCK__CHECK_PTHREAD(pthread_mutex_init(&wd->mu, NULL));
        dlock__cond_init_monotonic(&wd->round_done);
        wd->c = c;
        wd->wake_at_ns = INT64_MAX;
        wd->look_post.run = look_posted;
        wd->tick.fire = tick_fire;
        c->watchdog = wd;
        c->watchdog_ops = &bg_ops;
        /* Out of threads or fds is a resource limit, not a bug. */
        if (dlock__loop_thread_start(&wd->lt) != DLOCK_OK) {
            c->watchdog = NULL;
            DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&wd->round_done));
            DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&wd->mu));
            dlock__free(wd);
            DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->bg_mu));
            return DLOCK_ENOMEM;
        }
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->bg_mu));
    return DLOCK_OK;
}

void dlock__watchdog_add(dlock_client *c, dlock__renewal *l, int64_t first_ms)
{
    dlock__watchdog *wd = current(c);

    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    if (!l->registered) {
        l->registered = 1;
        l->hold++;
        l->prev = NULL;
        l->next = wd->head;
        if (wd->head)
            wd->head->prev = l;
        wd->head = l;
        wd->count++;
        l->next_ns = dlock__now_ns() + (first_ms < 0 ? interval_ms(l) : first_ms) * DLOCK__NS_PER_MS;
        /* Wake the thread only if this lock is due before it would look
         * anyway: with many locks held, waking it on every add made it walk
         * the whole list once per acquire. */
        int64_t at = l->next_ns - interval_ms(l) * DLOCK__NS_PER_MS / 10;
        if (at < wd->wake_at_ns) {
            wd->wake_at_ns = at;
            dlock__loop_thread_post(&wd->lt, &wd->look_post);
        }
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
}

int dlock__watchdog_remove(dlock_client *c, dlock__renewal *l)
{
    dlock__watchdog *wd = current(c);
    if (!wd)
        return 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    int was = l->registered;
    if (was)
        unlink_rec(wd, l);
    /* On the thread running the record's round (an on_lost callback
     * releasing its own lock) that round is past sending and waits for
     * the callback: waiting for it would never end. Another round's thread
     * (an on_lost of a set whose names are on several masters) waits until
     * this record's round has settled it: its renewal is then off the wire
     * and its verdict applied, and the rest of that round leaves a record
     * released (and taken again) alone. It does not wait for that round's
     * callbacks, which may be waiting for its own round in turn. */
    pthread_t self = pthread_self();
    int other_round = on_watchdog_thread(wd);
    while (l->in_round && !pthread_equal(l->round_thread, self) &&
           (l->unsettled || !other_round))
        DLOCK__CHECK_PTHREAD(pthread_cond_wait(&wd->round_done, &wd->mu));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    return was;
}

void dlock__watchdog_stop(dlock_client *c)
{
    dlock__watchdog *wd = c->watchdog;
    if (!wd)
        return;
    if (dlock__loop_thread_stop(&wd->lt) != DLOCK_OK)
        dlock__misuse("dlock_client_free() on the client's own watchdog thread");
    /* The cluster rounds in flight finish (they need wd->mu, and may post
     * to the stopped loop, which does nothing). */
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    for (size_t k = 0; k < DLOCK__CLUSTER_MAX_MASTERS; k++) {
        job *j = &wd->jobs[k];
        if (!j->active)
            continue;
        pthread_t t = j->thread;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
        DLOCK__CHECK_PTHREAD(pthread_join(t, NULL));
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
        dlock__free(j->items);
        dlock__free(j->lost);
        memset(j, 0, sizeof *j);
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    dlock__loop_thread_free(&wd->lt);
    DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&wd->round_done));
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&wd->mu));
    dlock__free(wd->items);
    dlock__free(wd->lost);
    dlock__free(wd);
    c->watchdog = NULL;
}

void dlock__watchdog_forget(dlock_client *c)
{
    dlock__watchdog *wd = c->watchdog;
    if (!wd)
        return;
    dlock__loop_thread_forget(&wd->lt);
    dlock__free(wd->items);
    dlock__free(wd->lost);
    dlock__free(wd);
    c->watchdog = NULL;
}

void dlock__watchdog_get_stats(dlock_client *c, dlock__watchdog_stats *out)
{
    memset(out, 0, sizeof *out);
    dlock__watchdog *wd = current(c);
    if (!wd)
        return;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    *out = wd->stats;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
}
