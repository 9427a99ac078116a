/* SPDX-License-Identifier: BSD-3-Clause */
/* Fair mode (DLOCK_FAIR) test helpers, shared by threads/test_fair.c and
 * threads/test_fair_handover.c: clients and handles on the harness's
 * server (test_srv), the line's keys as the server sees them, a fair
 * waiter on a thread, and one in a forked process.
 *
 * Keys (src/engine/lock.c, dlock__derived_key): the line is "NAME\0q", each
 * waiter's liveness key "NAME\0w\0TOKEN". Waiter threads never call cmocka
 * asserts; the main thread checks what they recorded. */
#ifndef DLOCK_TEST_FAIR_LINE_H
#define DLOCK_TEST_FAIR_LINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlock.h"

dlock_client *fair_client(int wakeups);
dlock_lock *new_fair(dlock_client *c, const char *name, int64_t ttl_ms);

/* The line's length, the waiters' liveness keys present now, the lock
 * key's PTTL. */
long long fair_queue_len(const char *name);
size_t fair_live_keys(const char *name);
long long fair_pttl(const char *name);

/* A fair waiter on a thread: acquire(wait_ms), note what it got, hold
 * hold_ms (after go_release, if set), release. */
typedef struct waiter {
    dlock_lock *lock;
    int64_t wait_ms;
    int hold_ms;            /* hold this long, then release; < 0: keep it */
    atomic_int *turn;       /* shared: order of acquisition */
    atomic_int *go_release; /* if set, wait for it before releasing */
    atomic_int started;
    atomic_int done;
    int rc;
    int order;
    uint64_t fence;
    int64_t validity_ms;
    int64_t done_us;
    char token[DLOCK_TOKEN_MAX + 1];
    int release_rc;
} waiter;

void fair_start_waiter(pthread_t *t, waiter *w, dlock_lock *l, int64_t wait_ms, int hold_ms);

/* A forked process that waits in line for `name` (fair, lock TTL ttl_ms)
 * for wait_ms, then exits 3 if it got the lock, 4 if it timed out, 2 on
 * anything else. The fork is safe while this process runs none of the
 * library's threads; the child starts its own when `wakeups`.
 * fork_fair_waiter: one that waits until it is killed, with no threads. */
pid_t fork_fair_child(const char *name, int64_t ttl_ms, int wakeups, int64_t wait_ms);
pid_t fork_fair_waiter(const char *name, int64_t ttl_ms);

/* The waiter got the lock straight from the holder's release at t0_us:
 * within bound_us, with the next fencing token, and it released it,
 * leaving neither a line nor a key behind. */
void fair_assert_handed_over(const waiter *w, const char *name, uint64_t fence0, int64_t t0_us,
                             int64_t bound_us);

#endif
