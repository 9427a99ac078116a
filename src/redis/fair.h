/* SPDX-License-Identifier: BSD-3-Clause */
/* Fair mode (one node): waiters keep a place in line and the release
 * script hands the lock to the next live one (docs/waiting.md). */
#ifndef DLOCK_FAIR_H
#define DLOCK_FAIR_H

#include <stdint.h>

#include "common.h"

/* The acquire loop of the fair kind (kinds.h). */
int dlock__fair_acquire(dlock_lock *l, int64_t wait_ms, int64_t deadline_ns);

/* After an acquire whose last word from the node was lost: leave the line
 * by our token, and if the lock turns out to be ours, release it. Returns
 * DLOCK_OK once done, or while the node has not answered the code that
 * says why (the cleanup stays pending); DLOCK_ECANCELED if cancel_fd (-1:
 * none) stopped it in flight, the leave and release then sent behind. */
int dlock__fair_cleanup(dlock_lock *l, int cancel_fd);

#endif
