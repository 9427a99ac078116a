/* SPDX-License-Identifier: BSD-3-Clause */
/* Locks on an event loop (dlock.h, "Locks on an event loop"), through one
 * adapter's test driver (loop_driver.h), against a real redis-server: each
 * _start verb answers
 * once, from the loop, never inside the start; waiters are woken by a
 * release; a cancel and a free end a pending acquire; the watchdog renews
 * on the loop; the process has no thread but the loop's; and once the
 * client is freed the loop has nothing of dlock's left (the driver's
 * idle(): uv_run() or event_base_dispatch() would return). */
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
#include "redis_server.h"
#include "loop_driver.h"

static test_redis srv;
static const test_loop_driver *d;
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
    return test_loop_open(d, &cl, srv.url, 300);
}

/* Free it, then turn the loop until dlock has nothing on it. */
static int close_client(void **state)
{
    (void)state;
    assert_int_equal(test_loop_close(d, &cl, 5000), 0);
    return 0;
}

static dlock_lock *new_lock(const char *name, int64_t ttl_ms, unsigned flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = flags;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, cl, name, &o), DLOCK_OK);
    return l;
}

static void take_and_give_back(void **state)
{
    (void)state;
    dlock_lock *l = new_lock("loop:one", 5000, 0);
    test_loop_result r = {0};
    assert_int_equal(dlock_lock_acquire_start(l, 0, test_loop_done, &r), DLOCK_OK);
    assert_int_equal(r.calls, 0); /* never inside the start */
    assert_int_equal(dlock_lock_pending(l), 1);
    assert_int_equal(test_loop_wait(d, &r, 5000), DLOCK_OK);
    assert_int_equal(r.calls, 1);
    assert_ptr_equal(r.lock, l);
    assert_int_equal(dlock_lock_pending(l), 0);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_true(dlock_lock_fence(l) > 0);

    /* One request at a time; forget waits for it too. */
    test_loop_result e = {0};
    assert_int_equal(dlock_lock_extend_start(l, 0, test_loop_done, &e), DLOCK_OK);
    assert_int_equal(dlock_lock_release_start(l, test_loop_done, &r), DLOCK_EBUSY);
    assert_int_equal(dlock_lock_forget(l), DLOCK_EBUSY);
    assert_int_equal(test_loop_wait(d, &e, 5000), DLOCK_OK);

    memset(&r, 0, sizeof r);
    assert_int_equal(dlock_lock_release_start(l, test_loop_done, &r), DLOCK_OK);
    assert_int_equal(r.calls, 0);
    assert_int_equal(test_loop_wait(d, &r, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);

    /* An answer known at once still comes from the loop. */
    memset(&r, 0, sizeof r);
    assert_int_equal(dlock_lock_release_start(l, test_loop_done, &r), DLOCK_OK);
    assert_int_equal(r.calls, 0);
    assert_int_equal(test_loop_wait(d, &r, 5000), DLOCK_ENOTHELD);
    memset(&r, 0, sizeof r);
    assert_int_equal(dlock_lock_acquire_start(l, -5, test_loop_done, &r), DLOCK_OK);
    assert_int_equal(r.calls, 0);
    assert_int_equal(test_loop_wait(d, &r, 5000), DLOCK_EINVAL);
    dlock_lock_free(l);
}

static void blocking_verbs_are_refused(void **state)
{
    (void)state;
    dlock_lock *l = new_lock("loop:blocking", 5000, 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_lock_errmsg(l), "_start"));
    assert_int_equal(dlock_lock_release(l), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_extend(l, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_adopt(l, "abc"), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_acquire_start(l, 0, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_acquire_start(NULL, 0, test_loop_done, NULL), DLOCK_EINVAL);
    dlock_lock_free(l);

    /* A client without a loop has no _start verbs. */
    dlock_client *plain = NULL;
    const char *urls[] = {srv.url};
    assert_int_equal(dlock_client_new(&plain, urls, 1, NULL, NULL, 0), DLOCK_OK);
    dlock_lock *p = NULL;
    assert_int_equal(dlock_lock_new(&p, plain, "loop:plain", NULL), DLOCK_OK);
    test_loop_result r = {0};
    assert_int_equal(dlock_lock_acquire_start(p, 0, test_loop_done, &r), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_lock_errmsg(p), "event loop"));
    dlock_lock_free(p);
    dlock_client_free(plain);

    /* Hooks missing or of an unknown version. */
    dlock_loop hooks = d->hooks();
    hooks.timer_clear = NULL;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.loop = &hooks;
    char err[256] = "";
    assert_int_equal(dlock_client_new(&plain, urls, 1, &o, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "timer_clear"));
    hooks = d->hooks();
    hooks.version = 99;
    assert_int_equal(dlock_client_new(&plain, urls, 1, &o, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "version"));
}

/* Handle *a takes name (ttl_ms), then handle *b starts waiting for it
 * (wait_ms) and is still waiting after turn_ms of the loop. */
static void holder_and_waiter(const char *name, int64_t ttl_ms, unsigned flags, int64_t wait_ms,
                              int turn_ms, dlock_lock **a, dlock_lock **b, test_loop_result *ra,
                              test_loop_result *rb)
{
    *a = new_lock(name, ttl_ms, flags);
    *b = new_lock(name, ttl_ms, 0);
    memset(ra, 0, sizeof *ra);
    memset(rb, 0, sizeof *rb);
    assert_int_equal(dlock_lock_acquire_start(*a, 0, test_loop_done, ra), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, ra, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(*b, wait_ms, test_loop_done, rb), DLOCK_OK);
    test_loop_turn(d, turn_ms);
    assert_int_equal(rb->calls, 0); /* waiting */
}

/* Lock-delay on a loop (docs/lock-delay.md): a holder's lease that ends
 * without a release (the handle forgotten: its process might have died)
 * keeps the name from the next taker until the lease plus the delay have
 * passed; the waiter sleeps on a loop timer meanwhile (the ticker shows
 * nothing blocked the loop), then takes it. A clean release frees the
 * name at once. */
static void lock_delay_after_an_unclean_end(void **state)
{
    (void)state;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 400;
    o.lock_delay_ms = 600;
    dlock_lock *a = NULL, *b = NULL;
    assert_int_equal(dlock_lock_new(&a, cl, "loop:delay", &o), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&b, cl, "loop:delay", &o), DLOCK_OK);
    test_loop_result ra = {0}, rb = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_loop_done, &ra), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &ra, 5000), DLOCK_OK);
    int64_t t0 = test_loop_now_ms();
    assert_int_equal(dlock_lock_forget(a), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(b, 5000, test_loop_done, &rb), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &rb, 6000), DLOCK_OK);
    int64_t took = test_loop_now_ms() - t0;
    print_message("lock-delay on a loop: granted %lld ms after the forget (lease 400 + delay 600)\n",
                  (long long)took);
    assert_true(took >= 1000 - 50); /* never before the lease and the delay ended */
    /* A clean release leaves no delay. */
    memset(&rb, 0, sizeof rb);
    assert_int_equal(dlock_lock_release_start(b, test_loop_done, &rb), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &rb, 5000), DLOCK_OK);
    memset(&ra, 0, sizeof ra);
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_loop_done, &ra), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &ra, 5000), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* A waiter is woken by the holder's release, made between two turns of
 * the loop (on its thread, as a program's own callback would). */
static void a_release_wakes_a_waiter(void **state)
{
    (void)state;
    dlock_lock *a, *b;
    test_loop_result ra, rb;
    holder_and_waiter("loop:contended", 10000, 0, 8000, 300, &a, &b, &ra, &rb);
    memset(&ra, 0, sizeof ra);
    assert_int_equal(dlock_lock_release_start(a, test_loop_done, &ra), DLOCK_OK);
    int64_t t0 = test_loop_now_ms();
    assert_int_equal(test_loop_wait(d, &rb, 9000), DLOCK_OK);
    /* Woken by the release, long before the wait's 8 s. */
    assert_true(test_loop_now_ms() - t0 < 2700);
    assert_int_equal(dlock_lock_state_get(b), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_UNLOCKED);
    dlock_lock_free(b); /* held: the free lets go of it on the loop */
    dlock_lock_free(a);
}

static void a_cancel_ends_a_wait(void **state)
{
    (void)state;
    dlock_lock *a, *b;
    test_loop_result ra, rb;
    holder_and_waiter("loop:cancel", 10000, 0, DLOCK_WAIT_FOREVER, 200, &a, &b, &ra, &rb);
    int64_t t0 = test_loop_now_ms();
    dlock_lock_cancel(b);
    assert_int_equal(test_loop_wait(d, &rb, 5000), DLOCK_ECANCELED);
    assert_true(test_loop_now_ms() - t0 < 2000);
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
    dlock_lock *a, *b;
    test_loop_result ra, rb;
    holder_and_waiter("loop:freed", 10000, 0, DLOCK_WAIT_FOREVER, 100, &a, &b, &ra, &rb);
    dlock_lock_free(b);
    assert_int_equal(rb.calls, 1);
    assert_int_equal(rb.rc, DLOCK_ECANCELED);
    test_loop_turn(d, 300);
    assert_int_equal(rb.calls, 1);
    memset(&ra, 0, sizeof ra);
    assert_int_equal(dlock_lock_release_start(a, test_loop_done, &ra), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &ra, 5000), DLOCK_OK);
    dlock_lock_free(a);
}

/* A pending release or extend of a freed handle: its callback runs inside
 * the free with DLOCK_ECANCELED and never again, and the release still
 * happens (the key is gone). */
static void a_free_ends_a_pending_release_or_extend(void **state)
{
    (void)state;
    for (int extend = 0; extend <= 1; extend++) {
        dlock_lock *a = new_lock("loop:freed2", 10000, 0);
        test_loop_result r = {0};
        assert_int_equal(dlock_lock_acquire_start(a, 0, test_loop_done, &r), DLOCK_OK);
        assert_int_equal(test_loop_wait(d, &r, 5000), DLOCK_OK);
        memset(&r, 0, sizeof r);
        if (extend)
            assert_int_equal(dlock_lock_extend_start(a, 20000, test_loop_done, &r), DLOCK_OK);
        else
            assert_int_equal(dlock_lock_release_start(a, test_loop_done, &r), DLOCK_OK);
        dlock_lock_free(a);
        assert_int_equal(r.calls, 1);
        assert_int_equal(r.rc, DLOCK_ECANCELED);
        test_loop_turn(d, 200);
        assert_int_equal(r.calls, 1);
        redisReply *y = test_redis_cmd(&srv, "EXISTS loop:freed2");
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
    lost_calls = 0;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 600;
    o.flags = DLOCK_AUTO_RENEW;
    o.on_lost = lost_then_free;
    dlock_lock *a = NULL;
    assert_int_equal(dlock_lock_new(&a, cl, "loop:lost", &o), DLOCK_OK);
    test_loop_result r = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_loop_done, &r), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &r, 5000), DLOCK_OK);
    redisReply *y = test_redis_cmd(&srv, "SET loop:lost someone-else");
    assert_non_null(y);
    freeReplyObject(y);
    int64_t end = test_loop_now_ms() + 3000;
    while (lost_calls == 0 && test_loop_now_ms() < end)
        d->turn(50);
    assert_int_equal(lost_calls, 1);
    test_loop_turn(d, 300); /* the free's end */
}

/* A lock held far past its TTL is renewed by the watchdog on the loop, and
 * the process has no thread but this one. */
static void the_loop_renews_and_no_thread_is_made(void **state)
{
    (void)state;
    dlock_lock *a, *b;
    test_loop_result ra, rb;
    /* A waiter subscribes for wake-ups: on the loop too. */
    holder_and_waiter("loop:renewed", 300, DLOCK_AUTO_RENEW, 1500, 0, &a, &b, &ra, &rb);
    assert_int_equal(test_loop_wait(d, &rb, 5000), DLOCK_ETIMEDOUT);
    test_loop_turn(d, 300);
    assert_int_equal(test_loop_threads(), 1);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    memset(&ra, 0, sizeof ra);
    assert_int_equal(dlock_lock_release_start(a, test_loop_done, &ra), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &ra, 5000), DLOCK_OK); /* still ours: renewed */
    dlock_stats st;
    assert_int_equal(dlock_client_stats(cl, &st, sizeof st), DLOCK_OK);
    assert_true(st.renewals >= 5); /* 1.8 s at a third of 300 ms */
    dlock_lock_free(b);
    dlock_lock_free(a);
}

/* The server drops dlock's connections between two takes: the adapter
 * reports the end of the stream, and the next take connects again (a new
 * connection's record, set anew on the loop) and succeeds. */
static void a_dropped_connection_is_made_again(void **state)
{
    (void)state;
    dlock_lock *a = new_lock("loop:dropped", 5000, 0);
    for (int round = 0; round < 3; round++) {
        test_loop_result r = {0};
        assert_int_equal(dlock_lock_acquire_start(a, 0, test_loop_done, &r), DLOCK_OK);
        assert_int_equal(test_loop_wait(d, &r, 5000), DLOCK_OK);
        memset(&r, 0, sizeof r);
        assert_int_equal(dlock_lock_release_start(a, test_loop_done, &r), DLOCK_OK);
        assert_int_equal(test_loop_wait(d, &r, 5000), DLOCK_OK);
        redisReply *y = test_redis_cmd(&srv, "CLIENT KILL TYPE normal SKIPME yes");
        assert_non_null(y);
        assert_true(y->integer >= 1); /* dlock's connection was there */
        freeReplyObject(y);
        test_loop_turn(d, 50); /* the loop sees the end of the stream */
    }
    dlock_lock_free(a);
}

/* Freeing the client with a held lock's handle just freed: the handle's
 * release and the client's end run on the loop, after which it is empty
 * (close_client checks), and the lock is free for another client. */
static void freeing_everything_leaves_the_loop_empty(void **state)
{
    (void)state;
    dlock_lock *a = new_lock("loop:all", 10000, 0);
    test_loop_result ra = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_loop_done, &ra), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &ra, 5000), DLOCK_OK);
    dlock_lock_free(a);
    dlock_client_free(cl);
    cl = NULL;
    assert_int_equal(test_loop_drain(d, 5000), 0);
    redisReply *rep = test_redis_cmd(&srv, "EXISTS loop:all");
    assert_non_null(rep);
    assert_int_equal(rep->integer, 0); /* released by the free */
    freeReplyObject(rep);
    assert_int_equal(test_loop_client(d, &cl, srv.url, 300), 0); /* for close_client */
}

int test_loop_locks_run(const test_loop_driver *driver)
{
    d = driver;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(take_and_give_back, open_client, close_client),
        cmocka_unit_test_setup_teardown(blocking_verbs_are_refused, open_client, close_client),
        cmocka_unit_test_setup_teardown(a_release_wakes_a_waiter, open_client, close_client),
        cmocka_unit_test_setup_teardown(lock_delay_after_an_unclean_end, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(a_cancel_ends_a_wait, open_client, close_client),
        cmocka_unit_test_setup_teardown(a_free_ends_a_pending_acquire, open_client, close_client),
        cmocka_unit_test_setup_teardown(a_free_ends_a_pending_release_or_extend, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(on_lost_runs_on_the_loop, open_client, close_client),
        cmocka_unit_test_setup_teardown(the_loop_renews_and_no_thread_is_made, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(a_dropped_connection_is_made_again, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(freeing_everything_leaves_the_loop_empty, open_client,
                                        close_client),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
