/* SPDX-License-Identifier: BSD-3-Clause */
/* An election's observer on a thread of its own, recording what
 * dlock_election_observe() reports (test_election, test_etcd_election):
 * each leader's fence, value (cut to 31 bytes) and the time it came. */
#ifndef DLOCK_TEST_LEADERS_H
#define DLOCK_TEST_LEADERS_H

#include <pthread.h>
#include <stdatomic.h>
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

/* A new election on c with terms of ttl_ms (the test fails otherwise). */
dlock_election *test_election_new(dlock_client *c, const char *name, int64_t ttl_ms);

/* A campaign on a thread of its own (wait 20 s): its return and when. */
typedef struct test_campaigner {
    dlock_election *e;
    const char *value;
    int rc;
    _Atomic int64_t done_ms; /* 0 until it returned */
} test_campaigner;

void *test_campaign_thread(void *arg);

/* dlock_election_leader() shows fence (0: nobody; any fence > 0 if
 * any_fence) and value, in full. */
void test_expect_leader(dlock_election *e, uint64_t fence, const char *value, int any_fence);

/* Campaign, proclaim and resign on client c, election `name`: a leads
 * and proclaims (b reads each value with a's fence), b's try-once is
 * DLOCK_ENOTACQUIRED, b stands by and leads within push_ms of a's resign
 * with a larger fence, and nobody leads after b's resign
 * (test_election, test_election_redlock). */
void test_leaders_hand_over(dlock_client *c, const char *name, int64_t ttl_ms, int push_ms);

/* The store-independent body of "observe sees every change in order"
 * (test_election on Redis, test_election_redlock, test_zk_election on
 * ZooKeeper): on client c, election `name` (its terms' ttl_ms), an
 * observer sees nobody, a's campaign, a's proclaim, the hand-over to b at
 * a's resign and b's resign, in order, each within push_ms of it, with
 * the fences each term should have; gap: the store keeps no fair line
 * (a Redlock), so the hand-over may show nobody between a and b (one
 * report more, allowed there only); then a timed observe ends and a
 * cancel of an observe only leaves the next campaign alone. */
void test_leaders_observe_changes(dlock_client *c, const char *name, int64_t ttl_ms,
                                  int push_ms, int gap);

#endif
