/* SPDX-License-Identifier: BSD-3-Clause */
/* A looped client's pending requests while its redis-server is stopped
 * (SIGSTOP), killed and restarted: every request's callback runs once,
 * with one of the codes dlock.h documents for the verb, the loop keeps
 * turning (a uv timer beside it keeps ticking), and after the faults the
 * lock is served again; the loop is empty once the client is freed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "dlock.h"
#include "redis_server.h"
#include "uv_support.h"

static test_redis srv;
static uv_loop_t loop;
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    return test_redis_start(&srv, NULL);
}

static int teardown(void **state)
{
    (void)state;
    test_redis_stop(&srv);
    return 0;
}

static int open_client(void **state)
{
    (void)state;
    return test_uv_open(&loop, &cl, srv.url, 300);
}

static int close_client(void **state)
{
    (void)state;
    assert_int_equal(test_uv_close(&loop, &cl, 10000), 0);
    return 0;
}

#define WAITERS 6

static int one_of(int rc, const int *codes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (rc == codes[i])
            return 1;
    return 0;
}

/* What a waiting acquire may end with while its one node is stopped or
 * killed: the lock (the holder's lease ran out meanwhile), its deadline,
 * or the node's own failure codes (dlock.h, dlock_lock_acquire()). */
static const int acquire_codes[] = {DLOCK_OK, DLOCK_ETIMEDOUT, DLOCK_ENOTACQUIRED, DLOCK_EIO,
                                    DLOCK_EUNKNOWN, DLOCK_EBUSY};
/* A release: done, or the node's failure (the key then ends with its TTL). */
static const int release_codes[] = {DLOCK_OK, DLOCK_EIO, DLOCK_EUNKNOWN, DLOCK_EEXPIRED,
                                    DLOCK_ENOTOWNER, DLOCK_ELOST};

/* A holder (auto-renewed) and WAITERS waiters on one name; fault() runs
 * while they are pending; then every callback must have run once. */
static void with_requests_pending(void (*fault)(void), const char *name)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 1000;
    o.flags = DLOCK_AUTO_RENEW;
    dlock_lock *holder = NULL, *w[WAITERS];
    assert_int_equal(dlock_lock_new(&holder, cl, name, &o), DLOCK_OK);
    test_uv_result rh = {0}, rw[WAITERS];
    memset(rw, 0, sizeof rw);
    assert_int_equal(dlock_lock_acquire_start(holder, 0, test_uv_done, &rh), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rh, 3000), DLOCK_OK);
    o.flags = 0;
    for (int i = 0; i < WAITERS; i++) {
        assert_int_equal(dlock_lock_new(&w[i], cl, name, &o), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire_start(w[i], 2500 + 300 * i, test_uv_done, &rw[i]),
                         DLOCK_OK);
    }
    test_uv_ticker k;
    test_uv_ticker_start(&loop, &k, 20);
    test_uv_turn(&loop, 100);
    fault();
    int64_t end = test_uv_now_ms() + 15000;
    int answered = 0;
    while (answered < WAITERS && test_uv_now_ms() < end) {
        uv_run(&loop, UV_RUN_ONCE);
        answered = 0;
        for (int i = 0; i < WAITERS; i++)
            answered += rw[i].calls > 0;
    }
    for (int i = 0; i < WAITERS; i++) {
        print_message("waiter %d: %s\n", i, dlock_errname(rw[i].rc));
        assert_int_equal(rw[i].calls, 1);
        assert_true(one_of(rw[i].rc, acquire_codes, sizeof acquire_codes / sizeof acquire_codes[0]));
        assert_int_equal(dlock_lock_pending(w[i]), 0);
    }
    memset(&rh, 0, sizeof rh);
    assert_int_equal(dlock_lock_release_start(holder, test_uv_done, &rh), DLOCK_OK);
    test_uv_wait(&loop, &rh, 5000);
    print_message("holder's release: %s; longest gap between 20 ms ticks: %lld ms\n",
                  dlock_errname(rh.rc), (long long)k.longest_gap_ms);
    assert_int_equal(rh.calls, 1);
    assert_true(one_of(rh.rc, release_codes, sizeof release_codes / sizeof release_codes[0]));
    assert_true(k.longest_gap_ms < 250); /* the loop was never blocked */
    for (int i = 0; i < WAITERS; i++)
        dlock_lock_free(w[i]);
    dlock_lock_free(holder);
    test_uv_turn(&loop, 600);
    assert_int_equal(rh.calls, 1);

    /* Served again. */
    dlock_lock *again = NULL;
    assert_int_equal(dlock_lock_new(&again, cl, name, &o), DLOCK_OK);
    test_uv_result ra = {0};
    assert_int_equal(dlock_lock_acquire_start(again, 5000, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 8000), DLOCK_OK);
    dlock_lock_free(again);
    test_uv_ticker_stop(&k);
    uv_run(&loop, UV_RUN_NOWAIT); /* its close: k is on this stack */
}

static void stop_for_a_while(void)
{
    test_redis_pause(&srv);
    test_uv_turn(&loop, 1500);
    test_redis_resume(&srv);
}

static void kill_and_restart(void)
{
    test_redis_kill9(&srv);
    test_uv_turn(&loop, 700);
    assert_int_equal(test_redis_restart(&srv), 0);
}

static void a_stopped_server(void **state)
{
    (void)state;
    with_requests_pending(stop_for_a_while, "uvf:stopped");
}

static void a_killed_and_restarted_server(void **state)
{
    (void)state;
    with_requests_pending(kill_and_restart, "uvf:killed");
}

/* An extend and a release pending on a stopped server end within the I/O
 * timeout, with the documented codes. */
static void an_extend_and_a_release_on_a_stopped_server(void **state)
{
    (void)state;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 5000;
    dlock_lock *a = NULL, *b = NULL;
    assert_int_equal(dlock_lock_new(&a, cl, "uvf:ext", &o), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&b, cl, "uvf:rel", &o), DLOCK_OK);
    test_uv_result ra = {0}, rb = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(b, 0, test_uv_done, &rb), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 3000), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rb, 3000), DLOCK_OK);
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    test_redis_pause(&srv);
    int64_t t0 = test_uv_now_ms();
    assert_int_equal(dlock_lock_extend_start(a, 8000, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(dlock_lock_release_start(b, test_uv_done, &rb), DLOCK_OK);
    test_uv_wait(&loop, &ra, 3000);
    test_uv_wait(&loop, &rb, 3000);
    int64_t took = test_uv_now_ms() - t0;
    test_redis_resume(&srv);
    print_message("extend %s, release %s, after %lld ms\n", dlock_errname(ra.rc),
                  dlock_errname(rb.rc), (long long)took);
    assert_int_equal(ra.calls, 1);
    assert_int_equal(rb.calls, 1);
    assert_true(ra.rc == DLOCK_EIO || ra.rc == DLOCK_EUNKNOWN);
    assert_true(rb.rc == DLOCK_EIO || rb.rc == DLOCK_EUNKNOWN);
    assert_true(took < 2000); /* the 300 ms I/O timeout, not the server */
    dlock_lock_free(a);
    dlock_lock_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_stopped_server, open_client, close_client),
        cmocka_unit_test_setup_teardown(a_killed_and_restarted_server, open_client, close_client),
        cmocka_unit_test_setup_teardown(an_extend_and_a_release_on_a_stopped_server, open_client,
                                        close_client),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
