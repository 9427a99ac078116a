/* SPDX-License-Identifier: BSD-3-Clause */
/* One loop library as the looped-client tests see it (tests/loop/): a
 * small driver per adapter (<dlock/libuv.h>, <dlock/libevent.h>,
 * <dlock/poll.h>) so that one test body (loop_locks.c) runs on each. */
#ifndef TEST_LOOP_DRIVER_H
#define TEST_LOOP_DRIVER_H

#include <stdint.h>

#include "dlock.h"

typedef struct test_loop_driver {
    const char *name; /* "uv", "event", "poll" */
    /* Make a fresh loop: 0, or -1. */
    int (*open)(void);
    /* The adapter's hooks for it. */
    dlock_loop (*hooks)(void);
    /* One turn of the loop, waiting at most max_ms for something. */
    void (*turn)(int max_ms);
    /* 1 when nothing is on the loop (no watcher of dlock's, none closing). */
    int (*idle)(void);
    /* Free the loop, which must be idle: 0, or -1. */
    int (*close)(void);
} test_loop_driver;

/* What a _start verb's callback got (test_loop_done's arg). */
typedef struct test_loop_result {
    int calls;
    int rc;
    dlock_lock *lock;
} test_loop_result;

/* A dlock_done_fn that records into arg (a test_loop_result). */
void test_loop_done(dlock_lock *lock, int rc, void *arg);

/* A client of url on d's loop, with io and connect timeouts of
 * timeout_ms: 0, or -1. */
int test_loop_client(const test_loop_driver *d, dlock_client **out, const char *url,
                     int timeout_ms);

/* The same for the nodes urls[0..n) (a Redlock with n > 1). */
int test_loop_client_n(const test_loop_driver *d, dlock_client **out, const char *const *urls,
                       size_t n, int timeout_ms);

/* d->open() and test_loop_client(): 0, or -1. */
int test_loop_open(const test_loop_driver *d, dlock_client **out, const char *url,
                   int timeout_ms);

/* d->open() and test_loop_client_n(): 0, or -1. */
int test_loop_open_n(const test_loop_driver *d, dlock_client **out, const char *const *urls,
                     size_t n, int timeout_ms);

/* dlock_client_free(*cl) (*cl NULL after), test_loop_drain() and
 * d->close(): 0, or -1 (something still on the loop after max_ms, or it
 * would not close). */
int test_loop_close(const test_loop_driver *d, dlock_client **cl, int max_ms);

/* Turn the loop until r has its first call, at most max_ms: r->rc, or
 * -999 if none came in time. */
int test_loop_wait(const test_loop_driver *d, test_loop_result *r, int max_ms);

/* Turn the loop for ms milliseconds. */
void test_loop_turn(const test_loop_driver *d, int ms);

/* Turn the loop until it is idle (0), or max_ms passed (-1: something of
 * dlock's is still on it). */
int test_loop_drain(const test_loop_driver *d, int max_ms);

int64_t test_loop_now_ms(void);

/* Threads of this process (/proc/self/status). */
int test_loop_threads(void);

/* The looped-lock tests (loop_locks.c) on d against a redis-server of
 * their own: cmocka's exit code. */
int test_loop_locks_run(const test_loop_driver *d);

#endif
