/* SPDX-License-Identifier: BSD-3-Clause */
/* Waking waiters when a lock is released: one shared pub/sub subscriber
 * connection per client and node, run by a background thread. */
#ifndef DLOCK_WAKEUP_H
#define DLOCK_WAKEUP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "waiter.h"

struct dlock_client;

/* Subscribe to the waiter's channel, and its inbox if it has one, on every
 * node, in two halves, for a wait that must not block (the engine's,
 * acquire.c). watch_start subscribes and returns at once: DLOCK_OK (the
 * waiter is watched; unwatch it in the end), DLOCK_EREFUSED or
 * DLOCK_ENOMEM (not watched). When a subscription is confirmed or
 * refused, the wake-up thread calls the wake hook of every watched
 * waiter (waiter.h). watch_ready: 1 once a node confirmed the waiter's
 * subscriptions (a release from then on wakes the waiter: w->woken
 * changes, the wake hook is called and *w->cond signalled), -1 if none
 * ever will (refused), 0 not yet; it waits for that until until_ns or
 * the waiter's cancel (0: only looks). */
int dlock__wakeup_watch_start(struct dlock_client *c, dlock__waiter *w);
int dlock__wakeup_watch_ready(struct dlock_client *c, dlock__waiter *w, int64_t until_ns);

/* 1 once a node refused the SUBSCRIBE of an inbox (an ACL that grants the
 * lock channels by their exact names): the client's waiters then go
 * without one (wait.c), woken on the lock's channel. */
int dlock__wakeup_inbox_off(struct dlock_client *c);

/* Stop waking this waiter. After return the wake-up thread no longer
 * touches it. */
void dlock__wakeup_unwatch(struct dlock_client *c, dlock__waiter *w);

/* Stop and join the thread (on a looped client: take its records off the
 * loop), close its connections (dlock_client_free). Returns 1: done. */
int dlock__wakeup_stop(struct dlock_client *c);

/* A lock's cancel: wake a dlock__wakeup_watch_ready() waiting for a
 * subscription to be confirmed, so it sees the cancel. Call without the lock's mu. */
void dlock__wakeup_kick(struct dlock_client *c);

/* In a child of fork(), where the thread does not exist and its mutex may
 * be held: close this process's copies of the subscriber sockets and the
 * self-pipe (sending nothing) and free the memory, without locking,
 * joining or destroying. */
void dlock__wakeup_forget(struct dlock_client *c);

#endif
