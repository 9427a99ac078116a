/* SPDX-License-Identifier: BSD-3-Clause */
/* Several names taken at once (dlock_lock_new_multi()): a composite above
 * single locks. The set's handle owns one handle per name and drives them
 * through the engine (engine.h), in sorted order, all or none
 * (docs/primitives.md). The public verbs hand a set's handle here (lock.c,
 * `if (l->set)`); their arguments are checked already. Same contracts,
 * return codes and messages as the public verbs in dlock.h. */
#ifndef DLOCK_SET_H
#define DLOCK_SET_H

#include <stdint.h>

#include "common.h"

int dlock__set_acquire(dlock_lock *set, int64_t wait_ms);
int dlock__set_release(dlock_lock *set);
int dlock__set_extend(dlock_lock *set, int64_t ttl_ms);
int dlock__set_adopt(dlock_lock *set); /* never: a set has no token of its own */
int dlock__set_forget(dlock_lock *set);
void dlock__set_cancel(dlock_lock *set); /* any thread */
/* Every name let go (not in a fork child) and freed, then the set. */
void dlock__set_free(dlock_lock *set);

#endif
