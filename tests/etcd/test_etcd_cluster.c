/* SPDX-License-Identifier: BSD-3-Clause */
/* A three-member etcd cluster under faults while processes contend for one
 * lock through the public API: the leader killed (and restarted), then a
 * member paused (SIGSTOP). The lock must stay exclusive with an exact
 * counter and strictly growing fencing tokens, and work must go on: the
 * test reports the share of failed sections and the longest wait. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "dlock.h"
#include "etcd_procs.h"
#include "etcd_server.h"
#include "proc.h"

static test_etcd cluster;

static int setup(void **state)
{
    (void)state;
    return test_etcd_start(&cluster, 3);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_stop(&cluster);
    return 0;
}

enum { N_PROCS = 4 };

static etcd_shared *contend_start(pid_t *pids, const char *name)
{
    etcd_shared *sh = etcd_shared_new();
    assert_non_null(sh);
    snprintf(sh->url, sizeof sh->url, "%s", cluster.url);
    snprintf(sh->name, sizeof sh->name, "%s", name);
    sh->rounds = 10;
    sh->until_stop = 1;
    sh->ttl_ms = 3000;
    sh->wait_ms = 10000;
    assert_int_equal(test_start_procs(pids, N_PROCS, etcd_worker, sh), 0);
    return sh;
}

static void contend_finish(pid_t *pids, etcd_shared *sh, const char *what)
{
    atomic_store(&sh->stop, 1);
    int bad = test_wait_procs(pids, N_PROCS);
    long sections = atomic_load(&sh->sections), failed = atomic_load(&sh->failed_sections);
    printf("# %s: %ld sections, counter %ld, overlaps %d, stale fences %ld, "
           "failed %ld (%.1f %%), longest wait %ld ms\n",
           what, sections, sh->counter, atomic_load(&sh->overlaps),
           atomic_load(&sh->stale_fences), failed,
           sections + failed ? 100.0 * (double)failed / (double)(sections + failed) : 0.0,
           atomic_load(&sh->longest_wait_ms));
    assert_int_equal(bad, 0);
    assert_int_equal(sh->counter, sections);
    assert_true(sections >= N_PROCS * sh->rounds);
    assert_int_equal(atomic_load(&sh->overlaps), 0);
    assert_int_equal(atomic_load(&sh->stale_fences), 0);
    assert_int_equal(atomic_load(&sh->lock_errors), 0);
    munmap(sh, sizeof *sh);
}

static void leader_killed_while_processes_contend(void **state)
{
    (void)state;
    pid_t pids[N_PROCS];
    etcd_shared *sh = contend_start(pids, "cluster-leader-kill");
    test_sleep_ms(1500);
    long before = atomic_load(&sh->sections);
    int leader = test_etcd_leader(&cluster, 5000);
    assert_true(leader >= 0);
    test_etcd_kill9(&cluster, leader);
    test_sleep_ms(3000);
    long during = atomic_load(&sh->sections) - before;
    assert_int_equal(test_etcd_restart(&cluster, leader), 0);
    test_sleep_ms(1500);
    printf("# leader m%d killed: %ld sections in the 3 s after\n", leader, during);
    /* two members are a majority: the lock goes on without the leader */
    assert_true(during > 0);
    contend_finish(pids, sh, "leader kill");
}

static void a_paused_member_is_ridden_out(void **state)
{
    (void)state;
    pid_t pids[N_PROCS];
    etcd_shared *sh = contend_start(pids, "cluster-pause");
    test_sleep_ms(1000);
    /* pause a member the clients talk to first: the first in the URL */
    test_etcd_pause(&cluster, 0);
    long before = atomic_load(&sh->sections);
    test_sleep_ms(3000);
    long during = atomic_load(&sh->sections) - before;
    test_etcd_resume(&cluster, 0);
    test_sleep_ms(1000);
    printf("# member m0 paused: %ld sections in the 3 s of the pause\n", during);
    assert_true(during > 0);
    contend_finish(pids, sh, "member pause");
}

/* The watchdog keeps an auto-renewed lease alive through a leader's death:
 * the holder stays the holder past its TTL, nobody else gets in. */
static void an_auto_renewed_lock_outlives_a_leader_kill(void **state)
{
    (void)state;
    const char *url = cluster.url;
    dlock_client_options co;
    dlock_client_options_init(&co, DLOCK_CLIENT_OPTIONS_VERSION);
    co.io_timeout_ms = 500;
    dlock_client *c, *other;
    assert_int_equal(dlock_client_new(&c, &url, 1, &co, NULL, 0), DLOCK_OK);
    assert_int_equal(dlock_client_new(&other, &url, 1, &co, NULL, 0), DLOCK_OK);
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = 3000;
    lo.flags = DLOCK_AUTO_RENEW;
    dlock_lock *l, *o;
    assert_int_equal(dlock_lock_new(&l, c, "cluster-renew", &lo), DLOCK_OK);
    lo.flags = 0;
    assert_int_equal(dlock_lock_new(&o, other, "cluster-renew", &lo), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    int leader = test_etcd_leader(&cluster, 5000);
    assert_true(leader >= 0);
    test_etcd_kill9(&cluster, leader);
    test_sleep_ms(4500); /* 1.5 x the TTL */
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_true(dlock_lock_validity_ms(l) > 0);
    assert_int_equal(dlock_lock_acquire(o, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(test_etcd_restart(&cluster, leader), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(o, 0), DLOCK_OK);
    dlock_lock_free(o);
    dlock_lock_free(l);
    dlock_client_free(other);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(leader_killed_while_processes_contend),
        cmocka_unit_test(a_paused_member_is_ridden_out),
        cmocka_unit_test(an_auto_renewed_lock_outlives_a_leader_kill),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
