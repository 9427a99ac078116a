/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared/exclusive locks (DLOCK_SHARED, DLOCK_EXCLUSIVE) on a store whose
 * every wait is a place in line (etcd: the recipe RWMutex's keys;
 * ZooKeeper: Curator's InterProcessReadWriteLock), one test body run by a
 * main per store (tests/etcd/test_etcd_rw.c, tests/zk/test_zk_kinds.c)
 * against a real server. Readers and writers are one line: a writer waits
 * for everyone before it, a reader only for the writers before it. So
 * readers share and hold no fence, a writer waits for both readers, a
 * reader that comes while the writer waits waits for it; a plain lock
 * (the store's own mutex) and readers exclude each other; holders lists
 * the readers (shared) or the writer (exclusive, its fence in status);
 * and six contenders (a reentrant reader and writer, two readers on
 * auto-renew) never put a writer beside anyone, writers' fences growing,
 * by the chaos history's checker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

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

static const char *url;
static dlock_client *cl;

static dlock_lock *lock_of(const char *name, unsigned flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    o.flags = flags;
    o.retry_min_ms = 10;
    o.retry_max_ms = 100;
    return test_lock_with(cl, name, &o);
}

static dlock_holders_info holders(const char *name, dlock_holder *h, size_t n)
{
    dlock_holders_info hi;
    assert_int_equal(dlock_client_holders(cl, name, 0, &hi, h, n), DLOCK_OK);
    return hi;
}

/* Two readers share and hold no fence; a writer waits for both; a reader
 * that comes while the writer waits waits for it, and gets in only after
 * the writer's release. holders and status say so at each step. (On etcd
 * this fails when a reader waits behind every key: the second reader is
 * refused; or when it skips the writers' keys: the late reader gets in
 * beside the waiting writer.) */
static void readers_share_a_writer_waits_for_both_and_a_later_reader_for_it(void **state)
{
    (void)state;
    const char *name = "/rw/a";
    dlock_lock *r1 = lock_of(name, DLOCK_SHARED), *r2 = lock_of(name, DLOCK_SHARED);
    dlock_holder h[4];
    assert_int_equal(holders(name, h, 4).mode, DLOCK_HOLD_FREE);
    assert_int_equal(dlock_lock_acquire(r1, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r2, 0), DLOCK_OK); /* readers share */
    assert_int_equal(dlock_lock_fence(r1), 0);              /* and hold no fence */
    assert_int_equal(dlock_lock_fence(r2), 0);
    dlock_lock *w1 = lock_of(name, DLOCK_EXCLUSIVE);
    assert_int_equal(dlock_lock_acquire(w1, 0), DLOCK_ENOTACQUIRED);
    test_waiter ww;
    assert_int_equal(test_waiter_start(&ww, w1, 20000, TEST_WAITER_KEEP), 0);
    test_sleep_ms(300); /* in line behind the readers */
    dlock_lock *r3 = lock_of(name, DLOCK_SHARED);
    assert_int_equal(dlock_lock_acquire(r3, 0), DLOCK_ENOTACQUIRED);
    test_waiter wr;
    assert_int_equal(test_waiter_start(&wr, r3, 20000, TEST_WAITER_KEEP), 0);
    test_sleep_ms(300);
    assert_int_equal(atomic_load(&ww.done), 0);
    assert_int_equal(atomic_load(&wr.done), 0);
    dlock_holders_info hi = holders(name, h, 4);
    assert_int_equal(hi.mode, DLOCK_HOLD_SHARED);
    assert_int_equal(hi.count, 2); /* not r3, behind the writer */
    /* in no set order (ZooKeeper lists children as it likes) */
    int r1_first = strcmp(h[0].token, dlock_lock_token(r1)) == 0;
    assert_string_equal(h[r1_first ? 0 : 1].token, dlock_lock_token(r1));
    assert_string_equal(h[r1_first ? 1 : 0].token, dlock_lock_token(r2));
    dlock_node_status ns[1];
    assert_int_equal(dlock_client_status(cl, name, 1, ns, NULL), DLOCK_OK);
    assert_int_equal(ns[0].held, 1);
    /* readers hold no fence themselves; status shows the newest reader's
     * key's create revision (ZooKeeper: its node's czxid), the guard a
     * break compares (below the writer's, which came later, waiting) */
    uint64_t readers_fence = ns[0].fence;
    assert_true(readers_fence > 0);
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    /* r2, the newest, still reads: the same guard (the oldest's would
     * have moved to r2's) */
    assert_int_equal(dlock_client_status(cl, name, 1, ns, NULL), DLOCK_OK);
    assert_true(ns[0].fence == readers_fence);
    test_sleep_ms(300);
    assert_int_equal(atomic_load(&ww.done), 0); /* r2 still reads */
    int64_t released = test_now_ms();
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    assert_int_equal(test_waiter_join(&ww), DLOCK_OK);
    /* woken by its watch, not a look seconds later */
    assert_true(test_now_ms() - released < 1500);
    assert_true(dlock_lock_fence(w1) > 0);
    hi = holders(name, h, 4);
    assert_int_equal(hi.mode, DLOCK_HOLD_EXCLUSIVE);
    assert_int_equal(hi.count, 1);
    assert_string_equal(h[0].token, dlock_lock_token(w1));
    assert_int_equal(dlock_client_status(cl, name, 1, ns, NULL), DLOCK_OK);
    assert_int_equal(ns[0].fence, dlock_lock_fence(w1));
    assert_true(readers_fence < dlock_lock_fence(w1));
    test_sleep_ms(300);
    assert_int_equal(atomic_load(&wr.done), 0); /* the writer writes */
    assert_int_equal(dlock_lock_release(w1), DLOCK_OK);
    assert_int_equal(test_waiter_join(&wr), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(r3), 0);
    /* a writer after it is refused while it reads, then has a newer fence */
    uint64_t first = dlock_lock_fence(w1);
    assert_int_equal(dlock_lock_acquire(w1, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(r3), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w1, 0), DLOCK_OK);
    assert_true(dlock_lock_fence(w1) > first);
    assert_int_equal(dlock_lock_release(w1), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(r3);
    dlock_lock_free(w1);
}

/* A plain lock (the store's own mutex) waits behind readers, and a reader
 * waits behind a plain lock: it counts as a writer. */
static void a_plain_lock_and_readers_exclude_each_other(void **state)
{
    (void)state;
    const char *name = "/rw/b";
    dlock_lock *r = lock_of(name, DLOCK_SHARED), *p = lock_of(name, 0);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(p), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(p);
}

/* Readers and writers (a reentrant one of each, two readers auto-renewed:
 * on etcd their keys share their client's session lease) on threads with
 * a client each: no writer overlaps anyone, writers' fences grow, readers
 * did read together. */
static void readers_and_writers_contend_without_a_writer_beside_anyone(void **state)
{
    (void)state;
    static zk_contender k[6]; /* a failed assert leaves the threads running */
    for (int i = 0; i < 6; i++)
        k[i] = (zk_contender){.url = url, .rounds = 10, .name = "/rw/loop",
                              .flags = i < 2 ? DLOCK_EXCLUSIVE : DLOCK_SHARED};
    k[1].flags |= DLOCK_REENTRANT;
    k[1].reentries = 1;
    k[2].flags |= DLOCK_REENTRANT;
    k[2].reentries = 1;
    k[3].flags |= DLOCK_AUTO_RENEW;
    k[5].flags |= DLOCK_AUTO_RENEW;
    char hist[300];
    int fd = zk_history_new(hist, sizeof hist, "dlock-store-rw-history");
    assert_true(fd >= 0);
    assert_int_equal(zk_contend_start(k, 6, fd), 0);
    assert_int_equal(zk_contend_join(k, 6), 0);
    close(fd);
    chaos_verdict v;
    assert_int_equal(zk_history_verdict(hist, &v), 0);
    assert_int_equal(v.cs, 60);
    assert_int_equal(v.cs_unclosed, 0);
    assert_int_equal(v.overlaps, 0);
    assert_int_equal(v.fence_violations, 0);
    assert_true(v.max_readers >= 2); /* readers did read together */
}

static int setup(void **state)
{
    (void)state;
    return dlock_client_new(&cl, &url, 1, NULL, NULL, 0) == DLOCK_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_free(cl);
    cl = NULL;
    return 0;
}

int test_store_rw_run(const char *store_url)
{
    url = store_url;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(readers_share_a_writer_waits_for_both_and_a_later_reader_for_it),
        cmocka_unit_test(a_plain_lock_and_readers_exclude_each_other),
        cmocka_unit_test(readers_and_writers_contend_without_a_writer_beside_anyone),
    };
    return cmocka_run_group_tests_name("store_rw", tests, setup, teardown);
}
