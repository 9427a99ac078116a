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

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "dlock.h"
#include "etcd_procs.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_util.h"

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
    dlock_client *c = test_etcd_client(&cluster, -1, 500);
    dlock_client *other = test_etcd_client(&cluster, -1, 500);
    assert_non_null(c);
    assert_non_null(other);
    dlock_lock *l = test_lock_new(c, "cluster-renew", 3000, DLOCK_AUTO_RENEW, 10, 200);
    dlock_lock *o = test_lock_new(other, "cluster-renew", 3000, 0, 10, 200);
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

/* dlock_lock_cancel() ends a wait at once, also with a member stalled
 * (SIGSTOP) that the waiter was talking to: undoing the attempt (revoking
 * its lease) must not wait io_timeout_ms for that member. If the revoke
 * cannot be done at once the lease ends with its TTL, which is safe. */
typedef struct cancel_waiter {
    dlock_lock *l;
    int rc;
    int64_t done_ms;
} cancel_waiter;

static void *wait_forever(void *arg)
{
    cancel_waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, DLOCK_WAIT_FOREVER);
    w->done_ms = etcd_now_ms();
    return NULL;
}

static void cancel_ends_a_wait_at_once_with_a_member_stalled(void **state)
{
    (void)state;
    /* io_timeout_ms 3000: what a stalled member would cost, per call */
    dlock_client *c = test_etcd_client(&cluster, -1, 3000);
    dlock_client *other = test_etcd_client(&cluster, -1, 3000);
    assert_non_null(c);
    assert_non_null(other);
    dlock_lock *holder = test_lock_new(other, "cluster-cancel", 3000, 0, 10, 200);
    dlock_lock *w = test_lock_new(c, "cluster-cancel", 3000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    cancel_waiter cw = {w, -99, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_forever, &cw), 0);
    test_sleep_ms(500); /* in line, watching on m0, the first in the URL */
    test_etcd_pause(&cluster, 0);
    test_sleep_ms(200);
    int64_t t0 = etcd_now_ms();
    dlock_lock_cancel(w);
    assert_int_equal(pthread_join(t, NULL), 0);
    int64_t took = cw.done_ms - t0;
    test_etcd_resume(&cluster, 0);
    printf("# cancel with m0 stalled: %s after %lld ms (io_timeout 3000 ms)\n",
           dlock_errname(cw.rc), (long long)took);
    assert_int_equal(cw.rc, DLOCK_ECANCELED);
    assert_true(took < 1000);
    assert_int_equal(test_etcd_wait_leader(&cluster, 10000), 0);
    /* the cancel was used up by the wait it ended: the next one waits */
    int rc = dlock_lock_acquire(w, 300);
    if (rc != DLOCK_ETIMEDOUT)
        fail_msg("the next wait: %s (%s)", dlock_errname(rc), dlock_lock_errmsg(w));
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    dlock_lock_free(w);
    dlock_lock_free(holder);
    dlock_client_free(other);
    dlock_client_free(c);
}

/* A release that no member could answer (two of three members killed:
 * no quorum) is owed, and the client sends it again until etcd answers
 * (etcd_owed.h): the waiter on another client gets the lock soon after
 * the quorum is back, not when the holder's lease ends (10 s, and a new
 * leader renews every lease by its TTL). flags: the holder's (0: a lease
 * of its own, revoked; DLOCK_AUTO_RENEW: its key on the client's session,
 * deleted). */
static void a_release_without_quorum_is_sent_again(const char *name, unsigned flags)
{
    enum { TTL_MS = 10000 };
    dlock_client *c = test_etcd_client(&cluster, -1, 500);
    dlock_client *other = test_etcd_client(&cluster, -1, 500);
    assert_non_null(c);
    assert_non_null(other);
    dlock_lock *holder = test_lock_new(c, name, TTL_MS, flags, 10, 200);
    dlock_lock *w = test_lock_new(other, name, TTL_MS, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    cancel_waiter cw = {w, -99, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_forever, &cw), 0);
    test_sleep_ms(500); /* in line behind the holder */
    int leader = test_etcd_leader(&cluster, 5000);
    assert_true(leader >= 0);
    int f = (leader + 1) % 3;
    /* killed, not stopped: a stopped member would still apply the
     * request waiting in its socket when it resumes */
    test_etcd_kill9(&cluster, leader);
    test_etcd_kill9(&cluster, f);
    int64_t t0 = etcd_now_ms();
    int rc = dlock_lock_release(holder);
    int64_t released_ms = etcd_now_ms() - t0;
    assert_int_equal(test_etcd_restart(&cluster, f), 0);
    assert_int_equal(test_etcd_restart(&cluster, leader), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    int64_t took = cw.done_ms - t0;
    printf("# %s: release without quorum %s after %lld ms; the waiter got it %lld ms after "
           "the release began (TTL %d ms)\n",
           name, dlock_errname(rc), (long long)released_ms, (long long)took, (int)TTL_MS);
    /* the case under test: the release had no answer */
    assert_true(rc == DLOCK_EUNKNOWN || rc == DLOCK_EIO || rc == DLOCK_EBUSY);
    assert_int_equal(cw.rc, DLOCK_OK);
    assert_true(took < TTL_MS / 2);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(w);
    dlock_lock_free(holder);
    dlock_client_free(other);
    dlock_client_free(c);
}

static void a_revoke_without_quorum_is_sent_again(void **state)
{
    (void)state;
    a_release_without_quorum_is_sent_again("cluster-owed-lease", 0);
}

static void a_session_key_delete_without_quorum_is_sent_again(void **state)
{
    (void)state;
    a_release_without_quorum_is_sent_again("cluster-owed-session", DLOCK_AUTO_RENEW);
}

/* Review (relsettle): an outage longer than the settler's bound. A lease
 * whose revoke no member answered is given up one TTL past its end as
 * last known (etcd_owed.c, owed_until), on the claim that it has ended by
 * then. It has not: with no leader nobody expires a lease, and the new
 * leader renews every lease by its TTL from the moment it takes over
 * (etcd's lessor Promote). So after an outage longer than about one TTL
 * the key is there again for a whole TTL once the quorum is back, and the
 * waiter waits that TTL, as before the settler. */
static void a_release_owed_through_an_outage_longer_than_its_ttl(void **state)
{
    (void)state;
    enum { TTL_MS = 4000, OUTAGE_MS = 12000 };
    const char *name = "cluster-owed-long-outage";
    dlock_client *c = test_etcd_client(&cluster, -1, 500);
    dlock_client *other = test_etcd_client(&cluster, -1, 500);
    assert_non_null(c);
    assert_non_null(other);
    dlock_lock *holder = test_lock_new(c, name, TTL_MS, 0, 10, 200);
    dlock_lock *w = test_lock_new(other, name, TTL_MS, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    int leader = test_etcd_leader(&cluster, 5000);
    assert_true(leader >= 0);
    int f = (leader + 1) % 3;
    test_etcd_kill9(&cluster, leader);
    test_etcd_kill9(&cluster, f);
    int rc = dlock_lock_release(holder);
    assert_true(rc == DLOCK_EUNKNOWN || rc == DLOCK_EIO || rc == DLOCK_EBUSY);
    test_sleep_ms(OUTAGE_MS); /* past the settler's bound (<= 2 TTLs) */
    assert_int_equal(test_etcd_restart(&cluster, f), 0);
    assert_int_equal(test_etcd_restart(&cluster, leader), 0);
    assert_int_equal(test_etcd_wait_leader(&cluster, 10000), 0);
    int64_t back = etcd_now_ms();
    rc = dlock_lock_acquire(w, 3 * TTL_MS);
    int64_t took = etcd_now_ms() - back;
    printf("# %s: outage %d ms, TTL %d ms: the waiter got it %lld ms after the quorum "
           "was back (%s)\n",
           name, (int)OUTAGE_MS, (int)TTL_MS, (long long)took, dlock_errname(rc));
    assert_int_equal(rc, DLOCK_OK);
    assert_true(took < TTL_MS / 2);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(w);
    dlock_lock_free(holder);
    dlock_client_free(other);
    dlock_client_free(c);
}

/* A call that is not a wait still gets io_timeout_ms per member: a
 * re-entry's keep-alive whose first member (the one that answered last)
 * is stalled fails over to the next, as a release does, instead of
 * spending its one io_timeout_ms there and failing DLOCK_EUNKNOWN. */
static void a_reentry_fails_over_past_a_stalled_member(void **state)
{
    (void)state;
    int f = test_etcd_follower(&cluster, 10000); /* first in the URL */
    assert_true(f >= 0);
    dlock_client *c = test_etcd_client(&cluster, f, 500);
    assert_non_null(c);
    dlock_lock *a = test_lock_new(c, "cluster-reenter", 10000, DLOCK_REENTRANT, 10, 200);
    dlock_lock *b = test_lock_new(c, "cluster-reenter", 10000, DLOCK_REENTRANT, 10, 200);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK); /* answered by m[f] */
    test_etcd_pause(&cluster, f);
    int64_t t0 = etcd_now_ms();
    int rc = dlock_lock_acquire(b, 0);
    int64_t took = etcd_now_ms() - t0;
    printf("# re-entry with m%d stalled: %s after %lld ms (io_timeout 500 ms)\n", f,
           dlock_errname(rc), (long long)took);
    if (rc != DLOCK_OK)
        fail_msg("re-entry: %s (%s)", dlock_errname(rc), dlock_lock_errmsg(b));
    assert_int_equal(dlock_lock_fence(b), dlock_lock_fence(a));
    test_etcd_resume(&cluster, f);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(leader_killed_while_processes_contend),
        cmocka_unit_test(a_paused_member_is_ridden_out),
        cmocka_unit_test(an_auto_renewed_lock_outlives_a_leader_kill),
        cmocka_unit_test(cancel_ends_a_wait_at_once_with_a_member_stalled),
        cmocka_unit_test(a_reentry_fails_over_past_a_stalled_member),
        cmocka_unit_test(a_revoke_without_quorum_is_sent_again),
        cmocka_unit_test(a_session_key_delete_without_quorum_is_sent_again),
        cmocka_unit_test(a_release_owed_through_an_outage_longer_than_its_ttl),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
