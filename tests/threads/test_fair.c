/* SPDX-License-Identifier: BSD-3-Clause */
/* Fair mode (DLOCK_FAIR) against a real redis-server: waiters are served
 * in arrival order; the release hands the lock to the next live waiter
 * (fence + 1, validity > 0; how the hand-over is taken and confirmed:
 * test_fair_handover.c); a waiter that gives up or is cancelled leaves the
 * queue and blocks nobody; a waiter that crashed (a child process killed
 * by pid) is skipped once its liveness key expires; fair mode over several
 * nodes is refused; waiting works by polling when wake-ups are off.
 * Helpers and the line's keys: support/fair_line.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "handle.h"
#include "proc.h"
#include "redis_server.h"
#include "fair_line.h"
#include "test_delayed.h"
#include "test_util.h"

/* ---- tests -------------------------------------------------------------- */

static void fair_waiters_acquire_in_arrival_order(void **state)
{
    (void)state;
    enum { N = 5 };
    const char *name = "fair:order";
    dlock_client *c = fair_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    uint64_t fence0 = dlock_lock_fence(holder);
    atomic_int turn = 0;
    waiter w[N];
    pthread_t t[N];
    memset(w, 0, sizeof w);
    for (int i = 0; i < N; i++) {
        w[i].turn = &turn;
        fair_start_waiter(&t[i], &w[i], new_fair(c, name, 30000), 20000, 10);
        assert_true(test_wait_for_count(fair_queue_len, name, i + 1, 3000)); /* it arrived */
        test_sleep_ms(50);
    }
    assert_int_equal(fair_live_keys(name), N);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    printf("# fair order:");
    for (int i = 0; i < N; i++)
        printf(" waiter %d -> turn %d (fence %" PRIu64 ")", i, w[i].order, w[i].fence);
    printf("\n");
    for (int i = 0; i < N; i++) {
        assert_int_equal(w[i].rc, DLOCK_OK);
        assert_int_equal(w[i].order, i);
        assert_int_equal(w[i].fence, fence0 + 1 + (uint64_t)i);
        assert_true(w[i].validity_ms > 0);
        assert_int_equal(w[i].release_rc, DLOCK_OK);
    }
    assert_int_equal(fair_queue_len(name), 0);
    assert_int_equal(fair_live_keys(name), 0);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(holder);
    for (int i = 0; i < N; i++)
        dlock_lock_free(w[i].lock);
    dlock_client_free(c);
}

static void fair_waiter_that_times_out_leaves_the_queue_and_blocks_nobody(void **state)
{
    (void)state;
    const char *name = "fair:timeout";
    dlock_client *c = fair_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    uint64_t fence0 = dlock_lock_fence(holder);
    waiter a = {0}, b = {0};
    pthread_t ta, tb;
    fair_start_waiter(&ta, &a, new_fair(c, name, 30000), 600, 0);
    assert_true(test_wait_for_count(fair_queue_len, name, 1, 3000));
    fair_start_waiter(&tb, &b, new_fair(c, name, 30000), 20000, 0);
    assert_true(test_wait_for_count(fair_queue_len, name, 2, 3000)); /* b is behind a */
    int64_t t_a = test_now_us();
    assert_int_equal(pthread_join(ta, NULL), 0);
    assert_int_equal(a.rc, DLOCK_ETIMEDOUT);
    assert_true(a.done_us - t_a < 2000000);
    assert_int_equal(dlock_lock_state_get(a.lock), DLOCK_STATE_UNLOCKED);
    /* a left: only b is in line, with its liveness key. */
    assert_int_equal(fair_queue_len(name), 1);
    assert_int_equal(fair_live_keys(name), 1);

    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(pthread_join(tb, NULL), 0);
    printf("# after the first waiter timed out, the next got the lock %.3f ms after the "
           "release\n", (double)(b.done_us - t0) / 1000.0);
    fair_assert_handed_over(&b, name, fence0, t0, 2000000); /* handed to b directly */
    dlock_lock_free(holder);
    dlock_lock_free(a.lock);
    dlock_lock_free(b.lock);
    dlock_client_free(c);
}

/* A wait whose deadline ends its sleep leaves the line at once: its leave
 * takes a lock handed to it meanwhile, so one more look would only cost a
 * round trip (an I/O timeout past the deadline on a stalled node). Its
 * looks: the first, then none until the deadline (one refresh is 1 s at
 * this TTL): two script calls in all, the look and the leave. */
static void fair_wait_at_its_deadline_leaves_without_another_look(void **state)
{
    (void)state;
    const char *name = "fair:deadline-leave";
    dlock_client *c = fair_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    dlock_lock *w = new_fair(c, name, 30000);
    long long calls0 = test_script_calls(&test_srv);
    int64_t t0 = test_now_us();
    int rc = dlock_lock_acquire(w, 300);
    int64_t took_us = test_now_us() - t0;
    long long calls = test_script_calls(&test_srv) - calls0;
    printf("# a fair wait of 300 ms: %s after %.3f ms, %lld script call(s) (%s)\n",
           dlock_errname(rc), (double)took_us / 1000.0, calls, dlock_lock_errmsg(w));
    assert_int_equal(rc, DLOCK_ETIMEDOUT);
    assert_int_equal(calls, 2);
    assert_int_equal(fair_queue_len(name), 0);
    assert_int_equal(fair_live_keys(name), 0);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(w);
    dlock_lock_free(holder);
    dlock_client_free(c);
}

static void cancelled_fair_waiter_returns_ecanceled_and_leaves_the_queue(void **state)
{
    (void)state;
    const char *name = "fair:cancel";
    dlock_client *c = fair_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    waiter w = {0};
    pthread_t t;
    fair_start_waiter(&t, &w, new_fair(c, name, 30000), DLOCK_WAIT_FOREVER, 0);
    assert_true(test_wait_for_count(fair_queue_len, name, 1, 3000));
    assert_int_equal(fair_live_keys(name), 1);
    test_sleep_ms(100);
    int64_t t0 = test_now_us();
    dlock_lock_cancel(w.lock);
    assert_int_equal(pthread_join(t, NULL), 0);
    printf("# fair cancel returned after %.3f ms\n", (double)(w.done_us - t0) / 1000.0);
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    assert_true(w.done_us - t0 < 1000000);
    assert_int_equal(fair_queue_len(name), 0);
    assert_int_equal(fair_live_keys(name), 0);
    /* Nobody in line: the release frees the lock. */
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    assert_int_equal(dlock_lock_state_get(w.lock), DLOCK_STATE_UNLOCKED);
    dlock_lock_free(holder);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

static void crashed_fair_waiter_is_skipped_after_its_liveness_key_expires(void **state)
{
    (void)state;
    const char *name = "fair:crashed-waiter";
    dlock_client *c = fair_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    uint64_t fence0 = dlock_lock_fence(holder);

    /* The child waits in line with a 1 s lock TTL: it refreshes its place
     * every 250 ms and its liveness key lives 750 ms. It starts no threads
     * (wakeups off), and this process runs none of the library's yet. */
    pid_t pid = fork_fair_waiter(name, 1000);
    int in_line = test_wait_for_count(fair_queue_len, name, 1, 5000);
    kill(pid, SIGKILL);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(in_line);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    int64_t t_kill = test_now_ms();
    while (fair_live_keys(name) != 0 && test_now_ms() - t_kill < 5000)
        test_sleep_ms(10);
    assert_int_equal(fair_live_keys(name), 0);
    printf("# crashed waiter's liveness key gone %" PRId64 " ms after SIGKILL\n",
           test_now_ms() - t_kill);
    assert_int_equal(fair_queue_len(name), 1); /* its token is still in line */

    waiter w = {0};
    pthread_t t;
    fair_start_waiter(&t, &w, new_fair(c, name, 30000), 20000, 0);
    assert_true(test_wait_for_count(fair_queue_len, name, 2, 3000)); /* behind the dead one */
    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    printf("# live waiter behind a crashed one got the lock %.3f ms after the release\n",
           (double)(w.done_us - t0) / 1000.0);
    /* fence0 + 1: the dead waiter was never granted */
    fair_assert_handed_over(&w, name, fence0, t0, 2000000);
    dlock_lock_free(holder);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

/* A waiter SIGKILLed while its liveness key still lives is handed the lock
 * at the next release; it never confirms the claim, which lapses after the
 * rest of its liveness TTL plus one refresh period (3 s + 1 s with a 30 s
 * TTL). It used to get the whole 30 s TTL, and the line waited for it. */
static void waiter_killed_just_before_the_release_delays_the_line_by_seconds_not_the_ttl(
    void **state)
{
    (void)state;
    const char *name = "fair:killed-before-release";
    dlock_client *c = fair_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    uint64_t fence0 = dlock_lock_fence(holder);

    pid_t pid = fork_fair_waiter(name, 30000);
    int in_line = test_wait_for_count(fair_queue_len, name, 1, 5000);
    waiter w = {0};
    pthread_t t;
    fair_start_waiter(&t, &w, new_fair(c, name, 30000), 20000, 0);
    int behind = test_wait_for_count(fair_queue_len, name, 2, 3000);
    kill(pid, SIGKILL);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(in_line && behind);
    assert_int_equal(fair_live_keys(name), 2); /* the dead one's key still lives */
    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    double waited_ms = (double)(w.done_us - t0) / 1000.0;
    printf("# live waiter behind a waiter SIGKILLed just before the release got the lock "
           "%.0f ms after the release (%s)\n", waited_ms, dlock_errname(w.rc));
    assert_int_equal(w.rc, DLOCK_OK);
    /* fence0 + 2: the dead waiter was granted the claim, then the live one */
    assert_int_equal(w.fence, fence0 + 2);
    assert_true(waited_ms < 6000); /* documented bound: 4 s; was the 30 s TTL */
    assert_int_equal(w.release_rc, DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

static void fair_try_once_does_not_join_the_queue(void **state)
{
    (void)state;
    const char *name = "fair:try-once";
    dlock_client *c = fair_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    dlock_lock *l = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED);
    assert_true(dlock_lock_holder_ttl_ms(l) > 0);
    assert_int_equal(fair_queue_len(name), 0);
    assert_int_equal(fair_live_keys(name), 0);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_assert_key_value(&test_srv, name, dlock_lock_token(l));
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void fair_mode_over_several_nodes_is_not_supported(void **state)
{
    (void)state;
    /* Nothing is connected by dlock_client_new or dlock_lock_new, so the
     * nodes need not run. */
    const char *urls[] = {"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"};
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_new(&c, urls, 3, NULL, NULL, 0), DLOCK_OK);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = DLOCK_FAIR;
    static char sentinel;
    dlock_lock *l = (dlock_lock *)(void *)&sentinel; /* must be reset to NULL */
    assert_int_equal(dlock_lock_new(&l, c, "fair:redlock", &o), DLOCK_ENOTSUP);
    assert_null(l);
    o.flags = 0;
    assert_int_equal(dlock_lock_new(&l, c, "fair:redlock", &o), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);

    /* Fair counted locks are not offered on one node either. */
    c = fair_client(1);
    o.flags = DLOCK_FAIR | DLOCK_REENTRANT;
    assert_int_equal(dlock_lock_new(&l, c, "fair:reentrant", &o), DLOCK_ENOTSUP);
    assert_null(l);
    dlock_client_free(c);
}

static void fair_waiting_works_by_polling_when_wakeups_are_off(void **state)
{
    (void)state;
    const char *name = "fair:polling";
    dlock_client *c = fair_client(0);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    uint64_t fence0 = dlock_lock_fence(holder);
    waiter w = {0};
    pthread_t t;
    fair_start_waiter(&t, &w, new_fair(c, name, 30000), 10000, 0);
    assert_true(test_wait_for_count(fair_queue_len, name, 1, 3000));
    test_sleep_ms(200);
    redisReply *r = test_cmd(&test_srv, "PUBSUB NUMSUB dlock:wake:%s", name);
    assert_int_equal(r->element[1]->integer, 0); /* nobody listens */
    freeReplyObject(r);
    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    printf("# fair polling (refresh every 1 s): acquired %.3f ms after the release\n",
           (double)(w.done_us - t0) / 1000.0);
    assert_true(w.validity_ms > 0);
    fair_assert_handed_over(&w, name, fence0, t0, 5000000);
    dlock_lock_free(holder);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

/* A cancel ends a fair wait at once while the server is stalled, as it
 * does in the default mode (issue 34 item 5): leaving the line is bounded
 * like the default mode's ZREM, and the cleanup of an unanswered leave is
 * left to the handle's next acquire or free, not waited for. The cancel
 * comes at several points of the waiter's refresh period (1 s at this
 * TTL), so it finds the waiter asleep and, where it falls, in a look. */
static void cancel_of_a_fair_waiter_is_prompt_while_the_server_is_stalled(void **state)
{
    (void)state;
    const char *name = "fair:cancel-stalled";
    static const int cancel_after_ms[] = {150, 500, 850, 1300};
    dlock_client *c = fair_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    for (size_t i = 0; i < sizeof cancel_after_ms / sizeof cancel_after_ms[0]; i++) {
        waiter w = {0};
        pthread_t t;
        fair_start_waiter(&t, &w, new_fair(c, name, 30000), DLOCK_WAIT_FOREVER, 0);
        assert_true(test_wait_for_count(fair_queue_len, name, 1, 3000));
        test_redis_pause(&test_srv);
        test_sleep_ms(cancel_after_ms[i]);
        int64_t t0 = test_now_us();
        dlock_lock_cancel(w.lock);
        assert_int_equal(pthread_join(t, NULL), 0);
        int64_t took_us = w.done_us - t0;
        test_redis_resume(&test_srv);
        printf("# fair cancel %d ms into a stall returned %s after %.3f ms\n", cancel_after_ms[i],
               dlock_errname(w.rc), (double)took_us / 1000.0);
        assert_int_equal(w.rc, DLOCK_ECANCELED);
        assert_true(took_us < 600000);
        /* The server is back: freeing the handle takes it out of the line. */
        dlock_lock_free(w.lock);
        assert_true(test_wait_for_count(fair_queue_len, name, 0, 3000));
        assert_int_equal(fair_live_keys(name), 0);
    }
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(holder);
    dlock_client_free(c);
}

/* A try-once on a stalled server leaves its cleanup pending; a waiting
 * acquire of the same handle then rides out the rest of the stall (4 s in
 * all) as any fair wait rides out a restart, retrying the cleanup on its
 * backoff, and gets the lock once the server answers (issue 34 item 6). */
static void fair_wait_rides_out_a_stall_with_an_earlier_cleanup_pending(void **state)
{
    (void)state;
    const char *name = "fair:cleanup-stalled";
    dlock_client *c = fair_client(1);
    dlock_lock *warm = new_fair(c, "fair:warm", 30000);
    assert_int_equal(dlock_lock_acquire(warm, 0), DLOCK_OK); /* a pooled connection */
    dlock_lock *l = new_fair(c, name, 30000);
    int64_t t_stall = test_now_us();
    test_redis_pause(&test_srv);
    int rc = dlock_lock_acquire(l, 0);
    printf("# fair try-once on a stalled server: %s (%s)\n", dlock_errname(rc),
           dlock_lock_errmsg(l));
    assert_int_equal(rc, DLOCK_EUNKNOWN);
    waiter w = {0};
    pthread_t t;
    fair_start_waiter(&t, &w, l, 20000, 0);
    int64_t left_us = 4000000 - (test_now_us() - t_stall);
    if (left_us > 0)
        test_sleep_ms((int)(left_us / 1000));
    int64_t t_resume = test_now_us();
    test_redis_resume(&test_srv);
    assert_int_equal(pthread_join(t, NULL), 0);
    printf("# the waiting acquire: %s %.3f ms after the server came back (%s)\n",
           dlock_errname(w.rc), (double)(w.done_us - t_resume) / 1000.0, dlock_lock_errmsg(l));
    assert_int_equal(w.rc, DLOCK_OK);
    assert_int_equal(w.release_rc, DLOCK_OK);
    assert_int_equal(fair_queue_len(name), 0);
    assert_int_equal(fair_live_keys(name), 0);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    assert_int_equal(dlock_lock_release(warm), DLOCK_OK);
    dlock_lock_free(warm);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* A cancel that comes just after the lock was handed to the waiter, with
 * the server slow for a moment: the leave (which confirms a hand-over by
 * setting the full TTL) goes unanswered within the cancel's 100 ms, so the
 * release by token is queued behind it on the same connection. The cancel
 * returns DLOCK_ECANCELED at once, and once the server answers nobody
 * holds the lock in the cancelled waiter's name: it was not left held for
 * the whole TTL (the review of issue 34's fix). No wake-ups: the waiter
 * is asleep between looks when the hand-over comes. */
static long long lock_key_exists(const char *name)
{
    return test_key_exists(&test_srv, name);
}

static void cancel_right_after_a_hand_over_leaves_no_lock_behind(void **state)
{
    (void)state;
    const char *name = "fair:cancel-handed";
    dlock_client *c = fair_client(0);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    waiter w = {0};
    pthread_t t;
    fair_start_waiter(&t, &w, new_fair(c, name, 30000), DLOCK_WAIT_FOREVER, 0);
    assert_true(test_wait_for_count(fair_queue_len, name, 1, 3000));
    test_sleep_ms(50);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK); /* handed to w */
    test_delayed slow;
    test_delayed_start(&slow, &test_srv, 0, "DEBUG SLEEP 0.6");
    test_sleep_ms(60);
    int64_t t0 = test_now_us();
    dlock_lock_cancel(w.lock);
    assert_int_equal(pthread_join(t, NULL), 0);
    int64_t took_us = w.done_us - t0;
    test_delayed_join(&slow);
    printf("# cancel right after a hand-over, server asleep: %s after %.3f ms\n",
           dlock_errname(w.rc), (double)took_us / 1000.0);
    assert_true(took_us < 600000);
    if (w.rc == DLOCK_OK) { /* the leave was answered in time: ours */
        assert_int_equal(dlock_lock_release(w.lock), DLOCK_OK);
    } else {
        assert_int_equal(w.rc, DLOCK_ECANCELED);
        assert_int_equal(dlock_lock_state_get(w.lock), DLOCK_STATE_UNLOCKED);
    }
    /* Either way the lock is free within moments, not after 30 s. */
    assert_true(test_wait_for_count(lock_key_exists, name, 0, 3000));
    dlock_node_status st;
    assert_int_equal(dlock_client_status(c, name, 1, &st, NULL), DLOCK_OK);
    assert_int_equal(st.held, 0);
    dlock_lock *next = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(next, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(next), DLOCK_OK);
    dlock_lock_free(next);
    dlock_lock_free(w.lock);
    dlock_lock_free(holder);
    dlock_client_free(c);
}

/* A hand-over message that came while the last wait could not take it
 * (a cancel seen in the same turn, or during that wait's last look or
 * leave) is that wait's: the next wait of the handle, while it backs off
 * on a cleanup the node does not answer, must not take it for a message
 * of its own. Before the fix each of its backoff sleeps ended at once,
 * counted as a pushed wake-up: the cleanup was retried every I/O timeout
 * (every moment on a node that refuses connections) instead of on the
 * backoff. The state such a wait leaves is set directly (the race that
 * leaves it is not reproducible on demand). */
static void a_hand_over_message_of_the_last_wait_does_not_end_the_next_ones_backoff(void **state)
{
    (void)state;
    const char *name = "fair:stale-hand-over";
    dlock_client *c = test_client_timeouts(&test_srv, 1, 100, 100);
    dlock_lock *l = test_lock_new(c, name, 30000, DLOCK_FAIR, 700, 700);
    dlock_lock *warm = new_fair(c, "fair:warm2", 30000);
    assert_int_equal(dlock_lock_acquire(warm, 0), DLOCK_OK); /* a pooled connection */
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    l->waiter.handed_over = 1;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    l->fair_cleanup_pending = 1;
    dlock_stats st0, st1;
    assert_int_equal(dlock_client_stats(c, &st0, sizeof st0), DLOCK_OK);
    test_redis_pause(&test_srv);
    int rc = dlock_lock_acquire(l, 1000);
    test_redis_resume(&test_srv);
    assert_int_equal(dlock_client_stats(c, &st1, sizeof st1), DLOCK_OK);
    unsigned long long pushed = st1.wakeups_pushed - st0.wakeups_pushed;
    printf("# a wait behind an unanswered cleanup, with a hand-over flag left: %s, %llu pushed "
           "wake-up(s) (%s)\n", dlock_errname(rc), pushed, dlock_lock_errmsg(l));
    assert_int_equal(rc, DLOCK_EUNKNOWN);
    assert_int_equal(pushed, 0);
    assert_int_equal(dlock_lock_acquire(l, 2000), DLOCK_OK); /* the cleanup, then the lock */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_release(warm), DLOCK_OK);
    dlock_lock_free(warm);
    dlock_lock_free(l);
    dlock_client_free(c);
}

#define T(f) cmocka_unit_test(f)

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* First: it forks, best done before any library thread ran. */
        T(crashed_fair_waiter_is_skipped_after_its_liveness_key_expires),
        T(waiter_killed_just_before_the_release_delays_the_line_by_seconds_not_the_ttl),
        T(fair_waiters_acquire_in_arrival_order),
        T(fair_waiter_that_times_out_leaves_the_queue_and_blocks_nobody),
        T(fair_wait_at_its_deadline_leaves_without_another_look),
        T(cancelled_fair_waiter_returns_ecanceled_and_leaves_the_queue),
        T(fair_try_once_does_not_join_the_queue),
        T(fair_mode_over_several_nodes_is_not_supported),
        T(fair_waiting_works_by_polling_when_wakeups_are_off),
        T(cancel_of_a_fair_waiter_is_prompt_while_the_server_is_stalled),
        T(fair_wait_rides_out_a_stall_with_an_earlier_cleanup_pending),
        T(cancel_right_after_a_hand_over_leaves_no_lock_behind),
        T(a_hand_over_message_of_the_last_wait_does_not_end_the_next_ones_backoff),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
