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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(a_stalled_round_does_not_hold_back_another_locks_renewal, setup),
    };
    return cmocka_run_group_tests(tests, test_nodes_setup, test_nodes_teardown);
}
