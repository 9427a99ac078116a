/* SPDX-License-Identifier: BSD-3-Clause */
/* A chaos worker's verbs on a looped client (dlock_client_options.loop): each
 * is its _start verb with the worker's libuv loop turned until the callback,
 * and a cancel is a timer on that loop (a looped client is used from its
 * loop's thread only). So the rows that set `looped` run the async engine,
 * one shared pipelined connection per node and the loop's own renewals,
 * under the same faults and checks as the blocking rows. Without libuv,
 * chaos_loop_new() returns NULL and the driver leaves those rows out. */
#ifndef DLOCK_CHAOS_WORKER_LOOP_H
#define DLOCK_CHAOS_WORKER_LOOP_H

#include <stdint.h>

#include "dlock.h"

typedef struct chaos_loop chaos_loop;

/* A loop and its hooks (for dlock_client_options.loop); NULL without
 * libuv or memory. */
chaos_loop *chaos_loop_new(void);
const dlock_loop *chaos_loop_hooks(chaos_loop *lp);

/* dlock_lock_acquire() through dlock_lock_acquire_start(); with
 * cancel_after_ms >= 0, dlock_lock_cancel() from a loop timer that long
 * in, unless the answer came first. */
int chaos_loop_acquire(chaos_loop *lp, dlock_lock *l, int64_t wait_ms, int64_t cancel_after_ms);

/* dlock_lock_release() through dlock_lock_release_start(). */
int chaos_loop_release(chaos_loop *lp, dlock_lock *l);

/* After the client's and its handles' frees: the loop turned until dlock
 * has nothing left on it, then closed and freed. */
void chaos_loop_free(chaos_loop *lp);

#endif
