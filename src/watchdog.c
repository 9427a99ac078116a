/* SPDX-License-Identifier: BSD-3-Clause */
/* The watchdog thread.
 *
 * Every registered renewal record (a held auto-renew lock, or a fair
 * hand-over's one confirming renewal) has a next-renewal time (acquire
 * time + interval, interval = renew_interval_ms or ttl/3, where ttl is the
 * lock's renewal TTL: the lock's ttl_ms, or the TTL of the last successful
 * dlock_lock_extend() of this hold). The thread sleeps on a
 * CLOCK_MONOTONIC condition variable until the earliest one is nearly due
 * (a tenth of its interval ahead), then renews in one round every lock due
 * within half of its interval, so rounds merge instead of multiplying with
 * the number of locks. A round is one pipelined
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
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "fanout.h"
#include "quorum.h"
#include "replies.h"
#include "scripts.h"
#include "watchdog.h"

#define RENEW_CHUNK 1000

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
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;       /* new work, stop */
    pthread_cond_t round_done; /* a round finished */
    int stop;
    dlock__renewal *head;      /* registered records */
    size_t count;
    int64_t wake_at_ns;        /* when the sleeping thread plans to look */
    dlock__watchdog_stats stats;
    job jobs[DLOCK__CLUSTER_MAX_MASTERS]; /* cluster: rounds in flight */
} dlock__watchdog;

/* Per-lock result of one round. */
typedef struct item {
    dlock__renewal *rec;
    int64_t ttl_ms;
    char ttl[24];
    size_t ttl_len;
    size_t yes, no, err;
    size_t n_gone;   /* answers "the key is gone" (counted in no unless put back) */
    uint64_t gone;   /* their nodes, a bit each */
    int64_t lease_end_ns;
    int restorable;  /* a gone key may be put back (restore_batch.lua) */
    unsigned slot; /* cluster: the lock key's hash slot */
    int master;    /* cluster: its master in the client's slot map */
} item;

typedef struct round_ctx {
    item *items;
    size_t n_items;
    size_t n_nodes, quorum;
    size_t undecided; /* items without a majority either way yet */
    const size_t *first; /* call k renews items first[k] .. first[k+1]-1 */
} round_ctx;

static int64_t interval_ms(const dlock__renewal *l)
{
    /* An explicit interval that an extend to a shorter TTL outgrew would
     * let the lease lapse between rounds: a third of the TTL then. */
    int64_t iv = l->interval_ms && l->interval_ms < l->ttl_ms ? l->interval_ms : l->ttl_ms / 3;
    return iv > 0 ? iv : 1;
}

/* A gone key that will be put back counts as a yes for ending the round
 * early (restore_gone() then settles it), else as a no. */
static int item_decided(const round_ctx *rc, const item *it)
{
    size_t yes = it->yes + (it->restorable ? it->n_gone : 0);
    size_t no = it->no + (it->restorable ? 0 : it->n_gone);
    return dlock__quorum_decided(rc->n_nodes, rc->quorum, yes, no, it->err);
}

static int round_cb(void *arg, size_t node, uint32_t idx, int err,
                    const redisReply *r, const char *detail, int64_t start_ns)
{
    round_ctx *rc = arg;
    (void)detail;
    (void)start_ns;
    size_t first = rc->first[idx];
    size_t n = rc->first[idx + 1] - first;
    for (size_t i = 0; i < n; i++) {
        item *it = &rc->items[first + i];
        int was = item_decided(rc, it);
        int gone, v = dlock__decode_renew(err, r, n, i, &gone);
        if (v < 0) {
            it->err++;
        } else if (v == 1) {
            it->yes++;
        } else if (gone) {
            it->n_gone++;
            it->gone |= UINT64_C(1) << node;
        } else {
            it->no++;
        }
        if (!was && item_decided(rc, it))
            rc->undecided--;
    }
    /* A round is over once a majority decided every lock: a stalled
     * minority must not keep it waiting while the leases run out. */
    return rc->undecided == 0;
}

/* A round of records that renew themselves (renewal_ops.renew): one
 * vote each, a majority of one. */
static void run_own_round(dlock__watchdog *wd, item *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *l = items[i].rec;
        int64_t end = l->ops->lease_end_ns(l->owner);
        int v = l->ops->renew(l->owner, end);
        items[i].yes = v == 1;
        items[i].no = v == 0;
        items[i].err = v < 0;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    wd->stats.rounds++;
    wd->stats.calls += n;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
}

/* Whether an item's gone keys may be put back (restore_batch.lua says
 * why): a plain lock over several masters (a cluster keeps one copy).
 * Fixed at the round's start, with the lease still running then; the
 * round's answers may then end it early counting a gone key as a yes. */
static int may_restore(const dlock_client *c, const item *it)
{
    return c->n_nodes > 1 && !dlock__client_cluster(c) && it->rec->mode[0] == 'p' &&
           dlock__now_ns() < it->lease_end_ns;
}

/* After the round's answers: still held somewhere (a key deleted
 * everywhere is lost, as documented), and either renewed by a majority in
 * this round or still within the lease, during which nobody else can hold
 * a majority. */
static int can_restore(const dlock_client *c, const item *it)
{
    return it->restorable && it->n_gone > 0 && it->yes > 0 &&
           (it->yes >= c->quorum || dlock__now_ns() < it->lease_end_ns);
}

typedef struct restore_ctx {
    item *items;
    const size_t *sel; /* the call's items, in KEYS order */
    size_t m;
} restore_ctx;

static int restore_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                      const char *detail, int64_t start_ns)
{
    restore_ctx *rc = arg;
    (void)node, (void)idx, (void)detail, (void)start_ns;
    for (size_t k = 0; k < rc->m; k++) {
        int gone, v = dlock__decode_renew(err, r, rc->m, k, &gone);
        item *it = &rc->items[rc->sel[k]];
        it->n_gone--;
        if (v == 1)
            it->yes++;
        else if (v == 0)
            it->no++;
        else
            it->err++;
    }
    return 0;
}

/* Put the gone keys back, node by node, and settle every gone answer as a
 * yes (put back) or a no. Runs inside the round, so a release (which waits
 * for the round) is never overtaken by it, and a yes counts from the
 * round's start like any other (the key put back lives longer). The usual
 * round, nothing gone, costs nothing. */
static void restore_gone(dlock_client *c, dlock__watchdog *wd, item *items, size_t n,
                         int64_t deadline)
{
    uint64_t nodes = 0;
    for (size_t i = 0; i < n; i++) {
        items[i].restorable = can_restore(c, &items[i]);
        nodes |= items[i].restorable ? items[i].gone : 0;
    }
    size_t cap = n < RENEW_CHUNK ? n : RENEW_CHUNK;
    const char **args = nodes ? dlock__calloc(3 * cap, sizeof *args) : NULL;
    size_t *lens = nodes ? dlock__calloc(3 * cap, sizeof *lens) : NULL;
    size_t *sel = nodes ? dlock__calloc(cap, sizeof *sel) : NULL;
    for (size_t node = 0; args && lens && sel && node < c->n_nodes; node++) {
        if (!(nodes >> node & 1))
            continue;
        /* KEYS first, then the ARGV pairs; past RENEW_CHUNK, the next
         * round takes the rest. */
        size_t m = 0;
        for (size_t i = 0; i < n && m < cap; i++)
            if (items[i].restorable && (items[i].gone >> node & 1))
                sel[m++] = i;
        for (size_t k = 0; k < m; k++) {
            const item *it = &items[sel[k]];
            args[k] = it->rec->key;
            lens[k] = it->rec->key_len;
            args[m + 2 * k] = it->rec->token;
            lens[m + 2 * k] = it->rec->token_len;
            args[m + 2 * k + 1] = it->ttl;
            lens[m + 2 * k + 1] = it->ttl_len;
        }
        uint8_t only[DLOCK__MAX_NODES] = {0};
        only[node] = 1;
        dlock__req req = {dlock__script_get(DLOCK__S_RESTORE), (int)m, (int)(3 * m), args, lens};
        dlock__fanout_opts fo = {c->opts.io_timeout_ms, deadline, only, 0};
        restore_ctx rc = {items, sel, m};
        if (dlock__fanout(c, &req, 1, &fo, restore_cb, &rc) != DLOCK_OK)
            for (size_t k = 0; k < m; k++) {
                items[sel[k]].n_gone--;
                items[sel[k]].err++;
            }
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
        wd->stats.restores += m;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    }
    /* What was not put back is what it said: gone, not ours. */
    for (size_t i = 0; i < n; i++) {
        items[i].no += items[i].n_gone;
        items[i].n_gone = 0;
    }
    dlock__free((void *)args);
    dlock__free(lens);
    dlock__free(sel);
}

/* Build and send one round for items[0..n). */
static void run_round(dlock_client *c, dlock__watchdog *wd, item *items, size_t n)
{
    if (n > 0 && items[0].rec->ops->renew) {
        run_own_round(wd, items, n);
        return;
    }
    /* Calls of up to RENEW_CHUNK locks; on a cluster a call holds one hash
     * slot's locks (a script's keys must share a slot), and the calls of a
     * round, all for one master, go out pipelined on one connection. */
    size_t *first = dlock__calloc(n + 1, sizeof *first);
    size_t nchunks = 0;
    for (size_t i = 0; first && i < n; i++)
        if (i == 0 || i - first[nchunks - 1] == RENEW_CHUNK ||
            (dlock__client_cluster(c) && items[i].slot != items[i - 1].slot))
            first[nchunks++] = i;
    if (first)
        first[nchunks] = n;
    dlock__req *reqs = dlock__calloc(nchunks ? nchunks : 1, sizeof *reqs);
    const char **args = dlock__calloc(n * 4, sizeof *args);
    size_t *lens = dlock__calloc(n * 4, sizeof *lens);
    round_ctx ctx = {items, n, c->n_nodes, c->quorum, n, first};
    /* No answer helps after the last lease in the round has ended. */
    int64_t deadline = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *l = items[i].rec;
        items[i].lease_end_ns = l->ops->lease_end_ns(l->owner);
        items[i].restorable = may_restore(c, &items[i]);
        deadline = DLOCK__MAX(deadline, items[i].lease_end_ns);
    }
    if (!reqs || !args || !lens || !first) {
        for (size_t i = 0; i < n; i++)
            items[i].err = c->n_nodes;
        goto out;
    }
    for (size_t k = 0; k < nchunks; k++) {
        size_t f = first[k], m = first[k + 1] - f;
        const char **a = args + f * 4;
        size_t *al = lens + f * 4;
        /* KEYS first, then the ARGV triples. */
        for (size_t i = 0; i < m; i++) {
            dlock__renewal *l = items[f + i].rec;
            a[i] = l->key;
            al[i] = l->key_len;
            a[m + 3 * i] = l->token;
            al[m + 3 * i] = l->token_len;
            a[m + 3 * i + 1] = items[f + i].ttl;
            al[m + 3 * i + 1] = items[f + i].ttl_len;
            a[m + 3 * i + 2] = l->mode;
            al[m + 3 * i + 2] = 1;
        }
        reqs[k] = (dlock__req){dlock__script_get(DLOCK__S_RENEW), (int)m, (int)(4 * m), a, al};
    }
    dlock__fanout_opts fo = {c->opts.io_timeout_ms, deadline, NULL, DLOCK__DECIDED_GRACE_MS};
    if (dlock__fanout(c, reqs, (uint32_t)nchunks, &fo, round_cb, &ctx) != DLOCK_OK)
        for (size_t i = 0; i < n; i++)
            items[i].err = c->n_nodes;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    wd->stats.rounds++;
    wd->stats.calls += nchunks * c->n_nodes;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    restore_gone(c, wd, items, n, deadline);
out:
    dlock__free(first);
    dlock__free(reqs);
    dlock__free((void *)args);
    dlock__free(lens);
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

/* After a round's answers: the owners are told (settle, then on_lost
 * before in_round is cleared: a concurrent release or free waits for the
 * callbacks), then the records are rescheduled. Called without wd->mu;
 * returns with it held. */
static void finish_round(dlock_client *c, dlock__watchdog *wd, item *items, size_t n, int64_t t0,
                         uint8_t *lost)
{
    settle(c, items, n, t0, lost);
    for (size_t i = 0; i < n; i++)
        if (lost[i])
            items[i].rec->ops->lost(items[i].rec->owner, lost[i]);

    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    int64_t done = dlock__now_ns();
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *l = items[i].rec;
        l->in_round = 0;
        if (lost[i]) {
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
     * round held back. */
    DLOCK__CHECK_PTHREAD(pthread_cond_signal(&wd->cond));
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
            if (pthread_create(&j->thread, NULL, job_main, j) == 0)
                continue;
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

static void *watchdog_main(void *arg)
{
    dlock_client *c = arg;
    dlock__watchdog *wd = c->watchdog;
    item *items = NULL;
    uint8_t *lost = NULL;
    size_t cap = 0;
    int cluster = dlock__client_cluster(c) != NULL;

    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    while (!wd->stop) {
        reap_jobs(wd);
        /* A round starts when some lock is due within a tenth of its
         * interval; it then takes along every lock due within half of its
         * interval. Renewing a lock a little early costs nothing, and the
         * locks of one round share their schedule from then on, so locks
         * taken at different times merge into a few groups instead of each
         * keeping a round of its own. A lock in a round still in flight
         * (a cluster master's, run_jobs()) waits for it. */
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
        if (trigger == 0)
            due = 0;
        if (due == 0) {
            wd->wake_at_ns = next;
            struct timespec ts = dlock__timespec_of(next);
            int w = pthread_cond_timedwait(&wd->cond, &wd->mu, &ts);
            if (w != 0 && w != ETIMEDOUT)
                DLOCK__CHECK_PTHREAD(w);
            continue;
        }
        if (due > cap) {
            item *ni = dlock__realloc(items, due * sizeof *ni);
            uint8_t *nl = ni ? dlock__realloc(lost, due) : NULL;
            if (ni)
                items = ni;
            if (nl)
                lost = nl;
            if (!ni || !nl) {
                /* Try again shortly; the leases still have 2/3 to run. */
                struct timespec ts = dlock__timespec_of(now + 10 * DLOCK__NS_PER_MS);
                int w = pthread_cond_timedwait(&wd->cond, &wd->mu, &ts);
                if (w != 0 && w != ETIMEDOUT)
                    DLOCK__CHECK_PTHREAD(w);
                continue;
            }
            cap = due;
        }
        size_t n = 0;
        for (dlock__renewal *l = wd->head; l && n < due; l = l->next) {
            if (l->in_round || l->next_ns - interval_ms(l) * DLOCK__NS_PER_MS / 2 > now)
                continue;
            item *it = &items[n++];
            memset(it, 0, sizeof *it);
            it->rec = l;
            it->ttl_ms = l->ttl_ms;
            it->ttl_len = (size_t)snprintf(it->ttl, sizeof it->ttl, "%" PRId64, it->ttl_ms);
            l->in_round = 1;
        }
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));

        if (cluster) {
            run_jobs(c, wd, items, n);
            continue;
        }
        int64_t t0 = dlock__now_ns();
        run_round(c, wd, items, n);
        finish_round(c, wd, items, n, t0, lost);
    }
    /* Stopping: the rounds in flight finish first (they need wd->mu). */
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
    dlock__free(items);
    dlock__free(lost);
    return NULL;
}

/* Whether the caller is a thread of the watchdog's (the watchdog thread,
 * or a cluster master's round). Under wd->mu. */
static int on_watchdog_thread(dlock__watchdog *wd)
{
    pthread_t self = pthread_self();
    if (pthread_equal(self, wd->thread))
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
        wd->wake_at_ns = INT64_MAX;
        dlock__cond_init_monotonic(&wd->cond);
        dlock__cond_init_monotonic(&wd->round_done);
        c->watchdog = wd;
        c->watchdog_ops = &bg_ops;
        int rc = pthread_create(&wd->thread, NULL, watchdog_main, c);
        if (rc == EAGAIN) {
            /* Out of threads is a resource limit, not a bug. */
            c->watchdog = NULL;
            DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&wd->cond));
            DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&wd->round_done));
            DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&wd->mu));
            dlock__free(wd);
            DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->bg_mu));
            return DLOCK_ENOMEM;
        }
        DLOCK__CHECK_PTHREAD(rc);
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
        int64_t look_at = l->next_ns - interval_ms(l) * DLOCK__NS_PER_MS / 10;
        if (look_at < wd->wake_at_ns) {
            wd->wake_at_ns = look_at;
            DLOCK__CHECK_PTHREAD(pthread_cond_signal(&wd->cond));
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
    /* On the watchdog thread (an on_lost callback releasing its own lock)
     * the round in flight is this thread's own, which is past sending and
     * waits for the callback: waiting for it would never end. */
    if (!on_watchdog_thread(wd))
        while (l->in_round)
            DLOCK__CHECK_PTHREAD(pthread_cond_wait(&wd->round_done, &wd->mu));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    return was;
}

void dlock__watchdog_stop(dlock_client *c)
{
    dlock__watchdog *wd = c->watchdog;
    if (!wd)
        return;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    wd->stop = 1;
    DLOCK__CHECK_PTHREAD(pthread_cond_signal(&wd->cond));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    DLOCK__CHECK_PTHREAD(pthread_join(wd->thread, NULL));
    DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&wd->cond));
    DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&wd->round_done));
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&wd->mu));
    dlock__free(wd);
    c->watchdog = NULL;
}

void dlock__watchdog_forget(dlock_client *c)
{
    dlock__free(c->watchdog);
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
