/* SPDX-License-Identifier: BSD-3-Clause */
/* DLOCK_NO_FENCE's first try at a plain lock: plain commands (SET NX PX
 * and what tells a busy lock's holder and TTL), no script (issue 20). */
#ifndef DLOCK_FIRST_TRY_H
#define DLOCK_FIRST_TRY_H

#include "common.h"
#include "fanout.h"
#include "quorum.h"

/* Whether this attempt of l is such a first try: a plain lock without a
 * fencing counter, by a handle that is not a listed waiter, not on a Redis
 * Cluster and without min_replicas. */
int dlock__first_try_is_raw(const dlock_lock *l);

/* Send it to every node and count the answers into t (the attempt's
 * tally, dlock__tally_answer()); what dlock__fanout_attempt() returns. */
int dlock__first_try_send(dlock_lock *l, dlock__tally *t, const dlock__fanout_opts *fo,
                          dlock__conn **kept);

#endif
