/* SPDX-License-Identifier: BSD-3-Clause */
/* A 20 ms ticker on an engine loop (loop.h): each tick notes the longest
 * gap since the one before. A request that blocked its loop shows as a
 * long gap; one that leaves it free keeps the gaps near 20 ms. */
#ifndef DLOCK_TEST_LOOP_TICKER_H
#define DLOCK_TEST_LOOP_TICKER_H

#include <stdint.h>

#include "loop.h"

typedef struct test_ticker {
    dlock__loop *loop;
    dlock__timer timer;
    int ticks;
    int64_t last_ns, max_gap_ns;
} test_ticker;

/* Start ticking on loop (the first tick 20 ms from now). */
void test_ticker_start(test_ticker *t, dlock__loop *loop);
/* Stop (safe to call twice). */
void test_ticker_stop(test_ticker *t);

#endif
