/* SPDX-License-Identifier: BSD-3-Clause */
/* DLOCK_NO_FENCE's first try at a plain lock: plain commands (SET NX PX
 * and what tells a busy lock's holder and TTL), no script (issue 20). */
#ifndef DLOCK_FIRST_TRY_H
#define DLOCK_FIRST_TRY_H

#include "common.h"
#include "fanout.h"
#include "quorum.h"

/* One first try's state (dlock__first_try_send() keeps it on its stack). */
enum { DLOCK__FT_DONE, DLOCK__FT_BUSY, DLOCK__FT_REFUSED };

typedef struct dlock__first_try {
    dlock__tally *t;
    int set_get; /* SET ... GET and PTTL, not SET, GET and PTTL */
    /* Per node, what the SET said when it did not settle the answer:
     * DLOCK__FT_BUSY (the lock is held: the replies behind it complete the
     * "no"), or DLOCK__FT_REFUSED, an error reply (OOM, MISCONF, NOPERM, a replica's
     * READONLY), which acquire.lua would never have met on a busy lock,
     * whose GET and PTTL come before any write: the GET or PTTL behind it
     * decides, as there. */
    uint8_t state[DLOCK__MAX_NODES];
    int refused[DLOCK__MAX_NODES];
    char why[DLOCK__MAX_NODES][80];
} dlock__first_try;

/* Its fan-out callback (fanout.h): counts each node's answer into t once.
 * Not static so that tests/unit/test_first_try.c can feed it replies. */
struct redisReply;
int dlock__first_try_reply(void *arg, size_t node, uint32_t idx, int err,
                           const struct redisReply *r, const char *detail, int64_t start_ns);

/* Whether this attempt of l is such a first try: a plain lock without a
 * fencing counter, by a handle that is not a listed waiter, not on a Redis
 * Cluster and without min_replicas. */
int dlock__first_try_is_raw(const dlock_lock *l);

/* Send it to every node and count the answers into t (the attempt's
 * tally, dlock__tally_answer()); what dlock__fanout_attempt() returns. */
int dlock__first_try_send(dlock_lock *l, dlock__tally *t, const dlock__fanout_opts *fo,
                          dlock__conn **kept);

#endif
