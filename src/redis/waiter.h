/* SPDX-License-Identifier: BSD-3-Clause */
/* The waiter record that a waiting acquire (wait.c, for the engine's wait
 * of every kind) hands to the wake-up thread (wakeup.h) and its channel
 * table (wakeup_chan.h). */
#ifndef DLOCK_WAITER_H
#define DLOCK_WAITER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* A waiter record: what the wake-up thread knows of one waiting acquire.
 * The thread never sees the lock handle; it bumps `woken` (and, for a
 * hand-over to `token`, sets handed_over and handed_fence) under *mu,
 * broadcasts *cond (fair mode still sleeps on it) and calls `wake` (the
 * engine's wait sleeps on its loop), and the waiting thread reads them
 * back. */
typedef struct dlock__waiter {
    /* The owner's, constant while watched. */
    const char *channel;
    size_t channel_len;
    /* Its client's inbox for the lock (keys.h), or NULL: messages
     * addressed to this waiter come there, the others on `channel`. */
    const char *inbox;
    size_t inbox_len;
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
    /* The engine's wait (src/engine/acquire.c) while it sleeps, else NULL:
     * called under *mu after every wake-up above and on a cancel, to make
     * the waiting call's loop turn (any thread; it must not block). */
    void (*wake)(void *arg);
    void *wake_arg;
} dlock__waiter;

#endif
