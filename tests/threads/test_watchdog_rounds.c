/* SPDX-License-Identifier: BSD-3-Clause */
/* A renewal round is a request on the watchdog's loop (watchdog.c,
 * renew_round.c): while one round waits out a stalled node, the thread
 * goes on renewing the other locks on schedule. Three real redis-server
 * processes of the Redlock fixtures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

#define N3 3

static int setup(void **state)
{
    if (test_nodes_revive(state) != 0)
        return -1;
    for (int i = 0; i < N3; i++)
        if (test_flushall(&test_nodes[i]) != 0)
            return -1;
    return 0;
}

/* Lock A's round cannot decide: node 0 holds A's key under another token
 * (a no), node 1 is stopped (no answer), node 2 renews it (a yes), so the
 * round waits for node 1 until the I/O timeout (3 s). Lock B, taken while
 * that round is in flight with a 900 ms lease (renewed every 300 ms), must
 * be renewed meanwhile: a watchdog thread blocked in A's round lets B's
 * lease run out (its key expires on nodes 0 and 2 about 900 ms after the
 * grant). */
static void a_stalled_round_does_not_hold_back_another_locks_renewal(void **state)
{
    (void)state;
    dlock_client *c = test_client_timeouts(test_nodes, N3, 1000, 3000);
    dlock_lock_options oa = DLOCK_LOCK_OPTIONS_INIT;
    oa.ttl_ms = 30000;
    oa.renew_interval_ms = 1000;
    oa.flags = DLOCK_AUTO_RENEW;
    dlock_lock *a = test_lock_with(c, "rounds:a", &oa);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(test_cmd_int(&test_nodes[0], "DEL %s", "rounds:a"), 1);
    assert_int_equal(test_cmd_int(&test_nodes[0], "SETNX %s %s", "rounds:a", "someone-else"), 1);
    test_redis_pause(&test_nodes[1]);
    /* A's first round goes out about 900 ms after its grant. */
    test_sleep_ms(1300);
    dlock_lock *b = test_lock_new(c, "rounds:b", 900, DLOCK_AUTO_RENEW, 5, 50);
    dlock_stats s0, s1;
    assert_int_equal(dlock_client_stats(c, &s0, sizeof s0), DLOCK_OK);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    /* Until A's round is over (about 3.9 s after A's grant): B's key on
     * nodes 0 and 2 all along, its handle held. */
    int held = 1, on0 = 1, on2 = 1;
    while (test_now_ms() - t0 < 1800 && held && on0 && on2) {
        test_sleep_ms(50);
        held = dlock_lock_state_get(b) == DLOCK_STATE_HELD;
        on0 = test_key_exists(&test_nodes[0], "rounds:b") == 1;
        on2 = test_key_exists(&test_nodes[2], "rounds:b") == 1;
    }
    int64_t seen = test_now_ms() - t0;
    assert_int_equal(dlock_client_stats(c, &s1, sizeof s1), DLOCK_OK);
    unsigned long long renewed = (unsigned long long)(s1.renewals - s0.renewals);
    print_message("B after %lld ms: %s, key on node 0: %d, on node 2: %d; %llu renewals "
                  "meanwhile\n", (long long)seen, held ? "held" : "not held", on0, on2, renewed);
    test_redis_resume(&test_nodes[1]);
    assert_true(held);
    assert_true(on0);
    assert_true(on2);
    /* Every 300 ms for 1.8 s: about 6 (A's round counts none: it is
     * still waiting). */
    assert_true(renewed >= 3);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(b);
    dlock_lock_free(a);
    dlock_client_free(c);
}

/* A decided lock must not wait for an undecided one in the same round.
 * Locks A (1800 ms lease, renewed every 1000 ms) and C (30 s lease, same
 * interval) are taken together, so their rounds merge. C's round cannot
 * decide (node 0 holds C's key under another token, node 1 is stopped,
 * node 2 renews it) and waits for node 1 until the I/O timeout (3 s). A
 * is renewed by nodes 0 and 2 at once (a majority), but while A sits in
 * that round nothing renews it again: its keys expire 1800 ms after the
 * round's start, and the verdict, applied only when the round ends, comes
 * after A's lease ended and calls A lost (DLOCK_LOST_NO_QUORUM), though a
 * majority renewed it in time and every node but the stopped one
 * answered. */
static void a_decided_lock_does_not_wait_for_an_undecided_one(void **state)
{
    (void)state;
    dlock_client *c = test_client_timeouts(test_nodes, N3, 1000, 3000);
    dlock_lock_options oc = DLOCK_LOCK_OPTIONS_INIT;
    oc.ttl_ms = 30000;
    oc.renew_interval_ms = 1000;
    oc.flags = DLOCK_AUTO_RENEW;
    dlock_lock *cl = test_lock_with(c, "rounds:c", &oc);
    dlock_lock_options oa = oc;
    oa.ttl_ms = 1800;
    dlock_lock *a = test_lock_with(c, "rounds:short", &oa);
    assert_int_equal(dlock_lock_acquire(cl, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    int64_t t0 = test_now_ms();
    assert_int_equal(test_cmd_int(&test_nodes[0], "DEL %s", "rounds:c"), 1);
    assert_int_equal(test_cmd_int(&test_nodes[0], "SETNX %s %s", "rounds:c", "someone-else"), 1);
    test_redis_pause(&test_nodes[1]);
    /* The round goes out about 900 ms after the grants and waits for node
     * 1 until about 3.9 s. Watch A until 3.5 s: its keys on nodes 0 and 2
     * must stay (a lease of 1800 ms, renewed every 1000 ms). */
    int on0 = 1, on2 = 1;
    while (test_now_ms() - t0 < 3500 && on0 && on2) {
        test_sleep_ms(50);
        on0 = test_key_exists(&test_nodes[0], "rounds:short") == 1;
        on2 = test_key_exists(&test_nodes[2], "rounds:short") == 1;
    }
    int64_t seen = test_now_ms() - t0;
    /* ...and after the round is over, A is still held. */
    while (test_now_ms() - t0 < 4500)
        test_sleep_ms(50);
    dlock_lock_state st = dlock_lock_state_get(a);
    test_redis_resume(&test_nodes[1]);
    print_message("A after %lld ms: key on node 0: %d, on node 2: %d; at 4.5 s: %s\n",
                  (long long)seen, on0, on2,
                  st == DLOCK_STATE_HELD ? "held" : st == DLOCK_STATE_LOST ? "lost" : "unlocked");
    assert_true(on0);
    assert_true(on2);
    assert_int_equal(st, DLOCK_STATE_HELD);
    (void)dlock_lock_release(a);
    (void)dlock_lock_release(cl);
    dlock_lock_free(a);
    dlock_lock_free(cl);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(a_stalled_round_does_not_hold_back_another_locks_renewal, setup),
        cmocka_unit_test_setup(a_decided_lock_does_not_wait_for_an_undecided_one, setup),
    };
    return cmocka_run_group_tests(tests, test_nodes_setup, test_nodes_teardown);
}
