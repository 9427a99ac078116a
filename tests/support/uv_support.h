/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers for tests of looped clients on libuv (tests/loop/): the libuv
 * test driver (loop_driver.h) and the loop_driver helpers on a given
 * uv_loop_t. */
#ifndef TEST_UV_SUPPORT_H
#define TEST_UV_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "dlock.h"
#include "loop_driver.h"

/* The libuv tests' names for the shared helpers (loop_driver.h), kept so
 * that they read as before the drivers came. */
typedef test_loop_result test_uv_result;
#define test_uv_done test_loop_done
#define test_uv_now_ms test_loop_now_ms
#define test_uv_threads test_loop_threads

/* The driver: its loop is the one the test_uv_ helpers below were last
 * handed, or its own (open()). */
extern const test_loop_driver test_uv_driver;

/* A client of urls with options o (its loop set here, to loop's hooks):
 * 0, or -1 (the message on stderr). */
int test_uv_client_with(dlock_client **out, uv_loop_t *loop, const char *const *urls, size_t n,
                        dlock_client_options *o);

/* A client of url on loop through <dlock/libuv.h>, with io and connect
 * timeouts of timeout_ms: 0, or -1. */
int test_uv_client(dlock_client **out, uv_loop_t *loop, const char *url, int timeout_ms);

/* A handle for name on c with ttl_ms and flags (the other options the
 * defaults), or NULL. */
dlock_lock *test_uv_lock(dlock_client *c, const char *name, int64_t ttl_ms, unsigned flags);

/* uv_loop_init(loop) and test_uv_client() on it: 0, or -1. */
int test_uv_open(uv_loop_t *loop, dlock_client **out, const char *url, int timeout_ms);

/* dlock_client_free(*cl) (*cl NULL after), then turn loop until nothing
 * of dlock's is left on it (test_uv_drain) and close it: 0, or -1 (a
 * watcher still there after max_ms, or the loop would not close). */
int test_uv_close(uv_loop_t *loop, dlock_client **cl, int max_ms);

/* test_loop_wait(), test_loop_turn(), test_loop_drain() on loop. */
int test_uv_wait(uv_loop_t *loop, test_loop_result *r, int max_ms);
void test_uv_turn(uv_loop_t *loop, int ms);
int test_uv_drain(uv_loop_t *loop, int max_ms);

/* A uv timer ticking every period_ms on the loop: a callback that blocks
 * the loop shows as a gap between two ticks longer than the period. */
typedef struct test_uv_ticker {
    uv_timer_t t;
    int64_t last_ms, longest_gap_ms;
} test_uv_ticker;

void test_uv_ticker_start(uv_loop_t *loop, test_uv_ticker *k, uint64_t period_ms);
/* Stop it (closed: k may go once the loop turned once more). */
void test_uv_ticker_stop(test_uv_ticker *k);

#endif
