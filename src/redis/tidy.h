/* SPDX-License-Identifier: BSD-3-Clause */
/* What a handle leaves to settle in Redis (backend.h: settle_start,
 * release_lost_start, cleanup_start), each a request on op->loop: a chain
 * of the release, undo, forget and fair cleanup steps. DLOCK_OK and
 * op->done() later, exactly once, from op->loop, op->v.code DLOCK_OK (best
 * effort: what is still owed stays pending on the handle) or settle's
 * DLOCK_ENOMEM (below); or DLOCK_ENOMEM, nothing sent, and done() never
 * comes. */
#ifndef DLOCK_TIDY_H
#define DLOCK_TIDY_H

#include "common.h"
#include "op.h"

/* Before the token changes (adopt): the release owed under an older
 * adopt's token, then the handle's own pending release, which is kept
 * under its token (owed_token) while a node still owes it; answered
 * DLOCK_ENOMEM when that copy could not be made: the release stays
 * pending under the current token, which the adopt must then keep. */
int dlock__tidy_settle_start(dlock_lock *l, dlock__op *op);
/* The lost handle's token out of the store, by token, listening
 * RELEASE_LOST_MS at most for each node (a fair line: its cleanup). */
int dlock__tidy_release_lost_start(dlock_lock *l, dlock__op *op);
/* dlock_lock_free(): the owed release, the pending undo and release, the
 * counted kind's bookkeeping, a fair cleanup or a lost release, and the
 * hold itself. */
int dlock__tidy_cleanup_start(dlock_lock *l, dlock__op *op);

#endif
