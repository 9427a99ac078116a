/* SPDX-License-Identifier: BSD-3-Clause */
/* Elections (dlock.h, "Elections"; docs/elections.md) on one real Redis
 * node: campaign, proclaim, resign, leader and observe; a standby that
 * takes over at a resign and after a SIGKILLed leader's lease; a new term
 * never shown with the previous term's value; observe sees every change,
 * pushed (each within a time far below the lease, the only other thing
 * that would make it look); bad input is DLOCK_EINVAL. */
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
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "proc.h"
#include "redis_topology.h"
#include "test_leaders.h"
#include "test_util.h"

/* Long enough that a change an observer saw within PUSH_MS was pushed, not
 * found by its look at the lease's end. */
#define TTL_MS 10000
#define PUSH_MS 2000

static dlock_election *election(dlock_client *c, const char *name, int64_t ttl_ms)
{
    return test_election_new(c, name, ttl_ms);
}

static void expect_leader(dlock_election *e, uint64_t fence, const char *value)
{
    test_expect_leader(e, fence, value, 0);
}

static void bad_input_is_einval(void **state)
{
    (void)state;
    dlock_election *e = NULL;
    dlock_election_options o = DLOCK_ELECTION_OPTIONS_INIT;
    assert_int_equal(dlock_election_new(NULL, test_cl, "e", NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_new(&e, NULL, "e", NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_new(&e, test_cl, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_new(&e, test_cl, "", NULL), DLOCK_EINVAL);
    o.version = 99;
    assert_int_equal(dlock_election_new(&e, test_cl, "e", &o), DLOCK_EINVAL);
    o = (dlock_election_options)DLOCK_ELECTION_OPTIONS_INIT;
    o.ttl_ms = 0;
    assert_int_equal(dlock_election_new(&e, test_cl, "e", &o), DLOCK_EINVAL);
    o = (dlock_election_options)DLOCK_ELECTION_OPTIONS_INIT;
    o.lock_delay_ms = -1;
    assert_int_equal(dlock_election_new(&e, test_cl, "e", &o), DLOCK_EINVAL);
    assert_null(e);
    assert_int_equal(dlock_election_options_init(NULL, 1), DLOCK_EINVAL);
    assert_int_equal(dlock_election_options_init(&o, 2), DLOCK_EINVAL);

    e = election(test_cl, "e", TTL_MS);
    char *big = malloc(DLOCK_ELECTION_VALUE_MAX + 2);
    assert_non_null(big);
    memset(big, 'v', DLOCK_ELECTION_VALUE_MAX + 1);
    big[DLOCK_ELECTION_VALUE_MAX + 1] = '\0';
    assert_int_equal(dlock_election_campaign(NULL, "v", 0), DLOCK_EINVAL);
    assert_int_equal(dlock_election_campaign(e, NULL, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_election_campaign(e, big, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_election_campaign(e, "v", -5), DLOCK_EINVAL);
    assert_int_equal(dlock_election_proclaim(e, "v"), DLOCK_ENOTHELD);
    assert_int_equal(dlock_election_resign(e), DLOCK_ENOTHELD);
    assert_int_equal(dlock_election_resign(NULL), DLOCK_EINVAL);
    uint64_t f = 0;
    char buf[8];
    assert_int_equal(dlock_election_leader(NULL, &f, buf, sizeof buf, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_leader(e, NULL, buf, sizeof buf, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_leader(e, &f, NULL, 4, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_leader(e, &f, NULL, 0, NULL), DLOCK_OK);
    assert_int_equal(dlock_election_observe(e, 0, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_observe(NULL, 0, NULL, NULL), DLOCK_EINVAL);

    memset(big, 'v', DLOCK_ELECTION_VALUE_MAX);
    big[DLOCK_ELECTION_VALUE_MAX] = '\0'; /* the longest is fine */
    assert_int_equal(dlock_election_campaign(e, big, 0), DLOCK_OK);
    assert_int_equal(dlock_election_campaign(e, "again", 0), DLOCK_EINVAL);
    assert_int_equal(dlock_election_proclaim(NULL, "v"), DLOCK_EINVAL);
    assert_int_equal(dlock_election_proclaim(e, NULL), DLOCK_EINVAL);
    big[DLOCK_ELECTION_VALUE_MAX] = 'v';
    assert_int_equal(dlock_election_proclaim(e, big), DLOCK_EINVAL);
    size_t full = 0;
    assert_int_equal(dlock_election_leader(e, &f, buf, sizeof buf, &full), DLOCK_OK);
    assert_int_equal(full, DLOCK_ELECTION_VALUE_MAX); /* cut to the buffer */
    assert_string_equal(buf, "vvvvvvv");
    assert_null(dlock_election_lock(NULL));
    assert_int_equal(dlock_election_fence(NULL), 0);
    free(big);
    dlock_election_free(e);
    dlock_election_free(NULL);
}

static void campaign_proclaim_resign_hand_over(void **state)
{
    (void)state;
    test_leaders_hand_over(test_cl, "job", TTL_MS, PUSH_MS);
}

/* A holder that has not written its term's value (a term's first moments
 * on Redis) is shown as nobody, never with the previous term's value. */
static void a_new_term_never_shows_the_previous_value(void **state)
{
    (void)state;
    dlock_election *a = election(test_cl, "term", TTL_MS);
    assert_int_equal(dlock_election_campaign(a, "old", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    expect_leader(a, fa, "old");
    /* Another holder takes the lock as a grant does, before its write:
     * the lock key holds its token and the counter went up. */
    test_cmd_status(&test_srv, "SET term other-token PX 10000");
    redisContext *rc = test_redis_admin(&test_srv);
    assert_non_null(rc);
    redisReply *r = redisCommand(rc, "INCR %b", "term\0fence", (size_t)10);
    assert_non_null(r);
    assert_int_equal(r->integer, (long long)fa + 1);
    freeReplyObject(r);
    expect_leader(a, 0, "");
    /* The same token in a later term (the counter moved on) is not it
     * either, even once it wrote: its stamp has the earlier fence. */
    char tok[80];
    snprintf(tok, sizeof tok, "%s", dlock_lock_token(dlock_election_lock(a)));
    test_cmd_status(&test_srv, "SET term %s PX 10000", tok);
    expect_leader(a, 0, "");
    assert_int_equal(dlock_election_proclaim(a, "new"), DLOCK_OK);
    expect_leader(a, 0, "");
    /* Back to a's own term: its value shows. */
    r = redisCommand(rc, "DECR %b", "term\0fence", (size_t)10);
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(rc);
    expect_leader(a, fa, "new");
    test_cmd_status(&test_srv, "SET term other-token PX 10000");
    assert_int_equal(dlock_election_proclaim(a, "mine"), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_lock_state_get(dlock_election_lock(a)), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_election_proclaim(a, "mine"), DLOCK_ENOTHELD);
    dlock_election_free(a);
}

/* ---- observe ---------------------------------------------------------------- */

static void observe_sees_every_change_in_order(void **state)
{
    (void)state;
    test_leaders_observe_changes(test_cl, "obs", TTL_MS, PUSH_MS, 0);
}

/* A leader in a child process, SIGKILLed after a second of renewals; a
 * standby of this process campaigns: the ms from the kill to its lead. */
static int64_t takeover_after_kill(const char *name, int64_t ttl, int64_t delay)
{
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = test_fork_child();
    if (pid == 0) {
        dlock_client *c = NULL;
        const char *url = test_srv.url;
        if (dlock_client_new(&c, &url, 1, NULL, NULL, 0) != DLOCK_OK)
            _exit(1);
        dlock_election_options eo = DLOCK_ELECTION_OPTIONS_INIT;
        eo.ttl_ms = ttl;
        eo.lock_delay_ms = delay;
        dlock_election *e = NULL;
        if (dlock_election_new(&e, c, name, &eo) != DLOCK_OK ||
            dlock_election_campaign(e, "doomed", 0) != DLOCK_OK)
            _exit(1);
        char b = 'L';
        if (write(ready[1], &b, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    char b;
    assert_int_equal(read(ready[0], &b, 1), 1);
    dlock_election_options eo = DLOCK_ELECTION_OPTIONS_INIT;
    eo.ttl_ms = ttl;
    eo.lock_delay_ms = delay;
    dlock_election *s = NULL, *o = election(test_cl, name, ttl);
    assert_int_equal(dlock_election_new(&s, test_cl, name, &eo), DLOCK_OK);
    uint64_t f0 = 0;
    char buf[32];
    assert_int_equal(dlock_election_leader(o, &f0, buf, sizeof buf, NULL), DLOCK_OK);
    assert_string_equal(buf, "doomed");
    usleep(1000 * 1000); /* renewed at least once */
    int64_t killed = test_now_ms();
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_int_equal(dlock_election_campaign(s, "standby", 10000), DLOCK_OK);
    int64_t took = test_now_ms() - killed;
    assert_true(dlock_election_fence(s) > f0);
    expect_leader(o, dlock_election_fence(s), "standby");
    /* A resign frees the name at once, delay or not. */
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_election_resign(s), DLOCK_OK);
    assert_int_equal(dlock_election_campaign(o, "next", 0), DLOCK_OK);
    assert_true(test_now_ms() - t0 < 500);
    close(ready[0]);
    close(ready[1]);
    dlock_election_free(s);
    dlock_election_free(o);
    return took;
}

/* A leader SIGKILLed: a standby leads within the lease (the kill comes
 * at most a third of it after the last renewal). */
static void a_killed_leader_is_replaced_within_its_lease(void **state)
{
    (void)state;
    int64_t took = takeover_after_kill("killed", 1500, 0);
    print_message("# takeover after SIGKILL (ttl 1500 ms): %" PRId64 " ms\n", took);
    assert_true(took <= 1500 + 500);
}

/* With a lock-delay the standby waits for the lease's end plus the delay
 * (docs/lock-delay.md): the lease ends 1000..1500 ms after the kill. */
static void a_killed_leader_is_replaced_after_its_lease_and_delay(void **state)
{
    (void)state;
    int64_t took = takeover_after_kill("killed-delay", 1500, 1000);
    print_message("# takeover after SIGKILL (ttl 1500 ms, lock-delay 1000 ms): %" PRId64 " ms\n",
                  took);
    assert_true(took >= 1000 + 1000 - 50);
    assert_true(took <= 1500 + 1000 + 500);
}

/* ---- Cluster, Sentinel (a Redlock: test_election_redlock) ------------------- */

static test_cluster C;
static test_sentinel_set S;
static dlock_client *cluster_cl, *sentinel_cl;

static int topologies_setup(void **state)
{
    (void)state;
    if (test_cluster_start(&C) != 0)
        return -1;
    if (test_sentinel_start(&S) != 0) {
        test_cluster_stop(&C);
        return -1;
    }
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = 1;
    if (dlock_client_new(&cluster_cl, C.urls, TEST_CLUSTER_NODES, &o, NULL, 0) != DLOCK_OK)
        return -1;
    const char *url = S.url;
    return dlock_client_new(&sentinel_cl, &url, 1, NULL, NULL, 0) == DLOCK_OK ? 0 : -1;
}

static int topologies_teardown(void **state)
{
    (void)state;
    dlock_client_free(cluster_cl);
    dlock_client_free(sentinel_cl);
    test_cluster_stop(&C);
    test_sentinel_stop(&S);
    return 0;
}

/* On a Cluster the value hash and the election channel are in the lock
 * key's slot (a sharded channel). */
static void elections_on_a_cluster(void **state)
{
    (void)state;
    test_leaders_observe_changes(cluster_cl, "elect-cl", TTL_MS, PUSH_MS, 0);
    test_leaders_observe_changes(cluster_cl, "{tag}elect-cl", TTL_MS, PUSH_MS, 0);
}

static void elections_on_a_sentinel_primary(void **state)
{
    (void)state;
    test_leaders_observe_changes(sentinel_cl, "elect-sn", TTL_MS, PUSH_MS, 0);
}

int main(void)
{
#define T(f) cmocka_unit_test_teardown(f, test_srv_flush)
    const struct CMUnitTest tests[] = {
        T(bad_input_is_einval),
        T(campaign_proclaim_resign_hand_over),
        T(a_new_term_never_shows_the_previous_value),
        T(observe_sees_every_change_in_order),
        T(a_killed_leader_is_replaced_within_its_lease),
        T(a_killed_leader_is_replaced_after_its_lease_and_delay),
    };
    const struct CMUnitTest topologies[] = {
        cmocka_unit_test(elections_on_a_cluster),
        cmocka_unit_test(elections_on_a_sentinel_primary),
    };
    int failed = cmocka_run_group_tests_name("one node", tests, test_srv_client_setup,
                                             test_srv_client_teardown);
    return failed + cmocka_run_group_tests_name("cluster and sentinel", topologies,
                                                topologies_setup, topologies_teardown);
}
