/* SPDX-License-Identifier: BSD-3-Clause */
/* The waiting thread of test_waiter.h. */
#include <string.h>

#include "proc.h"
#include "test_waiter.h"

static void *run(void *arg)
{
    test_waiter *w = arg;
    atomic_store(&w->start_ms, test_now_ms());
    atomic_store(&w->started, 1);
    int rc = dlock_lock_acquire(w->lock, w->wait_ms);
    atomic_store(&w->done_ms, test_now_ms());
    atomic_store(&w->rc, rc);
    if (rc == DLOCK_OK && w->release)
        dlock_lock_release(w->lock);
    atomic_store(&w->done, 1);
    return NULL;
}

int test_waiter_start(test_waiter *w, dlock_lock *lock, int64_t wait_ms, int release)
{
    memset(w, 0, sizeof *w);
    w->lock = lock;
    w->wait_ms = wait_ms;
    w->release = release;
    atomic_init(&w->started, 0);
    atomic_init(&w->done, 0);
    atomic_init(&w->rc, TEST_WAITER_PENDING);
    atomic_init(&w->start_ms, 0);
    atomic_init(&w->done_ms, 0);
    return pthread_create(&w->thread, NULL, run, w);
}

int test_waiter_join(test_waiter *w)
{
    int e = pthread_join(w->thread, NULL);
    return e ? e : atomic_load(&w->rc);
}

int64_t test_waiter_took_ms(const test_waiter *w)
{
    return atomic_load(&w->done_ms) - atomic_load(&w->start_ms);
}
