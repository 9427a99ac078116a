/* SPDX-License-Identifier: BSD-3-Clause */
/* Locks on a libuv loop (dlock.h, "Locks on an event loop", and
 * <dlock/libuv.h>), against a real redis-server: each _start verb answers
 * once, from the loop, never inside the start; waiters are woken by a
 * release; a cancel and a free end a pending acquire; the watchdog renews
 * on the loop; the process has no thread but the loop's; and once the
 * client is freed the loop has nothing of dlock's left (uv_run() returns). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock.h"
#include "dlock/libuv.h"
#include "redis_server.h"
#include "uv_support.h"

static test_redis srv;
static uv_loop_t loop;
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    if (test_redis_start(&srv, NULL) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_redis_stop(&srv);
    return 0;
}

/* A looped client of srv on a fresh loop. */
static int open_client(void **state)
{
    (void)state;
    return test_uv_open(&loop, &cl, srv.url, 300);
}

/* Free it, then turn the loop until dlock has nothing on it: uv_run()
 * returns 0 only once no watcher is left. */
static int close_client(void **state)
{
    (void)state;
    assert_int_equal(test_uv_close(&loop, &cl, 5000), 0);
    return 0;
}

static dlock_lock *new_lock(const char *name, int64_t ttl_ms, unsigned flags)
{
    dlock_lock *l = test_uv_lock(cl, name, ttl_ms, flags);
    assert_non_null(l);
    return l;
}

static void take_and_give_back(void **state)
{
    (void)state;
    dlock_lock *l = new_lock("uv:one", 5000, 0);
    test_uv_result r = {0};
    assert_int_equal(dlock_lock_acquire_start(l, 0, test_uv_done, &r), DLOCK_OK);
    assert_int_equal(r.calls, 0); /* never inside the start */
    assert_int_equal(dlock_lock_pending(l), 1);
    assert_int_equal(test_uv_wait(&loop, &r, 5000), DLOCK_OK);
    assert_int_equal(r.calls, 1);
    assert_ptr_equal(r.lock, l);
    assert_int_equal(dlock_lock_pending(l), 0);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_true(dlock_lock_fence(l) > 0);

    /* One request at a time. */
    test_uv_result e = {0};
    assert_int_equal(dlock_lock_extend_start(l, 0, test_uv_done, &e), DLOCK_OK);
    assert_int_equal(dlock_lock_release_start(l, test_uv_done, &r), DLOCK_EBUSY);
    assert_int_equal(test_uv_wait(&loop, &e, 5000), DLOCK_OK);

    memset(&r, 0, sizeof r);
    assert_int_equal(dlock_lock_release_start(l, test_uv_done, &r), DLOCK_OK);
    assert_int_equal(r.calls, 0);
    assert_int_equal(test_uv_wait(&loop, &r, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);

    /* An answer known at once still comes from the loop. */
    memset(&r, 0, sizeof r);
    assert_int_equal(dlock_lock_release_start(l, test_uv_done, &r), DLOCK_OK);
    assert_int_equal(r.calls, 0);
    assert_int_equal(test_uv_wait(&loop, &r, 5000), DLOCK_ENOTHELD);
    memset(&r, 0, sizeof r);
    assert_int_equal(dlock_lock_acquire_start(l, -5, test_uv_done, &r), DLOCK_OK);
    assert_int_equal(r.calls, 0);
    assert_int_equal(test_uv_wait(&loop, &r, 5000), DLOCK_EINVAL);
    dlock_lock_free(l);
}

static void blocking_verbs_are_refused(void **state)
{
    (void)state;
    dlock_lock *l = new_lock("uv:blocking", 5000, 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_lock_errmsg(l), "_start"));
    assert_int_equal(dlock_lock_release(l), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_extend(l, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_adopt(l, "abc"), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_acquire_start(l, 0, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_acquire_start(NULL, 0, test_uv_done, NULL), DLOCK_EINVAL);
    dlock_lock_free(l);

    /* A client without a loop has no _start verbs. */
    dlock_client *plain = NULL;
    const char *urls[] = {srv.url};
    assert_int_equal(dlock_client_new(&plain, urls, 1, NULL, NULL, 0), DLOCK_OK);
    dlock_lock *p = NULL;
    assert_int_equal(dlock_lock_new(&p, plain, "uv:plain", NULL), DLOCK_OK);
    test_uv_result r = {0};
    assert_int_equal(dlock_lock_acquire_start(p, 0, test_uv_done, &r), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_lock_errmsg(p), "event loop"));
    dlock_lock_free(p);
    dlock_client_free(plain);

    /* Hooks missing or of an unknown version. */
    dlock_loop hooks = dlock_libuv_loop(&loop);
    hooks.timer_clear = NULL;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.loop = &hooks;
    char err[256] = "";
    assert_int_equal(dlock_client_new(&plain, urls, 1, &o, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "timer_clear"));
    hooks = dlock_libuv_loop(&loop);
    hooks.version = 99;
    assert_int_equal(dlock_client_new(&plain, urls, 1, &o, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "version"));
}

/* A waiter is woken by the holder's release, from a timer on the loop. */
static void release_timer(uv_timer_t *t)
{
    dlock_lock *holder = t->data;
    static test_uv_result rel;
    memset(&rel, 0, sizeof rel);
    assert_int_equal(dlock_lock_release_start(holder, test_uv_done, &rel), DLOCK_OK);
    uv_close((uv_handle_t *)t, NULL);
}

static void a_release_wakes_a_waiter(void **state)
{
    (void)state;
    dlock_lock *a = new_lock("uv:contended", 10000, 0);
    dlock_lock *b = new_lock("uv:contended", 10000, 0);
    test_uv_result ra = {0}, rb = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(b, 8000, test_uv_done, &rb), DLOCK_OK);
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    t.data = a;
    uv_timer_start(&t, release_timer, 300, 0);
    int64_t t0 = test_uv_now_ms();
    assert_int_equal(test_uv_wait(&loop, &rb, 9000), DLOCK_OK);
    int64_t waited = test_uv_now_ms() - t0;
    /* Woken by the release (300 ms), not by a look (the wait is 8 s). */
    assert_true(waited >= 250);
    assert_true(waited < 3000);
    assert_int_equal(dlock_lock_state_get(b), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_UNLOCKED);
    dlock_lock_free(b); /* held: the free lets go of it on the loop */
    dlock_lock_free(a);
}

static void cancel_timer(uv_timer_t *t)
{
    dlock_lock_cancel(t->data);
    uv_close((uv_handle_t *)t, NULL);
}

static void a_cancel_ends_a_wait(void **state)
{
    (void)state;
    dlock_lock *a = new_lock("uv:cancel", 10000, 0);
    dlock_lock *b = new_lock("uv:cancel", 10000, 0);
    test_uv_result ra = {0}, rb = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(b, DLOCK_WAIT_FOREVER, test_uv_done, &rb),
                     DLOCK_OK);
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    t.data = b;
    uv_timer_start(&t, cancel_timer, 200, 0);
    int64_t t0 = test_uv_now_ms();
    assert_int_equal(test_uv_wait(&loop, &rb, 5000), DLOCK_ECANCELED);
    assert_true(test_uv_now_ms() - t0 < 2000);
    assert_int_equal(rb.calls, 1);
    dlock_lock_free(b);
    dlock_lock_free(a);
}

/* Freeing a handle whose acquire is pending: its callback runs inside the
 * free, with DLOCK_ECANCELED, and never again; the holder still gets its
 * release through. */
static void a_free_ends_a_pending_acquire(void **state)
{
    (void)state;
    dlock_lock *a = new_lock("uv:freed", 10000, 0);
    dlock_lock *b = new_lock("uv:freed", 10000, 0);
    test_uv_result ra = {0}, rb = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(b, DLOCK_WAIT_FOREVER, test_uv_done, &rb),
                     DLOCK_OK);
    test_uv_turn(&loop, 100); /* b is in its wait */
    assert_int_equal(rb.calls, 0);
    dlock_lock_free(b);
    assert_int_equal(rb.calls, 1);
    assert_int_equal(rb.rc, DLOCK_ECANCELED);
    test_uv_turn(&loop, 300);
    assert_int_equal(rb.calls, 1);
    memset(&ra, 0, sizeof ra);
    assert_int_equal(dlock_lock_release_start(a, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    dlock_lock_free(a);
}

/* A pending release or extend of a freed handle: its callback runs inside
 * the free with DLOCK_ECANCELED and never again, and the release still
 * happens (the key is gone). */
static void a_free_ends_a_pending_release_or_extend(void **state)
{
    (void)state;
    for (int extend = 0; extend <= 1; extend++) {
        dlock_lock *a = new_lock("uv:freed2", 10000, 0);
        test_uv_result r = {0};
        assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &r), DLOCK_OK);
        assert_int_equal(test_uv_wait(&loop, &r, 5000), DLOCK_OK);
        memset(&r, 0, sizeof r);
        if (extend)
            assert_int_equal(dlock_lock_extend_start(a, 20000, test_uv_done, &r), DLOCK_OK);
        else
            assert_int_equal(dlock_lock_release_start(a, test_uv_done, &r), DLOCK_OK);
        dlock_lock_free(a);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.rc, DLOCK_ECANCELED);
        test_uv_turn(&loop, 200);
        assert_int_equal(r.calls, 1);
        redisReply *y = test_redis_cmd(&srv, "EXISTS uv:freed2");
        assert_non_null(y);
        assert_int_equal(y->integer, 0);
        freeReplyObject(y);
    }
}

/* on_lost runs on the loop's thread, and may free its handle there. */
static pthread_t loop_thread;
static int lost_calls;

static void lost_then_free(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)why;
    (void)arg;
    lost_calls++;
    assert_true(pthread_equal(pthread_self(), loop_thread));
    dlock_lock_free(l);
}

static void on_lost_runs_on_the_loop(void **state)
{
    (void)state;
    loop_thread = pthread_self();
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 600;
    o.flags = DLOCK_AUTO_RENEW;
    o.on_lost = lost_then_free;
    dlock_lock *a = NULL;
    assert_int_equal(dlock_lock_new(&a, cl, "uv:lost", &o), DLOCK_OK);
    test_uv_result r = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &r), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &r, 5000), DLOCK_OK);
    redisReply *y = test_redis_cmd(&srv, "SET uv:lost someone-else");
    assert_non_null(y);
    freeReplyObject(y);
    int64_t end = test_uv_now_ms() + 3000;
    while (lost_calls == 0 && test_uv_now_ms() < end)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(lost_calls, 1);
    test_uv_turn(&loop, 300); /* the free's end */
}

/* A lock held far past its TTL is renewed by the watchdog on the loop, and
 * the process has no thread but this one. */
static void the_loop_renews_and_no_thread_is_made(void **state)
{
    (void)state;
    dlock_lock *a = new_lock("uv:renewed", 300, DLOCK_AUTO_RENEW);
    dlock_lock *b = new_lock("uv:renewed", 300, 0);
    test_uv_result ra = {0}, rb = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    /* A waiter subscribes for wake-ups: on the loop too. */
    assert_int_equal(dlock_lock_acquire_start(b, 1500, test_uv_done, &rb), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rb, 5000), DLOCK_ETIMEDOUT);
    test_uv_turn(&loop, 300);
    assert_int_equal(test_uv_threads(), 1);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    memset(&ra, 0, sizeof ra);
    assert_int_equal(dlock_lock_release_start(a, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK); /* still ours: renewed */
    dlock_stats st;
    assert_int_equal(dlock_client_stats(cl, &st, sizeof st), DLOCK_OK);
    assert_true(st.renewals >= 5); /* 1.8 s at a third of 300 ms */
    dlock_lock_free(b);
    dlock_lock_free(a);
}

/* Freeing the client with a held lock's handle just freed: the handle's
 * release and the client's end run on the loop, after which it is empty
 * (close_client checks), and the lock is free for another client. */
static void freeing_everything_leaves_the_loop_empty(void **state)
{
    (void)state;
    dlock_lock *a = new_lock("uv:all", 10000, 0);
    test_uv_result ra = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    dlock_lock_free(a);
    dlock_client_free(cl);
    cl = NULL;
    assert_int_equal(test_uv_drain(&loop, 5000), 0);
    redisReply *rep = test_redis_cmd(&srv, "EXISTS uv:all");
    assert_non_null(rep);
    assert_int_equal(rep->integer, 0); /* released by the free */
    freeReplyObject(rep);
    assert_int_equal(test_uv_client(&cl, &loop, srv.url, 300), 0); /* for close_client */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(take_and_give_back, open_client, close_client),
        cmocka_unit_test_setup_teardown(blocking_verbs_are_refused, open_client, close_client),
        cmocka_unit_test_setup_teardown(a_release_wakes_a_waiter, open_client, close_client),
        cmocka_unit_test_setup_teardown(a_cancel_ends_a_wait, open_client, close_client),
        cmocka_unit_test_setup_teardown(a_free_ends_a_pending_acquire, open_client, close_client),
        cmocka_unit_test_setup_teardown(a_free_ends_a_pending_release_or_extend, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(on_lost_runs_on_the_loop, open_client, close_client),
        cmocka_unit_test_setup_teardown(the_loop_renews_and_no_thread_is_made, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(freeing_everything_leaves_the_loop_empty, open_client,
                                        close_client),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
