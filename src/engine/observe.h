/* SPDX-License-Identifier: BSD-3-Clause */
/* A lock's events for the observer hooks and the statistics (stats.h):
 * acquires, holds and wake-ups, which read the handle. The engine calls
 * these (engine.c, acquire.c) on the handle's thread, hold_end with
 * DLOCK_HOLD_LOST on the watchdog's, never under the handle's mutex. */
#ifndef DLOCK_OBSERVE_H
#define DLOCK_OBSERVE_H

#include <stdint.h>

#include "common.h"

/* acquire_start also notes the time and zeroes the handle's attempts;
 * acquire_end reads them. */
void dlock__obs_acquire_start(dlock_lock *l, int64_t wait_ms);
void dlock__obs_acquire_end(dlock_lock *l, int64_t wait_ms, int rc);
/* The handle went from HELD to something else. */
void dlock__obs_hold_end(dlock_lock *l, dlock_hold_end how, int reason);
void dlock__obs_wakeup(dlock_lock *l, int pushed);

#endif
