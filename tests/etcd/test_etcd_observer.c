/* SPDX-License-Identifier: BSD-3-Clause */
/* The observer hooks on an etcd:// client against a real etcd member: the
 * engine's events are the same for every store. A grant and a release
 * each fire once (backend "etcd"; each read of the line is an attempt), a
 * wait woken by the watch on the key before ours is one pushed wake-up,
 * the watchdog's lease renewals are rounds, and a hold broken behind the
 * holder's back ends once, as lost, before on_lost. */
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

/* What the hooks saw; hooks run on the caller's and the watchdog's
 * threads. */
static atomic_int starts, ends, end_result, end_attempts, end_backend_etcd;
static atomic_int holds, hold_how, hold_reason, rounds, rounds_renewed_one;
static atomic_int lost_calls, hold_before_lost, wakes, wakes_pushed;

static void on_start(void *arg, const dlock_acquire_event *ev)
{
    (void)arg;
    (void)ev;
    atomic_fetch_add(&starts, 1);
}

static void on_end(void *arg, const dlock_acquire_event *ev)
{
    (void)arg;
    atomic_store(&end_result, ev->result);
    atomic_store(&end_attempts, (int)ev->attempts);
    atomic_store(&end_backend_etcd, !strcmp(ev->backend, "etcd"));
    atomic_fetch_add(&ends, 1);
}

static void on_hold(void *arg, const dlock_hold_event *ev)
{
    (void)arg;
    atomic_store(&hold_how, (int)ev->how);
    atomic_store(&hold_reason, ev->reason);
    atomic_fetch_add(&holds, 1);
}

static void on_round(void *arg, const dlock_renewal_event *ev)
{
    (void)arg;
    if (ev->locks == 1 && ev->renewed == 1 && ev->failed == 0 && ev->lease_left_ns > 0)
        atomic_fetch_add(&rounds_renewed_one, 1);
    atomic_fetch_add(&rounds, 1);
}

static void on_wake(void *arg, const dlock_wakeup_event *ev)
{
    (void)arg;
    atomic_fetch_add(&wakes_pushed, ev->pushed);
    atomic_fetch_add(&wakes, 1);
}

static const dlock_observer observer = {
    .version = DLOCK_OBSERVER_VERSION, .acquire_start = on_start, .acquire_end = on_end,
    .hold_end = on_hold, .renewal_round = on_round, .wakeup = on_wake};

static void on_lost(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)l;
    (void)why;
    (void)arg;
    atomic_store(&hold_before_lost, atomic_load(&holds));
    atomic_fetch_add(&lost_calls, 1);
}

static int setup(void **state)
{
    (void)state;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.observer = &observer;
    return test_etcd_setup(&srv, 1, &o, &cl);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_teardown(&srv, cl);
    return 0;
}

static void reset(void)
{
    atomic_store(&starts, 0);
    atomic_store(&ends, 0);
    atomic_store(&holds, 0);
    atomic_store(&rounds, 0);
    atomic_store(&rounds_renewed_one, 0);
    atomic_store(&lost_calls, 0);
    atomic_store(&wakes, 0);
    atomic_store(&wakes_pushed, 0);
}

static void a_grant_and_a_release_fire_once_each(void **state)
{
    (void)state;
    reset();
    dlock_lock *l = test_lock_new(cl, "obs-etcd", 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(atomic_load(&starts), 1);
    assert_int_equal(atomic_load(&ends), 1);
    assert_int_equal(atomic_load(&end_result), DLOCK_OK);
    assert_int_equal(atomic_load(&end_attempts), 1); /* in line, and first */
    assert_int_equal(atomic_load(&wakes), 0);
    assert_int_equal(atomic_load(&end_backend_etcd), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(atomic_load(&holds), 1);
    assert_int_equal(atomic_load(&hold_how), DLOCK_HOLD_RELEASED);
    dlock_stats s;
    assert_int_equal(dlock_client_stats(cl, &s, sizeof s), DLOCK_OK);
    assert_true(s.acquires_granted >= 1 && s.holds_released >= 1);
    dlock_lock_free(l);
}

static void *release_later(void *arg)
{
    test_sleep_ms(200);
    assert_int_equal(dlock_lock_release(arg), DLOCK_OK);
    return NULL;
}

static void a_wait_woken_by_the_watch_counts_its_reads_and_one_push(void **state)
{
    (void)state;
    dlock_lock *holder = test_lock_new(cl, "obs-etcd-wait", 30000, 0, 10, 50);
    dlock_lock *l = test_lock_new(cl, "obs-etcd-wait", 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    reset();
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, holder), 0);
    assert_int_equal(dlock_lock_acquire(l, 5000), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&ends), 1);
    assert_int_equal(atomic_load(&end_result), DLOCK_OK);
    /* In line, a look at the key before ours, and the look after it went. */
    assert_true(atomic_load(&end_attempts) >= 3);
    assert_int_equal(atomic_load(&wakes), 1);
    assert_int_equal(atomic_load(&wakes_pushed), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(holder);
}

static int lost_seen(void *arg)
{
    (void)arg;
    return atomic_load(&lost_calls) > 0;
}

static void renewals_are_rounds_and_a_broken_hold_ends_once_as_lost(void **state)
{
    (void)state;
    reset();
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 30000;
    o.flags = DLOCK_AUTO_RENEW;
    o.renew_interval_ms = 100;
    o.on_lost = on_lost;
    dlock_lock *l = test_lock_with(cl, "obs-etcd-lost", &o);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_sleep_ms(450);
    assert_true(atomic_load(&rounds_renewed_one) >= 2);
    dlock_break_result res;
    assert_int_equal(dlock_client_break(cl, "obs-etcd-lost", 0, &res), DLOCK_OK);
    assert_true(test_wait_until(lost_seen, NULL, 5000, 10));
    assert_int_equal(atomic_load(&holds), 1);
    assert_int_equal(atomic_load(&hold_before_lost), 1); /* before on_lost */
    assert_int_equal(atomic_load(&hold_how), DLOCK_HOLD_LOST);
    assert_int_equal(atomic_load(&hold_reason), DLOCK_LOST_NOT_OWNER);
    assert_int_equal(dlock_lock_release(l), DLOCK_ELOST);
    assert_int_equal(atomic_load(&holds), 1);
    dlock_lock_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_grant_and_a_release_fire_once_each),
        cmocka_unit_test(a_wait_woken_by_the_watch_counts_its_reads_and_one_push),
        cmocka_unit_test(renewals_are_rounds_and_a_broken_hold_ends_once_as_lost),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
