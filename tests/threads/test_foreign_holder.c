/* SPDX-License-Identifier: BSD-3-Clause */
/* A waiter behind another library's lock on the same key (issue 20): a
 * plain `SET key token NX PX ttl`, as redis-py or redsync take it, which
 * publishes nothing on release. The waiter sees the release within a
 * look period (200 ms) and costs a few script calls a second while it
 * waits. Script calls come from INFO commandstats; the bounds are
 * generous (a loaded 2-core VM), and the delay is printed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

typedef struct waiter {
    dlock_lock *lock;
    int rc;
    _Atomic int64_t done_ms;
} waiter;

static void *wait_for_it(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->lock, 20000);
    atomic_store(&w->done_ms, test_now_ms());
    return NULL;
}

#define HOLD_MS 3000

static void waiter_sees_a_foreign_release_within_a_look_period(void **state)
{
    (void)state;
    const char *name = "foreign:key";
    /* The other library holds it: 30 s TTL, so only a look can tell. */
    test_cmd_status(&test_srv, "SET %s redis-py-token NX PX 30000", name);
    /* Long retries: only the look period explains a prompt return. */
    dlock_lock *l = test_lock_new(test_cl, name, 10000, 0, 5000, 5000);
    waiter w = {l, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_it, &w), 0);
    test_sleep_ms(500); /* subscribed and asleep */
    long long calls0 = test_script_calls(&test_srv);
    int64_t t0 = test_now_ms();
    test_sleep_ms(HOLD_MS);
    long long calls = test_script_calls(&test_srv) - calls0;
    double per_s = (double)calls * 1000.0 / (double)(test_now_ms() - t0);
    int64_t released = test_now_ms();
    test_cmd_int(&test_srv, "DEL %s", name); /* the other library's release */
    assert_int_equal(pthread_join(t, NULL), 0);
    int64_t delay = atomic_load(&w.done_ms) - released;
    printf("# behind a foreign holder: %lld script calls in %d ms (%.1f/s); lock taken %lld ms "
           "after the release\n", calls, HOLD_MS, per_s, (long long)delay);
    assert_int_equal(w.rc, DLOCK_OK);
    /* A look every 200 ms: 5 a second. Before, one a second. */
    assert_true(per_s >= 3.0);
    assert_true(per_s <= 12.0);
    assert_true(delay < 1000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(waiter_sees_a_foreign_release_within_a_look_period,
                                  test_srv_flush),
    };
    return cmocka_run_group_tests(tests, test_srv_client_setup, test_srv_client_teardown);
}
