/* SPDX-License-Identifier: BSD-3-Clause */
/* DLOCK_NO_FENCE's first try at a plain lock: plain commands (SET NX PX
 * and what tells a busy lock's holder and TTL), no script (issue 20). */
#ifndef DLOCK_FIRST_TRY_H
#define DLOCK_FIRST_TRY_H

#include "common.h"
#include "fanout.h"
#include "quorum.h"

/* One first try's state (in dlock__first_try_reqs). */
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

/* The first try's commands and state, for a fan-out with
 * dlock__first_try_reply and &rt: they must outlive the run. */
typedef struct dlock__first_try_reqs {
    dlock__first_try rt;
    const char *set[7], *get[2], *pttl[2];
    size_t set_lens[7], get_lens[2], pttl_lens[2];
    dlock__req raw[3];
    uint32_t n;
} dlock__first_try_reqs;

/* Fill q for a try of l that counts its answers into t (the attempt's
 * tally, dlock__tally_answer()); SET ... GET only when every node takes
 * it. */
void dlock__first_try_prepare(dlock_lock *l, dlock__tally *t, dlock__first_try_reqs *q);

#endif
