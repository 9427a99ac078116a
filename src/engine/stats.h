/* SPDX-License-Identifier: BSD-3-Clause */
/* What a client tells about itself (dlock.h, "Observing a client"): the
 * application's observer hooks, called once per event, and the counters
 * and histograms of dlock_client_stats(), kept always.
 *
 * Why always: each event costs a few relaxed atomic additions on the
 * client's own counters, next to a round trip to a store (tens of
 * microseconds at best); dlock-bench's `ab` figures did not move
 * (docs/observing.md). The hooks cost one NULL test when unset.
 *
 * This module knows the counters and hooks only (the client embeds them,
 * so it depends on nothing of the client's): the watchdog reports its
 * rounds and the Redis transport its node errors and topology changes
 * here; the lock's events, which read the handle, are observe.h's. No
 * emitter holds a lock handle's mutex while it calls a hook. */
#ifndef DLOCK_STATS_H
#define DLOCK_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "common.h"

typedef struct dlock__hist {
    _Atomic uint64_t count, sum_us;
    _Atomic uint64_t bucket[DLOCK_STATS_BUCKETS];
} dlock__hist;

/* The counters, in dlock_stats's order. */
enum {
    DLOCK__C_ACQUIRES,
    DLOCK__C_GRANTED,
    DLOCK__C_BUSY,
    DLOCK__C_FAILED,
    DLOCK__C_ATTEMPTS,
    DLOCK__C_RELEASED,
    DLOCK__C_LOST,
    DLOCK__C_ENDED,
    DLOCK__C_FORGOTTEN,
    DLOCK__C_ROUNDS,
    DLOCK__C_RENEWALS,
    DLOCK__C_RENEW_FAILURES,
    DLOCK__C_NODE_ERRORS,
    DLOCK__C_TOPOLOGY,
    DLOCK__C_WAKE_PUSHED,
    DLOCK__C_WAKE_LOOKED,
    DLOCK__C_COUNT
};

typedef struct dlock__obs {
    dlock_observer hooks; /* all NULL without an observer */
    _Atomic uint64_t counter[DLOCK__C_COUNT];
    dlock__hist acquire, hold, renewal;
} dlock__obs;

/* Copy the application's observer (NULL: none) as its version has it.
 * DLOCK_EINVAL with a message for an unknown version. */
int dlock__stats_init(dlock__obs *o, const dlock_observer *app, char *err, size_t len);

void dlock__stats_count(dlock__obs *o, int which, uint64_t n);
/* One value, in ns, into a histogram. */
void dlock__stats_record(dlock__hist *h, int64_t ns);

/* A watchdog round is over (ev->size is set here). */
void dlock__stats_renewal(dlock__obs *o, dlock_renewal_event *ev);
/* A request to the node called `node` failed with error code `code`;
 * timed_out: its connect or I/O timeout ran out. */
void dlock__stats_node_error(dlock__obs *o, const char *node, int code, int timed_out);
/* The node called `node` answered a request with an error reply that
 * refuses it (code: DLOCK_EREFUSED, DLOCK_EBUSY or DLOCK_EAUTH). */
void dlock__stats_node_refused(dlock__obs *o, const char *node, int code);
/* The topology moved (what: DLOCK_NODE_SLOTS_RELEARNED, ...). */
void dlock__stats_topology(dlock__obs *o, dlock_node_what what, const char *node);

/* dlock_client_stats()'s figures. */
void dlock__stats_snapshot(const dlock__obs *o, dlock_stats *out);

#endif
