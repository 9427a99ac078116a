/* SPDX-License-Identifier: BSD-3-Clause */
/* Elections on a Redlock of three real redis-server processes
 * (docs/elections.md, "Redlock"): the term is a plain auto-renewed Redlock
 * lock (no fair line), the value is written on every node and counts on a
 * majority, the leader is the token of a majority with the value of a
 * node stamped with it, and an observer is woken by any node. The same
 * verbs as on one node: campaign, proclaim, resign, leader, observe; a
 * proclaim whose write finds the term gone from a majority ends it; a
 * leader read with one node down answers, with two down says
 * DLOCK_ENOQUORUM; an observer with a node down does not spin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "proc.h"
#include "test_leaders.h"
#include "test_util.h"

#define N 3
#define TTL_MS 10000 /* far above PUSH_MS: a change seen within it was pushed */
#define PUSH_MS 2000

static test_redis nodes[N];
static dlock_client *cl;

static int group_setup(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++)
        if (test_redis_start(&nodes[i], NULL) != 0)
            return -1;
    const char *urls[N] = {nodes[0].url, nodes[1].url, nodes[2].url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = 500;
    o.io_timeout_ms = 500;
    return dlock_client_new(&cl, urls, N, &o, NULL, 0) == DLOCK_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    dlock_client_free(cl);
    for (int i = 0; i < N; i++)
        test_redis_stop(&nodes[i]);
    return 0;
}

/* Every node up and empty again (a failed test may have left one down). */
static int revive(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++) {
        test_redis_resume(&nodes[i]);
        if (test_flushall(&nodes[i]) != 0 && test_redis_restart(&nodes[i]) != 0)
            return -1;
        if (test_flushall(&nodes[i]) != 0)
            return -1;
    }
    return 0;
}

static void expect_leader(dlock_election *e, uint64_t fence, const char *value)
{
    test_expect_leader(e, fence, value, 0);
}

/* The value hash of election `name` on node i: HSET of t, f, v, s. */
static void stamp(int i, const char *name, const char *token, uint64_t fence, const char *value,
                  long long seq)
{
    char key[64];
    int klen = snprintf(key, sizeof key, "%s%cvalue", name, '\0');
    redisContext *c = test_redis_admin(&nodes[i]);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "HSET %b t %s f %" PRIu64 " v %s s %lld", key, (size_t)klen,
                                 token, fence, value, seq);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    redisFree(c);
}

/* A command on node i with the value hash's key of election `name` as
 * its %b argument (test_cmd() is printf-checked: no %b there). */
static redisReply *on_value(int i, const char *fmt, const char *name)
{
    char key[64];
    int klen = snprintf(key, sizeof key, "%s%cvalue", name, '\0');
    redisContext *c = test_redis_admin(&nodes[i]);
    assert_non_null(c);
    redisReply *r = redisCommand(c, fmt, key, (size_t)klen);
    assert_non_null(r);
    redisFree(c);
    return r;
}

/* HGET of field in the value hash on node i (caller frees). */
static char *value_field(int i, const char *name, const char *field)
{
    char fmt[32];
    snprintf(fmt, sizeof fmt, "HGET %%b %s", field);
    redisReply *r = on_value(i, fmt, name);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    char *s = strdup(r->str);
    freeReplyObject(r);
    return s;
}

static void drop_value(int i, const char *name)
{
    freeReplyObject(on_value(i, "DEL %b", name));
}

static void bad_input_is_einval_on_a_redlock_too(void **state)
{
    (void)state;
    dlock_election *e = NULL;
    dlock_election_options o = DLOCK_ELECTION_OPTIONS_INIT;
    o.ttl_ms = 0;
    assert_int_equal(dlock_election_new(&e, cl, "e", &o), DLOCK_EINVAL);
    assert_int_equal(dlock_election_new(&e, cl, "", NULL), DLOCK_EINVAL);
    assert_null(e);
    e = test_election_new(cl, "e", TTL_MS);
    assert_int_equal(dlock_election_campaign(e, NULL, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_election_proclaim(e, "v"), DLOCK_ENOTHELD);
    assert_int_equal(dlock_election_resign(e), DLOCK_ENOTHELD);
    dlock_election_free(e);
}

static void campaign_proclaim_resign_on_a_redlock(void **state)
{
    (void)state;
    test_leaders_hand_over(cl, "job", TTL_MS, PUSH_MS);
}

/* The term's keys on every node (all three answer at once here): the lock
 * key with the leader's token, and the value hash stamped with it and the
 * term's fence; no fair line (no line keys). */
static void the_term_is_on_every_node(void **state)
{
    (void)state;
    dlock_election *a = test_election_new(cl, "keys", TTL_MS);
    assert_int_equal(dlock_election_campaign(a, "host-a", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    const char *tok = dlock_lock_token(dlock_election_lock(a));
    test_sleep_ms(200); /* a node past the majority is heard within the grace */
    for (int i = 0; i < N; i++) {
        test_assert_key_value(&nodes[i], "keys", tok);
        char *v = value_field(i, "keys", "v");
        char *f = value_field(i, "keys", "f");
        assert_string_equal(v, "host-a");
        assert_int_equal(strtoull(f, NULL, 10), fa);
        free(v);
        free(f);
        redisReply *r = test_cmd(&nodes[i], "KEYS *");
        assert_int_equal(r->elements, 3); /* the key, its fence, the value */
        freeReplyObject(r);
    }
    assert_int_equal(dlock_election_resign(a), DLOCK_OK);
    dlock_election_free(a);
}

static void observe_sees_every_change_in_order_on_a_redlock(void **state)
{
    (void)state;
    test_leaders_observe_changes(cl, "obs", TTL_MS, PUSH_MS, 1);
}

/* The leader is the token of a majority: a holder of one node, even one
 * that stamped a value there, leads nothing; the leader's value comes
 * from a node stamped with its token, the newest write where nodes
 * differ; a token of no majority with a node silent is "cannot tell". */
static void the_leader_is_the_token_of_a_majority(void **state)
{
    (void)state;
    dlock_election *a = test_election_new(cl, "maj", TTL_MS);
    test_cmd_status(&nodes[0], "SET maj intruder PX 10000");
    stamp(0, "maj", "intruder", 99, "fake", 1);
    expect_leader(a, 0, ""); /* one node of three: nobody */

    test_cmd_int(&nodes[0], "DEL maj");
    assert_int_equal(dlock_election_campaign(a, "v1", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    assert_int_equal(dlock_election_proclaim(a, "v2"), DLOCK_OK);
    /* Node 0 keeps an older write of the term (as one that missed the
     * proclaim): the newest write shows. */
    const char *tok = dlock_lock_token(dlock_election_lock(a));
    stamp(0, "maj", tok, fa, "v1", 1);
    expect_leader(a, fa, "v2");
    /* Only node 2 has the value: it shows (a majority holds the token). */
    drop_value(0, "maj");
    drop_value(1, "maj");
    expect_leader(a, fa, "v2");
    /* The term's token on one node, another's on one, one node down:
     * which leads depends on the silent node. */
    test_cmd_status(&nodes[1], "SET maj intruder PX 10000");
    test_redis_kill9(&nodes[2]);
    uint64_t f = 7;
    assert_int_equal(dlock_election_leader(a, &f, NULL, 0, NULL), DLOCK_ENOQUORUM);
    assert_int_equal(f, 0);
    assert_int_equal(test_redis_restart(&nodes[2]), 0);
    dlock_election_free(a);
}

/* Proclaim counts on a majority: a key of another on two nodes is
 * DLOCK_ENOTOWNER, and ends the term (on_lost, as on one node); on one
 * node only, the write stands on the other two. */
static void a_proclaim_counts_on_a_majority(void **state)
{
    (void)state;
    dlock_election *a = test_election_new(cl, "pro", TTL_MS);
    assert_int_equal(dlock_election_campaign(a, "v1", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    test_cmd_status(&nodes[0], "SET pro other PX 10000");
    assert_int_equal(dlock_election_proclaim(a, "v2"), DLOCK_OK);
    char *v = value_field(0, "pro", "v");
    assert_string_equal(v, "v1"); /* not ours there: not written */
    free(v);
    test_cmd_status(&nodes[1], "SET pro other PX 10000");
    expect_leader(a, 0, ""); /* "other" holds a majority, wrote nothing */
    assert_int_equal(dlock_election_proclaim(a, "v3"), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_lock_state_get(dlock_election_lock(a)), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_election_proclaim(a, "v3"), DLOCK_ENOTHELD);
    (void)fa;

    /* Gone from two nodes (the lease ran out there): DLOCK_EEXPIRED. */
    test_cmd_int(&nodes[0], "DEL pro");
    test_cmd_int(&nodes[1], "DEL pro");
    test_cmd_int(&nodes[2], "DEL pro");
    assert_int_equal(dlock_election_campaign(a, "w1", 0), DLOCK_OK);
    test_cmd_int(&nodes[0], "DEL pro");
    test_cmd_int(&nodes[2], "DEL pro");
    assert_int_equal(dlock_election_proclaim(a, "w2"), DLOCK_EEXPIRED);
    dlock_election_free(a);
}

/* A leader read with one node down answers; with two down it cannot
 * tell (DLOCK_ENOQUORUM, fence 0), and a proclaim reaches no majority
 * (DLOCK_ENOQUORUM: the term is not given up for it). */
static void leader_read_with_nodes_down(void **state)
{
    (void)state;
    dlock_election *a = test_election_new(cl, "down", TTL_MS);
    dlock_election *o = test_election_new(cl, "down", TTL_MS);
    assert_int_equal(dlock_election_campaign(a, "up", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    test_redis_kill9(&nodes[0]);
    expect_leader(o, fa, "up");
    assert_int_equal(dlock_election_proclaim(a, "up2"), DLOCK_OK);
    expect_leader(o, fa, "up2");
    test_redis_kill9(&nodes[1]);
    uint64_t f = 7;
    char buf[16] = "x";
    assert_int_equal(dlock_election_leader(o, &f, buf, sizeof buf, NULL), DLOCK_ENOQUORUM);
    assert_int_equal(f, 0);
    assert_string_equal(buf, "");
    assert_int_equal(dlock_election_proclaim(a, "up3"), DLOCK_ENOQUORUM);
    assert_int_equal(test_redis_restart(&nodes[0]), 0);
    assert_int_equal(test_redis_restart(&nodes[1]), 0);
    dlock_election_free(a);
    dlock_election_free(o);
}

/* An observer with one node down, and then two, spends little CPU (no
 * spin on the dead node's reconnects nor on reads that cannot decide),
 * and still sees a change pushed by the nodes left. */
static void an_observer_does_not_spin_with_nodes_down(void **state)
{
    (void)state;
    dlock_election *a = test_election_new(cl, "spin", TTL_MS);
    dlock_election *o = test_election_new(cl, "spin", TTL_MS);
    assert_int_equal(dlock_election_campaign(a, "v1", 0), DLOCK_OK);
    test_leaders s;
    test_leaders_start(&s, o);
    test_leaders_wait(&s, 1, test_now_ms(), PUSH_MS);
    test_redis_kill9(&nodes[2]);
    double c0 = test_cpu_s();
    test_sleep_ms(2000);
    double one_down = test_cpu_s() - c0;
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_election_proclaim(a, "v2"), DLOCK_OK);
    int64_t pushed = test_leaders_wait(&s, 2, t0, PUSH_MS);
    test_redis_kill9(&nodes[1]);
    c0 = test_cpu_s();
    test_sleep_ms(2000);
    double two_down = test_cpu_s() - c0;
    print_message("# observer CPU over 2 s: %.3f s with one node down, %.3f s with two; "
                  "a proclaim seen %" PRId64 " ms after it with one down\n",
                  one_down, two_down, pushed);
    assert_true(one_down < 0.5);
    assert_true(two_down < 0.5);
    test_leaders_stop(&s);
    assert_string_equal(s.value[1], "v2");
    assert_int_equal(test_redis_restart(&nodes[1]), 0);
    assert_int_equal(test_redis_restart(&nodes[2]), 0);
    dlock_election_free(o);
    dlock_election_free(a);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup(f, revive)
    const struct CMUnitTest tests[] = {
        T(bad_input_is_einval_on_a_redlock_too),
        T(campaign_proclaim_resign_on_a_redlock),
        T(the_term_is_on_every_node),
        T(observe_sees_every_change_in_order_on_a_redlock),
        T(the_leader_is_the_token_of_a_majority),
        T(a_proclaim_counts_on_a_majority),
        T(leader_read_with_nodes_down),
        T(an_observer_does_not_spin_with_nodes_down),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
