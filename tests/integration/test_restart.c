/* SPDX-License-Identifier: BSD-3-Clause */
/* A node that dies, restarts or hangs: calls fail with a node error (never
 * success, never a crash), and the same client recovers afterwards. Every
 * test gets its own redis-server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_handles.h"
#include "test_util.h"
#include "test_waiter.h"

#define IO_TIMEOUT_MS 300

static test_redis srv;
static dlock_client *cl;
/* Handles made by lock_for() are freed after each test even when it fails
 * (test_handles.h). */

static int setup(void **state)
{
    (void)state;
    return test_srv_client_start(&srv, &cl, IO_TIMEOUT_MS);
}

static int teardown(void **state)
{
    (void)state;
    test_handles_free_all();
    test_srv_client_stop(&srv, &cl);
    return 0;
}

static dlock_lock *lock_for(const char *name, int64_t ttl_ms)
{
    return test_handles_add(test_lock_new(cl, name, ttl_ms, 0, 5, 50));
}

/* A node that cannot be reached gives DLOCK_EIO (not sent) or DLOCK_EUNKNOWN
 * (sent, no reply); nothing else is acceptable. */
static void assert_node_error(int rc, const char *what, const dlock_lock *l)
{
    if (rc != DLOCK_EIO && rc != DLOCK_EUNKNOWN)
        fail_msg("%s on a dead node gave %s (%s)", what, dlock_errname(rc),
                 l ? dlock_lock_errmsg(l) : "");
    if (l && dlock_lock_errmsg(l)[0] == '\0')
        fail_msg("%s failed without a message", what);
}

static void killed_server_gives_node_errors_never_success(void **state)
{
    (void)state;
    dlock_lock *held = lock_for("restart:held", 10000), *ext = lock_for("restart:ext", 10000);
    dlock_lock *other = lock_for("restart:other", 10000);
    assert_int_equal(dlock_lock_acquire(held, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(ext, 0), DLOCK_OK);
    test_redis_kill9(&srv);

    assert_node_error(dlock_lock_release(held), "release", held);
    assert_int_equal(dlock_lock_state_get(held), DLOCK_STATE_UNLOCKED);
    assert_node_error(dlock_lock_extend(ext, 20000), "extend", ext);
    assert_node_error(dlock_lock_acquire(other, 0), "acquire", other);
    assert_int_equal(dlock_lock_state_get(other), DLOCK_STATE_UNLOCKED);
    assert_null(dlock_lock_token(other));
    dlock_node_status st;
    assert_node_error(dlock_client_status(cl, "restart:held", 1, &st, NULL), "status", NULL);
    assert_node_error(st.error, "status entry", NULL);
    /* The teardown frees handles that hold (or think they hold) a lock on
     * the dead node: that must be fine too. */
}

static void same_client_recovers_after_restart(void **state)
{
    (void)state;
    dlock_lock *a = lock_for("restart:a", 10000), *b = lock_for("restart:b", 10000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    test_redis_kill9(&srv);
    assert_node_error(dlock_lock_acquire(b, 0), "acquire", b);
    assert_node_error(dlock_lock_release(a), "release", a);
    assert_int_equal(test_redis_restart(&srv), 0);
    /* No persistence: the restarted node has forgotten "restart:a". */
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(a, 20000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_node_status st;
    assert_int_equal(dlock_client_status(cl, "restart:a", 1, &st, NULL), DLOCK_OK);
    assert_int_equal(st.held, 0);
}

static void waiting_acquire_rides_out_a_restart(void **state)
{
    (void)state;
    /* dlock.h: "Node errors end a wait at once except DLOCK_EBUSY, DLOCK_EIO
     * and DLOCK_EUNKNOWN, which are retried until the deadline." The server
     * is restarted from this thread: the harness ties a server's life to
     * the thread that forked it (PR_SET_PDEATHSIG). */
    dlock_lock *wl = lock_for("restart:wait", 10000);
    test_waiter w;
    test_redis_kill9(&srv);
    assert_int_equal(test_waiter_start(&w, wl, 15000, TEST_WAITER_KEEP), 0);
    test_sleep_ms(300);
    int restarted = test_redis_restart(&srv);
    int wrc = test_waiter_join(&w);
    assert_int_equal(restarted, 0);
    if (wrc != DLOCK_OK)
        fail_msg("waiting acquire gave %s after %lld ms: %s", dlock_errname(wrc),
                 (long long)test_waiter_took_ms(&w), dlock_lock_errmsg(w.lock));
    assert_int_equal(dlock_lock_release(w.lock), DLOCK_OK);
}

static void waiting_acquire_on_a_dead_node_gives_a_node_error(void **state)
{
    (void)state;
    dlock_lock *a = lock_for("restart:deadline", 10000);
    test_redis_kill9(&srv);
    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(a, 500);
    int64_t took = test_now_ms() - t0;
    assert_node_error(rc, "waiting acquire", a);
    assert_true(took < 500 + 3000);
}

static void paused_server_gives_unknown_within_io_timeout(void **state)
{
    (void)state;
    dlock_lock *warm = lock_for("restart:warm", 10000), *p = lock_for("restart:paused", 1000);
    dlock_lock *after = lock_for("restart:after", 10000);
    /* Warm the pool, and hold one lock across the pause. */
    assert_int_equal(dlock_lock_acquire(warm, 0), DLOCK_OK);
    test_redis_pause(&srv);

    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(p, 0);
    int64_t took = test_now_ms() - t0;
    printf("# acquire on a paused node: %s after %lld ms (io_timeout_ms %d)\n",
           dlock_errname(rc), (long long)took, IO_TIMEOUT_MS);
    if (rc != DLOCK_EUNKNOWN)
        fail_msg("acquire on a paused node gave %s: %s", dlock_errname(rc), dlock_lock_errmsg(p));
    /* One timeout for the attempt and one for undoing it, plus slack. */
    assert_true(took < 2 * IO_TIMEOUT_MS + 2000);
    assert_int_equal(dlock_lock_state_get(p), DLOCK_STATE_UNLOCKED);

    t0 = test_now_ms();
    rc = dlock_lock_extend(warm, 20000);
    took = test_now_ms() - t0;
    assert_int_equal(rc, DLOCK_EUNKNOWN);
    assert_true(took < IO_TIMEOUT_MS + 2000);

    test_redis_resume(&srv);
    assert_int_equal(dlock_lock_acquire(after, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(after), DLOCK_OK);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(killed_server_gives_node_errors_never_success),
        T(same_client_recovers_after_restart),
        T(waiting_acquire_rides_out_a_restart),
        T(waiting_acquire_on_a_dead_node_gives_a_node_error),
        T(paused_server_gives_unknown_within_io_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
