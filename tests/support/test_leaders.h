/* SPDX-License-Identifier: BSD-3-Clause */
/* An election's observer on a thread of its own, recording what
 * dlock_election_observe() reports (test_election, test_etcd_election):
 * each leader's fence, value (cut to 31 bytes) and the time it came. */
#ifndef DLOCK_TEST_LEADERS_H
#define DLOCK_TEST_LEADERS_H

#include <pthread.h>
#include <stdint.h>

#include "dlock.h"

#define TEST_LEADERS_MAX 32

typedef struct test_leaders {
    pthread_mutex_t mu;
    int n; /* under mu, as the arrays */
    uint64_t fence[TEST_LEADERS_MAX];
    char value[TEST_LEADERS_MAX][32];
    int64_t at_ms[TEST_LEADERS_MAX];
    dlock_election *e;
    int rc; /* observe's return, once stopped */
    pthread_t thread;
} test_leaders;

/* Observe e (which the caller keeps) on a new thread. */
void test_leaders_start(test_leaders *s, dlock_election *e);
/* Wait until n leaders were reported, max_ms at most (the test fails
 * otherwise); the time the n-th came, in test_now_ms() ms, minus from_ms. */
int64_t test_leaders_wait(test_leaders *s, int n, int64_t from_ms, int max_ms);
/* dlock_election_cancel(), then join: observe must have returned
 * DLOCK_ECANCELED. */
void test_leaders_stop(test_leaders *s);
/* The callback itself, for a test's own observe call. */
int test_leaders_on_leader(void *arg, uint64_t fence, const char *value, size_t len);

#endif
