/* SPDX-License-Identifier: BSD-3-Clause */
/* The watchdog: one background thread per client renews every held
 * auto-renew lock, batching many locks into one script call per node per
 * round. */
#ifndef DLOCK_WATCHDOG_H
#define DLOCK_WATCHDOG_H

struct dlock_client;
struct dlock_lock;

/* Make sure the thread runs (started on first use). Called before an
 * auto-renew acquire, so that registering the lock after the grant cannot
 * fail: a grant the client could not keep alive would have to be undone,
 * and under memory pressure the undo may fail too. DLOCK_OK or
 * DLOCK_ENOMEM. */
int dlock__watchdog_start(struct dlock_client *c);

/* Start renewing `lock` (held, DLOCK_AUTO_RENEW). The thread must have been
 * started with dlock__watchdog_start(). Allocates nothing. */
void dlock__watchdog_add(struct dlock_client *c, struct dlock_lock *lock);

/* Stop renewing `lock`. When this returns, no renewal of it is in flight
 * and none will be sent. No-op for a lock that is not registered. */
void dlock__watchdog_remove(struct dlock_client *c, struct dlock_lock *lock);

/* Stop and join the thread (dlock_client_free). */
void dlock__watchdog_stop(struct dlock_client *c);

/* Counters for tests and dlock-bench (internal). */
typedef struct dlock__watchdog_stats {
    unsigned long rounds;    /* renewal rounds run */
    unsigned long calls;     /* script calls sent, summed over nodes */
    unsigned long renewed;   /* lock renewals confirmed */
    unsigned long lost;      /* locks found lost */
} dlock__watchdog_stats;

void dlock__watchdog_get_stats(struct dlock_client *c, dlock__watchdog_stats *out);

#endif
