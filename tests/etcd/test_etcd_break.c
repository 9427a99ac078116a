/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_break() on an etcd:// client against a real etcd member:
 * the owner's key goes, the next waiter in line takes the lock with a
 * larger fence, the broken holder is told at its next renewal (on_lost,
 * DLOCK_LOST_NOT_OWNER), and a free name is left as it is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

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

static atomic_int lost_calls, lost_reason;

static void on_lost(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)l;
    (void)arg;
    atomic_store(&lost_reason, (int)why);
    atomic_fetch_add(&lost_calls, 1);
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

static void the_next_in_line_takes_the_broken_lock(void **state)
{
    (void)state;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 30000;
    o.flags = DLOCK_AUTO_RENEW;
    o.renew_interval_ms = 100;
    o.on_lost = on_lost;
    dlock_lock *holder = test_lock_with(cl, "stuck", &o);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    waiter w = {test_lock_new(cl, "stuck", 30000, 0, 10, 50), -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_it, &w), 0);
    test_sleep_ms(300); /* in line behind the holder */
    dlock_break_result res;
    assert_int_equal(dlock_client_break(cl, "stuck", 0, &res), DLOCK_OK);
    assert_int_equal(res.removed, 1);
    assert_int_equal(res.mode, DLOCK_HOLD_EXCLUSIVE);
    assert_int_equal(res.fence, dlock_lock_fence(holder));
    assert_int_equal(res.answered, 1);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK); /* long before the 30 s lease ended */
    assert_true(dlock_lock_fence(w.l) > res.fence);
    assert_true(test_wait_for_state(holder, DLOCK_STATE_LOST, 3000));
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_int_equal(atomic_load(&lost_reason), DLOCK_LOST_NOT_OWNER);
    assert_int_equal(dlock_lock_release(holder), DLOCK_ELOST);
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
}

/* With the fence the caller looked at, a newer owner is not broken. */
static void a_fence_guards_a_newer_owner(void **state)
{
    (void)state;
    dlock_lock *old = test_lock_new(cl, "guarded", 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(old, 0), DLOCK_OK);
    uint64_t seen = dlock_lock_fence(old);
    assert_int_equal(dlock_lock_release(old), DLOCK_OK);
    dlock_lock *newer = test_lock_new(cl, "guarded", 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(newer, 0), DLOCK_OK);
    dlock_break_result res;
    assert_int_equal(dlock_client_break(cl, "guarded", seen, &res), DLOCK_ENOTOWNER);
    assert_int_equal(res.removed, 0);
    assert_int_equal(res.fence, dlock_lock_fence(newer));
    assert_int_equal(dlock_client_break(cl, "guarded", dlock_lock_fence(newer), &res), DLOCK_OK);
    assert_int_equal(res.removed, 1);
    dlock_lock_free(newer);
    dlock_lock_free(old);
}

static void a_free_name_is_left_alone(void **state)
{
    (void)state;
    dlock_break_result res;
    assert_int_equal(dlock_client_break(cl, "nobody", 0, &res), DLOCK_OK);
    assert_int_equal(res.removed, 0);
    assert_int_equal(res.mode, DLOCK_HOLD_FREE);
    assert_int_equal(res.fence, 0);
    assert_int_equal(dlock_client_break(cl, "", 0, &res), DLOCK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_next_in_line_takes_the_broken_lock),
        cmocka_unit_test(a_fence_guards_a_newer_owner),
        cmocka_unit_test(a_free_name_is_left_alone),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
