/* SPDX-License-Identifier: BSD-3-Clause */
/* Fair mode test helpers (fair_line.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "fair_line.h"
#include "test_util.h"

dlock_client *fair_client(int wakeups)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.wakeups = wakeups;
    return test_client_for(&test_srv, &o);
}

dlock_lock *new_fair(dlock_client *c, const char *name, int64_t ttl_ms)
{
    return test_lock_new(c, name, ttl_ms, DLOCK_FAIR, 1000, 5000);
}

/* ---- server-side helpers ------------------------------------------------ */

long long fair_queue_len(const char *name)
{
    char q[256];
    size_t n_q = test_helper_key(q, sizeof q, name, "q");
    redisReply *r = test_cmd_bin(&test_srv, "LLEN %b", q, n_q);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* Waiters' liveness keys present now. */
size_t fair_live_keys(const char *name)
{
    char pat[256];
    size_t n_pat = test_helper_key(pat, sizeof pat, name, "w");
    memcpy(pat + n_pat, "\0*", 3);
    redisReply *r = test_cmd_bin(&test_srv, "KEYS %b", pat, n_pat + 2);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    size_t n = r->elements;
    freeReplyObject(r);
    return n;
}

/* ---- a fair waiter on a thread ------------------------------------------ */


static void *fair_wait(void *arg)
{
    waiter *w = arg;
    atomic_store(&w->started, 1);
    w->rc = dlock_lock_acquire(w->lock, w->wait_ms);
    w->done_us = test_now_us();
    if (w->rc == DLOCK_OK) {
        if (w->turn)
            w->order = atomic_fetch_add(w->turn, 1);
        w->fence = dlock_lock_fence(w->lock);
        w->validity_ms = dlock_lock_validity_ms(w->lock);
        snprintf(w->token, sizeof w->token, "%s", dlock_lock_token(w->lock));
    }
    atomic_store(&w->done, 1);
    if (w->rc != DLOCK_OK || w->hold_ms < 0)
        return NULL;
    if (w->go_release)
        while (!atomic_load(w->go_release))
            test_sleep_ms(1);
    test_sleep_ms(w->hold_ms);
    w->release_rc = dlock_lock_release(w->lock);
    return NULL;
}

void fair_start_waiter(pthread_t *t, waiter *w, dlock_lock *l, int64_t wait_ms, int hold_ms)
{
    w->lock = l;
    w->wait_ms = wait_ms;
    w->hold_ms = hold_ms;
    w->rc = 99;
    assert_int_equal(pthread_create(t, NULL, fair_wait, w), 0);
    while (!atomic_load(&w->started))
        test_sleep_ms(1);
}

/* A forked process that waits in line for `name` (fair, lock TTL ttl_ms)
 * for wait_ms, then exits 3 if it got the lock, 4 if it timed out, 2 on
 * anything else. The fork is safe while this process runs none of the
 * library's threads; the child starts its own when `wakeups`. */
pid_t fork_fair_child(const char *name, int64_t ttl_ms, int wakeups, int64_t wait_ms)
{
    pid_t pid = test_fork_child();
    if (pid == 0) {
        dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
        dlock_client *cc = NULL;
        dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
        dlock_lock *l = NULL;
        const char *urls[] = {test_srv.url};
        o.wakeups = wakeups;
        lo.ttl_ms = ttl_ms;
        lo.flags = DLOCK_FAIR;
        if (dlock_client_new(&cc, urls, 1, &o, NULL, 0) != DLOCK_OK ||
            dlock_lock_new(&l, cc, name, &lo) != DLOCK_OK)
            _exit(2);
        int rc = dlock_lock_acquire(l, wait_ms);
        _exit(rc == DLOCK_OK ? 3 : rc == DLOCK_ETIMEDOUT ? 4 : 2);
    }
    return pid;
}

/* Waits in line until it is killed; no threads (wakeups off). */
pid_t fork_fair_waiter(const char *name, int64_t ttl_ms)
{
    return fork_fair_child(name, ttl_ms, 0, 60000);
}

/* The waiter got the lock straight from the holder's release at t0_us:
 * within bound_us, with the next fencing token, and it released it, leaving
 * neither a queue nor a key behind. */
void fair_assert_handed_over(const waiter *w, const char *name, uint64_t fence0,
                             int64_t t0_us, int64_t bound_us)
{
    assert_int_equal(w->rc, DLOCK_OK);
    assert_int_equal(w->fence, fence0 + 1);
    assert_true(w->done_us - t0_us < bound_us);
    assert_int_equal(w->release_rc, DLOCK_OK);
    assert_int_equal(fair_queue_len(name), 0);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
}

long long fair_pttl(const char *name)
{
    redisReply *r = test_cmd_bin(&test_srv, "PTTL %b", name, strlen(name));
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

