/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers for tests of looped clients on libuv (tests/loop/). */
#ifndef TEST_UV_SUPPORT_H
#define TEST_UV_SUPPORT_H

#include <stdint.h>
#include <uv.h>

#include "dlock.h"

/* What a _start verb's callback got (test_uv_done's arg). */
typedef struct test_uv_result {
    int calls;
    int rc;
    dlock_lock *lock;
} test_uv_result;

/* A dlock_done_fn that records into arg (a test_uv_result). */
void test_uv_done(dlock_lock *lock, int rc, void *arg);

/* A client of url on loop through <dlock/libuv.h>, with io and connect
 * timeouts of timeout_ms: 0, or -1. */
int test_uv_client(dlock_client **out, uv_loop_t *loop, const char *url, int timeout_ms);

/* A client of urls with options o (its loop set here, to loop): 0, or -1
 * (the message on stderr). */
int test_uv_client_with(dlock_client **out, uv_loop_t *loop, const char *const *urls, size_t n,
                        dlock_client_options *o);

/* A handle for name on c with ttl_ms and flags (the other options the
 * defaults), or NULL. */
dlock_lock *test_uv_lock(dlock_client *c, const char *name, int64_t ttl_ms, unsigned flags);

/* uv_loop_init(loop) and test_uv_client() on it: 0, or -1. */
int test_uv_open(uv_loop_t *loop, dlock_client **out, const char *url, int timeout_ms);

/* dlock_client_free(*cl) (*cl NULL after), then turn loop until nothing
 * of dlock's is left on it (test_uv_drain) and close it: 0, or -1 (a
 * watcher still there after max_ms, or the loop would not close). */
int test_uv_close(uv_loop_t *loop, dlock_client **cl, int max_ms);

/* Turn loop until r has its first call, at most max_ms: r->rc, or -999
 * if none came in time. */
int test_uv_wait(uv_loop_t *loop, test_uv_result *r, int max_ms);

/* Turn loop for ms milliseconds. */
void test_uv_turn(uv_loop_t *loop, int ms);

/* Turn loop until it has no active watcher left (0), or max_ms passed
 * (-1: something of dlock's is still on it). */
int test_uv_drain(uv_loop_t *loop, int max_ms);

int64_t test_uv_now_ms(void);

/* A uv timer ticking every period_ms on the loop: a callback that blocks
 * the loop shows as a gap between two ticks longer than the period. */
typedef struct test_uv_ticker {
    uv_timer_t t;
    int64_t last_ms, longest_gap_ms;
} test_uv_ticker;

void test_uv_ticker_start(uv_loop_t *loop, test_uv_ticker *k, uint64_t period_ms);
/* Stop it (closed: k may go once the loop turned once more). */
void test_uv_ticker_stop(test_uv_ticker *k);

/* Threads of this process (/proc/self/status). */
int test_uv_threads(void);

#endif
