/* SPDX-License-Identifier: BSD-3-Clause */
/* etcd's part of the engine's wait (backend.h: begin, try, watch,
 * watch_ready, unwatch, leave, handed; the engine's acquire.c drives
 * them): every kind waits in line here (the owner is the first key by
 * create revision, etcd_lock.h), so every wait is a queued one. Each step
 * is a chain of POST requests (etcd_request.h) on the wait's loop, each
 * started from the one before's done, and the waiter watches the key
 * before its own with a watch stream on that loop (etcd_watch.h):
 *
 *   begin  first the revoke a cancel cut off before (the handle's owed
 *          lease, etcd_hold.h), within DLOCK__CANCEL_LEAVE_MS; then a
 *          reentrant kind's re-entry (a keep-alive and a read of our
 *          key, etcd_renew.h), else a place in line: the grant of a lease
 *          of ours, then the create transaction, which says whether ours
 *          is the first key;
 *   try    a look: granted when ours is first (known from begin, or read);
 *          a try-once refused reads the holder's TTL and revokes; a waiter
 *          keeps its lease alive, reads the key before its own and watches
 *          it (V_QUEUED, looking again within RECHECK_MS);
 *   leave  the revoke of the waiter's lease within the time given.
 *
 * A cancel ends a step in flight (the acquire's cancel pipe is a record
 * on the loop while one is). Nothing of the wait outlives it: the stream
 * stops on every way out (granted, refused, left, cancelled, failed,
 * unwatched), a begin or try that ends the wait revokes what it made. */
#ifndef DLOCK_ETCD_WAIT_H
#define DLOCK_ETCD_WAIT_H

#include <stdint.h>

#include "common.h"
#include "op.h"

int dlock__etcd_wait_begin(dlock_lock *l, dlock__op *op);
int dlock__etcd_wait_try(dlock_lock *l, dlock__op *op);
int dlock__etcd_wait_watch(dlock_lock *l);
int dlock__etcd_wait_watch_ready(dlock_lock *l, int64_t until_ns);
void dlock__etcd_wait_unwatch(dlock_lock *l);
int dlock__etcd_wait_leave(dlock_lock *l, int64_t timeout_ms, dlock__op *op);
int dlock__etcd_wait_handed(dlock_lock *l);
/* lock_clear: the wait's memory (no wait runs then); forked: in a child
 * of fork(), where the client's mutex may be held by a thread not copied,
 * the place's session is not counted down (the client's close frees the
 * table's memory). */
void dlock__etcd_wait_free(dlock_lock *l, int forked);

#endif
