/* SPDX-License-Identifier: BSD-3-Clause */
/* The seam between the public face (lock.c) and the store the locks live
 * in. lock.c keeps a handle's state machine (unlocked / held / lost), the
 * watchdog registration, cancel and the getters; every round trip goes
 * through a backend's operations. Redis (scripts, fan-out, Redlock
 * majorities, EVALSHA replies) is one table (redis_backend.c with
 * attempt.c, release.c, fair.c); a set of names has none (set.c drives
 * its names' handles). etcd (issue 21) waits in a line, not by attempts, so lock.c
 * calls etcd_backend.c beside the table, not through it (docs/design.md,
 * "Modules"). */
#ifndef DLOCK_BACKEND_H
#define DLOCK_BACKEND_H

#include <stdint.h>

#include "common.h"

typedef struct dlock__backend {
    const char *name;
    /* One acquire attempt, undoing whatever part of it may have been
     * granted when it failed. On DLOCK_OK the handle is held (state set);
     * *retry says whether waiting longer could help. */
    int (*attempt)(dlock_lock *l, int *retry);
    /* Give back one hold of the current owner (all of a plain lock);
     * returns DLOCK_OK or why not (DLOCK_ENOTOWNER, DLOCK_EEXPIRED, ...).
     * The state change is the caller's. */
    int (*release)(dlock_lock *l);
    /* Push the expiry out to ttl_ms from now; a confirmation after
     * deadline_ns proves nothing. Returns a code as release does. */
    int (*extend)(dlock_lock *l, int64_t ttl_ms, int64_t deadline_ns);
    /* Before the token changes outside an acquire (adopt): settle what an
     * earlier operation left with an unknown outcome, best effort. */
    void (*settle)(dlock_lock *l);
    /* dlock_lock_free(): best-effort cleanup of everything the handle
     * left in the store (pending undos and releases, bookkeeping, holds). */
    void (*cleanup)(dlock_lock *l);
    /* The handle was found lost, and its holder lets go (release, free,
     * or the handle's next acquire): take its token out of the store
     * should it still be there, best effort, without waiting long. A
     * renewal the watchdog gave up on may reach a stalled node late and
     * keep the token there for a whole TTL. */
    void (*release_lost)(dlock_lock *l);
} dlock__backend;

/* Redis and Redlock (redis_backend.c). */
extern const dlock__backend dlock__redis_backend;

#endif
