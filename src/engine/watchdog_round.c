/* SPDX-License-Identifier: BSD-3-Clause */
/* What a renewal round's answers do to the watchdog's records
 * (watchdog.c says when rounds run and why a release is safe against one
 * in flight): each owner gets its verdict (settle), the round is reported
 * to the observer and the statistics, the records are rescheduled or
 * taken off the list, and on_lost runs; a lock a majority renewed before
 * its round ends is settled at once (dlock__wd_renewed_early). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"
#include "watchdog_round.h"

void dlock__wd_look_at(dlock__watchdog *wd, int64_t at)
{
    dlock__loop *loop = dlock__loop_thread_loop(&wd->lt);
    if (at == INT64_MAX) {
        dlock__timer_clear(loop, &wd->tick);
        return;
    }
    wd->tick.due_ns = at;
    (void)dlock__timer_set(loop, &wd->tick); /* a poll loop's timers cannot fail */
}

void dlock__wd_unlink(dlock__watchdog *wd, dlock__renewal *l)
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

void dlock__wd_let_go(dlock__renewal *l)
{
    if (l->round_item)
        l->round_item->rec = NULL;
    l->round_item = NULL;
    l->in_round = 0;
    l->unsettled = 0;
}

/* Hand the results to the owners: new validity, or lost. Runs without
 * wd->mu. */
static void settle(dlock_client *c, item *items, size_t n, int64_t t0)
{
    for (size_t i = 0; i < n; i++) {
        item *it = &items[i];
        if (!it->rec || it->settled)
            continue;
        it->settled = 1;
        int own = it->rec->ops->renew_start != NULL; /* one vote each: renew_round.c */
        dlock__renew_votes v = {own ? 1 : c->n_nodes, own ? 1 : c->quorum, it->yes, it->no,
                                it->err, t0, it->ttl_ms};
        it->lost = (uint8_t)it->rec->ops->settle(it->rec->owner, &v);
    }
}

/* The round's figures for the observer and the statistics (stats.h),
 * once its verdicts are known and before on_lost runs. A record let go
 * meanwhile counts as failed. */
static void report_round(dlock_client *c, const item *items, size_t n, int64_t t0,
                         size_t renewed_early)
{
    dlock_renewal_event ev = {0};
    ev.locks = n;
    ev.renewed = renewed_early;
    ev.duration_ns = dlock__now_ns() - t0;
    ev.lease_left_ns = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        const item *it = &items[i];
        if (!it->rec)
            continue;
        if (it->lost)
            ev.lost++;
        else if (it->yes >= (it->rec->ops->renew_start ? 1 : c->quorum))
            ev.renewed++;
        if (it->lease_end_ns != INT64_MAX)
            ev.lease_left_ns = DLOCK__MIN(ev.lease_left_ns, it->lease_end_ns - t0);
    }
    ev.failed = n - ev.renewed;
    dlock__stats_renewal(&c->obs, &ev);
}

/* Reschedule a record the round renewed or could not decide, and let it
 * go. Under wd->mu. */
static void reschedule(dlock__watchdog *wd, item *it, int64_t t0, int64_t now)
{
    dlock__renewal *l = it->rec;
    if (l->hold != it->hold) {
        /* Registered again meanwhile: the new hold has a schedule of its
         * own. */
    } else if (it->yes >= (l->ops->renew_start ? 1 : wd->c->quorum)) {
        wd->stats.renewed++;
        l->next_ns = t0 + dlock__wd_interval_ms(l) * DLOCK__NS_PER_MS;
        if (l->once && l->registered)
            dlock__wd_unlink(wd, l);
    } else {
        /* No verdict yet (nodes unreachable): try again soon, while the
         * lease lasts. */
        l->next_ns = now + DLOCK__MAX(1, dlock__wd_interval_ms(l) / 4) * DLOCK__NS_PER_MS;
    }
    dlock__wd_let_go(l);
}

/* After a round's answers: the owners are told (settle, then on_lost
 * before in_round is cleared: a release or free from another thread waits
 * for the callbacks), and the records are rescheduled. The records not
 * lost are let go once settled; an on_lost may release the others and
 * even take them again, which bumps their hold, and this round then
 * leaves them alone. Called without wd->mu. */
void dlock__wd_finish_round(dlock__watchdog *wd, wd_round *w)
{
    dlock_client *c = wd->c;
    item *items = w->r.items;
    size_t n = w->r.n;
    settle(c, items, n, w->t0);
    report_round(c, items, n, w->t0, w->renewed_early);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    wd->stats.rounds += w->r.counts.rounds;
    wd->stats.calls += w->r.counts.calls;
    wd->stats.restores += w->r.counts.restores;
    int64_t now = dlock__now_ns();
    for (size_t i = 0; i < n; i++) {
        if (!items[i].rec)
            continue;
        items[i].rec->unsettled = 0;
        if (!items[i].lost || items[i].rec->hold != items[i].hold)
            reschedule(wd, &items[i], w->t0, now);
        else
            wd->stats.lost++;
    }
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&wd->round_done));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    /* A callback may let any record go (dlock__watchdog_remove() on this
     * thread), this round's included: items[i].rec is read again after
     * each. */
    for (size_t i = 0; i < n; i++)
        if (items[i].rec)
            items[i].rec->ops->lost(items[i].rec->owner, items[i].lost);

    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *l = items[i].rec;
        if (!l)
            continue;
        if (l->registered)
            dlock__wd_unlink(wd, l);
        dlock__wd_let_go(l);
    }
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&wd->round_done));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
}

/* A lock a majority renewed while its round still waits for other
 * answers (another lock's silent nodes): settled and rescheduled now, its
 * item let go, so that its next round need not wait for this one. With
 * an I/O timeout longer than the lease left, waiting lost it: renewed in
 * time, it was not renewed again before its keys ran out. On the
 * thread, without wd->mu, as dlock__wd_finish_round's settle. */
void dlock__wd_renewed_early(dlock__renew_round *r, item *it)
{
    wd_round *w = DLOCK__OWNER(r, wd_round, r);
    dlock__watchdog *wd = w->wd;
    settle(wd->c, it, 1, w->t0);
    if (it->lost)
        return; /* renewed too late for its lease: the round's end says so */
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wd->mu));
    if (it->rec) {
        it->rec->unsettled = 0;
        w->renewed_early++;
        reschedule(wd, it, w->t0, dlock__now_ns()); /* lets it go */
    }
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&wd->round_done));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wd->mu));
    dlock__wd_look_at(wd, dlock__now_ns()); /* it may be due again before the round ends */
}
