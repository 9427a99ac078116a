/* SPDX-License-Identifier: BSD-3-Clause */
/* The ZooKeeper backend's other kinds, on Curator's layouts, on a real
 * member: reentrant (DLOCK_REENTRANT: one node, its re-entries counted in
 * the handle as Curator's InterProcessMutex counts a thread's), and
 * shared/exclusive (DLOCK_SHARED / DLOCK_EXCLUSIVE: Curator's
 * InterProcessReadWriteLock, `_c_<uuid>-__READ__<seq>` and
 * `-__WRIT__<seq>` nodes in one line, a reader waiting only for writers
 * before it: the body etcd runs too, support/store_rw.c), and semaphores (dlock_semaphore_new(): Curator's
 * InterProcessSemaphoreV2, a locks line and lease nodes); each under
 * contention with the chaos history's checker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dlock.h"
#include "history.h"
#include "proc.h"
#include "store_rw.h"
#include "test_util.h"
#include "test_waiter.h"
#include "zk_contend.h"
#include "zk_server.h"

static test_zk srv;

static int setup(void **state)
{
    (void)state;
    return test_zk_start(&srv);
}

static int teardown(void **state)
{
    (void)state;
    test_zk_stop(&srv);
    return 0;
}

static dlock_client *client_new(void)
{
    const char *u = srv.url;
    return test_client_new(&u, 1, NULL);
}

static dlock_lock *lock_new(dlock_client *c, const char *name, unsigned flags)
{
    dlock_lock *l = zk_test_lock(c, name, flags, 0);
    assert_non_null(l);
    return l;
}

static dlock_holders_info holders(dlock_client *c, const char *name, dlock_holder *h, size_t n)
{
    dlock_holders_info hi;
    assert_int_equal(dlock_client_holders(c, name, 0, &hi, h, n), DLOCK_OK);
    return hi;
}

/* ---- reentrant ------------------------------------------------------------------ */

static void a_reentrant_hold_is_one_node_counted_in_the_handle(void **state)
{
    (void)state;
    const char *name = "/kinds/reentrant";
    dlock_client *a = client_new(), *b = client_new();
    dlock_lock *la = lock_new(a, name, DLOCK_REENTRANT), *lb = lock_new(b, name, 0);
    assert_int_equal(dlock_lock_acquire(la, 0), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(la);
    dlock_holder h[2];
    assert_int_equal(holders(a, name, h, 2).count, 1);
    char token[DLOCK_TOKEN_MAX + 1];
    snprintf(token, sizeof token, "%s", h[0].token);
    assert_int_equal(dlock_lock_acquire(la, 0), DLOCK_OK); /* re-entries: no new node */
    assert_int_equal(dlock_lock_acquire(la, 1000), DLOCK_OK);
    dlock_holders_info hi = holders(a, name, h, 2);
    assert_int_equal(hi.count, 1);
    assert_string_equal(h[0].token, token);
    assert_int_equal(dlock_lock_fence(la), fence);
    /* Two of the three releases count down; the lock stays held. */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(dlock_lock_release(la), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(lb, 0), DLOCK_ENOTACQUIRED);
    }
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(lb, 0), DLOCK_OK);
    assert_true(dlock_lock_fence(lb) > fence);
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    assert_int_equal(dlock_lock_release(la), DLOCK_ENOTHELD);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_free(a);
    dlock_client_free(b);
}

/* ---- contenders of one kind or two ----------------------------------------------- */

#define MAX_CONTENDERS 6

/* Run the contenders and check their history; its verdict. */
static chaos_verdict run_contenders(zk_contender *k, int n)
{
    char hist[300];
    int fd = zk_history_new(hist, sizeof hist, "dlock-zk-kinds-history");
    assert_true(fd >= 0);
    long sections = 0;
    for (int i = 0; i < n; i++) {
        k[i].url = srv.url;
        sections += k[i].rounds;
    }
    assert_int_equal(zk_contend_start(k, n, fd), 0);
    assert_int_equal(zk_contend_join(k, n), 0);
    close(fd);
    chaos_verdict v;
    assert_int_equal(zk_history_verdict(hist, &v), 0);
    assert_int_equal(v.cs, sections);
    assert_int_equal(v.cs_unclosed, 0);
    assert_int_equal(v.overlaps, 0);
    assert_int_equal(v.fence_violations, 0);
    return v;
}

static void reentrant_contenders_never_overlap(void **state)
{
    (void)state;
    static zk_contender k[3]; /* a failed assert leaves the threads running */
    for (int i = 0; i < 3; i++)
        k[i] = (zk_contender){.rounds = 8, .reentries = 2, .flags = DLOCK_REENTRANT,
                              .name = "/kinds/reentrant-loop"};
    chaos_verdict v = run_contenders(k, 3);
    assert_int_equal(v.max_concurrent, 1);
}

/* ---- semaphore ------------------------------------------------------------------ */

static void a_semaphore_of_two_lets_two_in_and_a_third_waits(void **state)
{
    (void)state;
    const char *name = "/kinds/sem";
    dlock_client *c = client_new();
    dlock_lock *s[3];
    for (int i = 0; i < 3; i++)
        assert_non_null(s[i] = zk_test_lock(c, name, 0, 2));
    assert_int_equal(dlock_lock_acquire(s[0], 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(s[1], 0), DLOCK_OK);
    assert_non_null(strstr(dlock_lock_token(s[0]), "-lease-")); /* Curator's lease node */
    assert_int_equal(dlock_lock_fence(s[0]), 0);
    assert_int_equal(dlock_lock_acquire(s[2], 0), DLOCK_ENOTACQUIRED);
    test_waiter w;
    assert_int_equal(test_waiter_start(&w, s[2], 20000, TEST_WAITER_KEEP), 0);
    test_sleep_ms(300);
    assert_int_equal(atomic_load(&w.done), 0);
    assert_int_equal(dlock_lock_extend(s[1], 0), DLOCK_OK); /* the lease is still ours */
    int64_t released = test_now_ms();
    assert_int_equal(dlock_lock_release(s[0]), DLOCK_OK);
    assert_int_equal(test_waiter_join(&w), DLOCK_OK);
    /* woken by its watch on the leases, not its 2 s look */
    assert_true(test_now_ms() - released < 1000);
    assert_int_equal(dlock_lock_release(s[1]), DLOCK_OK);
    assert_int_equal(dlock_lock_release(s[2]), DLOCK_OK);
    for (int i = 0; i < 3; i++)
        dlock_lock_free(s[i]);
    dlock_client_free(c);
}

static void semaphore_contenders_never_exceed_the_permits(void **state)
{
    (void)state;
    static zk_contender k[5];
    for (int i = 0; i < 5; i++)
        k[i] = (zk_contender){.rounds = 8, .permits = 2, .hold_ms = 30,
                              .name = "/kinds/sem-loop"};
    chaos_verdict v = run_contenders(k, 5);
    assert_int_equal(v.max_permits, 2); /* two at once, never three */
}

int main(void)
{
    if (!test_zk_available()) {
        printf("no ZooKeeper (apt-get install zookeeper): skipped\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_reentrant_hold_is_one_node_counted_in_the_handle),
        cmocka_unit_test(reentrant_contenders_never_overlap),
        cmocka_unit_test(a_semaphore_of_two_lets_two_in_and_a_third_waits),
        cmocka_unit_test(semaphore_contenders_never_exceed_the_permits),
    };
    int failed = cmocka_run_group_tests(tests, setup, NULL);
    /* shared and exclusive: the body etcd runs too */
    failed += test_store_rw_run(srv.url);
    teardown(NULL);
    return failed;
}
