/* SPDX-License-Identifier: BSD-3-Clause */
/* Redlock renewal puts a lost key back (restore_batch.lua): a node that
 * was stopped or cut off for longer than the TTL comes back without the
 * key. The holder still has its majority, but without the key back one
 * more faulty node would cost it the lock while a majority of the nodes is
 * up (the chaos row renew_stalled_minority lost sections this way). The
 * watchdog puts the key back when a majority renewed it, or when the lease
 * still runs and a gone key completes the majority; never over another
 * owner's key, and never when the key is gone everywhere (that lock is
 * lost, as documented). Three real redis-server processes. */
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

typedef struct key_on {
    const test_redis *node;
    const char *key, *want;
} key_on;

static int key_is(void *arg)
{
    key_on *k = arg;
    char *v = test_cmd_str_or_nil(k->node, "GET %s", k->key);
    int same = v && !strcmp(v, k->want);
    free(v);
    return same;
}

/* A 1 s auto-renewed lease over the first three nodes (renewed every
 * ~333 ms). */
static dlock_lock *held_lock(dlock_client **c, const char *key)
{
    *c = test_client_timeouts(test_nodes, N3, 500, 1000);
    dlock_lock *l = test_lock_new(*c, key, 1000, DLOCK_AUTO_RENEW, 5, 50);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    /* The grant decides at a majority (a node answering after it, under
     * TSan on a loaded VM or with a NOSCRIPT first, misses the key); the
     * renewal puts it back there, so every node has it within a few
     * renewals. */
    for (int i = 0; i < N3; i++) {
        key_on k = {&test_nodes[i], key, dlock_lock_token(l)};
        if (!test_wait_until(key_is, &k, 5000, 20))
            fail_msg("%s: not on node %d 5 s after the grant", key, i);
    }
    return l;
}

/* Held for ms, checked every 20 ms. */
static int stays_held(dlock_lock *l, int ms)
{
    for (int t = 0; t < ms; t += 20) {
        if (dlock_lock_state_get(l) != DLOCK_STATE_HELD)
            return 0;
        test_sleep_ms(20);
    }
    return dlock_lock_state_get(l) == DLOCK_STATE_HELD;
}

static void a_key_gone_from_one_node_is_put_back_and_the_lock_outlives_the_next_fault(void **state)
{
    (void)state;
    const char *key = "restore:next-fault";
    dlock_client *c;
    dlock_lock *l = held_lock(&c, key);
    /* Node 0 lost the key (as if stopped past the TTL). */
    assert_int_equal(test_cmd_int(&test_nodes[0], "DEL %s", key), 1);
    key_on k = {&test_nodes[0], key, dlock_lock_token(l)};
    int back = test_wait_until(key_is, &k, 3000, 20);
    print_message("key back on node 0: %s\n", back ? "yes" : "no");
    assert_true(back);
    /* Now another node stalls for twice the TTL: nodes 0 and 2 carry it. */
    test_redis_pause(&test_nodes[1]);
    int held = stays_held(l, 2000);
    test_redis_resume(&test_nodes[1]);
    assert_true(held);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void a_key_gone_from_one_node_while_another_stalls_is_put_back_within_the_lease(
    void **state)
{
    (void)state;
    const char *key = "restore:same-round";
    dlock_client *c;
    dlock_lock *l = held_lock(&c, key);
    /* One round sees: node 0 gone, node 1 silent, node 2 renewed. Only
     * node 0's key put back, while the lease runs, keeps a majority. */
    assert_int_equal(test_cmd_int(&test_nodes[0], "DEL %s", key), 1);
    test_redis_pause(&test_nodes[1]);
    int held = stays_held(l, 2000);
    key_on k = {&test_nodes[0], key, dlock_lock_token(l)};
    int back = key_is(&k);
    test_redis_resume(&test_nodes[1]);
    print_message("node 1 stopped 2 s, node 0's key gone: %s, key back on node 0: %s\n",
                  held ? "held" : "lost", back ? "yes" : "no");
    assert_true(held);
    assert_true(back);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    for (int i = 0; i < N3; i++)
        assert_int_equal(test_key_exists(&test_nodes[i], key), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void another_owners_key_on_a_minority_is_never_overwritten(void **state)
{
    (void)state;
    const char *key = "restore:other-owner";
    dlock_client *c;
    dlock_lock *l = held_lock(&c, key);
    test_cmd_status(&test_nodes[0], "SET %s someone-else PX 60000", key);
    assert_true(stays_held(l, 1500)); /* a majority still renews it */
    test_assert_key_value(&test_nodes[0], key, "someone-else");
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    test_assert_key_value(&test_nodes[0], key, "someone-else");
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void a_key_deleted_on_every_node_is_lost_not_put_back(void **state)
{
    (void)state;
    const char *key = "restore:deleted-everywhere";
    dlock_client *c;
    dlock_lock *l = held_lock(&c, key);
    for (int i = 0; i < N3; i++)
        assert_int_equal(test_cmd_int(&test_nodes[i], "DEL %s", key), 1);
    assert_true(test_wait_for_state(l, DLOCK_STATE_LOST, 3000));
    for (int i = 0; i < N3; i++)
        assert_int_equal(test_key_exists(&test_nodes[i], key), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* dlock break that reached a majority (the third node did not answer it)
 * removed the holds: the holder must find them gone at its next round
 * and turn lost (dlock.h, dlock_client_break()). The round finds the key
 * gone on two nodes and still there on the third, with the lease still
 * running, and puts it back on the two: the break is undone, and the
 * holder keeps a lock an operator broke. */
static void a_break_on_a_majority_is_not_undone_by_the_holders_renewal(void **state)
{
    (void)state;
    const char *key = "restore:broken";
    dlock_client *c = test_client_timeouts(test_nodes, N3, 500, 1000);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 6000;
    o.renew_interval_ms = 2000;
    o.flags = DLOCK_AUTO_RENEW;
    dlock_lock *l = test_lock_with(c, key, &o);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    for (int i = 0; i < N3; i++) {
        key_on k = {&test_nodes[i], key, dlock_lock_token(l)};
        assert_true(test_wait_until(key_is, &k, 1000, 5));
    }
    /* Within the first interval: the operator's break reaches nodes 0
     * and 1 (a majority, DLOCK_OK); node 2 is stopped meanwhile. */
    dlock_client *op = test_client_timeouts(test_nodes, N3, 300, 300);
    test_redis_pause(&test_nodes[2]);
    dlock_break_result br;
    int rc = dlock_client_break(op, key, 0, &br);
    test_redis_resume(&test_nodes[2]);
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(br.removed_on, 2);
    assert_int_equal(test_key_exists(&test_nodes[0], key), 0);
    assert_int_equal(test_key_exists(&test_nodes[1], key), 0);
    /* The first round, about 1.8 s after the grant. */
    int lost = test_wait_for_state(l, DLOCK_STATE_LOST, 4000);
    print_message("after the break: holder %s; key on node 0: %lld, node 1: %lld\n",
                  lost ? "lost" : "still held", test_key_exists(&test_nodes[0], key),
                  test_key_exists(&test_nodes[1], key));
    assert_true(lost);
    dlock_lock_free(l);
    dlock_client_free(op);
    dlock_client_free(c);
}

/* A node restarted empty (no persistence) loses the key and the holder
 * identity's hash beside it (lib/ident.lua): the key put back brings the
 * identity back too, so dlock_client_identity() and dlock list name the
 * holder on that node again (without "since": the grant's time is the
 * granting nodes'). */
static int identity_back(void *arg)
{
    key_on *k = arg;
    char buf[DLOCK_IDENTITY_MAX + 64];
    dlock_client *r = test_client_timeouts(k->node, 1, 500, 500);
    int rc = dlock_client_identity(r, k->key, 0, buf, sizeof buf);
    dlock_client_free(r);
    return rc == DLOCK_OK && !strcmp(buf, k->want);
}

static void a_key_put_back_after_a_node_restart_keeps_its_holders_identity(void **state)
{
    (void)state;
    const char *key = "restore:identity";
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = 500;
    o.io_timeout_ms = 1000;
    o.identity = 1;
    o.identity_text = "job=restore";
    const char *urls[N3];
    char bufs[N3][64];
    for (int i = 0; i < N3; i++) {
        snprintf(bufs[i], sizeof bufs[i], "redis://127.0.0.1:%d", test_nodes[i].port);
        urls[i] = bufs[i];
    }
    dlock_client *c = test_client_new(urls, N3, &o);
    dlock_lock *l = test_lock_new(c, key, 1000, DLOCK_AUTO_RENEW, 5, 50);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    key_on k = {&test_nodes[0], key, dlock_lock_token(l)};
    assert_true(test_wait_until(key_is, &k, 5000, 20));
    test_redis_kill9(&test_nodes[0]);
    assert_int_equal(test_redis_restart(&test_nodes[0]), 0);
    assert_int_equal(test_key_exists(&test_nodes[0], key), 0);
    assert_true(test_wait_until(key_is, &k, 3000, 20));
    key_on id = {&test_nodes[0], key, "job=restore"};
    int back = test_wait_until(identity_back, &id, 1000, 20);
    print_message("identity on the restarted node: %s\n", back ? "back" : "missing");
    assert_true(back);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    char ik[128];
    size_t ik_len = test_helper_key(ik, sizeof ik, key, "id");
    for (int i = 0; i < N3; i++) {
        redisReply *r = test_cmd_bin(&test_nodes[i], "EXISTS %b", ik, ik_len);
        assert_int_equal(r->integer, 0); /* the release took it away there too */
        freeReplyObject(r);
    }
    dlock_lock_free(l);
    dlock_client_free(c);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, test_nodes_revive)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(a_key_gone_from_one_node_is_put_back_and_the_lock_outlives_the_next_fault),
        T(a_key_gone_from_one_node_while_another_stalls_is_put_back_within_the_lease),
        T(another_owners_key_on_a_minority_is_never_overwritten),
        T(a_key_deleted_on_every_node_is_lost_not_put_back),
        T(a_break_on_a_majority_is_not_undone_by_the_holders_renewal),
        T(a_key_put_back_after_a_node_restart_keeps_its_holders_identity),
    };
    return cmocka_run_group_tests(tests, test_nodes_setup, test_nodes_teardown);
}
