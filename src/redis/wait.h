/* SPDX-License-Identifier: BSD-3-Clause */
/* Redis's part of waiting for a lock: the engine's wait
 * (src/engine/acquire.c) tries (dlock__wait_try), watches the release
 * channel (woken early by release messages, wakeup.c) and leaves the
 * waiter list through these; fair mode (fair.c) sleeps here too. */
#ifndef DLOCK_WAIT_H
#define DLOCK_WAIT_H

#include <stdint.h>

#include "backend.h"
#include "common.h"
#include "op.h"

/* The backend's try (backend.h): one attempt (attempt.h's chain) on
 * op->loop, its verdict completed from that loop. DLOCK_OK, or
 * DLOCK_ENOMEM (the handle's message set) and no completion. */
int dlock__wait_try(dlock_lock *l, dlock__op *op);
/* The backend's leave (backend.h): a listed waiter that gives up leaves
 * the waiter list (wq_leave.lua), best effort, within timeout_ms, as a
 * request on op->loop; DLOCK_ENOTHELD when it is not listed. */
int dlock__wait_leave(dlock_lock *l, int64_t timeout_ms, dlock__op *op);

/* Sleep until wake_at, a cancel, a release message (woken moves on), or a
 * hand-over to us. Returns 1 if cancelled (and clears the cancel). */
int dlock__wait_sleep_until(dlock_lock *l, unsigned woken, int64_t wake_at_ns);

/* The waiter record's wake-up count now. */
unsigned dlock__wait_woken(dlock_lock *l);

/* Watch the lock's release channel: fill the waiter record and subscribe
 * (fair kinds also name their token for hand-overs). DLOCK_OK if watched. */
int dlock__wait_watch(dlock_lock *l, int fair);
void dlock__wait_unwatch(dlock_lock *l);
/* The backend's watch and watch_ready (backend.h): the subscription
 * started, not waited for; its confirmation (wakeup.h). */
int dlock__wait_watch_release(dlock_lock *l);
int dlock__wait_watch_ready(dlock_lock *l, int64_t until_ns);

#endif
