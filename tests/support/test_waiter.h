/* SPDX-License-Identifier: BSD-3-Clause */
/* A thread that waits for a lock: the waiter that several test files each
 * wrote for themselves. test_waiter_start() starts a thread that runs
 * dlock_lock_acquire(lock, wait_ms), notes when it began and returned and
 * what it returned, and (with TEST_WAITER_RELEASE) releases a lock it got.
 * The fields the thread writes are atomics: the main thread may poll
 * `done` while it runs. Nothing here asserts (it runs off the main
 * thread); the caller asserts on what test_waiter_join() hands back. */
#ifndef DLOCK_TEST_WAITER_H
#define DLOCK_TEST_WAITER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "dlock.h"

enum { TEST_WAITER_KEEP = 0, TEST_WAITER_RELEASE = 1 };
/* rc until the acquire returns (no dlock code). */
#define TEST_WAITER_PENDING 99

typedef struct test_waiter {
    dlock_lock *lock;
    int64_t wait_ms;
    int release;               /* TEST_WAITER_RELEASE: release after a grant */
    pthread_t thread;
    atomic_int started;        /* the thread runs */
    atomic_int done;           /* dlock_lock_acquire() returned */
    atomic_int rc;             /* what it returned; TEST_WAITER_PENDING before */
    _Atomic int64_t start_ms;  /* test_now_ms() before the acquire */
    _Atomic int64_t done_ms;   /* ... and when it returned */
} test_waiter;

/* Start the thread; 0, or the pthread_create() error. */
int test_waiter_start(test_waiter *w, dlock_lock *lock, int64_t wait_ms, int release);
/* Join it; returns what dlock_lock_acquire() returned (or the join error
 * as a positive number). */
int test_waiter_join(test_waiter *w);
/* How long the acquire took (valid once done). */
int64_t test_waiter_took_ms(const test_waiter *w);

#endif
