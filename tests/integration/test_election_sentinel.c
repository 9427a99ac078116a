/* SPDX-License-Identifier: BSD-3-Clause */
/* An election through Sentinel while its primary is killed (issue 39:
 * "a leader ... and its node fails"): a leader and a standby on clients
 * of their own, an observer on a third. The primary is SIGKILLed once the
 * replica has the term (a fair grant is not acknowledged by replicas:
 * docs/deployment.md), the sentinels promote the replica, and then:
 *   - at no moment do both candidates believe they lead (polled every
 *     20 ms across the fault: a leader believes while its handle's
 *     validity is above 0 and on_lost has not run);
 *   - within the failover and a lease, a leader is shown again, with its
 *     value, by a read on the new primary;
 *   - the leader's resign hands the term to the standby, whose fence is
 *     larger, and the observer saw the terms in fence order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "dlock.h"
#include "proc.h"
#include "redis_topology.h"
#include "test_leaders.h"
#include "test_util.h"

#define TTL_MS 3000

static test_sentinel_set S;

static int group_setup(void **state)
{
    (void)state;
    return test_sentinel_start(&S);
}

static int group_teardown(void **state)
{
    (void)state;
    test_sentinel_stop(&S);
    return 0;
}

static dlock_client *client(void)
{
    const char *urls[1] = {S.url};
    return test_client_new(urls, 1, NULL);
}

typedef struct candidate {
    dlock_client *c;
    dlock_election *e;
    const char *value;
    atomic_int lost;     /* on_lost ran */
    atomic_int returned; /* the campaign returned (its code in rc) */
    int rc;
    pthread_t thread;
} candidate;

static void on_lost(dlock_lock *l, dlock_lost_reason reason, void *arg)
{
    candidate *k = arg;
    (void)l;
    (void)reason;
    atomic_store(&k->lost, 1);
}

static void candidate_new(candidate *k, const char *value)
{
    memset(k, 0, sizeof *k);
    k->c = client();
    k->value = value;
    dlock_election_options o = DLOCK_ELECTION_OPTIONS_INIT;
    o.ttl_ms = TTL_MS;
    o.on_lost = on_lost;
    o.on_lost_arg = k;
    assert_int_equal(dlock_election_new(&k->e, k->c, "sentinel-term", &o), DLOCK_OK);
}

static void *campaign_main(void *arg)
{
    candidate *k = arg;
    k->rc = dlock_election_campaign(k->e, k->value, 60000);
    atomic_store(&k->returned, 1);
    return NULL;
}

static int believes(candidate *k)
{
    if (atomic_load(&k->lost))
        return 0;
    if (k->thread && !atomic_load(&k->returned))
        return 0;
    return dlock_lock_validity_ms(dlock_election_lock(k->e)) > 0;
}

/* The leader a read on the store shows now: its fence (0: nobody, or an
 * error), value into v. */
static uint64_t shown(dlock_election *reader, char *v, size_t n)
{
    uint64_t fence = 0;
    if (dlock_election_leader(reader, &fence, v, n, NULL) != DLOCK_OK)
        return 0;
    return fence;
}

static void a_term_rides_out_a_failover(void **state)
{
    (void)state;
    candidate a, b;
    candidate_new(&a, "leader-a");
    candidate_new(&b, "standby-b");
    dlock_client *rc = client();
    dlock_election *reader = NULL;
    assert_int_equal(dlock_election_new(&reader, rc, "sentinel-term", NULL), DLOCK_OK);

    assert_int_equal(dlock_election_campaign(a.e, a.value, 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a.e);
    assert_int_equal(pthread_create(&b.thread, NULL, campaign_main, &b), 0);
    test_leaders seen;
    test_leaders_start(&seen, reader);
    test_leaders_wait(&seen, 1, 0, 10000);

    int old_port = test_sentinel_primary_port(&S);
    test_redis *p = test_sentinel_node(&S, old_port);
    assert_non_null(p);
    assert_int_equal(test_redis_replica_acks(p, "sentinel-term-probe", 5000), 1);
    test_redis_kill9(p);
    int64_t t0 = test_now_ms();

    /* Across the failover and a lease: never two believers; then a leader
     * shown again with its value. */
    char v[64] = "";
    uint64_t f = 0;
    int both = 0;
    int64_t shown_at = -1;
    while (test_now_ms() - t0 < 40000) {
        if (believes(&a) && believes(&b))
            both++;
        if (test_sentinel_primary_port(&S) != old_port && (f = shown(reader, v, sizeof v)) > 0) {
            shown_at = test_now_ms() - t0;
            break;
        }
        test_sleep_ms(20);
    }
    print_message("# failover: a leader shown again %" PRId64 " ms after the kill: fence %" PRIu64
                  " (the term before: %" PRIu64 "), value \"%s\"; a %s, b %s\n",
                  shown_at, f, fa, v, believes(&a) ? "leads" : "does not lead",
                  believes(&b) ? "leads" : "does not lead");
    assert_int_equal(both, 0);
    assert_true(shown_at >= 0);
    if (f == fa) {
        assert_string_equal(v, "leader-a"); /* the term survived: a still leads */
        assert_true(believes(&a));
    } else {
        assert_true(f > fa); /* a new term: b's, with a larger fence */
        assert_string_equal(v, "standby-b");
        assert_int_equal(atomic_load(&a.lost), 1);
    }

    /* A resign (if a still leads) hands the term to b. */
    if (believes(&a))
        assert_int_equal(dlock_election_resign(a.e), DLOCK_OK);
    assert_int_equal(pthread_join(b.thread, NULL), 0);
    assert_int_equal(b.rc, DLOCK_OK);
    uint64_t fb = dlock_election_fence(b.e);
    assert_true(fb > fa);
    assert_int_equal(shown(reader, v, sizeof v), fb);
    assert_string_equal(v, "standby-b");
    test_leaders_wait(&seen, 2, 0, 10000);
    test_leaders_stop(&seen);
    for (int i = 1; i < seen.n; i++)
        if (seen.fence[i] && seen.fence[i] < seen.fence[i - 1])
            fail_msg("observer: fence %" PRIu64 " after %" PRIu64, seen.fence[i],
                     seen.fence[i - 1]);
    assert_int_equal(dlock_election_resign(b.e), DLOCK_OK);
    dlock_election_free(reader);
    dlock_election_free(a.e);
    dlock_election_free(b.e);
    dlock_client_free(rc);
    dlock_client_free(a.c);
    dlock_client_free(b.c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_term_rides_out_a_failover),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
