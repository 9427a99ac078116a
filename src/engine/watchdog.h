/* SPDX-License-Identifier: BSD-3-Clause */
/* The watchdog: one background thread per client renews every registered
 * renewal record, batching many locks into one script call per node per
 * round; a round is a request on the thread's loop.
 *
 * The thread knows renewal records, not lock handles: a record names the
 * key and token to renew and how, and hands each round's votes back to its
 * owner through dlock__renewal_ops; only the owner (the lock module)
 * changes a lock's state. */
#ifndef DLOCK_WATCHDOG_H
#define DLOCK_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "renewal.h"

/* Make sure the thread runs (started on first use). Called before an
 * auto-renew acquire, so that registering the lock after the grant cannot
 * fail: a grant the client could not keep alive would have to be undone,
 * and under memory pressure the undo may fail too. DLOCK_OK or
 * DLOCK_ENOMEM. */
int dlock__watchdog_start(dlock_client *c);

/* Start renewing `r` (its owner holds the lock) to r->ttl_ms, the first
 * round first_ms from now: 0 at once (a failed extend: the lease has had
 * no renewal for a while), DLOCK__RENEW_INTERVAL one interval from now.
 * The thread must have been started with dlock__watchdog_start().
 * Allocates nothing. */
#define DLOCK__RENEW_INTERVAL (-1)
void dlock__watchdog_add(dlock_client *c, dlock__renewal *r, int64_t first_ms);

/* Stop renewing `r`. When this returns from a thread other than the
 * watchdog's, no renewal of it is in flight and none will be sent. On the
 * watchdog's thread (an on_lost callback), where its round cannot go on
 * while this waits, the round lets it go instead and never touches it
 * again; a renewal of it already sent may still arrive (watchdog.c says
 * why that is harmless). No-op for a record that is not registered.
 * Returns 1 if it was registered. */
int dlock__watchdog_remove(dlock_client *c, dlock__renewal *r);

/* Stop and join the thread (dlock_client_free): 1 when stopped and freed; 0 on a looped client with rounds in flight:
 * none starts any more, and the last one's end frees the watchdog and
 * calls dlock__client_closed(). */
int dlock__watchdog_stop(dlock_client *c);

/* In a child of fork(), where the thread does not exist and its mutex may
 * be held: free the memory without locking, joining or destroying. */
void dlock__watchdog_forget(dlock_client *c);

/* Counters for tests and dlock-bench (internal): dlock__watchdog_stats,
 * renewal.h. */
void dlock__watchdog_get_stats(dlock_client *c, dlock__watchdog_stats *out);

#endif
