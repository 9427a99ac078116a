/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs of a looped client (dlock.h, "Locks on an event loop"): the
 * engine's starts (engine.h, set.h) on the application's loop, a handle's
 * one pending request, and a handle's and its client's end on the loop.
 * No second copy of the machine: the blocking verbs are the same starts
 * on a private loop (call.c). */
#ifndef DLOCK_ASYNC_H
#define DLOCK_ASYNC_H

#include "common.h"

typedef struct dlock__async dlock__async;

/* A public constructor's end (dlock_lock_new() and the like): on a looped
 * client the handle gets its request record now, so that its free can
 * never fail for memory; rc is the constructor's, returned, or
 * DLOCK_ENOMEM (the handle is then freed, *out NULL). */
int dlock__async_made(dlock_lock **out, int rc);

/* dlock_lock_free() on a looped client (dlock.h says what it does). */
void dlock__async_free(dlock_lock *l);

/* A handle's record, memory only (its free, or a failed constructor). */
void dlock__async_drop(dlock_lock *l);

#endif
