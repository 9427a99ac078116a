/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_semaphore_new(): a handle for one permit of a semaphore. The kind
 * (kinds.c) and its scripts (shared_*.lua with zlease.lua) do the work;
 * docs/primitives.md says why several masters are refused. */
#include "async.h"
#include "handle.h"

int dlock_semaphore_new(dlock_lock **out, dlock_client *client, const char *name,
                        unsigned permits, const dlock_lock_options *opts)
{
    if (out)
        *out = NULL;
    /* A mode flag would ask for another kind: refused, not ignored. */
    if (permits == 0 || permits > DLOCK_PERMITS_MAX ||
        (opts && (opts->flags & (DLOCK_FAIR | DLOCK_REENTRANT | DLOCK_SHARED | DLOCK_EXCLUSIVE))))
        return DLOCK_EINVAL;
    return dlock__async_made(out, dlock__lock_create(out, client, name, opts, permits));
}
