/* SPDX-License-Identifier: BSD-3-Clause */
/* Elections on one Redis node when things go wrong around an observer or
 * a campaign, each case a defect an adversarial review proved (and each
 * failed before its fix): a change made while the observer's
 * subscription was cut and made again is still reported; an observer
 * backs off while the node is down rather than spin, and a timed observe
 * ends at its deadline; a cancel that comes as an observe starts on
 * another thread lands once (in the observe, or, when it came before
 * the call, in the next campaign), and one that comes as a campaign
 * starts ends it; a proclaim that finds the term gone from the store
 * runs on_lost once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "proc.h"
#include "test_observer.h"
#include "test_util.h"

static dlock_election *election(dlock_client *c, const char *name, int64_t ttl_ms,
                                dlock_lost_fn on_lost)
{
    dlock_election_options o = DLOCK_ELECTION_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.on_lost = on_lost;
    dlock_election *e = NULL;
    assert_int_equal(dlock_election_new(&e, c, name, &o), DLOCK_OK);
    return e;
}

/* The subscription cut (CLIENT KILL TYPE pubsub) and a new leader right
 * after: the subscription's renewal pokes the observer, which looks and
 * reports it (it waited with no timeout for a signal that never came). */
static void a_change_while_the_subscription_was_cut_is_reported(void **state)
{
    (void)state;
    dlock_client *other = test_client_for(&test_srv, NULL);
    assert_non_null(other);
    dlock_election *e = election(test_cl, "cut", 30000, NULL);
    dlock_election *cand = election(other, "cut", 30000, NULL);
    test_obs o;
    test_obs_start(&o, e, DLOCK_WAIT_FOREVER);
    test_obs_first_report(&o);
    test_sleep_ms(200);
    assert_true(test_cmd_int(&test_srv, "CLIENT KILL TYPE pubsub") >= 1);
    test_sleep_ms(10);
    assert_int_equal(dlock_election_campaign(cand, "new-leader", 0), DLOCK_OK);
    uint64_t want = dlock_election_fence(cand), seen = 0;
    int64_t end = test_now_ms() + 5000;
    while (test_obs_calls(&o, &seen) < 2 && test_now_ms() < end)
        test_sleep_ms(10);
    dlock_election_cancel(e);
    test_obs_join(&o);
    assert_int_equal(seen, want);
    assert_int_equal(dlock_election_resign(cand), DLOCK_OK);
    dlock_election_free(cand);
    dlock_election_free(e);
    dlock_client_free(other);
}

/* The node killed under an observer: it backs off (a spinning observer
 * burned a core: 1.1-1.9 s of CPU in 2 s), and a timed observe started
 * while it is down returns at its deadline (it ran past 12 s and more). */
static void an_observer_backs_off_while_the_node_is_down(void **state)
{
    (void)state;
    dlock_election *e = election(test_cl, "down", 30000, NULL);
    test_obs o;
    test_obs_start(&o, e, DLOCK_WAIT_FOREVER);
    test_obs_first_report(&o);
    test_redis_kill9(&test_srv);
    /* A read says the node's own error, as ever (on a Redlock "no
     * majority answered" is DLOCK_ENOQUORUM: test_election_redlock). */
    uint64_t fence = 7;
    assert_int_equal(dlock_election_leader(e, &fence, NULL, 0, NULL), DLOCK_EIO);
    assert_int_equal(fence, 0);
    test_sleep_ms(100);
    double c0 = test_cpu_s();
    test_sleep_ms(2000);
    double used = test_cpu_s() - c0;
    dlock_election_cancel(e);
    test_obs_join(&o);
    assert_int_equal(o.rc, DLOCK_ECANCELED);
    print_message("# CPU %.3f s in 2 s with the node down\n", used);
    if (used > 0.5) /* a backoff of 50 ms to 1 s costs a few ms */
        fail_msg("the observer used %.3f s of CPU in 2 s: it spins", used);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_election_observe(e, 1500, test_obs_on_leader, &o), DLOCK_ETIMEDOUT);
    int64_t took = test_now_ms() - t0;
    assert_int_equal(test_redis_restart(&test_srv), 0);
    if (took > 4000) /* the deadline, plus a read's I/O timeout at most */
        fail_msg("a 1.5 s observe returned after %lld ms", (long long)took);
    dlock_election_free(e);
}

/* A cancel as an observe starts on another thread lands exactly once:
 * in the observe (DLOCK_ECANCELED, even before it is listed: it had
 * begun), and then the next campaign is not cancelled; or, when it came
 * before the observe's call, in the next campaign (DLOCK_ECANCELED at
 * once, dlock.h) while the observe times out. Never both, never neither
 * (both were seen: the observe timed out and the campaign was
 * cancelled, or the reverse). */
static void a_cancel_as_an_observe_starts_lands_once(void **state)
{
    (void)state;
    dlock_election *e = election(test_cl, "early", 30000, NULL);
    int in_observe = 0, before = 0;
    for (int i = 0; i < 12; i++) {
        test_obs o;
        test_obs_start(&o, e, 400);
        if (i % 2)
            test_sleep_ms(1); /* sometimes a little later */
        dlock_election_cancel(e);
        test_obs_join(&o);
        /* a waiting campaign: a try-once leaves a cancel pending, as a
         * lock's does (dlock_lock_cancel()) */
        int rc = dlock_election_campaign(e, "v", 300);
        print_message("# run %d: observe %s, campaign %s\n", i, dlock_errname(o.rc),
                      dlock_errname(rc));
        if (o.rc == DLOCK_ECANCELED) {
            in_observe++;
            assert_int_equal(rc, DLOCK_OK);
            assert_int_equal(dlock_election_resign(e), DLOCK_OK);
        } else if (o.rc == DLOCK_ETIMEDOUT) {
            before++;
            assert_int_equal(rc, DLOCK_ECANCELED);
        } else {
            fail_msg("run %d: the observe returned %s after a cancel", i, dlock_errname(o.rc));
        }
    }
    print_message("# the cancel landed in the observe %d times, before it %d times\n", in_observe,
                  before);
    dlock_election_free(e);
}

typedef struct camp {
    dlock_election *e;
    int rc;
} camp;

static void *camp_main(void *arg)
{
    camp *c = arg;
    c->rc = dlock_election_campaign(c->e, "y", 10000);
    return NULL;
}

/* An observe in progress and a campaign in progress on another thread,
 * from just called to waiting: a cancel ends both (one just called was
 * missed before: it waited its 10 s). */
static void a_cancel_reaches_a_campaign_that_just_started(void **state)
{
    (void)state;
    dlock_client *other = test_client_for(&test_srv, NULL);
    dlock_election *holder = election(other, "both", 30000, NULL);
    assert_int_equal(dlock_election_campaign(holder, "h", 0), DLOCK_OK);
    dlock_election *e = election(test_cl, "both", 30000, NULL);
    for (int i = 0; i < 5; i++) {
        test_obs o;
        test_obs_start(&o, e, DLOCK_WAIT_FOREVER);
        test_obs_first_report(&o);
        camp c = {e, 0};
        pthread_t y;
        int64_t t0 = test_now_ms();
        assert_int_equal(pthread_create(&y, NULL, camp_main, &c), 0);
        /* in the call (a cancel before it meets only the observe: the
         * campaign then waits, as dlock.h says), from just in to waiting */
        test_sleep_ms(30 + i * 10);
        dlock_election_cancel(e);
        pthread_join(y, NULL);
        test_obs_join(&o);
        assert_int_equal(o.rc, DLOCK_ECANCELED);
        assert_int_equal(c.rc, DLOCK_ECANCELED);
        assert_true(test_now_ms() - t0 < 5000);
    }
    dlock_election_free(e);
    assert_int_equal(dlock_election_resign(holder), DLOCK_OK);
    dlock_election_free(holder);
    dlock_client_free(other);
}

static atomic_int lost_calls;

static void on_lost(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)l, (void)why, (void)arg;
    atomic_fetch_add(&lost_calls, 1);
}

/* The term's key deleted under its leader, then a proclaim: refused,
 * on_lost once (it was never called: the watchdog had not looked yet),
 * the handle let go, and not again when the watchdog would look. */
static void a_proclaim_that_finds_the_term_gone_runs_on_lost(void **state)
{
    (void)state;
    atomic_store(&lost_calls, 0);
    dlock_election *a = election(test_cl, "gone", 1500, on_lost);
    assert_int_equal(dlock_election_campaign(a, "A", 0), DLOCK_OK);
    test_cmd_int(&test_srv, "DEL gone");
    int rc = dlock_election_proclaim(a, "A2");
    assert_true(rc == DLOCK_ENOTOWNER || rc == DLOCK_EEXPIRED);
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_int_equal(dlock_lock_state_get(dlock_election_lock(a)), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_election_fence(a), 0);
    test_sleep_ms(1500); /* past a renewal round */
    assert_int_equal(atomic_load(&lost_calls), 1);
    /* and it can campaign again */
    assert_int_equal(dlock_election_campaign(a, "A", 0), DLOCK_OK);
    assert_int_equal(dlock_election_resign(a), DLOCK_OK);
    dlock_election_free(a);
}

/* A standby that campaigns in a process of its own, on a client of its
 * own, and waits in line. */
static int standby_main(int i, void *arg)
{
    (void)i, (void)arg;
    dlock_client *c = test_client_for(&test_srv, NULL);
    if (!c)
        return 1;
    dlock_election *e = NULL;
    dlock_election_options o = DLOCK_ELECTION_OPTIONS_INIT;
    o.ttl_ms = 30000;
    if (dlock_election_new(&e, c, "stalled", &o) != DLOCK_OK)
        return 1;
    (void)dlock_election_campaign(e, "B", DLOCK_WAIT_FOREVER);
    return 0;
}

static long long line_length(const char *name)
{
    char key[64];
    size_t n = (size_t)snprintf(key, sizeof key, "%s", name) + 1;
    memcpy(key + n, "q", 2);
    redisReply *r = test_cmd_bin(&test_srv, "LLEN %b", key, n + 1);
    long long len = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return len;
}

/* A resign hands the term to the next standby, which is stopped: it
 * never writes a value, so nothing of the new term wakes the observer.
 * The resign itself does: the observer reports the leader gone once the
 * new term has gone without a value for the I/O timeout (1 s), not the
 * resigned leader until its lease's end (30 s here). */
static void a_resign_to_a_stopped_standby_is_observed(void **state)
{
    (void)state;
    dlock_election *a = election(test_cl, "stalled", 30000, NULL);
    assert_int_equal(dlock_election_campaign(a, "A", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a), seen = 0;
    pid_t pid;
    assert_int_equal(test_start_procs(&pid, 1, standby_main, NULL), 0);
    int64_t end = test_now_ms() + 10000;
    while (line_length("stalled") < 1 && test_now_ms() < end)
        test_sleep_ms(10);
    assert_int_equal(line_length("stalled"), 1);
    assert_int_equal(test_proc_stop(pid, 2000), 0);
    /* (test_cl's subscriber may still be in its reconnect's backoff
     * after the node's restart in the test before) */
    dlock_client *oc = test_client_for(&test_srv, NULL);
    assert_non_null(oc);
    dlock_election *ob = election(oc, "stalled", 30000, NULL);
    test_obs o;
    test_obs_start(&o, ob, DLOCK_WAIT_FOREVER);
    test_obs_first_report(&o);
    assert_true(test_obs_calls(&o, &seen) >= 1 && seen == fa);
    int64_t resigned = test_now_ms();
    assert_int_equal(dlock_election_resign(a), DLOCK_OK);
    end = resigned + 5000;
    while (test_obs_calls(&o, &seen) < 2 && test_now_ms() < end)
        test_sleep_ms(5);
    int64_t heard = test_now_ms() - resigned;
    int calls = test_obs_calls(&o, &seen);
    dlock_election_cancel(ob);
    test_obs_join(&o);
    kill(pid, SIGKILL);
    (void)test_wait_procs(&pid, 1);
    dlock_election_free(ob);
    dlock_client_free(oc);
    dlock_election_free(a);
    print_message("# the observer heard the resign after %" PRId64 " ms (reports %d, fence %" PRIu64
                  ")\n",
                  heard, calls, seen);
    assert_true(calls >= 2);
    assert_int_not_equal(seen, fa);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_change_while_the_subscription_was_cut_is_reported),
        cmocka_unit_test(a_cancel_as_an_observe_starts_lands_once),
        cmocka_unit_test(a_cancel_reaches_a_campaign_that_just_started),
        cmocka_unit_test(a_proclaim_that_finds_the_term_gone_runs_on_lost),
        cmocka_unit_test(an_observer_backs_off_while_the_node_is_down),
        cmocka_unit_test(a_resign_to_a_stopped_standby_is_observed),
    };
    return cmocka_run_group_tests(tests, test_srv_client_setup, test_srv_client_teardown);
}
