/* SPDX-License-Identifier: BSD-3-Clause */
/* Elections on etcd (docs/elections.md) against etcd's own election
 * (`etcdctl elect`, Go's concurrency.Election), one real etcd member:
 * dlock's candidate keys are Election's (NAME/<lease in %x>, the value as
 * the key's value), so each elects against the other and observes the
 * other's leaders, both directions; proclaim writes the leader's key in
 * a transaction on its create revision; observe sees every change in
 * order, pushed (a watch). Skipped when etcdctl is not installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "etcd_ctl.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_leaders.h"
#include "test_util.h"

#define PUSH_MS 2000 /* far below the 10 s lease: a change seen within it was pushed */

static test_etcd srv;
static dlock_client *cl;
static int have_etcdctl;

static int setup(void **state)
{
    (void)state;
    return test_etcdctl_setup(&srv, &cl, &have_etcdctl);
}

static int teardown(void **state)
{
    (void)state;
    test_etcdctl_teardown(&srv, cl, have_etcdctl);
    return 0;
}

static dlock_election *election(const char *name)
{
    dlock_election_options o = DLOCK_ELECTION_OPTIONS_INIT;
    o.ttl_ms = 10000;
    dlock_election *e = NULL;
    assert_int_equal(dlock_election_new(&e, cl, name, &o), DLOCK_OK);
    return e;
}

static void expect_leader(dlock_election *e, uint64_t fence, const char *value)
{
    uint64_t f = 99;
    char buf[64];
    assert_int_equal(dlock_election_leader(e, &f, buf, sizeof buf, NULL), DLOCK_OK);
    if (fence != UINT64_MAX)
        assert_int_equal(f, fence);
    else
        assert_true(f > 0);
    assert_string_equal(buf, value);
}

static void observe_start(test_leaders *s, const char *name)
{
    test_leaders_start(s, election(name));
}

static void wait_seen(test_leaders *s, int n)
{
    (void)test_leaders_wait(s, n, 0, PUSH_MS);
}

static void observe_stop(test_leaders *s)
{
    test_leaders_stop(s);
    dlock_election_free(s->e);
}

/* ---- the tests -------------------------------------------------------------- */

static void campaign_proclaim_resign_and_observe(void **state)
{
    (void)state;
    if (!have_etcdctl)
        skip();
    dlock_election *a = election("e1"), *b = election("e1");
    test_leaders s;
    observe_start(&s, "e1");
    wait_seen(&s, 1);
    assert_int_equal(dlock_election_campaign(a, "a1", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    assert_true(fa > 0);
    expect_leader(b, fa, "a1");
    wait_seen(&s, 2);
    assert_int_equal(dlock_election_campaign(b, "b1", 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_election_proclaim(a, "a2"), DLOCK_OK);
    expect_leader(b, fa, "a2");
    wait_seen(&s, 3);
    assert_int_equal(dlock_election_proclaim(b, "b"), DLOCK_ENOTHELD);
    assert_int_equal(dlock_election_resign(a), DLOCK_OK);
    wait_seen(&s, 4);
    assert_int_equal(dlock_election_campaign(b, "b1", 0), DLOCK_OK);
    assert_true(dlock_election_fence(b) > fa);
    wait_seen(&s, 5);
    assert_int_equal(dlock_election_resign(b), DLOCK_OK);
    wait_seen(&s, 6);
    observe_stop(&s);
    static const char *const want[] = {"", "a1", "a2", "", "b1", ""};
    for (int i = 0; i < 6; i++)
        assert_string_equal(s.value[i], want[i]);
    assert_true(s.fence[4] > s.fence[2]);
    dlock_election_free(a);
    dlock_election_free(b);
}

/* etcdctl leads; dlock reads and observes it, stands by, and leads with a
 * larger fence once etcdctl resigns (SIGTERM). */
static void etcdctl_leads_and_dlock_follows(void **state)
{
    (void)state;
    if (!have_etcdctl)
        skip();
    test_leaders s;
    observe_start(&s, "e2");
    wait_seen(&s, 1);
    ctl c;
    const char *args[] = {"elect", "e2", "from-etcdctl", NULL};
    ctl_start(&c, args);
    assert_true(ctl_wait_for(&c, "from-etcdctl", 10000)); /* it leads */
    wait_seen(&s, 2);
    assert_string_equal(s.value[1], "from-etcdctl");
    dlock_election *d = election("e2");
    expect_leader(d, s.fence[1], "from-etcdctl");
    assert_int_equal(dlock_election_campaign(d, "from-dlock", 0), DLOCK_ENOTACQUIRED);
    assert_true(WIFEXITED(ctl_stop(&c))); /* resigns */
    assert_int_equal(dlock_election_campaign(d, "from-dlock", 10000), DLOCK_OK);
    assert_true(dlock_election_fence(d) > s.fence[1]);
    expect_leader(d, dlock_election_fence(d), "from-dlock");
    wait_seen(&s, 4); /* nobody, then dlock */
    assert_string_equal(s.value[2], "");
    assert_string_equal(s.value[3], "from-dlock");
    assert_int_equal(dlock_election_resign(d), DLOCK_OK);
    observe_stop(&s);
    dlock_election_free(d);
}

/* dlock leads; `etcdctl elect -l` observes its value and its proclaims,
 * and `etcdctl elect` waits behind it and leads once dlock resigns. */
static void dlock_leads_and_etcdctl_follows(void **state)
{
    (void)state;
    if (!have_etcdctl)
        skip();
    dlock_election *d = election("e3");
    assert_int_equal(dlock_election_campaign(d, "dlock-1", 0), DLOCK_OK);
    ctl obs, cand;
    const char *largs[] = {"elect", "-l", "e3", NULL};
    ctl_start(&obs, largs);
    assert_true(ctl_wait_for(&obs, "dlock-1", 10000));
    assert_int_equal(dlock_election_proclaim(d, "dlock-2"), DLOCK_OK);
    assert_true(ctl_wait_for(&obs, "dlock-2", PUSH_MS));
    const char *cargs[] = {"elect", "e3", "etcdctl-1", NULL};
    ctl_start(&cand, cargs);
    test_sleep_ms(500);
    assert_false(ctl_wait_for(&cand, "etcdctl-1", 10)); /* waits behind dlock */
    assert_int_equal(dlock_election_resign(d), DLOCK_OK);
    assert_true(ctl_wait_for(&cand, "etcdctl-1", 10000)); /* leads now */
    assert_true(ctl_wait_for(&obs, "etcdctl-1", PUSH_MS));
    /* etcdctl leads: dlock's proclaim is not its to make. */
    assert_int_equal(dlock_election_proclaim(d, "x"), DLOCK_ENOTHELD);
    expect_leader(d, UINT64_MAX, "etcdctl-1");
    (void)ctl_stop(&cand);
    (void)ctl_stop(&obs);
    dlock_election_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(campaign_proclaim_resign_and_observe),
        cmocka_unit_test(etcdctl_leads_and_dlock_follows),
        cmocka_unit_test(dlock_leads_and_etcdctl_follows),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
