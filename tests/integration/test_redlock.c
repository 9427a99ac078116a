/* SPDX-License-Identifier: BSD-3-Clause */
/* Redlock over five real redis-server processes: majority decisions with
 * nodes held by another owner, down (kill -9), stalled (SIGSTOP, DEBUG
 * SLEEP) or freshly restarted; the validity and drift arithmetic; detail
 * messages that name failing nodes; per-node status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

#define N_NODES TEST_N_NODES
#define SLACK_MS 700 /* scheduling slack on a loaded 2-core machine */

/* Every test starts with five running, empty nodes and leaves them running
 * (a failed test may have left one killed or stopped). */
/* The flags lock_for() gives: 0, or DLOCK_NO_FENCE in the tests that run a
 * second time as "(unfenced)", whose first try per node is SET NX PX GET
 * with PTTL behind it (Redis 7; SET NX PX, GET and PTTL before), not
 * acquire.lua (issue 20). */
static unsigned lock_flags;

static int setup(void **state)
{
    lock_flags = 0;
    if (test_nodes_revive(state) != 0)
        return -1;
    for (int i = 0; i < N_NODES; i++)
        if (test_flushall(&test_nodes[i]) != 0)
            return -1;
    return 0;
}

static int setup_unfenced(void **state)
{
    int rc = setup(state);
    lock_flags = DLOCK_NO_FENCE;
    return rc;
}

static dlock_client *client_with(const dlock_client_options *o)
{
    const char *urls[N_NODES];
    for (int i = 0; i < N_NODES; i++)
        urls[i] = test_nodes[i].url;
    dlock_client *c = test_client_new(urls, N_NODES, o);
    assert_int_equal(dlock_client_node_count(c), N_NODES);
    return c;
}

static dlock_client *fast_client(void)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = 500;
    o.io_timeout_ms = 300;
    return client_with(&o);
}

static dlock_lock *lock_for(dlock_client *c, const char *name, int64_t ttl_ms)
{
    return test_lock_new(c, name, ttl_ms, lock_flags, 5, 50);
}

static void set_other(int node, const char *key)
{
    test_cmd_status(&test_nodes[node], "SET %s other PX 10000", key);
}

/* The value of `key` on `node`, or NULL if absent; caller frees. */
static char *get_value(int node, const char *key)
{
    return test_cmd_str_or_nil(&test_nodes[node], "GET %s", key);
}

static void assert_value(int node, const char *key, const char *want)
{
    char *v = get_value(node, key);
    if (!want && v)
        fail_msg("node %d: %s = \"%s\", expected no key", node, key, v);
    if (want && !v)
        fail_msg("node %d: %s absent, expected \"%s\"", node, key, want);
    if (want)
        assert_string_equal(v, want);
    free(v);
}

/* Every key on `node` is a fencing counter or `name` holding "other" (when
 * other_ok): no lock key holds a token of ours. */
static void assert_no_key_of_ours(int node, const char *name, int other_ok)
{
    redisReply *r = test_cmd(&test_nodes[node], "KEYS *");
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++) {
        const char *k = r->element[i]->str;
        size_t klen = r->element[i]->len;
        /* A fencing counter: KEY NUL "fence" (docs/design.md). */
        if (klen > 6 && memcmp(k + klen - 6, "\0fence", 6) == 0)
            continue;
        if (strcmp(k, name) != 0)
            fail_msg("node %d: unexpected key %s", node, k);
        if (!other_ok)
            fail_msg("node %d: %s exists, expected no key", node, k);
        assert_value(node, k, "other");
    }
    freeReplyObject(r);
}

/* "127.0.0.1:PORT:" as the detail message writes a node's name. */
static int errmsg_names_node(const dlock_lock *l, int node)
{
    char needle[64];
    snprintf(needle, sizeof needle, "127.0.0.1:%d:", test_nodes[node].port);
    return strstr(dlock_lock_errmsg(l), needle) != NULL;
}

/* Acquire then release once, so that every node has a pooled connection. */
static void warm_up(dlock_client *c)
{
    dlock_lock *w = lock_for(c, "redlock:warmup", 5000);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(w);
}

/* ---- (a) majority over nodes held by another owner ---------------------- */

static void acquire_succeeds_when_two_of_five_nodes_hold_another_token(void **state)
{
    (void)state;
    const char *key = "redlock:two-taken";
    dlock_client *c = fast_client();
    dlock_lock *l = lock_for(c, key, 10000);
    set_other(0, key);
    set_other(1, key);

    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    const char *tok = dlock_lock_token(l);
    assert_non_null(tok);
    assert_value(0, key, "other");
    assert_value(1, key, "other");
    for (int i = 2; i < N_NODES; i++)
        assert_value(i, key, tok);

    /* Release takes back our three and leaves the other owner's two. */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_value(0, key, "other");
    assert_value(1, key, "other");
    for (int i = 2; i < N_NODES; i++)
        assert_value(i, key, NULL);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void acquire_fails_when_three_of_five_nodes_hold_another_token_and_leaves_no_key_of_ours(
    void **state)
{
    (void)state;
    const char *key = "redlock:three-taken";
    dlock_client *c = fast_client();
    dlock_lock *l = lock_for(c, key, 10000);
    for (int i = 0; i < 3; i++)
        set_other(i, key);

    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    assert_null(dlock_lock_token(l));
    assert_true(dlock_lock_holder_ttl_ms(l) > 0 && dlock_lock_holder_ttl_ms(l) <= 10000);
    /* Nodes 3 and 4 received the SET NX and may have granted it: the failed
     * attempt must have taken that back before returning. */
    for (int i = 0; i < 3; i++) {
        assert_value(i, key, "other");
        assert_no_key_of_ours(i, key, 1);
    }
    for (int i = 3; i < N_NODES; i++) {
        assert_value(i, key, NULL);
        assert_no_key_of_ours(i, key, 0);
    }
    /* A waiting acquire gives up the same way, also leaving nothing. */
    assert_int_equal(dlock_lock_acquire(l, 300), DLOCK_ETIMEDOUT);
    for (int i = 3; i < N_NODES; i++)
        assert_no_key_of_ours(i, key, 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- (b) nodes down ------------------------------------------------------ */

static void acquire_extend_release_work_with_two_of_five_nodes_killed(void **state)
{
    (void)state;
    const char *key = "redlock:two-down";
    dlock_client *c = fast_client();
    warm_up(c); /* pooled connections to the nodes about to die */
    dlock_lock *l = lock_for(c, key, 10000);
    test_redis_kill9(&test_nodes[0]);
    test_redis_kill9(&test_nodes[1]);

    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    const char *tok = dlock_lock_token(l);
    for (int i = 2; i < N_NODES; i++)
        assert_value(i, key, tok);
    assert_true(lock_flags ? dlock_lock_fence(l) == 0 : dlock_lock_fence(l) > 0);

    assert_int_equal(dlock_lock_extend(l, 20000), DLOCK_OK);
    for (int i = 2; i < N_NODES; i++) {
        long long pttl = test_key_pttl(&test_nodes[i], key);
        assert_true(pttl > 10000 && pttl <= 20000);
    }
    assert_true(dlock_lock_validity_ms(l) > 10000);

    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    for (int i = 2; i < N_NODES; i++)
        assert_value(i, key, NULL);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void acquire_with_three_of_five_nodes_killed_fails_fast_with_no_quorum_then_recovers(
    void **state)
{
    (void)state;
    const char *key = "redlock:three-down";
    dlock_client *c = fast_client();
    warm_up(c);
    dlock_lock *l = lock_for(c, key, 10000);
    for (int i = 0; i < 3; i++)
        test_redis_kill9(&test_nodes[i]);

    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOQUORUM);
    int64_t took = test_now_ms() - t0;
    assert_true(took < 3000);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    /* The two live nodes granted; the failed attempt released them. */
    for (int i = 3; i < N_NODES; i++)
        assert_no_key_of_ours(i, key, 0);

    /* A waiting acquire does not hang on dead nodes either. */
    t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(l, 1000), DLOCK_ENOQUORUM);
    took = test_now_ms() - t0;
    assert_true(took < 1000 + 3000);
    for (int i = 3; i < N_NODES; i++)
        assert_no_key_of_ours(i, key, 0);

    /* The same client recovers once the nodes are back. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(test_redis_restart(&test_nodes[i]), 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    const char *tok = dlock_lock_token(l);
    int ours = 0;
    for (int i = 0; i < N_NODES; i++) {
        char *v = get_value(i, key);
        ours += v && strcmp(v, tok) == 0;
        free(v);
    }
    assert_true(ours >= 3);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- (e) detail messages -------------------------------------------------- */

static void errmsg_names_every_unreachable_node_and_no_healthy_one(void **state)
{
    (void)state;
    dlock_client *c = fast_client();
    dlock_lock *l = lock_for(c, "redlock:errmsg", 10000);
    test_redis_kill9(&test_nodes[1]);
    test_redis_kill9(&test_nodes[2]);
    test_redis_kill9(&test_nodes[4]);

    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOQUORUM);
    const char *msg = dlock_lock_errmsg(l);
    print_message("errmsg: %s\n", msg);
    assert_true(errmsg_names_node(l, 1));
    assert_true(errmsg_names_node(l, 2));
    assert_true(errmsg_names_node(l, 4));
    assert_false(errmsg_names_node(l, 0));
    assert_false(errmsg_names_node(l, 3));
    /* A success clears the message. */
    assert_int_equal(test_redis_restart(&test_nodes[1]), 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_string_equal(dlock_lock_errmsg(l), "");
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- (c) stalled nodes ----------------------------------------------------- */

/* io_timeout_ms is far above ttl/10, so an acquire that waited for the
 * stalled node by io_timeout_ms (or by connect_timeout_ms) would break the
 * bound below; only the per-node timeout min(io, ttl/10) = 300 ms fits. */
#define STALL_TTL_MS 3000
#define STALL_IO_MS 2500
#define STALL_NODE_MS 300

static dlock_client *stall_client(void)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = STALL_IO_MS;
    o.io_timeout_ms = STALL_IO_MS;
    return client_with(&o);
}

static void acquire_is_not_held_up_by_a_sigstopped_node(void **state)
{
    (void)state;
    const char *key = "redlock:sigstop";
    dlock_client *c = stall_client();
    warm_up(c);
    dlock_lock *l = lock_for(c, key, STALL_TTL_MS);
    test_redis_pause(&test_nodes[2]);

    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(l, 0);
    int64_t took = test_now_ms() - t0;
    print_message("acquire with node 2 stopped: %s in %" PRId64 " ms\n", dlock_errname(rc), took);
    assert_int_equal(rc, DLOCK_OK);
    assert_true(took < STALL_NODE_MS + SLACK_MS);
    const char *tok = dlock_lock_token(l);
    for (int i = 0; i < N_NODES; i++)
        if (i != 2)
            assert_value(i, key, tok);

    /* A client with no pooled connection is not held up either: the kernel
     * completes the TCP handshake of a stopped server, which then never
     * answers. */
    dlock_client *fresh = stall_client();
    dlock_lock *l2 = lock_for(fresh, "redlock:sigstop-fresh", STALL_TTL_MS);
    t0 = test_now_ms();
    rc = dlock_lock_acquire(l2, 0);
    took = test_now_ms() - t0;
    print_message("fresh client, node 2 stopped: %s in %" PRId64 " ms\n", dlock_errname(rc), took);
    assert_int_equal(rc, DLOCK_OK);
    assert_true(took < STALL_NODE_MS + SLACK_MS);

    test_redis_resume(&test_nodes[2]);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l2), DLOCK_OK);
    dlock_lock_free(l2);
    dlock_client_free(fresh);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* When the stalled node's vote is needed (two others hold the lock), the
 * attempt cannot succeed; it must give up after the per-node timeout rather
 * than the I/O timeout, and leave no key of ours behind. Four of five nodes
 * answered and some said "held by another": the lock is busy
 * (DLOCK_ENOTACQUIRED); the silent node is one missing vote, not a lost
 * majority (issue 15). */
static void failed_acquire_needing_a_sigstopped_node_gives_up_after_the_per_node_timeout(
    void **state)
{
    (void)state;
    const char *key = "redlock:sigstop-needed";
    dlock_client *c = stall_client();
    warm_up(c);
    dlock_lock *l = lock_for(c, key, STALL_TTL_MS);
    set_other(0, key);
    set_other(1, key);
    test_redis_pause(&test_nodes[4]);

    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(l, 0);
    int64_t took = test_now_ms() - t0;
    print_message("acquire needing stopped node 4: %s in %" PRId64 " ms (%s)\n",
                  dlock_errname(rc), took, dlock_lock_errmsg(l));
    test_redis_resume(&test_nodes[4]);
    for (int i = 2; i < 4; i++)
        assert_no_key_of_ours(i, key, 0);
    dlock_lock_free(l);
    dlock_client_free(c);
    assert_int_equal(rc, DLOCK_ENOTACQUIRED);
    assert_true(took < STALL_NODE_MS + SLACK_MS);
}

typedef struct sleeper {
    const test_redis *node;
    atomic_int connected;
    int ok;
    int64_t end_ms; /* when DEBUG SLEEP returned */
} sleeper;

static void *debug_sleep(void *arg)
{
    sleeper *s = arg;
    redisContext *ctx = test_redis_admin(s->node);
    if (!ctx) {
        atomic_store(&s->connected, -1);
        return NULL;
    }
    struct timeval tv = {10, 0};
    redisSetTimeout(ctx, tv);
    atomic_store(&s->connected, 1);
    redisReply *r = redisCommand(ctx, "DEBUG SLEEP 3");
    s->end_ms = test_now_ms();
    s->ok = r && r->type == REDIS_REPLY_STATUS;
    if (r)
        freeReplyObject(r);
    redisFree(ctx);
    return NULL;
}

/* 1 if `node` does not answer PING within 200 ms. */
static int node_is_stalled(int node)
{
    struct timeval tv = {0, 200000};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", test_nodes[node].port, tv);
    if (!ctx)
        return 0;
    int stalled = 0;
    if (!ctx->err) {
        redisSetTimeout(ctx, tv);
        redisReply *r = redisCommand(ctx, "PING");
        stalled = r == NULL;
        if (r)
            freeReplyObject(r);
    }
    redisFree(ctx);
    return stalled;
}

static void acquire_is_not_held_up_by_a_node_in_debug_sleep(void **state)
{
    (void)state;
    const char *key = "redlock:debug-sleep";
    dlock_client *c = stall_client();
    warm_up(c);
    dlock_lock *l = lock_for(c, key, STALL_TTL_MS);
    assert_false(node_is_stalled(3));

    sleeper s = {&test_nodes[3], 0, 0, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, debug_sleep, &s), 0);
    while (atomic_load(&s.connected) == 0)
        test_sleep_ms(1);
    assert_int_equal(atomic_load(&s.connected), 1);
    int64_t give_up = test_now_ms() + 1500;
    int stalled = 0;
    while (!(stalled = node_is_stalled(3)) && test_now_ms() < give_up)
        test_sleep_ms(10);
    assert_true(stalled); /* the server is asleep now */

    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(l, 0);
    int64_t t1 = test_now_ms();
    print_message("acquire with node 3 in DEBUG SLEEP: %s in %" PRId64 " ms\n",
                  dlock_errname(rc), t1 - t0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(s.ok);
    assert_true(s.end_ms > t1); /* the node slept through the whole acquire */
    assert_int_equal(rc, DLOCK_OK);
    assert_true(t1 - t0 < STALL_NODE_MS + SLACK_MS);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- (d) validity -------------------------------------------------------------- */

static void validity_after_acquire_is_ttl_minus_elapsed_minus_drift(void **state)
{
    (void)state;
    dlock_client *c = fast_client();
    warm_up(c);
    const int64_t ttl = 10000, drift = ttl / 100 + 2; /* ttl * 0.01 + 2 ms */
    dlock_lock *l = lock_for(c, "redlock:validity", ttl);

    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    int64_t v = dlock_lock_validity_ms(l);
    int64_t took = test_now_ms() - t0;
    print_message("validity %" PRId64 " ms after an acquire of %" PRId64 " ms\n", v, took);
    assert_true(v > 0);
    assert_true(v <= ttl - drift);
    assert_true(v >= ttl - drift - took - 2);

    /* Extend counts the new lease the same way. */
    t0 = test_now_ms();
    assert_int_equal(dlock_lock_extend(l, 2 * ttl), DLOCK_OK);
    v = dlock_lock_validity_ms(l);
    took = test_now_ms() - t0;
    const int64_t drift2 = 2 * ttl / 100 + 2;
    assert_true(v <= 2 * ttl - drift2);
    assert_true(v >= 2 * ttl - drift2 - took - 2);

    /* A larger drift factor shortens the validity accordingly. */
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.drift_factor = 0.25;
    dlock_client *c2 = client_with(&o);
    dlock_lock *l2 = lock_for(c2, "redlock:validity-drift", ttl);
    assert_int_equal(dlock_lock_acquire(l2, 0), DLOCK_OK);
    v = dlock_lock_validity_ms(l2);
    assert_true(v > 0 && v <= ttl - ttl / 4 - 2);

    assert_int_equal(dlock_lock_release(l2), DLOCK_OK);
    assert_int_equal(dlock_lock_validity_ms(l2), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l2);
    dlock_client_free(c2);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- (e2) split votes ------------------------------------------------------------ */

/* SET calls `node` has served, scripts' included (INFO commandstats). */
static long long set_calls(int node)
{
    char *info = test_cmd_str(&test_nodes[node], "INFO commandstats");
    const char *p = strstr(info, "cmdstat_set:calls=");
    long long n = p ? strtoll(p + strlen("cmdstat_set:calls="), NULL, 10) : 0;
    free(info);
    return n;
}

/* How many grants node 4 (always free) made while a waiter tried `key`
 * for 1 s: each attempt wins it, and is undone. */
static long long grants_on_node4_while_waiting(dlock_client *c, const char *key)
{
    dlock_lock *l = lock_for(c, key, 10000);
    long long before = set_calls(4);
    assert_int_equal(dlock_lock_acquire(l, 1000), DLOCK_ETIMEDOUT);
    long long n = set_calls(4) - before;
    assert_no_key_of_ours(4, key, 0);
    dlock_lock_free(l);
    return n;
}

/* A waiter that won some nodes while no single owner holds a majority
 * (two holders on two nodes each) may face nobody who will ever release:
 * it retries on a short random backoff (5-50 ms here). Behind one owner on
 * a majority it waits for that owner's release message and looks again
 * only at the safety poll (200 ms, src/engine/acquire.c). Both decided from the
 * holders the busy nodes named (dlock__tally_max_same_holder). */
static void split_vote_retries_soon_and_a_majority_holder_is_waited_for(void **state)
{
    (void)state;
    dlock_client *c = fast_client();
    warm_up(c);
    const char *split = "redlock:split";
    test_cmd_status(&test_nodes[0], "SET %s other1 PX 10000", split);
    test_cmd_status(&test_nodes[1], "SET %s other1 PX 10000", split);
    test_cmd_status(&test_nodes[2], "SET %s other2 PX 10000", split);
    test_cmd_status(&test_nodes[3], "SET %s other2 PX 10000", split);
    long long split_grants = grants_on_node4_while_waiting(c, split);

    /* One dlock holder on nodes 0-2: a majority of the five. */
    const char *held = "redlock:majority";
    const char *urls3[3] = {test_nodes[0].url, test_nodes[1].url, test_nodes[2].url};
    dlock_client *c3 = test_client_new(urls3, 3, NULL);
    dlock_lock *holder = lock_for(c3, held, 10000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    long long majority_grants = grants_on_node4_while_waiting(c, held);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    print_message("grants on the free node in 1 s: split vote %lld, behind a majority "
                  "holder %lld\n", split_grants, majority_grants);
    assert_true(split_grants >= 12);
    assert_true(majority_grants <= 9);
    dlock_lock_free(holder);
    dlock_client_free(c3);
    dlock_client_free(c);
}

/* ---- (f) the restart rule -------------------------------------------------------- */

static void freshly_restarted_nodes_do_not_count_until_min_uptime(void **state)
{
    (void)state;
    const char *key = "redlock:restart-rule";
    for (int i = 0; i < N_NODES; i++)
        assert_int_equal(test_redis_restart(&test_nodes[i]), 0);
    int64_t started = test_now_ms();

    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.min_node_uptime_ms = 60000;
    dlock_client *c = client_with(&o);
    dlock_lock *l = lock_for(c, key, 10000);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOQUORUM);
    print_message("errmsg: %s\n", dlock_lock_errmsg(l));
    assert_non_null(strstr(dlock_lock_errmsg(l), "restarted"));
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    /* Grants that did not count were handed back. */
    for (int i = 0; i < N_NODES; i++)
        assert_no_key_of_ours(i, key, 0);

    /* Once the nodes have been up longer than the limit, they count. */
    int64_t waited = test_now_ms() - started;
    if (waited < 1200)
        test_sleep_ms((int)(1200 - waited));
    o.min_node_uptime_ms = 1000;
    dlock_client *c2 = client_with(&o);
    dlock_lock *l2 = lock_for(c2, key, 10000);
    int rc = dlock_lock_acquire(l2, 0);
    if (rc != DLOCK_OK)
        print_message("errmsg: %s\n", dlock_lock_errmsg(l2));
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(dlock_lock_release(l2), DLOCK_OK);
    dlock_lock_free(l2);
    dlock_client_free(c2);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- (g) status ---------------------------------------------------------------------- */

static void status_reports_held_ttl_and_fence_per_node(void **state)
{
    (void)state;
    const char *key = "redlock:status";
    dlock_client *c = fast_client();
    dlock_lock *l = lock_for(c, key, 10000);
    dlock_node_status st[N_NODES];

    assert_int_equal(dlock_client_status(c, key, N_NODES, st, NULL), DLOCK_OK);
    for (int i = 0; i < N_NODES; i++) {
        assert_int_equal(st[i].error, DLOCK_OK);
        assert_int_equal(st[i].held, 0);
        assert_int_equal(st[i].ttl_ms, -1);
        assert_int_equal(st[i].fence, 0);
    }

    test_redis_kill9(&test_nodes[4]);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(l);
    assert_true(fence > 0);
    assert_int_equal(dlock_client_status(c, key, N_NODES, st, NULL), DLOCK_OK);
    /* Held on a majority (the grant decides there: a node answering after
     * the decision may not have the key), and each node as it is: the
     * status went out behind the acquire on the same connections. */
    int synced = 0, held = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(st[i].error, DLOCK_OK);
        assert_int_equal(st[i].held, test_key_exists(&test_nodes[i], key));
        held += st[i].held;
        if (st[i].held)
            assert_true(st[i].ttl_ms > 0 && st[i].ttl_ms <= 10000);
        assert_true(st[i].fence <= fence);
        synced += st[i].fence == fence;
    }
    assert_true(held >= 3);
    assert_true(synced >= 3); /* written back to a majority */
    assert_int_not_equal(st[4].error, DLOCK_OK);
    assert_int_equal(st[4].held, 0);

    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_client_status(c, key, N_NODES, st, NULL), DLOCK_OK);
    held = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(st[i].held, test_key_exists(&test_nodes[i], key));
        if (!st[i].held)
            assert_int_equal(st[i].ttl_ms, -1);
        held += st[i].held;
    }
    assert_true(held <= 1); /* released on a majority */

    /* Status cannot tell owners apart: another owner's key shows as held. */
    const char *other = "redlock:status-other";
    set_other(0, other);
    assert_int_equal(dlock_client_status(c, other, N_NODES, st, NULL), DLOCK_OK);
    assert_int_equal(st[0].held, 1);
    assert_true(st[0].ttl_ms > 0);
    assert_int_equal(st[1].held, 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* A node that answers NOSCRIPT (restarted, or SCRIPT FLUSH) gets the
 * script's body (EVAL) even when the others decided the acquire before
 * its answer came: the decided fan-out listens a short grace longer, as
 * release and renewal do. It used to stop at the decision, so in 14 of 150
 * acquires on fresh servers one node never got the key, and the lock ran
 * on a bare majority from the start. Here nodes 3 and 4 (read last) lose
 * their script cache before each acquire; a loaded machine may stall past
 * the grace now and then, so two misses of 100 are allowed (before the
 * grace, most acquires missed). */
static void nodes_answering_noscript_after_the_decision_still_get_the_key(void **state)
{
    (void)state;
    dlock_client *c = fast_client();
    warm_up(c);
    int misses = 0;
    for (int round = 0; round < 100; round++) {
        char key[64];
        snprintf(key, sizeof key, "redlock:noscript:%d", round);
        for (int i = 3; i < N_NODES; i++)
            test_cmd_status(&test_nodes[i], "SCRIPT FLUSH");
        dlock_lock *l = lock_for(c, key, 10000);
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        int have = 0;
        for (int i = 0; i < N_NODES; i++)
            have += (int)test_key_exists(&test_nodes[i], key);
        misses += have < N_NODES;
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        dlock_lock_free(l);
    }
    print_message("acquires that left a NOSCRIPT node without the key: %d of 100\n", misses);
    assert_true(misses <= 2);
    dlock_client_free(c);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, test_nodes_revive)
#define T_UNFENCED(f) {#f " (unfenced)", f, setup_unfenced, test_nodes_revive, NULL}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(acquire_succeeds_when_two_of_five_nodes_hold_another_token),
        T(acquire_fails_when_three_of_five_nodes_hold_another_token_and_leaves_no_key_of_ours),
        T(acquire_extend_release_work_with_two_of_five_nodes_killed),
        T(acquire_with_three_of_five_nodes_killed_fails_fast_with_no_quorum_then_recovers),
        T(errmsg_names_every_unreachable_node_and_no_healthy_one),
        T(acquire_is_not_held_up_by_a_sigstopped_node),
        T(failed_acquire_needing_a_sigstopped_node_gives_up_after_the_per_node_timeout),
        T(acquire_is_not_held_up_by_a_node_in_debug_sleep),
        T(validity_after_acquire_is_ttl_minus_elapsed_minus_drift),
        T(freshly_restarted_nodes_do_not_count_until_min_uptime),
        T(status_reports_held_ttl_and_fence_per_node),
        T(nodes_answering_noscript_after_the_decision_still_get_the_key),
        T(split_vote_retries_soon_and_a_majority_holder_is_waited_for),
        T_UNFENCED(acquire_succeeds_when_two_of_five_nodes_hold_another_token),
        T_UNFENCED(
            acquire_fails_when_three_of_five_nodes_hold_another_token_and_leaves_no_key_of_ours),
        T_UNFENCED(acquire_extend_release_work_with_two_of_five_nodes_killed),
        T_UNFENCED(acquire_with_three_of_five_nodes_killed_fails_fast_with_no_quorum_then_recovers),
        T_UNFENCED(acquire_is_not_held_up_by_a_sigstopped_node),
        T_UNFENCED(failed_acquire_needing_a_sigstopped_node_gives_up_after_the_per_node_timeout),
        T_UNFENCED(acquire_is_not_held_up_by_a_node_in_debug_sleep),
        T_UNFENCED(freshly_restarted_nodes_do_not_count_until_min_uptime),
        T_UNFENCED(split_vote_retries_soon_and_a_majority_holder_is_waited_for),
    };
    return cmocka_run_group_tests(tests, test_nodes_setup, test_nodes_teardown);
}
