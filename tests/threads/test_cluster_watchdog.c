/* SPDX-License-Identifier: BSD-3-Clause */
/* The watchdog on a Redis Cluster runs each master's round as a request of
 * its own on the watchdog's loop, all in flight at once
 * (src/engine/watchdog.c). An on_lost called by one master's round may
 * release a lock whose renewal is in another master's round still in
 * flight (a multi-name set over several masters releasing itself): on the
 * watchdog's thread that release cannot wait for the other round, which
 * goes on only once the callback returns (review 34 item 5 had it wait
 * when each round had a thread). The other round lets the record go
 * instead, and never touches it again. The records are the watchdog's
 * own (the test decides their verdicts); the cluster is real, gives their
 * keys their masters, and one master is stopped to keep a round in
 * flight. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "redis_server.h"

#include "dlock.h"
#include "proc.h"
#include "redis_topology.h"
#include "test_util.h"
#include "watchdog.h"

static test_cluster C;

static int group_setup(void **state)
{
    (void)state;
    return test_cluster_start(&C);
}

static int group_teardown(void **state)
{
    (void)state;
    test_cluster_stop(&C);
    return 0;
}

static dlock_client *client;
static dlock__renewal rec_a, rec_b;
static atomic_int a_in_lost, b_settled, b_lost_calls, b_settled_at_remove;
static _Atomic int64_t remove_ms;

static int64_t lease_end(void *owner)
{
    (void)owner;
    return test_now_ms() * 1000000 + 60 * INT64_C(1000000000);
}

/* A's key does not exist: its round says gone, and A is lost. */
static int settle_a(void *owner, const dlock__renew_votes *v)
{
    (void)owner;
    return v->no ? DLOCK_LOST_NOT_OWNER : 0;
}

/* A's on_lost releases B, whose round waits for its stopped master. */
static void a_lost(void *owner, int reason)
{
    (void)owner;
    (void)reason;
    int64_t t = test_now_ms();
    dlock__watchdog_remove(client, &rec_b);
    atomic_store(&remove_ms, test_now_ms() - t);
    atomic_store(&b_settled_at_remove, atomic_load(&b_settled));
    atomic_store(&a_in_lost, 1);
}

static int settle_b(void *owner, const dlock__renew_votes *v)
{
    (void)owner;
    (void)v;
    atomic_fetch_add(&b_settled, 1);
    return 0;
}

static void b_lost(void *owner, int reason)
{
    (void)owner;
    (void)reason;
    atomic_fetch_add(&b_lost_calls, 1);
}

static const dlock__renewal_ops ops_a = {lease_end, settle_a, a_lost, NULL};
static const dlock__renewal_ops ops_b = {lease_end, settle_b, b_lost, NULL};

/* A name whose key's master is not `not_master` (-1: any), by the
 * client's own slot map. */
static void pick_name(char *out, size_t len, int not_master)
{
    for (int k = 0; k < 1000; k++) {
        snprintf(out, len, "wd-%d", k);
        int m = test_cluster_master_of(&C, test_cluster_keyslot(&C, out));
        if (m >= 0 && m != not_master)
            return;
    }
    fail();
}

static void release_on_another_masters_lost_lets_that_round_go_of_it(void **state)
{
    (void)state;
    /* No failover while a master is stopped (as test_cluster's stall). */
    assert_int_equal(test_cluster_set_node_timeout(&C, 20000), 0);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = 1;
    o.io_timeout_ms = 1500;
    client = test_client_new(C.urls, TEST_CLUSTER_NODES, &o);
    /* Learn the slot map: the watchdog groups its rounds by it. */
    dlock_lock *warm = NULL;
    assert_int_equal(dlock_lock_new(&warm, client, "warm", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(warm, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(warm), DLOCK_OK);
    dlock_lock_free(warm);

    static char name_a[32], name_b[32];
    pick_name(name_a, sizeof name_a, -1);
    pick_name(name_b, sizeof name_b,
              test_cluster_master_of(&C, test_cluster_keyslot(&C, name_a)));
    int mb = test_cluster_master_of(&C, test_cluster_keyslot(&C, name_b));
    rec_a = (dlock__renewal){.ops = &ops_a, .key = name_a, .key_len = strlen(name_a),
                             .token = "t", .token_len = 1, .mode = "p", .ttl_ms = 30000,
                             .interval_ms = 10000};
    rec_b = (dlock__renewal){.ops = &ops_b, .key = name_b, .key_len = strlen(name_b),
                             .token = "t", .token_len = 1, .mode = "p", .ttl_ms = 30000,
                             .interval_ms = 10000};
    assert_int_equal(dlock__watchdog_start(client), DLOCK_OK);
    test_redis_pause(&C.node[mb]);
    /* Due together: one look, two masters, two rounds. */
    dlock__watchdog_add(client, &rec_b, 100);
    dlock__watchdog_add(client, &rec_a, 100);
    for (int i = 0; i < 1000 && !atomic_load(&a_in_lost); i++)
        usleep(5000);
    assert_true(atomic_load(&a_in_lost));
    /* B's round is over by the I/O timeout: two rounds counted. */
    dlock__watchdog_stats st = {0};
    for (int i = 0; i < 1000 && st.rounds < 2; i++) {
        usleep(5000);
        dlock__watchdog_get_stats(client, &st);
    }
    usleep(100 * 1000);
    test_redis_resume(&C.node[mb]);
    print_message("release of B in A's on_lost took %lld ms; B settled %d times, lost %d "
                  "times; %lu rounds\n", (long long)atomic_load(&remove_ms),
                  atomic_load(&b_settled), atomic_load(&b_lost_calls), st.rounds);
    assert_true(st.rounds >= 2);
    /* At once (B's round waits 1.5 s for its master), and B never heard
     * of its round again. */
    assert_true(atomic_load(&remove_ms) < 500);
    assert_int_equal(atomic_load(&b_settled_at_remove), 0);
    assert_int_equal(atomic_load(&b_settled), 0);
    assert_int_equal(atomic_load(&b_lost_calls), 0);
    dlock__watchdog_remove(client, &rec_a);
    dlock__watchdog_remove(client, &rec_b);
    dlock_client_free(client);
    assert_int_equal(test_cluster_set_node_timeout(&C, 1000), 0);
    assert_int_equal(test_cluster_wait_ok(&C, 30000), 0);
}

/* A stopped master's round waits for it up to the I/O timeout; the other
 * masters' rounds go on meanwhile. H (1500 ms lease, renewed every 500
 * ms) on a running master must keep its key while S's master is stopped
 * for 4 s with a 3 s I/O timeout. */
static void a_stopped_masters_round_does_not_hold_back_another_masters_locks(void **state)
{
    (void)state;
    assert_int_equal(test_cluster_set_node_timeout(&C, 20000), 0);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = 1;
    o.io_timeout_ms = 3000;
    dlock_client *c = test_client_new(C.urls, TEST_CLUSTER_NODES, &o);
    static char name_s[32], name_h[32];
    pick_name(name_s, sizeof name_s, -1);
    int ms = test_cluster_master_of(&C, test_cluster_keyslot(&C, name_s));
    pick_name(name_h, sizeof name_h, ms);
    int mh = test_cluster_master_of(&C, test_cluster_keyslot(&C, name_h));
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.flags = DLOCK_AUTO_RENEW;
    lo.ttl_ms = 1500;
    lo.renew_interval_ms = 500;
    dlock_lock *s = test_lock_with(c, name_s, &lo);
    dlock_lock *h = test_lock_with(c, name_h, &lo);
    assert_int_equal(dlock_lock_acquire(s, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h, 0), DLOCK_OK);
    test_redis_pause(&C.node[ms]);
    int64_t t0 = test_now_ms();
    int on = 1;
    while (test_now_ms() - t0 < 4000 && on) {
        test_sleep_ms(50);
        on = test_key_exists(&C.node[mh], name_h) == 1;
    }
    int64_t seen = test_now_ms() - t0;
    dlock_lock_state st = dlock_lock_state_get(h);
    test_redis_resume(&C.node[ms]);
    print_message("H after %lld ms with S's master stopped: key %d, %s\n", (long long)seen, on,
                  st == DLOCK_STATE_HELD ? "held" : "not held");
    assert_true(on);
    assert_int_equal(st, DLOCK_STATE_HELD);
    (void)dlock_lock_release(h);
    (void)dlock_lock_release(s);
    dlock_lock_free(h);
    dlock_lock_free(s);
    dlock_client_free(c);
    assert_int_equal(test_cluster_set_node_timeout(&C, 1000), 0);
    assert_int_equal(test_cluster_wait_ok(&C, 30000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(release_on_another_masters_lost_lets_that_round_go_of_it),
        cmocka_unit_test(a_stopped_masters_round_does_not_hold_back_another_masters_locks),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
