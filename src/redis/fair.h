/* SPDX-License-Identifier: BSD-3-Clause */
/* Fair mode (one node): waiters keep a place in line and the release
 * script hands the lock to the next live one (docs/waiting.md). Redis's
 * part of the engine's wait for a queued kind (kinds.h, DLOCK__WAIT_QUEUE;
 * backend.h: begin, try, handed, leave), each a request on op->loop. */
#ifndef DLOCK_FAIR_H
#define DLOCK_FAIR_H

#include <stdint.h>

#include "common.h"
#include "loop.h"
#include "op.h"

/* The wait's begin: settle what the last wait left (its cleanup by the
 * old token, a release of unknown outcome), then take the wait's token. */
int dlock__fair_begin(dlock_lock *l, dlock__op *op);
/* One look (fair_acquire.lua): held, or our place in line kept. */
int dlock__fair_try(dlock_lock *l, dlock__op *op);
/* After a sleep: was the lock handed to us by its message? 1: held. */
int dlock__fair_handed(dlock_lock *l);
/* Leave the line (fair_leave.lua), which may find the lock handed to us:
 * op->v.code DLOCK_OK then. DLOCK_ENOTHELD: no look went out. */
int dlock__fair_leave(dlock_lock *l, int64_t timeout_ms, dlock__op *op);

/* After an acquire whose last word from the node was lost: leave the line
 * by our token, and if the lock turns out to be ours, release it, on loop
 * (a handle's free and lost path: tidy.c). DLOCK_OK, and then(arg) follows
 * from the loop once done, l->fair_cleanup_pending cleared or, while the
 * node has not answered, set; DLOCK_ENOMEM: nothing sent, still pending,
 * and then() never comes. */
int dlock__fair_cleanup_start(dlock_lock *l, dlock__loop *loop, void (*then)(void *arg),
                              void *arg);

#endif
