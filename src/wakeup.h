/* SPDX-License-Identifier: BSD-3-Clause */
/* Waking waiters when a lock is released: one shared pub/sub subscriber
 * connection per client and node, run by a background thread. */
#ifndef DLOCK_WAKEUP_H
#define DLOCK_WAKEUP_H

struct dlock_client;
struct dlock_lock;

/* Subscribe to the lock's release channel on every node and return once the
 * subscription is confirmed (so a release after this call wakes the lock's
 * waiter: lock->woken changes and lock->cond is signalled). Returns
 * DLOCK_OK, or an error after which the caller falls back to polling. */
int dlock__wakeup_watch(struct dlock_client *c, struct dlock_lock *lock);

/* Stop waking this lock. After return the wake-up thread no longer touches
 * it. */
void dlock__wakeup_unwatch(struct dlock_client *c, struct dlock_lock *lock);

/* Stop and join the thread, close its connections (dlock_client_free). */
void dlock__wakeup_stop(struct dlock_client *c);

#endif
