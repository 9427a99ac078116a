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
 * posts a look at the schedule to the thread (a post wakes its loop), and
 * a round's completion looks again; the timer is set and cleared there
 * only.
 *
 * A round is a request on this loop (renew_round.h): one pipelined batch
 * of renew_batch.lua calls per node, RENEW_CHUNK locks per call, contacted
 * in parallel through the fan-out, then the restore step, and a completion
 * that hands the verdicts to the owners (watchdog_round.c; a lock renewed
 * by a majority gets its verdict as soon as it has it, and is let go of
 * the round, so its next round never waits for this one). The thread never
 * waits for a round: while one is in flight it goes on looking at the
 * schedule, and a record due meanwhile that is not in a round starts a
 * round of its own; a record in a round in flight waits for it (in_round).
 * On a Cluster (one node of ours, many masters) each master's locks make a
 * round of their own, all in flight at once: a stalled master's round
 * must not hold back the others. Rounds in flight share the loop's fd
 * slots (loop_poll.h): one starts only while there is room for a
 * connection per node it contacts (wd->fds). The etcd backend's records
 * renew themselves (renewal_ops.renew_start): each is a request on this
 * loop too (a keep-alive and a read of its key over curl's multi_socket,
 * etcd_renew.h), in a round of its own, so that a stalled member holds
 * back neither the other records' renewals nor adds and removes.
 *
 * Safety of release against a round in flight: a lock taking part in a
 * round is flagged in_round, and unsettled until the round's completion
 * has applied its verdict. dlock__watchdog_remove() from another thread
 * waits until the round lets the record go, so when release or free goes
 * on, no renewal of the lock is on the wire and none will be sent.
 * Callbacks (on_lost) run at the end of the round, before in_round is
 * cleared, so a lock is never freed under its callback. A remove on this
 * thread (an on_lost releasing its own lock, or a set's names in other
 * rounds) cannot wait for a round on the loop it would be blocking: it
 * lets the record go from its round at once (dlock__wd_let_go()), which then never
 * touches it again: a renewal of it still on the wire is harmless
 * (renew_batch.lua extends only a key holding our token, and a released
 * key no longer does), and its key is not put back (the restore step
 * skips it), except by a restore call already sent, which puts back a
 * key that expires within its TTL. A hold counter (rec->hold, bumped by
 * each registration) keeps a round of an earlier hold away from a later
 * one. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "loop_thread.h"
#include "renew_round.h"
#include "watchdog.h"
#include "watchdog_round.h"



static int by_master_then_slot(const void *a, const void *b)
{
    const item *x = a, *y = b;
    if (x->master != y->master)
        return x->master < y->master ? -1 : 1;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

/* Cluster: sort the due items by master (then slot); each master's run is
 * items[first..] with one master. */
static void group_by_master(dlock_client *c, item *items, size_t n)
{
    dlock__cluster *cl = dlock__client_cluster(c);
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *l = items[i].rec;
        items[i].slot = dlock__cluster_keyslot(l->key, l->key_len);
        items[i].master = dlock__cluster_master_of(cl, items[i].slot);
    }
    qsort(items, n, sizeof *items, by_master_then_slot);
}

/* An idle round with room for n items, or NULL out of memory. On the
 * thread. */
static wd_round *take_round(dlock__watchdog *wd, size_t n)
{
    wd_round *w = wd->spare;
    if (w) {
        wd->spare = w->spare_next;
    } else {
        w = dlock__calloc(1, sizeof *w);
        if (!w)
            return NULL;
        w->wd = wd;
        w->all_next = wd->all;
        wd->all = w;
    }
    if (!dlock__renew_round_reserve(&w->r, n)) {
        w->spare_next = wd->spare;
        wd->spare = w;
        return NULL;
    }
    memset(&w->r.counts, 0, sizeof w->r.counts);
    w->r.n = 0;
    return w;
}

static void stopped_later(dlock__timer *t);

static void round_over(dlock__renew_round *r)
{
    wd_round *w = DLOCK__OWNER(r, wd_round, r);
    dlock__watchdog *wd = w->wd;
    dlock__wd_finish_round(wd, w);
    wd->fds -= w->fds;
    w->spare_next = wd->spare;
    wd->spare = w;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    wd->in_flight--;
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&wd->round_done));
    int last = wd->stopping && wd->in_flight == 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    if (last && wd->lt.app) {
        /* A looped client's free came during the round: the rest of the
         * stop from the loop's next turn, this round's caller gone. */
        wd->tick.fire = stopped_later;
        dlock__defer(wd->lt.app, &wd->tick);
        return;
    }
    /* The records it held may be due by now. */
    dlock__wd_look_at(wd, dlock__now_ns());
}

/* Round w, its items in place, is in flight from now: queued on *go to
 * be started once wd->mu is let go. Under wd->mu. */
static void book(dlock__watchdog *wd, wd_round *w, wd_round **go)
{
    for (size_t i = 0; i < w->r.n; i++)
        w->r.items[i].rec->round_item = &w->r.items[i];
    w->fds = wd->c->n_nodes;
    wd->fds += w->fds;
    wd->in_flight++;
    w->spare_next = *go;
    *go = w;
}

/* Take l into a round: its item it. Under wd->mu. */
static void take(item *it, dlock__renewal *l)
{
    memset(it, 0, sizeof *it);
    it->rec = l;
    it->ttl_ms = l->ttl_ms;
    it->ttl_len = (size_t)snprintf(it->ttl, sizeof it->ttl, "%" PRId64, it->ttl_ms);
    it->hold = l->hold;
    l->in_round = 1;
    l->unsettled = 1;
}

/* Take the records due by now (below) into items[0..due). Under wd->mu. */
static size_t take_due(dlock__watchdog *wd, item *items, size_t due, int64_t now)
{
    size_t n = 0;
    for (dlock__renewal *l = wd->head; l && n < due; l = l->next)
        if (!l->in_round && l->next_ns - dlock__wd_interval_ms(l) * DLOCK__NS_PER_MS / 2 <= now)
            take(&items[n++], l);
    return n;
}

/* Cluster: a round per master of the n records taken into wd->pick, all
 * in flight at once, queued on *go; a master's that finds no room
 * (memory, fd slots) is let go, and looked at again when a round is
 * over. Without wd->mu: the slot map has a lock of its own. Records that
 * renew themselves (etcd's) get a round each, the same way: one stalled
 * renewal must not hold back another's verdict or on_lost. */
static void split_by_master(dlock__watchdog *wd, size_t n, wd_round **go)
{
    if (dlock__client_cluster(wd->c))
        group_by_master(wd->c, wd->pick, n);
    else
        for (size_t i = 0; i < n; i++)
            wd->pick[i].master = (int)i;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    for (size_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && wd->pick[b].master == wd->pick[a].master; b++)
            ;
        wd_round *w = wd->fds + wd->c->n_nodes <= ROUND_FDS ? take_round(wd, b - a) : NULL;
        if (!w) {
            for (size_t i = a; i < b; i++)
                dlock__wd_let_go(wd->pick[i].rec);
            continue;
        }
        memcpy(w->r.items, wd->pick + a, (b - a) * sizeof *w->r.items);
        w->r.n = b - a;
        book(wd, w, go);
    }
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&wd->round_done));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
}

/* Under wd->mu, on the thread: room in wd->pick for n. */
static int reserve_pick(dlock__watchdog *wd, size_t n)
{
    if (n <= wd->pick_cap)
        return 1;
    item *p = dlock__realloc(wd->pick, n * sizeof *p);
    if (!p)
        return 0;
    wd->pick = p;
    wd->pick_cap = n;
    return 1;
}

/* The schedule, on the thread: start the rounds that are due, and arm the
 * timer for the next look. */
static void look(dlock__watchdog *wd)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    /* A round per master (Cluster) or per record (records that renew
     * themselves), else one. */
    int split = dlock__client_cluster(wd->c) != NULL ||
                (wd->head && wd->head->ops->renew_start != NULL);
    /* A round starts when some lock is due within a tenth of its
     * interval; it then takes along every lock due within half of its
     * interval. Renewing a lock a little early costs nothing, and the
     * locks of one round share their schedule from then on, so locks
     * taken at different times merge into a few groups instead of each
     * keeping a round of its own. A lock in a round still in flight waits
     * for it: it is looked at again when that round is over. */
    int64_t now = dlock__now_ns(), next = INT64_MAX;
    size_t due = 0, trigger = 0, picked = 0;
    for (dlock__renewal *l = wd->head; l; l = l->next) {
        if (l->in_round)
            continue;
        int64_t iv = dlock__wd_interval_ms(l) * DLOCK__NS_PER_MS;
        if (l->next_ns - iv / 10 <= now)
            trigger++;
        else if (l->next_ns - iv / 10 < next)
            next = l->next_ns - iv / 10;
        if (l->next_ns - iv / 2 <= now)
            due++;
    }
    int want = trigger > 0 && due > 0 && !wd->stopping;
    int room = wd->fds + wd->c->n_nodes <= ROUND_FDS;
    wd_round *go = NULL;
    if (want && split && reserve_pick(wd, due)) {
        picked = take_due(wd, wd->pick, due, now);
    } else if (want && !split && room) {
        wd_round *w = take_round(wd, due);
        if (w) {
            w->r.n = take_due(wd, w->r.items, due, now);
            book(wd, w, &go);
        }
    }
    wd->wake_at_ns = next;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    if (picked > 0)
        split_by_master(wd, picked, &go);
    if (want && !go && room)
        next = now + 10 * DLOCK__NS_PER_MS; /* out of memory: the leases have 2/3 to run */
    dlock__wd_look_at(wd, next);
    /* Started without wd->mu: a round's start asks the owners for their
     * lease ends, and an etcd round starts its records' requests there. */
    for (wd_round *w = go, *n; w; w = n) {
        n = w->spare_next;
        w->t0 = dlock__now_ns();
        w->renewed_early = 0;
        w->r.renewed = dlock__wd_renewed_early;
        dlock__renew_round_start(&w->r, wd->c, dlock__loop_thread_loop(&wd->lt), round_over);
    }
}

static void tick_fire(dlock__timer *t)
{
    look(DLOCK__OWNER(t, dlock__watchdog, tick));
}

static void look_posted(dlock__post *p)
{
    look(DLOCK__OWNER(p, dlock__watchdog, look_post));
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
        if (dlock__loop_thread_start(&wd->lt, c->loop) != DLOCK_OK) {
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
        l->next_ns = dlock__now_ns() + (first_ms < 0 ? dlock__wd_interval_ms(l) : first_ms) * DLOCK__NS_PER_MS;
        /* Wake the thread only if this lock is due before it would look
         * anyway: with many locks held, waking it on every add made it walk
         * the whole list once per acquire. */
        int64_t at = l->next_ns - dlock__wd_interval_ms(l) * DLOCK__NS_PER_MS / 10;
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
        dlock__wd_unlink(wd, l);
    if (dlock__loop_thread_on_thread(&wd->lt)) {
        /* A callback of a round (an on_lost releasing its own lock, or a
         * set's other names): the round holding the record goes on only
         * once this returns, on this very loop. Its round lets it go
         * instead (the header comment says why that is safe). */
        if (l->in_round)
            dlock__wd_let_go(l);
    } else {
        /* Another thread waits until the round has let the record go:
         * its renewal is then off the wire, its verdict applied and its
         * callback over. */
        while (l->in_round)
            DLOCK__CHECK_PTHREAD(pthread_cond_wait(&wd->round_done, &wd->mu));
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    return was;
}

static void free_rounds(dlock__watchdog *wd)
{
    for (wd_round *w = wd->all, *next; w; w = next) {
        next = w->all_next;
        dlock__renew_round_free(&w->r);
        dlock__free(w);
    }
    dlock__free(wd->pick);
}

/* The stop's end, once no round is in flight. */
static void stop_rest(dlock__watchdog *wd)
{
    dlock__loop_thread_free(&wd->lt);
    DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&wd->round_done));
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&wd->mu));
    free_rounds(wd);
    dlock__free(wd);
}

static void stopped_later(dlock__timer *t)
{
    dlock__watchdog *wd = DLOCK__OWNER(t, dlock__watchdog, tick);
    dlock_client *c = wd->c;
    stop_rest(wd);
    c->watchdog = NULL;
    dlock__client_closed(c);
}

int dlock__watchdog_stop(dlock_client *c)
{
    dlock__watchdog *wd = c->watchdog;
    if (!wd)
        return 1;
    if (!wd->lt.app && dlock__loop_thread_on_thread(&wd->lt))
        dlock__misuse("dlock_client_free() on the client's own watchdog thread");
    /* The rounds in flight finish first (their connections go back to the
     * pools), and no other starts: a thread waits for them; a looped
     * client's last one ends the stop (round_over()). */
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    wd->stopping = 1;
    while (!wd->lt.app && wd->in_flight > 0)
        DLOCK__CHECK_PTHREAD(pthread_cond_wait(&wd->round_done, &wd->mu));
    int later = wd->in_flight > 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    if (dlock__loop_thread_stop(&wd->lt) != DLOCK_OK)
        dlock__misuse("dlock_client_free() on the client's own watchdog thread");
    dlock__timer_clear(dlock__loop_thread_loop(&wd->lt), &wd->tick);
    if (later)
        return 0;
    stop_rest(wd);
    c->watchdog = NULL;
    return 1;
}

void dlock__watchdog_forget(dlock_client *c)
{
    dlock__watchdog *wd = c->watchdog;
    if (!wd)
        return;
    dlock__loop_thread_forget(&wd->lt);
    free_rounds(wd);
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
