/* SPDX-License-Identifier: BSD-3-Clause */
/* Handles of one libuv loop contending (tests/loop/): each takes its lock,
 * holds it 2-4 ms (a uv timer), gives it back and goes again, all at once,
 * while a board checks every grant and release as it comes (one thread:
 * no two writers of a name, at most N permits, no reader beside a writer,
 * fences rising). */
#ifndef TEST_UV_CONTEND_H
#define TEST_UV_CONTEND_H

#include <stdint.h>
#include <uv.h>

#include "dlock.h"

#define TEST_UV_MAX_NAMES 128

typedef struct test_uv_board {
    int writers[TEST_UV_MAX_NAMES];
    int readers[TEST_UV_MAX_NAMES];
    uint64_t fence[TEST_UV_MAX_NAMES];
    unsigned permits; /* a semaphore's N (0: not one) */
    int fenced;       /* fences must rise (exclusive kinds) */
    int violations;
    int done, failed; /* workers done; cycles that failed */
    int starts_refused;
    int still_pending; /* handles with a request pending at the end */
    int64_t longest_ms;
    int64_t longest_gap_ms; /* between two ticks of a 10 ms uv timer beside them */
    int fail_rc;          /* the first failure's code ... */
    char fail_msg[200];   /* ... and the handle's message */
} test_uv_board;

/* Worker i's handle, on board name `name`: make() sets *reader for a
 * shared lock's reader and *name2 (else -1) for a set's second name. */
typedef dlock_lock *(*test_uv_make_fn)(void *arg, int i, int name, int *reader, int *name2);

/* n workers on names i % n_names, `cycles` cycles each, for at most
 * max_ms; then every handle freed. Prints a line; the caller checks b. */
void test_uv_contend(uv_loop_t *loop, test_uv_board *b, int n, int n_names, int cycles,
                     int max_ms, test_uv_make_fn make, void *arg);

#endif
