/* SPDX-License-Identifier: BSD-3-Clause */
/* The engine's wait (docs/dev/engine-plan.md §3, E9-E13): an acquire on
 * a backend that tries once as a request (backend.h, try), for every
 * kind. A state machine driven by callbacks on one loop, never blocking
 * in itself: TRY (the backend's request), then granted or given up, or
 * (once) a wait for the watch's confirmation before the next try, or a
 * sleep on a loop timer that a wake-up message or a cancel ends early. A
 * kind that waits in line (kinds.h, DLOCK__WAIT_QUEUE) first BEGINs (its
 * token, its place; backed off and asked again while what the last wait
 * left is unsettled) and watches before its first look; its sleep may
 * end in a hold handed over by the message alone (handed), and its leave
 * on a give-up may find the lock handed to it. The blocking API drives it on
 * a private loop (call.c); the async API will drive the same machine on
 * an application's loop. */
#ifndef DLOCK_ACQUIRE_H
#define DLOCK_ACQUIRE_H

#include <stdint.h>

#include "common.h"
#include "loop.h"
#include "op.h"

/* A wait's driver, for a wait that sleeps: wakeable(wake_arg) before
 * the first sleep lets wake(wake_arg) be called from any thread, which
 * must then get the wait's poked() run on its loop (dlock__acq_poked(),
 * dlock__engine_acquire_poked()). wake NULL: the sleep ends at its timer
 * only. sleep_blocking: the blocking driver's fallback when wakeable()
 * fails (no fd to spare for its eventfd): sleep on the handle's condition
 * variable, which a cancel and a wake-up broadcast, until one of them or
 * wake_at_ns; NULL: the sleep ends at its timer only. */
typedef struct dlock__wait_hooks {
    int (*wakeable)(void *wake_arg);
    void (*wake)(void *wake_arg);
    void *wake_arg;
    void (*sleep_blocking)(dlock_lock *l, unsigned woken, int64_t wake_at_ns);
} dlock__wait_hooks;

typedef struct dlock__acq {
    dlock_lock *l;
    int64_t wait_ms, deadline_ns;
    dlock__loop *loop;
    void (*done)(struct dlock__acq *a); /* once, on loop; rc is the acquire's result */
    int rc;
    dlock__wait_hooks hooks; /* the driver's (all NULL: none) */

    /* The machine's own. */
    dlock__op op;       /* the try */
    dlock__op leave_op; /* leaving the waiter list on a give-up */
    dlock__timer timer;
    int64_t wake_at_ns;
    unsigned woken;   /* the waiter record's wake-up count before the try */
    unsigned attempts; /* backoff steps taken */
    int watching, hooked, sleeping;
    int begun; /* a queued kind's begin answered DLOCK_OK (or none is needed) */
    int tried; /* a try answered */
    int confirming;        /* waiting for the watch's confirmation ... */
    int64_t confirm_by_ns; /* ... until then at most */
    /* The last sleep ended by its timer, not by a message: a grant after
     * it was found by a look (observe.h's wake-ups). */
    int slept_out;
} dlock__acq;

void dlock__acq_init(dlock__acq *a, dlock_lock *l, int64_t wait_ms, int64_t deadline_ns,
                     dlock__loop *loop, void (*done)(dlock__acq *a));
/* The first try. done() runs later, from the loop. */
void dlock__acq_start(dlock__acq *a);
/* On the loop: a wake-up or a cancel may have come. */
void dlock__acq_poked(dlock__acq *a);

#endif
