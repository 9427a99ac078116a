/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_break() against real redis-servers: every kind broken, its
 * auto-renewed holders told (on_lost, DLOCK_LOST_NOT_OWNER; their release
 * DLOCK_ELOST), the next grant's fence larger than every one before; a
 * waiter, plain and fair, taking the broken lock long before the broken
 * lease would have ended; a free name; a key that is not a lock left as
 * it is; a waiter's turn left alone; a fence guarding a newer holder, and
 * the fence status shows for a name its readers hold guarding a writer or
 * reader that came later (one node, a Redlock, a Cluster); a
 * Redlock of three with a node down and with two down; bad
 * inputs; a Cluster lock broken on its slot's master. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "redis_topology.h"
#include "test_util.h"

#define N 3
static test_redis srv[N];

static int setup(void **state)
{
    (void)state;
    return test_redis_start_many(srv, N, NULL);
}

static int teardown(void **state)
{
    (void)state;
    test_redis_stop_many(srv, N);
    return 0;
}

static atomic_int lost_calls;
static atomic_int lost_reason;

static void on_lost(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)l;
    (void)arg;
    atomic_store(&lost_reason, (int)why);
    atomic_fetch_add(&lost_calls, 1);
}

/* A holder renewed every 50 ms, so that it learns of the break soon. */
static dlock_lock *renewed(dlock_client *c, const char *name, unsigned flags, unsigned permits)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 3000;
    o.flags = flags | DLOCK_AUTO_RENEW;
    o.renew_interval_ms = 50;
    o.on_lost = on_lost;
    dlock_lock *l = NULL;
    if (permits)
        assert_int_equal(dlock_semaphore_new(&l, c, name, permits, &o), DLOCK_OK);
    else
        assert_int_equal(dlock_lock_new(&l, c, name, &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    return l;
}

/* The fence `dlock break` shows and passes on as its guard: status's, the
 * highest over the nodes (cli/break.c). */
static uint64_t shown_fence(dlock_client *c, const char *name)
{
    dlock_node_status ns[N];
    size_t n = dlock_client_node_count(c);
    assert_true(n <= N);
    assert_int_equal(dlock_client_status(c, name, n, ns, NULL), DLOCK_OK);
    uint64_t f = 0;
    for (size_t i = 0; i < n; i++)
        if (ns[i].error == DLOCK_OK && ns[i].fence > f)
            f = ns[i].fence;
    return f;
}

typedef struct kind_case {
    const char *name;
    unsigned flags, permits;
    int holders;
    dlock_hold_mode mode;
} kind_case;

static void every_kind_is_broken_and_its_holders_learn_it(void **state)
{
    (void)state;
    test_flushall(&srv[0]);
    dlock_client *c = test_client_for(&srv[0], NULL);
    const kind_case cases[] = {
        {"plain", 0, 0, 1, DLOCK_HOLD_EXCLUSIVE},
        {"fair", DLOCK_FAIR, 0, 1, DLOCK_HOLD_EXCLUSIVE},
        {"reent", DLOCK_REENTRANT, 0, 1, DLOCK_HOLD_OTHER},
        {"writer", DLOCK_EXCLUSIVE, 0, 1, DLOCK_HOLD_EXCLUSIVE},
        {"readers", DLOCK_SHARED, 0, 2, DLOCK_HOLD_SHARED},
        {"sem", 0, 3, 2, DLOCK_HOLD_SEMAPHORE},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const kind_case *kc = &cases[k];
        atomic_store(&lost_calls, 0);
        dlock_lock *h[2] = {NULL, NULL};
        uint64_t top = 0;
        for (int i = 0; i < kc->holders; i++) {
            h[i] = renewed(c, kc->name, kc->flags, kc->permits);
            if (dlock_lock_fence(h[i]) > top)
                top = dlock_lock_fence(h[i]);
        }
        /* The counter: the last holder's fence, or, readers', what their
         * grants raised it to (they hold none: top stays 0). */
        uint64_t shown = shown_fence(c, kc->name);
        dlock_break_result res;
        assert_int_equal(dlock_client_break(c, kc->name, 0, &res), DLOCK_OK);
        if (res.removed != (size_t)kc->holders || res.mode != kc->mode)
            fail_msg("%s: removed %zu (want %d), mode %d (want %d)", kc->name, res.removed,
                     kc->holders, (int)res.mode, (int)kc->mode);
        assert_int_equal(res.fence, shown);
        if (top > 0)
            assert_int_equal(res.fence, top);
        assert_int_equal(res.removed_on, 1);
        assert_int_equal(res.answered, 1);
        assert_int_equal(res.nodes, 1);
        assert_int_equal(res.quorum, 1);
        /* Each holder learns it at its next renewal. */
        for (int i = 0; i < kc->holders; i++) {
            if (!test_wait_for_state(h[i], DLOCK_STATE_LOST, 2000))
                fail_msg("%s: holder %d not told of the break", kc->name, i);
        }
        assert_int_equal(atomic_load(&lost_calls), kc->holders);
        assert_int_equal(atomic_load(&lost_reason), DLOCK_LOST_NOT_OWNER);
        for (int i = 0; i < kc->holders; i++) {
            assert_int_equal(dlock_lock_release(h[i]), DLOCK_ELOST);
            dlock_lock_free(h[i]);
        }
        /* The next holder's fence is larger than every one before. */
        dlock_lock *next = renewed(c, kc->name, kc->flags, kc->permits);
        if (top > 0 && dlock_lock_fence(next) <= top)
            fail_msg("%s: fence %llu after a break of %llu", kc->name,
                     (unsigned long long)dlock_lock_fence(next), (unsigned long long)top);
        assert_int_equal(dlock_lock_release(next), DLOCK_OK);
        dlock_lock_free(next);
    }
    dlock_client_free(c);
}

typedef struct waiter {
    dlock_lock *l;
    int rc;
} waiter;

static void *wait_for_it(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, 20000);
    return NULL;
}

/* The holder's lease has 60 s left and it never releases: only the break
 * can give the waiter the lock within its 20 s wait. */
static void a_waiter_takes_the_broken_lock(unsigned flags)
{
    test_flushall(&srv[0]);
    dlock_client *c = test_client_for(&srv[0], NULL);
    dlock_lock *holder = test_lock_new(c, "stuck", 60000, flags, 10, 50);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    waiter w = {test_lock_new(c, "stuck", 60000, flags, 10, 50), -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_it, &w), 0);
    test_sleep_ms(200); /* in line (fair) or on the waiter list */
    dlock_break_result res;
    assert_int_equal(dlock_client_break(c, "stuck", 0, &res), DLOCK_OK);
    assert_int_equal(res.removed, 1);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(dlock_lock_fence(w.l) > dlock_lock_fence(holder));
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    assert_int_equal(dlock_lock_release(holder), DLOCK_EEXPIRED);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
    dlock_client_free(c);
}

static void a_waiter_takes_a_broken_plain_lock(void **state)
{
    (void)state;
    a_waiter_takes_the_broken_lock(0);
}

static void a_waiter_takes_a_broken_fair_lock(void **state)
{
    (void)state;
    a_waiter_takes_the_broken_lock(DLOCK_FAIR);
}

static void a_free_name_and_a_key_that_is_not_a_lock(void **state)
{
    (void)state;
    test_flushall(&srv[0]);
    dlock_client *c = test_client_for(&srv[0], NULL);
    dlock_break_result res;
    assert_int_equal(dlock_client_break(c, "nobody", 0, &res), DLOCK_OK);
    assert_int_equal(res.removed, 0);
    assert_int_equal(res.mode, DLOCK_HOLD_FREE);
    assert_int_equal(res.answered, 1);
    assert_int_equal(dlock_client_break(c, "nobody", 0, NULL), DLOCK_OK);
    test_cmd_int(&srv[0], "RPUSH alist a");
    assert_int_equal(dlock_client_break(c, "alist", 0, &res), DLOCK_EWRONGTYPE);
    assert_int_equal(test_cmd_int(&srv[0], "LLEN alist"), 1);
    dlock_client_free(c);
}

/* A waiter's turn (release.lua at a run's end: the lock handed to the head
 * of the line as "turn:ID", not taken yet) is not a hold: it stays. */
static void a_waiters_turn_is_not_broken(void **state)
{
    (void)state;
    test_flushall(&srv[0]);
    dlock_client *c = test_client_for(&srv[0], NULL);
    test_cmd_status(&srv[0], "SET turnlock turn:0123456789abcdef0123456789abcdef PX 5000");
    dlock_break_result res;
    assert_int_equal(dlock_client_break(c, "turnlock", 0, &res), DLOCK_OK);
    assert_int_equal(res.removed, 0);
    assert_int_equal(test_key_exists(&srv[0], "turnlock"), 1);
    dlock_client_free(c);
}

/* With the fence the caller looked at, a holder that took the lock since
 * is not broken by mistake. */
static void a_fence_guards_a_newer_holder(void **state)
{
    (void)state;
    test_flushall(&srv[0]);
    dlock_client *c = test_client_for(&srv[0], NULL);
    dlock_lock *old = test_lock_new(c, "guarded", 60000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(old, 0), DLOCK_OK);
    uint64_t seen = dlock_lock_fence(old);
    assert_int_equal(dlock_lock_release(old), DLOCK_OK); /* gone before the break */
    dlock_lock *newer = test_lock_new(c, "guarded", 60000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(newer, 0), DLOCK_OK);
    dlock_break_result res;
    assert_int_equal(dlock_client_break(c, "guarded", seen, &res), DLOCK_ENOTOWNER);
    assert_int_equal(res.removed, 0);
    assert_int_equal(res.fence, dlock_lock_fence(newer));
    assert_int_equal(test_key_exists(&srv[0], "guarded"), 1);
    assert_int_equal(dlock_client_break(c, "guarded", dlock_lock_fence(newer), &res), DLOCK_OK);
    assert_int_equal(res.removed, 1);
    assert_int_equal(dlock_lock_release(newer), DLOCK_EEXPIRED);
    dlock_lock_free(newer);
    dlock_lock_free(old);
    dlock_client_free(c);
}

/* A name only readers ever held: the operator looks (status), the readers
 * leave and a writer takes the name before the answer. A break guarded by
 * what was shown must spare the writer (dlock.1: only the holder shown
 * goes). Found by review: status showed fence 0 for readers, which the
 * break reads as "whoever holds it", and the writer was broken. A reader
 * that came after the look makes the guard fail too; the guard shown now
 * removes every reader. */
static void readers_guard_spares_later_holders(dlock_client *c, const char *name)
{
    dlock_lock *r[3], *w = test_lock_new(c, name, 60000, DLOCK_EXCLUSIVE, 10, 50);
    for (int i = 0; i < 3; i++)
        r[i] = test_lock_new(c, name, 60000, DLOCK_SHARED, 10, 50);
    assert_int_equal(dlock_lock_acquire(r[0], 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r[1], 0), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(r[0]), 0); /* a reader holds no fence */
    uint64_t seen = shown_fence(c, name);
    assert_int_equal(dlock_lock_release(r[0]), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r[1]), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    dlock_break_result res;
    int rc = dlock_client_break(c, name, seen, &res);
    if (rc != DLOCK_ENOTOWNER || res.removed_on != 0)
        fail_msg("%s: a break guarded by the readers' fence %llu gave %s and removed holds on "
                 "%zu node(s): the writer that came after them (fence %llu) was broken",
                 name, (unsigned long long)seen, dlock_errname(rc), res.removed_on,
                 (unsigned long long)dlock_lock_fence(w));
    assert_true(seen > 0);
    assert_true(dlock_lock_fence(w) > seen); /* fences keep growing */
    assert_int_equal(res.fence, dlock_lock_fence(w));
    assert_int_equal(dlock_lock_release(w), DLOCK_OK); /* still its */
    assert_int_equal(dlock_lock_acquire(r[0], 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r[1], 0), DLOCK_OK);
    seen = shown_fence(c, name);
    assert_true(seen > dlock_lock_fence(w));
    assert_int_equal(dlock_lock_acquire(r[2], 0), DLOCK_OK); /* after the look */
    assert_int_equal(dlock_client_break(c, name, seen, &res), DLOCK_ENOTOWNER);
    assert_int_equal(res.removed_on, 0);
    seen = shown_fence(c, name);
    assert_int_equal(dlock_client_break(c, name, seen, &res), DLOCK_OK);
    assert_int_equal(res.removed, 3);
    assert_int_equal(res.mode, DLOCK_HOLD_SHARED);
    assert_int_equal(res.fence, seen);
    assert_int_equal(res.removed_on, dlock_client_node_count(c));
    for (int i = 0; i < 3; i++) {
        assert_int_not_equal(dlock_lock_release(r[i]), DLOCK_OK); /* broken */
        dlock_lock_free(r[i]);
    }
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    assert_true(dlock_lock_fence(w) > seen);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(w);
}

static void a_readers_guard_spares_a_later_writer(void **state)
{
    (void)state;
    test_flushall(&srv[0]);
    dlock_client *c = test_client_for(&srv[0], NULL);
    readers_guard_spares_later_holders(c, "rwguard");
    dlock_client_free(c);
}

/* The same on a Redlock of three: each node's counter moves with the
 * grants it saw, and the break looks at every node's first. */
static void a_readers_guard_spares_a_later_writer_on_a_redlock(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++)
        test_flushall(&srv[i]);
    dlock_client *c = test_client_timeouts(srv, N, 300, 300);
    readers_guard_spares_later_holders(c, "rwguard3");
    dlock_client_free(c);
}

/* Counters apart on a Redlock (node 0 ahead: it granted alone once): the
 * readers' grant syncs the largest counter of their majority back, as a
 * writer's does, so a writer granted later by the two other nodes alone
 * still gets a fence above what status showed for the readers. Without
 * the sync its fence was 5, under the 11 shown, and the break removed it. */
static void a_readers_guard_holds_on_a_redlock_with_counters_apart(void **state)
{
    (void)state;
    static const char fk[] = "rwapart\0fence";
    for (int i = 0; i < N; i++) {
        test_flushall(&srv[i]);
        freeReplyObject(test_cmd_bin(&srv[i], "SET %b %s", fk, sizeof fk - 1, i ? "3" : "10"));
    }
    dlock_client *c = test_client_timeouts(srv, N, 300, 300);
    dlock_lock *r = test_lock_new(c, "rwapart", 60000, DLOCK_SHARED, 10, 50);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(r), 0);
    uint64_t seen = shown_fence(c, "rwapart");
    assert_int_equal(seen, 11);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    char down[64];
    snprintf(down, sizeof down, "redis://127.0.0.1:%d", test_free_port());
    const char *two_up[N] = {down, srv[1].url, srv[2].url};
    dlock_client *c2 = test_client_new(two_up, N, NULL);
    dlock_lock *w = test_lock_new(c2, "rwapart", 60000, DLOCK_EXCLUSIVE, 10, 50);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    assert_true(dlock_lock_fence(w) > seen);
    dlock_break_result res;
    assert_int_equal(dlock_client_break(c, "rwapart", seen, &res), DLOCK_ENOTOWNER);
    assert_int_equal(res.removed_on, 0);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK); /* still its */
    dlock_lock_free(w);
    dlock_lock_free(r);
    dlock_client_free(c2);
    dlock_client_free(c);
}

/* On a Redlock a guarded break looks at every node's counter first: a
 * grant seen on one node (a contender's there: the holder's key had ended
 * on that node, say) breaks nothing anywhere, as the CLI's "nothing
 * broken" says. Found by review: the holder was broken on the other two
 * nodes (removed_on 2 of 3). */
static void a_refusal_on_one_redlock_node_breaks_nothing(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++)
        test_flushall(&srv[i]);
    dlock_client *c = test_client_timeouts(srv, N, 300, 300);
    dlock_lock *h = test_lock_new(c, "red2", 60000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(h, 0), DLOCK_OK);
    uint64_t seen = dlock_lock_fence(h);
    /* A contender's grant on node 0 only: its token, the counter one up. */
    static const char fk[] = "red2\0fence";
    freeReplyObject(test_cmd_bin(&srv[0], "SET %b contender PX 60000", "red2", (size_t)4));
    freeReplyObject(test_cmd_bin(&srv[0], "INCR %b", fk, sizeof fk - 1));
    dlock_break_result res;
    int rc = dlock_client_break(c, "red2", seen, &res);
    assert_int_equal(rc, DLOCK_ENOTOWNER);
    assert_int_equal(test_key_exists(&srv[1], "red2"), 1);
    assert_int_equal(test_key_exists(&srv[2], "red2"), 1);
    if (res.removed_on != 0)
        fail_msg("DLOCK_ENOTOWNER (the CLI: \"nothing broken\") but the holder's holds were "
                 "removed on %zu of %zu nodes", res.removed_on, res.nodes);
    dlock_lock_free(h);
    dlock_client_free(c);
}

static void bad_inputs_are_einval(void **state)
{
    (void)state;
    dlock_client *c = test_client_for(&srv[0], NULL);
    dlock_break_result res;
    char longname[DLOCK_NAME_MAX + 2];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(dlock_client_break(NULL, "x", 0, &res), DLOCK_EINVAL);
    assert_int_equal(dlock_client_break(c, NULL, 0, &res), DLOCK_EINVAL);
    assert_int_equal(dlock_client_break(c, "", 0, &res), DLOCK_EINVAL);
    assert_int_equal(dlock_client_break(c, longname, 0, &res), DLOCK_EINVAL);
    dlock_client_free(c);
}

static void a_redlock_is_broken_on_a_majority(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++)
        test_flushall(&srv[i]);
    dlock_client *c = test_client_timeouts(srv, N, 300, 300);
    dlock_lock *h = test_lock_new(c, "red", 60000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(h, 0), DLOCK_OK);
    /* The same three nodes, the third one's port replaced by a closed one. */
    char down[64];
    snprintf(down, sizeof down, "redis://127.0.0.1:%d", test_free_port());
    const char *two_up[N] = {srv[0].url, srv[1].url, down};
    dlock_client *c2 = test_client_new(two_up, N, NULL);
    dlock_break_result res;
    assert_int_equal(dlock_client_break(c2, "red", 0, &res), DLOCK_OK);
    assert_int_equal(res.removed, 1);
    assert_int_equal(res.removed_on, 2);
    assert_int_equal(res.answered, 2);
    assert_int_equal(res.nodes, 3);
    assert_int_equal(res.quorum, 2);
    assert_int_equal(res.fence, dlock_lock_fence(h));
    assert_int_equal(test_key_exists(&srv[2], "red"), 1); /* the node it did not reach */
    char down2[64];
    snprintf(down2, sizeof down2, "redis://127.0.0.1:%d", test_free_port());
    const char *one_up[N] = {srv[0].url, down, down2};
    dlock_client *c1 = test_client_new(one_up, N, NULL);
    assert_int_equal(dlock_client_break(c1, "red", 0, &res), DLOCK_ENOQUORUM);
    assert_int_equal(res.answered, 1);
    dlock_client_free(c1);
    dlock_client_free(c2);
    dlock_lock_free(h);
    dlock_client_free(c);
}

/* On a Cluster the script goes to the master of the lock key's slot (its
 * fencing counter is in that slot too: docs/deployment.md), for a name
 * with a hash tag and one without. */
static void a_cluster_lock_is_broken_on_its_master(void **state)
{
    (void)state;
    static test_cluster cluster;
    assert_int_equal(test_cluster_start(&cluster), 0);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = 1;
    dlock_client *c = test_client_new(cluster.urls, TEST_CLUSTER_NODES, &o);
    const char *names[] = {"job:7", "{tag}job"};
    const char *rw_names[] = {"rw:7", "{tag}rw"};
    for (size_t i = 0; i < 2; i++) {
        readers_guard_spares_later_holders(c, rw_names[i]); /* the counter in the slot */
        dlock_lock *h = renewed(c, names[i], 0, 0);
        atomic_store(&lost_calls, 0);
        dlock_break_result res;
        assert_int_equal(dlock_client_break(c, names[i], 0, &res), DLOCK_OK);
        assert_int_equal(res.removed, 1);
        assert_int_equal(res.fence, dlock_lock_fence(h));
        assert_true(test_wait_for_state(h, DLOCK_STATE_LOST, 2000));
        dlock_lock *next = renewed(c, names[i], 0, 0);
        assert_true(dlock_lock_fence(next) > res.fence);
        assert_int_equal(dlock_lock_release(next), DLOCK_OK);
        dlock_lock_free(next);
        dlock_lock_free(h);
    }
    dlock_client_free(c);
    test_cluster_stop(&cluster);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_kind_is_broken_and_its_holders_learn_it),
        cmocka_unit_test(a_waiter_takes_a_broken_plain_lock),
        cmocka_unit_test(a_waiter_takes_a_broken_fair_lock),
        cmocka_unit_test(a_free_name_and_a_key_that_is_not_a_lock),
        cmocka_unit_test(a_waiters_turn_is_not_broken),
        cmocka_unit_test(a_fence_guards_a_newer_holder),
        cmocka_unit_test(a_readers_guard_spares_a_later_writer),
        cmocka_unit_test(a_readers_guard_spares_a_later_writer_on_a_redlock),
        cmocka_unit_test(a_readers_guard_holds_on_a_redlock_with_counters_apart),
        cmocka_unit_test(a_refusal_on_one_redlock_node_breaks_nothing),
        cmocka_unit_test(bad_inputs_are_einval),
        cmocka_unit_test(a_redlock_is_broken_on_a_majority),
        cmocka_unit_test(a_cluster_lock_is_broken_on_its_master),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
