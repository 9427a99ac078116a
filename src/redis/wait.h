/* SPDX-License-Identifier: BSD-3-Clause */
/* Waiting for a lock: attempts with backoff, woken early by release
 * messages (wakeup.c), until the deadline or a cancel. */
#ifndef DLOCK_WAIT_H
#define DLOCK_WAIT_H

#include <stdint.h>

#include "common.h"

/* A cancel must end a wait at once: the best-effort step that takes a
 * cancelled waiter out of a list or line (wq_leave.lua, fair_leave.lua)
 * gets this long, in ms, and otherwise its entry lapses by itself or, in
 * fair mode, the handle's next acquire or free cleans up. */
#define DLOCK__CANCEL_LEAVE_MS 100

/* The acquire loop of the plain and counted kinds (kinds.h). */
int dlock__wait_acquire(dlock_lock *l, int64_t wait_ms, int64_t deadline_ns);

/* Sleep until wake_at, a cancel, a release message (woken moves on), or a
 * hand-over to us. Returns 1 if cancelled (and clears the cancel). */
int dlock__wait_sleep_until(dlock_lock *l, unsigned woken, int64_t wake_at_ns);

/* The waiter record's wake-up count now. */
unsigned dlock__wait_woken(dlock_lock *l);

/* Watch the lock's release channel: fill the waiter record and subscribe
 * (fair kinds also name their token for hand-overs). DLOCK_OK if watched. */
int dlock__wait_watch(dlock_lock *l, int fair);
void dlock__wait_unwatch(dlock_lock *l);

#endif
