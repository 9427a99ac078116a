/* SPDX-License-Identifier: BSD-3-Clause */
/* The lock handle's public verbs: each checks its arguments and the
 * process (a fork child's handle refuses), then goes by the handle's type,
 * as libuv's uv_close() does: a set of names (dlock_lock_new_multi()) to
 * set.c, one name to the engine (engine.h), where the state machine is.
 * Making a handle is create.c's; the getters, which only read it, are in
 * handle.c. This is the only module that calls these verbs: everything
 * below calls the engine (scripts/check-modules.sh checks it). */
#include <inttypes.h>
#include <stdint.h>

#include "client.h"
#include "engine.h"
#include "error.h"
#include "handle.h"
#include "set.h"

/* A handle inherited across fork() refuses every call (see
 * dlock__client_forked()). */
static int forked(dlock_lock *l)
{
    if (!dlock__client_forked(l->client))
        return 0;
    dlock__err_set(&l->err, "\"%s\": used after fork(); a client and its locks belong to the "
                   "process that made them (make a new client in the child)", l->name);
    return 1;
}

int dlock_lock_acquire(dlock_lock *l, int64_t wait_ms)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
    if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER) {
        dlock__err_set(&l->err, "wait_ms must be >= 0 or DLOCK_WAIT_FOREVER");
        return DLOCK_EINVAL;
    }
    if (l->set)
        return dlock__set_acquire(l, wait_ms);
    return dlock__engine_acquire(l, wait_ms);
}

int dlock_lock_release(dlock_lock *l)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
    if (l->set)
        return dlock__set_release(l);
    return dlock__engine_release(l);
}

int dlock_lock_extend(dlock_lock *l, int64_t ttl_ms)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
    dlock__err_clear(&l->err);
    if (ttl_ms < 0 || ttl_ms > DLOCK_TTL_MAX_MS) {
        dlock__err_set(&l->err, "ttl_ms must be 1..%" PRId64 " (or 0 for the lock's TTL)",
                       DLOCK_TTL_MAX_MS);
        return DLOCK_EINVAL;
    }
    if (l->set)
        return dlock__set_extend(l, ttl_ms);
    return dlock__engine_extend(l, ttl_ms);
}

int dlock_lock_adopt(dlock_lock *l, const char *token)
{
    if (!l || !token || forked(l))
        return DLOCK_EINVAL;
    if (l->set)
        return dlock__set_adopt(l);
    return dlock__engine_adopt(l, token);
}

int dlock_lock_forget(dlock_lock *l)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
    if (l->set)
        return dlock__set_forget(l);
    return dlock__engine_forget(l);
}

void dlock_lock_cancel(dlock_lock *l)
{
    if (!l || dlock__client_forked(l->client))
        return;
    if (l->set)
        dlock__set_cancel(l);
    else
        dlock__engine_cancel(l);
}

void dlock_lock_free(dlock_lock *l)
{
    if (!l)
        return;
    if (l->set) {
        dlock__set_free(l);
        return;
    }
    /* In a fork child nothing is let go: the parent's lock is the parent's. */
    if (!dlock__client_forked(l->client))
        dlock__engine_let_go(l);
    dlock__lock_destroy(l);
}
