/* SPDX-License-Identifier: BSD-3-Clause */
/* Redis's part of waiting for a lock: the engine's wait
 * (src/engine/acquire.c) tries (dlock__wait_try), watches the release
 * channel (woken early by release messages, wakeup.c) and leaves the
 * waiter list through these; the queued kinds (fair.c) watch here too. */
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

/* The watch's end (the backend's unwatch). */
void dlock__wait_unwatch(dlock_lock *l);
/* The backend's watch and watch_ready (backend.h): the subscription
 * started, not waited for (a queued kind also names its token for
 * hand-overs); its confirmation (wakeup.h). */
int dlock__wait_watch_release(dlock_lock *l);
int dlock__wait_watch_ready(dlock_lock *l, int64_t until_ns);

#endif
