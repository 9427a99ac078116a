/* SPDX-License-Identifier: BSD-3-Clause */
/* Lock-delay (issue 39; dlock_lock_options.lock_delay_ms,
 * docs/lock-delay.md) against real servers: one node, a Redlock of three
 * and a Redis Cluster, every kind. A holder in a child process takes the
 * lock, renews it for a while (so the delay must follow the renewed lease,
 * not the first one) and is SIGKILLed; the next acquire must come at least
 * the delay after the lease's end (the last look that still saw the key on
 * every node is a lower bound of that end), and not much later; a clean
 * release frees the name at once, and a try-once acquire after it gets
 * the lock. A waiter sleeps through the delay instead of polling (script
 * calls counted on one node). Bad values are DLOCK_EINVAL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "lock_delay_body.h"
#include "proc.h"
#include "redis_topology.h"
#include "test_util.h"

#define TTL_MS 600
#define DELAY_MS 800
/* The child holds (renewing every TTL_MS / 3) this long before its death. */
#define HOLD_MS 700
/* How much later than the delay's end the next holder may come: a wait's
 * slack on a loaded machine, generous. */
#define LATE_MS 1500

typedef test_delay_kind kind;
typedef test_delay_target target;

static const kind kinds[] = {
    {"plain", 0, 0, 0, 0},
    {"reentrant", DLOCK_REENTRANT, 0, 0, 0},
    {"fair", DLOCK_FAIR, 0, 0, 1},
    {"exclusive", DLOCK_EXCLUSIVE, 0, 0, 0},
    {"shared", DLOCK_SHARED, 0, 0, 0},
    {"shared reentrant", DLOCK_SHARED | DLOCK_REENTRANT, 0, 0, 0},
    {"semaphore", 0, 1, 0, 1},
    {"several names", 0, 0, 1, 0},
};

static long long script_calls(const void *srv)
{
    return test_script_calls(srv);
}

/* One node: the try-once, the waiting acquire's first try and the one
 * after the delay's sleep, and a release message's look perhaps (a set:
 * per name; a fair waiter looks each refresh, 4 more). Without the sleep
 * until the delay's end the plain case made 7 (a subscribed waiter's 200
 * ms safety looks). */
static long long calls_max(unsigned flags, int multi)
{
    return flags & DLOCK_FAIR ? 8 : multi ? 6 : 4;
}

static target target_of(const char *label, const char *const *urls, size_t n, int cluster,
                        const test_redis *one)
{
    target t = {label, {NULL}, n, cluster, TTL_MS, DELAY_MS, HOLD_MS, DELAY_MS, LATE_MS,
                one ? script_calls : NULL, one, calls_max};
    for (size_t i = 0; i < n; i++)
        t.urls[i] = urls[i];
    return t;
}

static void every_kind(const target *t)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!(kinds[i].one_node && t->n > 1))
            test_delay_killed_holder(t, &kinds[i]);
}

/* ---- one node ------------------------------------------------------------ */

static target one_node(void)
{
    return target_of("one", (const char *const[]){test_srv.url}, 1, 0, &test_srv);
}

static void one_node_every_kind(void **state)
{
    (void)state;
    target t = one_node();
    every_kind(&t);
}

/* A semaphore's permit of a dead holder stays taken for the delay: with
 * two permits and one live holder beside it nobody else gets one; with
 * three, the third is free at once. */
static void a_dead_holders_permit_is_counted_for_the_delay(void **state)
{
    (void)state;
    target t = one_node();
    for (unsigned n = 2; n <= 3; n++) {
        char name[64];
        snprintf(name, sizeof name, "ld:permits:%u", n);
        kind k = {"semaphore", 0, n, 0, 1};
        pid_t pid = test_delay_dying_holder(&t, &k, name);
        dlock_client *c = test_delay_client(&t);
        dlock_lock *live = NULL, *next = NULL;
        assert_int_equal(test_delay_lock(&t, c, &k, name, DLOCK_AUTO_RENEW, DELAY_MS, &live), DLOCK_OK);
        assert_int_equal(test_delay_lock(&t, c, &k, name, 0, DELAY_MS, &next), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(live, 0), DLOCK_OK);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        /* Until the dead one's lease ended: our live permit alone. */
        dlock_holders_info hi = {0};
        int64_t until = test_now_ms() + 5000;
        do {
            test_sleep_ms(5);
            assert_int_equal(dlock_client_holders(c, name, 0, &hi, NULL, 0), DLOCK_OK);
        } while (hi.count > 1 && test_now_ms() < until);
        assert_int_equal(hi.count, 1);
        int64_t t0 = test_now_ms();
        int want = n == 2 ? DLOCK_ENOTACQUIRED : DLOCK_OK;
        assert_int_equal(dlock_lock_acquire(next, 0), want);
        if (n == 2) {
            assert_int_equal(dlock_lock_acquire(next, 5000), DLOCK_OK);
            assert_true(test_now_ms() - t0 <= DELAY_MS + LATE_MS);
        }
        assert_int_equal(dlock_lock_release(next), DLOCK_OK);
        assert_int_equal(dlock_lock_release(live), DLOCK_OK);
        dlock_lock_free(next);
        dlock_lock_free(live);
        dlock_client_free(c);
    }
}

/* Without a delay nothing changes: the next holder comes as soon as the
 * lease ends, and nothing is left beside the lock. */
static void without_a_delay_the_lease_end_frees_the_name(void **state)
{
    (void)state;
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *a = test_lock_new(c, "ld:none", 300, 0, 1, 20);
    dlock_lock *b = test_lock_new(c, "ld:none", 300, 0, 1, 20);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char dk[64];
    size_t dkn = test_helper_key(dk, sizeof dk, "ld:none", "delay");
    redisReply *r = test_cmd_bin(&test_srv, "EXISTS %b", dk, dkn); /* no marks */
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(b, 5000), DLOCK_OK);
    assert_true(test_now_ms() - t0 < 300 + 250);
    int64_t left = -1;
    assert_int_equal(dlock_client_lock_delay(c, "ld:none", 0, &left), DLOCK_OK);
    assert_int_equal(left, 0);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_free(c);
}

/* A lease that ran out under a live process (no renewal) counts as an
 * unclean end too: its late release finds nothing and frees nothing. */
static void a_lease_that_ran_out_is_delayed_too(void **state)
{
    (void)state;
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 200;
    o.lock_delay_ms = DELAY_MS;
    dlock_lock *a = test_lock_with(c, "ld:ranout", &o);
    dlock_lock *b = test_lock_with(c, "ld:ranout", &o);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    test_sleep_ms(250);
    assert_int_not_equal(dlock_lock_release(a), DLOCK_OK);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    assert_non_null(strstr(dlock_lock_errmsg(b), "lock-delay"));
    assert_int_equal(dlock_lock_acquire(b, 5000), DLOCK_OK);
    int64_t waited = test_now_ms() - t0;
    assert_true(waited >= DELAY_MS - 250 && waited <= DELAY_MS + LATE_MS);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_free(c);
}

static void bad_delays_are_refused(void **state)
{
    (void)state;
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *l = NULL;
    const int64_t bad[] = {-1, INT64_MIN, DLOCK_LOCK_DELAY_MAX_MS + 1, INT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.lock_delay_ms = bad[i];
        assert_int_equal(dlock_lock_new(&l, c, "ld:bad", &o), DLOCK_EINVAL);
        assert_null(l);
        assert_int_equal(dlock_semaphore_new(&l, c, "ld:bad", 2, &o), DLOCK_EINVAL);
        assert_int_equal(dlock_lock_new_multi(&l, c, (const char *const[]){"ld:x", "ld:y"}, 2,
                                              &o),
                         DLOCK_EINVAL);
    }
    o.lock_delay_ms = DLOCK_LOCK_DELAY_MAX_MS;
    assert_int_equal(dlock_lock_new(&l, c, "ld:bad", &o), DLOCK_OK);
    dlock_lock_free(l);
    int64_t left = 0;
    assert_int_equal(dlock_client_lock_delay(c, "ld:bad", 0, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_client_lock_delay(c, "ld:bad", 1, &left), DLOCK_EINVAL);
    assert_int_equal(dlock_client_lock_delay(c, "", 0, &left), DLOCK_EINVAL);
    dlock_client_free(c);
}

/* ---- a Redlock of three -------------------------------------------------- */

static test_redis three[3];

static int three_setup(void **state)
{
    (void)state;
    return test_redis_start_many(three, 3, NULL);
}

static int three_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        test_redis_stop(&three[i]);
    return 0;
}

static void redlock_every_kind(void **state)
{
    (void)state;
    target t = target_of("redlock", (const char *const[]){three[0].url, three[1].url,
                                                          three[2].url},
                         3, 0, NULL);
    every_kind(&t);
}

/* ---- a Redis Cluster ------------------------------------------------------- */

static test_cluster C;

static int cluster_setup(void **state)
{
    (void)state;
    return test_cluster_start(&C) == 0 ? 0 : -1;
}

static int cluster_teardown(void **state)
{
    (void)state;
    test_cluster_stop(&C);
    return 0;
}

/* The marks live in the lock's slot (the scripts name them: CROSSSLOT
 * otherwise), for names on different masters. */
static void cluster_every_kind(void **state)
{
    (void)state;
    target t = target_of("cluster", C.urls, TEST_CLUSTER_NODES, 1, NULL);
    every_kind(&t);
}

int main(void)
{
    const struct CMUnitTest one[] = {
        cmocka_unit_test_teardown(one_node_every_kind, test_srv_flush),
        cmocka_unit_test_teardown(a_dead_holders_permit_is_counted_for_the_delay,
                                  test_srv_flush),
        cmocka_unit_test_teardown(without_a_delay_the_lease_end_frees_the_name, test_srv_flush),
        cmocka_unit_test_teardown(a_lease_that_ran_out_is_delayed_too, test_srv_flush),
        cmocka_unit_test_teardown(bad_delays_are_refused, test_srv_flush),
    };
    const struct CMUnitTest redlock[] = {cmocka_unit_test(redlock_every_kind)};
    const struct CMUnitTest cluster[] = {cmocka_unit_test(cluster_every_kind)};
    int failed = cmocka_run_group_tests_name("one node", one, test_srv_setup, test_srv_teardown);
    failed += cmocka_run_group_tests_name("redlock", redlock, three_setup, three_teardown);
    failed += cmocka_run_group_tests_name("cluster", cluster, cluster_setup, cluster_teardown);
    return failed;
}
