/* SPDX-License-Identifier: BSD-3-Clause */
/* An observer (dlock_observer) that records every event it is given, for
 * the tests of the hooks (test_observer.c, test_observe_faults.c). The
 * events live only for their call, so each is copied, and its strings
 * with it; hooks may run on several threads (the caller's, the
 * watchdog's, the wake-up thread's), so the recorder takes a mutex. */
#ifndef DLOCK_TEST_RECORDER_H
#define DLOCK_TEST_RECORDER_H

#include <pthread.h>

#include "dlock.h"

#define TEST_REC_MAX 64

typedef struct test_recorder {
    pthread_mutex_t mu; /* first: test_rec_seen() copies what follows it */
    pthread_t caller;   /* node events on this thread are flagged */
    int n_start, n_end, n_hold, n_round, n_node, n_wake;
    dlock_acquire_event start[TEST_REC_MAX], end[TEST_REC_MAX];
    char start_name[TEST_REC_MAX][64], end_name[TEST_REC_MAX][64], end_kind[TEST_REC_MAX][32],
        end_backend[TEST_REC_MAX][16], hold_name[TEST_REC_MAX][64],
        node_name[TEST_REC_MAX][300];
    dlock_hold_event hold[TEST_REC_MAX];
    dlock_renewal_event round[TEST_REC_MAX];
    dlock_node_event node[TEST_REC_MAX];
    int node_on_caller[TEST_REC_MAX]; /* 1: on the thread test_rec_reset() ran on */
    dlock_wakeup_event wake[TEST_REC_MAX];
} test_recorder;

/* Records into the one recorder (its arg); give it as
 * dlock_client_options.observer. Every hook is set. */
extern const dlock_observer test_rec_observer;

/* Forget every event; node events on the calling thread are flagged
 * from now on. */
void test_rec_reset(void);

/* A copy of what was recorded so far, taken under the mutex (a static
 * copy's: valid until the next call). */
test_recorder test_rec_seen(void);

#endif
