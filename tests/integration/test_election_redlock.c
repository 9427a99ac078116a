/* SPDX-License-Identifier: BSD-3-Clause */
/* Elections on a Redlock of three real redis-server processes
 * (docs/elections.md, "Redlock"): the term is a plain auto-renewed Redlock
 * lock (no fair line), the value is written on every node and counts on a
 * majority, the leader is the token of a majority with the value of a
 * node stamped with it, and an observer is woken by any node. The same
 * verbs as on one node: campaign, proclaim, resign, leader, observe; a
 * proclaim whose write finds the term gone from a majority ends it; a
 * leader read with one node down answers, with two down says
 * DLOCK_ENOQUORUM; an observer with a node down does not spin. A node
 * restarted without persistence gets the term's value back with its key
 * (a standby's failed campaigns there notwithstanding), and the value
 * shown does not go back after such a restore. */
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
#define SHORT_TTL_MS 1500 /* a renewal round every 500 ms: a key put back soon */

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

typedef struct held_at {
    int node;
    const char *key, *token;
} held_at;

static int holds(void *arg)
{
    const held_at *h = arg;
    char *v = test_cmd_str_or_nil(&nodes[h->node], "GET %s", h->key);
    int yes = v && strcmp(v, h->token) == 0;
    free(v);
    return yes;
}

/* Start node i again after a kill (without persistence it comes back
 * empty) and wait for the leader's watchdog to put the term's key back
 * there. */
static void back_empty(int i, const char *name, const char *token)
{
    assert_int_equal(test_redis_restart(&nodes[i]), 0);
    held_at h = {i, name, token};
    assert_true(test_wait_until(holds, &h, 5 * SHORT_TTL_MS, 20));
}

static void restart_empty(int i, const char *name, const char *token)
{
    test_redis_kill9(&nodes[i]);
    back_empty(i, name, token);
}

/* F1 of the review: restore_batch.lua put the key back without the
 * value; after two restarts the value was on the third node only, and
 * with that node down the leader read as nobody (fence 0) while its term
 * was held. */
static void a_restarted_node_gets_the_value_back_with_the_key(void **state)
{
    (void)state;
    dlock_election *a = test_election_new(cl, "rv", SHORT_TTL_MS);
    dlock_election *o = test_election_new(cl, "rv", SHORT_TTL_MS);
    assert_int_equal(dlock_election_campaign(a, "leader-a", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    const char *tok = dlock_lock_token(dlock_election_lock(a));
    restart_empty(0, "rv", tok);
    restart_empty(1, "rv", tok);
    test_redis_kill9(&nodes[2]);
    test_expect_leader(o, fa, "leader-a", 0); /* not nobody (fence 0) */
    for (int i = 0; i < 2; i++) { /* the value came back with the key */
        char *v = value_field(i, "rv", "v");
        assert_non_null(v);
        assert_string_equal(v, "leader-a");
        free(v);
    }
    /* A proclaim after the restarts is what a restore carries next. */
    back_empty(2, "rv", tok);
    assert_int_equal(dlock_election_proclaim(a, "leader-a2"), DLOCK_OK);
    restart_empty(0, "rv", tok);
    restart_empty(1, "rv", tok);
    test_redis_kill9(&nodes[2]);
    test_expect_leader(o, fa, "leader-a2", 0);
    assert_int_equal(test_redis_restart(&nodes[2]), 0);
    dlock_election_free(o);
    dlock_election_free(a);
}

/* A standby's failed campaigns on a node restarted without persistence
 * raise that node's fence counter (acquire.lua INCRs it on every SET NX
 * it wins there, the undo keeps it) above the term's fence before the
 * leader's watchdog puts the key back; elect_read.lua refused a Redlock
 * stamp whose fence was below the node's counter, so after two such
 * restarts and the third node down the leader read as nobody (fence 0)
 * again (an adversarial review's R1). */
static void grab(dlock_election *s, int times)
{
    for (int k = 0; k < times; k++)
        assert_int_not_equal(dlock_election_campaign(s, "standby", 0), DLOCK_OK);
}

static long long fence_counter(int i, const char *name)
{
    char key[64];
    int klen = snprintf(key, sizeof key, "%s%cfence", name, '\0');
    redisContext *c = test_redis_admin(&nodes[i]);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "GET %b", key, (size_t)klen);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

static void a_standby_s_failed_campaigns_do_not_hide_the_restored_value(void **state)
{
    (void)state;
    dlock_election *a = test_election_new(cl, "rg", SHORT_TTL_MS);
    dlock_election *s = test_election_new(cl, "rg", SHORT_TTL_MS);
    dlock_election *o = test_election_new(cl, "rg", SHORT_TTL_MS);
    assert_int_equal(dlock_election_campaign(a, "leader-a", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    const char *tok = dlock_lock_token(dlock_election_lock(a));
    for (int i = 0; i < 2; i++) {
        test_redis_kill9(&nodes[i]);
        assert_int_equal(test_redis_restart(&nodes[i]), 0);
        grab(s, 2); /* a standby's try-once campaigns, before the restore */
        held_at h = {i, "rg", tok};
        assert_true(test_wait_until(holds, &h, 5 * SHORT_TTL_MS, 20));
        char *v = value_field(i, "rg", "v");
        assert_string_equal(v, "leader-a"); /* the stamp did come back */
        free(v);
        assert_true(fence_counter(i, "rg") > (long long)fa); /* the case */
    }
    test_redis_kill9(&nodes[2]);
    test_expect_leader(o, fa, "leader-a", 0); /* not nobody (fence 0) */
    assert_int_equal(test_redis_restart(&nodes[2]), 0);
    dlock_election_free(o);
    dlock_election_free(s);
    dlock_election_free(a);
}

/* a's proclaim of value while node i refuses writes (out of memory). */
static int proclaim_refused_by(dlock_election *a, int i, const char *value)
{
    test_cmd_status(&nodes[i], "CONFIG SET maxmemory 1");
    int rc = dlock_election_proclaim(a, value);
    test_cmd_status(&nodes[i], "CONFIG SET maxmemory 0");
    return rc;
}

/* A proclaim whose replies were lost (node 1 stopped past the I/O
 * timeout, then resumed: it runs the queued write) answers
 * DLOCK_ENOQUORUM yet is on a majority and shows; the restore stamp is
 * still the write before it, so once node 1 restarts without persistence
 * the watchdog puts the older value back there. The newest write on any
 * node still shows (node 0 kept v2): the value does not go back to v1
 * within the term, as it did with a read that took only a write a
 * majority holds (an adversarial review's R2). */
static void a_shown_value_stays_after_a_restore(void **state)
{
    (void)state;
    dlock_election *a = test_election_new(cl, "gb", SHORT_TTL_MS);
    dlock_election *o = test_election_new(cl, "gb", SHORT_TTL_MS);
    assert_int_equal(dlock_election_campaign(a, "v1", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    const char *tok = dlock_lock_token(dlock_election_lock(a));
    test_redis_pause(&nodes[1]);
    int rc = proclaim_refused_by(a, 2, "v2");
    test_redis_resume(&nodes[1]);
    assert_int_equal(rc, DLOCK_ENOQUORUM);
    usleep(200 * 1000);
    char *v = value_field(1, "gb", "v");
    assert_string_equal(v, "v2"); /* node 1 ran the write after all */
    free(v);
    test_expect_leader(o, fa, "v2", 0); /* on a majority (0, 1): shown */
    restart_empty(1, "gb", tok);
    v = value_field(1, "gb", "v");
    assert_string_equal(v, "v1"); /* the restore stamp: the write before */
    free(v);
    test_expect_leader(o, fa, "v2", 0); /* not "v1": nothing went back */
    dlock_election_free(o);
    dlock_election_free(a);
}

/* One node missed a proclaim (refused it, OOM), so v2 is on nodes 0 and
 * 1 and v1 on node 2; node 0 then restarts without persistence (one
 * crash: a Redlock of three survives it). Until the watchdog's next round
 * puts the key and v2 back (up to a third of the TTL) no write of the
 * leader's is on a majority; the leader, which holds its term on nodes 1
 * and 2, still shows with v2, the newest write there (a read that took
 * only a write a majority holds said nobody: an adversarial review's
 * R3). */
static void one_restart_after_a_missed_write_shows_the_leader(void **state)
{
    (void)state;
    dlock_election *a = test_election_new(cl, "ow", TTL_MS);
    dlock_election *o = test_election_new(cl, "ow", TTL_MS);
    assert_int_equal(dlock_election_campaign(a, "v1", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    int rc = proclaim_refused_by(a, 2, "v2");
    assert_int_equal(rc, DLOCK_OK); /* nodes 0 and 1 took it */
    test_expect_leader(o, fa, "v2", 0);
    test_redis_kill9(&nodes[0]);
    assert_int_equal(test_redis_restart(&nodes[0]), 0);
    test_expect_leader(o, fa, "v2", 0); /* not nobody (fence 0) */
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
        T(a_restarted_node_gets_the_value_back_with_the_key),
        T(a_standby_s_failed_campaigns_do_not_hide_the_restored_value),
        T(a_shown_value_stays_after_a_restore),
        T(one_restart_after_a_missed_write_shows_the_leader),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
