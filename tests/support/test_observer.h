/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_election_observe() on a thread of its own, its reports counted
 * (test_election_faults, test_election_resign): how many, the last fence,
 * and observe's code and when it returned. */
#ifndef DLOCK_TEST_OBSERVER_H
#define DLOCK_TEST_OBSERVER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock.h"

typedef struct test_obs {
    dlock_election *e;
    int64_t wait_ms;
    pthread_mutex_t mu;
    int calls;
    uint64_t fence;
    int rc, done;        /* observe's code, once it returned */
    int64_t returned_ms; /* test_now_ms() then */
    pthread_t t;
} test_obs;

/* The callback itself, for a test's own observe call on o. */
int test_obs_on_leader(void *arg, uint64_t fence, const char *value, size_t len);
/* Start observing e with wait_ms (as dlock_election_observe() takes it). */
void test_obs_start(test_obs *o, dlock_election *e, int64_t wait_ms);
/* The reports so far, and the last one's fence into *fence (if not NULL). */
int test_obs_calls(test_obs *o, uint64_t *fence);
/* Whether observe has returned. */
int test_obs_done(test_obs *o);
/* Wait up to 10 s for the first report; exactly one by then. */
void test_obs_first_report(test_obs *o);
/* Join the thread (observe must have returned or be cancelled). */
void test_obs_join(test_obs *o);

#endif
