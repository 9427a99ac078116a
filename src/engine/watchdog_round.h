/* SPDX-License-Identifier: BSD-3-Clause */
/* The watchdog's own records (watchdog.c: the thread, its schedule and
 * the API; watchdog_round.c: what a round's answers do to the records).
 * Private to those two files. */
#ifndef DLOCK_WATCHDOG_ROUND_H
#define DLOCK_WATCHDOG_ROUND_H

#include <pthread.h>
#include <stdint.h>

#include "client.h"
#include "loop_thread.h"
#include "renew_round.h"
#include "renewal.h"

/* One round in flight on the loop (the whole client's, or on a Cluster
 * one master's); kept when over, with its buffers, for the next. */
typedef struct wd_round {
    dlock__renew_round r;
    struct dlock__watchdog *wd;
    int64_t t0;
    size_t renewed_early;       /* items settled and let go before its end */
    size_t fds;                 /* the loop's fd slots it may take */
    struct wd_round *all_next;  /* every round made (wd->all) */
    struct wd_round *spare_next; /* an idle one (wd->spare) */
} wd_round;

/* Room in the loop's fd slots for rounds in flight; the rest is for a
 * Cluster map's or Sentinel's learning, which opens connections of its
 * own on the loop. */
#define ROUND_FDS (DLOCK__LOOP_POLL_FDS - 2)

typedef struct dlock__watchdog {
    dlock__loop_thread lt;
    dlock_client *c;
    pthread_mutex_t mu;
    pthread_cond_t round_done; /* a round settled or finished */
    dlock__renewal *head;      /* registered records */
    size_t count;
    int64_t wake_at_ns;        /* when the thread plans to look */
    dlock__watchdog_stats stats;
    size_t in_flight;          /* rounds in flight */
    int stopping;              /* no round starts any more */
    /* The thread's own. */
    dlock__post look_post; /* posted by add(): look now */
    dlock__timer tick;     /* the next look */
    size_t fds;            /* fd slots the rounds in flight may take */
    wd_round *all, *spare;
    item *pick;            /* cluster: the due records, before grouping */
    size_t pick_cap;
} dlock__watchdog;

static inline int64_t dlock__wd_interval_ms(const dlock__renewal *l)
{
    /* An explicit interval that an extend to a shorter TTL outgrew would
     * let the lease lapse between rounds: a third of the TTL then. */
    int64_t iv = l->interval_ms && l->interval_ms < l->ttl_ms ? l->interval_ms : l->ttl_ms / 3;
    return iv > 0 ? iv : 1;
}

/* Arm the thread's next look at `at` (INT64_MAX: none). On the thread. */
void dlock__wd_look_at(dlock__watchdog *wd, int64_t at);

/* Take l off the registered list. Under wd->mu. */
void dlock__wd_unlink(dlock__watchdog *wd, dlock__renewal *l);
/* The round lets its item's record go: it never touches it again. Under
 * wd->mu. */
void dlock__wd_let_go(dlock__renewal *l);
/* A round's completion: settle, report, reschedule, on_lost (below, in
 * watchdog_round.c). Without wd->mu. */
void dlock__wd_finish_round(dlock__watchdog *wd, wd_round *w);
/* renew_round's `renewed` hook: a lock a majority renewed, settled before
 * its round ends. */
void dlock__wd_renewed_early(dlock__renew_round *r, item *it);

#endif
