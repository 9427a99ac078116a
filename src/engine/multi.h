/* SPDX-License-Identifier: BSD-3-Clause */
/* Several names taken at once (dlock_lock_new_multi()): the handle of the
 * set owns one handle per name and takes them in sorted order, all or
 * none (docs/primitives.md). */
#ifndef DLOCK_MULTI_H
#define DLOCK_MULTI_H

#include <stdint.h>

#include "common.h"

/* The waiting acquire of a set (kinds.h, DLOCK__WAIT_MULTI). */
int dlock__multi_acquire(dlock_lock *set, int64_t wait_ms, int64_t deadline_ns);

/* A name's lease moved (a renewal): the set's validity is the least of its
 * names'. Takes the set's mutex, then each name's (never the other way). */
void dlock__multi_sync(dlock_lock *set);

/* The operations of a set (backend.h): every one works through the names'
 * own handles, so each name uses its store and kind. */
extern const struct dlock__backend dlock__multi_backend;

#endif
