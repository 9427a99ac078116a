/* SPDX-License-Identifier: BSD-3-Clause */
/* The lock handle's public verbs: each checks its arguments and the
 * process (a fork child's handle refuses), then goes by the handle's type,
 * as libuv's uv_close() does: a set of names (dlock_lock_new_multi()) to
 * set.c, one name to the engine (engine.h), where the state machine is.
 * Making a handle is create.c's; the getters, which only read it, are in
 * handle.c. This is the only module that calls these verbs: everything
 * below calls the engine (scripts/check-modules.sh checks it). */
#include <stdint.h>

#include "async.h"
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

/* A blocking verb on a looped client would block its loop (dlock.h). */
static int looped(dlock_lock *l)
{
    if (!l->client->loop)
        return 0;
    dlock__err_set(&l->err, "\"%s\": a client made with an event loop takes the _start verbs "
                   "(dlock_lock_acquire_start() and the like); a blocking one would block the loop",
                   l->name);
    return 1;
}

int dlock_lock_acquire(dlock_lock *l, int64_t wait_ms)
{
    if (!l || forked(l) || looped(l))
        return DLOCK_EINVAL;
    int rc = dlock__lock_check_wait_ms(l, wait_ms);
    if (rc != DLOCK_OK)
        return rc;
    if (l->set)
        return dlock__set_acquire(l, wait_ms);
    return dlock__engine_acquire(l, wait_ms);
}

int dlock_lock_release(dlock_lock *l)
{
    if (!l || forked(l) || looped(l))
        return DLOCK_EINVAL;
    if (l->set)
        return dlock__set_release(l);
    return dlock__engine_release(l);
}

int dlock_lock_extend(dlock_lock *l, int64_t ttl_ms)
{
    if (!l || forked(l) || looped(l))
        return DLOCK_EINVAL;
    dlock__err_clear(&l->err);
    int rc = dlock__lock_check_ttl_ms(l, ttl_ms);
    if (rc != DLOCK_OK)
        return rc;
    if (l->set)
        return dlock__set_extend(l, ttl_ms);
    return dlock__engine_extend(l, ttl_ms);
}

int dlock_lock_adopt(dlock_lock *l, const char *token)
{
    if (!l || !token || forked(l) || looped(l))
        return DLOCK_EINVAL;
    if (l->set)
        return dlock__set_adopt(l);
    return dlock__engine_adopt(l, token);
}

int dlock_lock_forget(dlock_lock *l)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
    if (dlock_lock_pending(l)) { /* a looped client's request uses the hold */
        dlock__err_set(&l->err, "\"%s\": a request of this handle is pending", l->name);
        return DLOCK_EBUSY;
    }
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
    if (l->async && !dlock__client_forked(l->client)) {
        dlock__async_free(l); /* a looped client's: on its loop */
        return;
    }
    if (l->set) {
        dlock__set_free(l);
        return;
    }
    /* In a fork child nothing is let go: the parent's lock is the parent's. */
    if (!dlock__client_forked(l->client))
        dlock__engine_let_go(l);
    dlock__lock_destroy(l);
}
