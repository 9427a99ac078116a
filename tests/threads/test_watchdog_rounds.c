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

#include <stdatomic.h>
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

/* A lock renewed every second with a 30 s lease. */
static dlock_lock_options renewed_opts(void)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 30000;
    o.renew_interval_ms = 1000;
    o.flags = DLOCK_AUTO_RENEW;
    return o;
}

/* Make key's next rounds undecided: node 0 holds it under another token
 * (a no), node 1 is stopped (no answer until the I/O timeout), node 2
 * renews it (a yes). The test resumes node 1. */
static void undecided(const char *key)
{
    assert_int_equal(test_cmd_int(&test_nodes[0], "DEL %s", key), 1);
    assert_int_equal(test_cmd_int(&test_nodes[0], "SETNX %s %s", key, "someone-else"), 1);
    test_redis_pause(&test_nodes[1]);
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
    dlock_lock_options oa = renewed_opts();
    dlock_lock *a = test_lock_with(c, "rounds:a", &oa);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    undecided("rounds:a");
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
    dlock_lock_options oc = renewed_opts();
    dlock_lock *cl = test_lock_with(c, "rounds:c", &oc);
    dlock_lock_options oa = oc;
    oa.ttl_ms = 1800;
    dlock_lock *a = test_lock_with(c, "rounds:short", &oa);
    assert_int_equal(dlock_lock_acquire(cl, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    int64_t t0 = test_now_ms();
    undecided("rounds:c");
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

static atomic_int b_released;

/* A's on_lost forgets B, whose round is still in flight: on the
 * watchdog's thread the round lets B go instead of being waited for. */
static void forget_b(dlock_lock *lock, dlock_lost_reason reason, void *arg)
{
    (void)lock;
    (void)reason;
    (void)dlock_lock_forget(arg);
    atomic_store(&b_released, 1);
}

/* The handle of a lock let go from its round in flight is freed from
 * another thread about 2 s before that round ends: the round never
 * touches it again (ASan: heap-use-after-free in settle() when let_go()
 * leaves the item's record), and the client frees after it. B's round
 * waits for the stopped node 1 (node 0 holds B's key under another
 * token); A, taken while it is in flight, is lost at its first round
 * (another token on nodes 0 and 2) and its on_lost forgets B on the
 * watchdog's thread, which sends nothing and returns at once. */
static void a_handle_let_go_from_a_round_in_flight_is_freed_safely(void **state)
{
    (void)state;
    atomic_store(&b_released, 0);
    dlock_client *c = test_client_timeouts(test_nodes, N3, 1000, 3000);
    dlock_lock_options ob = renewed_opts();
    dlock_lock *b = test_lock_with(c, "rounds:b2", &ob);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    undecided("rounds:b2");
    test_sleep_ms(1300); /* B's round is in flight */
    dlock_lock_options oa = ob;
    oa.renew_interval_ms = 300;
    oa.on_lost = forget_b;
    oa.on_lost_arg = b;
    dlock_lock *a = test_lock_with(c, "rounds:a2", &oa);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    for (int i = 0; i < N3; i += 2) {
        assert_int_equal(test_cmd_int(&test_nodes[i], "DEL %s", "rounds:a2"), 1);
        assert_int_equal(test_cmd_int(&test_nodes[i], "SETNX %s %s", "rounds:a2", "x"), 1);
    }
    for (int i = 0; i < 400 && !atomic_load(&b_released); i++)
        test_sleep_ms(10);
    assert_true(atomic_load(&b_released));
    dlock_lock_free(b); /* B's round may still be in flight */
    dlock_lock_free(a);
    dlock_stats s0, s1;
    assert_int_equal(dlock_client_stats(c, &s0, sizeof s0), DLOCK_OK);
    test_sleep_ms(3500); /* B's round is over */
    assert_int_equal(dlock_client_stats(c, &s1, sizeof s1), DLOCK_OK);
    test_redis_resume(&test_nodes[1]);
    print_message("rounds over after B was freed: %llu\n",
                  (unsigned long long)(s1.renewal_rounds - s0.renewal_rounds));
    dlock_client_free(c);
}

static atomic_int in_slow_lost, slow_lost_done;

/* A slow on_lost that reads its handle after a while. */
static void slow_lost(dlock_lock *lock, dlock_lost_reason reason, void *arg)
{
    (void)reason;
    (void)arg;
    atomic_store(&in_slow_lost, 1);
    test_sleep_ms(300);
    (void)dlock_lock_state_get(lock);
    (void)dlock_lock_name(lock);
    atomic_store(&slow_lost_done, 1);
}

/* dlock_lock_free() from another thread while the lock's on_lost runs on
 * the watchdog's: the free waits for the callback (ASan would see the
 * callback read a freed handle). */
static void a_free_during_on_lost_waits_for_it(void **state)
{
    (void)state;
    atomic_store(&in_slow_lost, 0);
    atomic_store(&slow_lost_done, 0);
    dlock_client *c = test_client_timeouts(test_nodes, N3, 1000, 1000);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 900;
    o.flags = DLOCK_AUTO_RENEW;
    o.on_lost = slow_lost;
    dlock_lock *l = test_lock_with(c, "rounds:slowlost", &o);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    for (int i = 0; i < N3; i++)
        (void)test_cmd_int(&test_nodes[i], "DEL %s", "rounds:slowlost");
    for (int i = 0; i < 300 && !atomic_load(&in_slow_lost); i++)
        test_sleep_ms(10);
    assert_true(atomic_load(&in_slow_lost));
    int64_t t = test_now_ms();
    dlock_lock_free(l);
    int done = atomic_load(&slow_lost_done);
    print_message("free during on_lost took %lld ms; callback over: %d\n",
                  (long long)(test_now_ms() - t), done);
    assert_true(done);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(a_stalled_round_does_not_hold_back_another_locks_renewal, setup),
        cmocka_unit_test_setup(a_decided_lock_does_not_wait_for_an_undecided_one, setup),
        cmocka_unit_test_setup(a_handle_let_go_from_a_round_in_flight_is_freed_safely, setup),
        cmocka_unit_test_setup(a_free_during_on_lost_waits_for_it, setup),
    };
    return cmocka_run_group_tests(tests, test_nodes_setup, test_nodes_teardown);
}
