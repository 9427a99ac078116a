/* SPDX-License-Identifier: BSD-3-Clause */
/* Waking waiters when a lock is released: one shared pub/sub subscriber
 * connection per client and node, run by a background thread. */
#ifndef DLOCK_WAKEUP_H
#define DLOCK_WAKEUP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct dlock_client;

/* A waiter record: what the wake-up thread knows of one waiting acquire.
 * The thread never sees the lock handle; it bumps `woken` (and, for a
 * hand-over to `token`, sets handed_over and handed_fence) under *mu and
 * broadcasts *cond, and the waiting thread reads them back. */
typedef struct dlock__waiter {
    /* The owner's, constant while watched. */
    const char *channel;
    size_t channel_len;
    const char *token; /* fair waiters: the token a hand-over names; else NULL */
    size_t token_len;
    /* Waiters in a lock's waiter list: their id there. A release that
     * names an id ("w ID") wakes only that waiter; NULL: woken by every
     * release message. */
    const char *wait_id;
    size_t wait_id_len;
    pthread_mutex_t *mu;  /* the owner's mutex, guarding the fields below */
    pthread_cond_t *cond; /* broadcast on every wake-up */
    const int *canceled;  /* the owner's cancel flag, read under *mu */
    /* Written by the wake-up thread under *mu. */
    unsigned woken;       /* bumped on a release message or a lost link */
    int handed_over;      /* a release handed the lock to `token` ... */
    uint64_t handed_fence; /* ... with this fencing token */
} dlock__waiter;

/* Subscribe to the waiter's channel on every node and return once the
 * subscription is confirmed (so a release after this call wakes the
 * waiter: w->woken changes and *w->cond is signalled). Returns DLOCK_OK,
 * or an error after which the caller falls back to polling. */
int dlock__wakeup_watch(struct dlock_client *c, dlock__waiter *w);

/* Stop waking this waiter. After return the wake-up thread no longer
 * touches it. */
void dlock__wakeup_unwatch(struct dlock_client *c, dlock__waiter *w);

/* Stop and join the thread, close its connections (dlock_client_free). */
void dlock__wakeup_stop(struct dlock_client *c);

/* A lock's cancel: wake a dlock__wakeup_watch() waiting for a subscription
 * to be confirmed, so it sees the cancel. Call without the lock's mu. */
void dlock__wakeup_kick(struct dlock_client *c);

/* In a child of fork(), where the thread does not exist and its mutex may
 * be held: close this process's copies of the subscriber sockets and the
 * self-pipe (sending nothing) and free the memory, without locking,
 * joining or destroying. */
void dlock__wakeup_forget(struct dlock_client *c);

#endif
