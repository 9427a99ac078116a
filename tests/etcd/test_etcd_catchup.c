/* SPDX-License-Identifier: BSD-3-Clause */
/* A waiter in etcd's line reads its predecessor a few times while its
 * watch is young (etcd_wait.c, CATCHUP_LOOK_MS): etcd 3.4 may register a
 * watch "unsynced" when a write lands while it is being created, and
 * then sends its events only at its next 100 ms catch-up. The race cannot
 * be forced from outside, so the test counts the reads: etcd's own
 * grpc_server_handled_total for Txn while one waiter waits behind a
 * holder. In the first 400 ms: its create (which reads the line) and at
 * least three catch-up reads; then none until its 2 s look. Without the
 * catch-up reads the first count is 1-2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>

#include "dlock.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_util.h"

static test_etcd srv;
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    return test_etcd_setup(&srv, 1, NULL, &cl);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_teardown(&srv, cl);
    return 0;
}

typedef struct waiter {
    dlock_lock *l;
    int rc;
} waiter;

static void *wait_main(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, 20000);
    return NULL;
}

static long txns(void)
{
    long n = test_etcd_served(&srv, 0, "Txn");
    assert_true(n >= 0);
    return n;
}

static void a_young_watch_is_backed_by_a_few_reads_then_none(void **state)
{
    (void)state;
    dlock_lock *holder = test_lock_new(cl, "catchup", 30000, 0, 10, 100);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    waiter w = {.l = test_lock_new(cl, "catchup", 30000, 0, 10, 100)};
    long base = txns();
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_main, &w), 0);
    test_sleep_ms(400);
    long young = txns() - base;
    test_sleep_ms(1000);
    long later = txns() - base - young;
    print_message("# Txn served: %ld in the wait's first 400 ms, %ld in the next second\n", young,
                  later);
    assert_true(young >= 4); /* the create, and at least three catch-up reads */
    assert_true(young <= 10); /* and no more than the window allows (about 8) */
    assert_int_equal(later, 0);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_young_watch_is_backed_by_a_few_reads_then_none),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
