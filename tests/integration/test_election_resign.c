/* SPDX-License-Identifier: BSD-3-Clause */
/* A resign's word to the observers (src/redis/elect_resign.c) when the
 * next standby is stopped: on a Cluster and a Sentinel-managed primary, a
 * blocking free of a leading election (a resign, dlock.h), and the
 * observer's hold-back of a term with no value (election.c, hold_back())
 * against a term that ends before the client's I/O timeout; a timed
 * observe's deadline during a hold, and the CPU it uses (an adversarial
 * review's tests: the resign and free cases fail without the word, the
 * hold case without the cap). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "proc.h"
#include "test_observer.h"
#include "redis_topology.h"
#include "test_util.h"

enum { SINGLE, CLUSTER, SENTINEL };

static test_cluster C;
static test_sentinel_set S;

static dlock_client *client_of(int topo, int io_ms)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.io_timeout_ms = io_ms;
    dlock_client *c = NULL;
    const char *url = topo == SINGLE ? test_srv.url : S.url;
    int rc;
    if (topo == CLUSTER) {
        o.cluster = 1;
        rc = dlock_client_new(&c, C.urls, TEST_CLUSTER_NODES, &o, NULL, 0);
    } else {
        rc = dlock_client_new(&c, &url, 1, &o, NULL, 0);
    }
    return rc == DLOCK_OK ? c : NULL;
}

static dlock_election *election(dlock_client *c, const char *name, int64_t ttl_ms)
{
    dlock_election_options o = DLOCK_ELECTION_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    dlock_election *e = NULL;
    assert_int_equal(dlock_election_new(&e, c, name, &o), DLOCK_OK);
    return e;
}

/* The standby: its own process, its own client, in line until killed. */
static int g_topo;
static const char *g_name;
static int64_t g_standby_ttl;

static int standby_main(int i, void *arg)
{
    (void)i, (void)arg;
    dlock_client *c = client_of(g_topo, 1000);
    dlock_election *e = NULL;
    dlock_election_options o = DLOCK_ELECTION_OPTIONS_INIT;
    o.ttl_ms = g_standby_ttl;
    if (!c || dlock_election_new(&e, c, g_name, &o) != DLOCK_OK)
        return 1;
    (void)dlock_election_campaign(e, "B", DLOCK_WAIT_FOREVER);
    return 0;
}

typedef struct scen {
    int topo;
    const char *name;
    int how;              /* 0 dlock_election_resign, 1 dlock_election_free */
    int64_t lead_ttl, standby_ttl;
    int obs_io_ms;        /* the observer's client's io_timeout_ms */
    int64_t obs_wait_ms;  /* the observe's wait_ms */
    int64_t wait_ms;      /* how long the test waits for the second report */
    /* out */
    int64_t heard_ms;     /* resign to the second report, -1: none */
    int64_t obs_return_ms; /* observe's start to its return (timed observe) */
    int obs_rc;
    double cpu;           /* this process's CPU while waiting */
    uint64_t fa, seen;
    long long holder_after; /* single node: EXISTS of the lock key right after */
} scen;

static void run(scen *s)
{
    dlock_client *la = client_of(s->topo, 1000), *oc = client_of(s->topo, s->obs_io_ms);
    assert_non_null(la);
    assert_non_null(oc);
    dlock_election *a = election(la, s->name, s->lead_ttl);
    assert_int_equal(dlock_election_campaign(a, "A", 0), DLOCK_OK);
    s->fa = dlock_election_fence(a);
    dlock_election *ob = election(oc, s->name, s->lead_ttl);
    test_obs o;
    int64_t obs_start = test_now_ms();
    test_obs_start(&o, ob, s->obs_wait_ms);
    int64_t end = test_now_ms() + 10000;
    while (test_obs_calls(&o, &s->seen) < 1 && test_now_ms() < end)
        test_sleep_ms(2);
    assert_int_equal(s->seen, s->fa);
    g_topo = s->topo, g_name = s->name, g_standby_ttl = s->standby_ttl;
    pid_t pid;
    assert_int_equal(test_start_procs(&pid, 1, standby_main, NULL), 0);
    /* in line: its first look is at once; well within its liveness */
    test_sleep_ms(s->standby_ttl >= 4000 ? 1000 : 300);
    assert_int_equal(test_proc_stop(pid, 2000), 0);
    int64_t t0 = test_now_ms();
    if (s->how == 0)
        assert_int_equal(dlock_election_resign(a), DLOCK_OK);
    else
        dlock_election_free(a), a = NULL;
    if (s->topo == SINGLE)
        s->holder_after = test_cmd_int(&test_srv, "EXISTS %s", s->name);
    double c0 = test_cpu_s();
    end = t0 + s->wait_ms;
    while (test_obs_calls(&o, &s->seen) < 2 && test_now_ms() < end && !test_obs_done(&o))
        test_sleep_ms(2);
    s->cpu = test_cpu_s() - c0;
    s->heard_ms = test_obs_calls(&o, &s->seen) >= 2 ? test_now_ms() - t0 : -1;
    dlock_election_cancel(ob);
    test_obs_join(&o);
    s->obs_rc = o.rc;
    s->obs_return_ms = o.returned_ms - obs_start;
    kill(pid, SIGKILL);
    (void)test_wait_procs(&pid, 1);
    dlock_election_free(ob);
    dlock_election_free(a);
    dlock_client_free(oc);
    dlock_client_free(la);
    print_message("# %s topo %d how %d: heard after %" PRId64 " ms (fence %" PRIu64
                  " -> %" PRIu64 "), lock key after: %lld, observe rc %s after %" PRId64
                  " ms, CPU %.3f s\n",
                  s->name, s->topo, s->how, s->heard_ms, s->fa, s->seen, s->holder_after,
                  dlock_errname(s->obs_rc), s->obs_return_ms, s->cpu);
}

/* ---- Cluster and Sentinel: does the word reach the observers? ---------- */

static void cluster_resign_to_a_stopped_standby_is_observed(void **state)
{
    (void)state;
    scen s = {.topo = CLUSTER, .name = "resign-cl", .lead_ttl = 30000, .standby_ttl = 30000,
              .obs_io_ms = 1000, .obs_wait_ms = DLOCK_WAIT_FOREVER, .wait_ms = 6000};
    run(&s);
    assert_true(s.heard_ms >= 0 && s.heard_ms < 3000);
    assert_int_equal(s.seen, 0);
}

static void sentinel_resign_to_a_stopped_standby_is_observed(void **state)
{
    (void)state;
    scen s = {.topo = SENTINEL, .name = "resign-sn", .lead_ttl = 30000, .standby_ttl = 30000,
              .obs_io_ms = 1000, .obs_wait_ms = DLOCK_WAIT_FOREVER, .wait_ms = 6000};
    run(&s);
    assert_true(s.heard_ms >= 0 && s.heard_ms < 3000);
    assert_int_equal(s.seen, 0);
}

/* ---- one node ------------------------------------------------------------ */

/* dlock.h: dlock_election_free() "resigns first if it leads". The same
 * stopped standby as a_resign_to_a_stopped_standby_is_observed: the
 * observer should hear of it as it does of dlock_election_resign(). */
static void a_free_of_the_leader_to_a_stopped_standby_is_observed(void **state)
{
    (void)state;
    scen s = {.topo = SINGLE, .name = "resign-free", .how = 1, .lead_ttl = 30000,
              .standby_ttl = 30000, .obs_io_ms = 1000, .obs_wait_ms = DLOCK_WAIT_FOREVER,
              .wait_ms = 6000};
    run(&s);
    assert_int_equal(s.holder_after, 1); /* handed to the stopped standby */
    assert_true(s.heard_ms >= 0 && s.heard_ms < 3000);
}

/* hold_back() holds a term with no value for the observer's io_timeout_ms
 * whatever that term's own lease: with a 1 s election (the standby's claim
 * lapses within about 1 s, the resigned leader's lease was at most 1 s)
 * and an observer's io_timeout_ms of 5 s, the change is shown after 5 s,
 * where without the branch the look at the leader's lease end showed it
 * within about 1 s. */
static void a_held_term_that_ends_is_shown_by_its_end(void **state)
{
    (void)state;
    scen s = {.topo = SINGLE, .name = "resign-hold", .lead_ttl = 1000, .standby_ttl = 1000,
              .obs_io_ms = 5000, .obs_wait_ms = DLOCK_WAIT_FOREVER, .wait_ms = 8000};
    run(&s);
    assert_int_equal(s.holder_after, 1);
    if (s.cpu > 0.5)
        fail_msg("%.3f s of CPU while held: it spins", s.cpu);
    assert_true(s.heard_ms >= 0);
    if (s.heard_ms > 2500)
        fail_msg("the change was shown %lld ms after the resign; the held term's lease "
                 "was about 1 s",
                 (long long)s.heard_ms);
}

/* A timed observe whose deadline falls inside a hold returns at it. */
static void a_timed_observe_ends_at_its_deadline_during_a_hold(void **state)
{
    (void)state;
    scen s = {.topo = SINGLE, .name = "resign-deadline", .lead_ttl = 30000, .standby_ttl = 30000,
              .obs_io_ms = 5000, .obs_wait_ms = 2500, .wait_ms = 4000};
    run(&s);
    assert_int_equal(s.holder_after, 1);
    assert_int_equal(s.obs_rc, DLOCK_ETIMEDOUT);
    assert_true(s.obs_return_ms >= 2400 && s.obs_return_ms < 3000);
    if (s.cpu > 0.5)
        fail_msg("%.3f s of CPU while held: it spins", s.cpu);
}

static int topo_setup(void **state)
{
    (void)state;
    if (test_cluster_start(&C) != 0)
        return -1;
    if (test_sentinel_start(&S) != 0) {
        test_cluster_stop(&C);
        return -1;
    }
    return 0;
}

static int topo_teardown(void **state)
{
    (void)state;
    test_cluster_stop(&C);
    test_sentinel_stop(&S);
    return 0;
}

int main(void)
{
    const struct CMUnitTest one[] = {
        cmocka_unit_test(a_free_of_the_leader_to_a_stopped_standby_is_observed),
        cmocka_unit_test(a_held_term_that_ends_is_shown_by_its_end),
        cmocka_unit_test(a_timed_observe_ends_at_its_deadline_during_a_hold),
    };
    const struct CMUnitTest topo[] = {
        cmocka_unit_test(cluster_resign_to_a_stopped_standby_is_observed),
        cmocka_unit_test(sentinel_resign_to_a_stopped_standby_is_observed),
    };
    int failed = cmocka_run_group_tests_name("one node", one, test_srv_client_setup,
                                             test_srv_client_teardown);
    return failed + cmocka_run_group_tests_name("cluster and sentinel", topo, topo_setup,
                                                topo_teardown);
}
