/* SPDX-License-Identifier: BSD-3-Clause */
/* Threads: dlock_lock_cancel() interrupting a waiting acquire (also in the
 * middle of a round whose nodes are still connecting), a cancel that comes
 * before the wait, and one client shared by two threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"
#include "test_waiter.h"

static dlock_lock *lock_for(const char *name)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 30000;
    return test_lock_with(test_cl, name, &o);
}

static void cancel_interrupts_a_thread_waiting_forever(void **state)
{
    (void)state;
    dlock_lock *holder = lock_for("cancel:held"), *wl = lock_for("cancel:held");
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    test_waiter w;
    assert_int_equal(test_waiter_start(&w, wl, DLOCK_WAIT_FOREVER, TEST_WAITER_KEEP), 0);
    test_sleep_ms(300);
    assert_int_equal(atomic_load(&w.done), 0); /* still waiting */
    int64_t canceled_at = test_now_ms();
    dlock_lock_cancel(wl);
    assert_int_equal(test_waiter_join(&w), DLOCK_ECANCELED);
    assert_true(atomic_load(&w.done_ms) - canceled_at < 2000);
    assert_true(dlock_lock_errmsg(wl)[0] != '\0');
    assert_int_equal(dlock_lock_state_get(wl), DLOCK_STATE_UNLOCKED);
    /* The holder was not disturbed, and the cancel was used up: the handle
     * can wait again (and time out normally). */
    assert_int_equal(dlock_lock_state_get(holder), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_acquire(wl, 100), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(wl, 1000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(wl), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(wl);
}

static void cancel_before_a_waiting_acquire_makes_it_return_at_once(void **state)
{
    (void)state;
    dlock_lock *holder = lock_for("cancel:early"), *wl = lock_for("cancel:early");
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    dlock_lock_cancel(wl);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(wl, 20000), DLOCK_ECANCELED);
    assert_true(test_now_ms() - t0 < 2000);
    /* Used up: the next wait runs its course. */
    assert_int_equal(dlock_lock_acquire(wl, 100), DLOCK_ETIMEDOUT);
    /* Also with DLOCK_WAIT_FOREVER. */
    dlock_lock_cancel(wl);
    t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(wl, DLOCK_WAIT_FOREVER), DLOCK_ECANCELED);
    assert_true(test_now_ms() - t0 < 2000);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(wl);
}

static void cancel_is_kept_for_the_next_waiting_acquire_not_a_try(void **state)
{
    (void)state;
    /* "A cancel with no acquire in progress makes the next waiting acquire
     * return at once": a try-once acquire in between does not use it up. */
    dlock_lock *holder = lock_for("cancel:try"), *wl = lock_for("cancel:try");
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    dlock_lock_cancel(wl);
    assert_int_equal(dlock_lock_acquire(wl, 0), DLOCK_ENOTACQUIRED);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(wl, 20000), DLOCK_ECANCELED);
    assert_true(test_now_ms() - t0 < 2000);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(wl);
}

#define ROUNDS 200

typedef struct looper {
    const char *name;
    dlock_lock *lock;
    int ok_rounds;
    int first_error;
} looper;

static void *lock_loop(void *arg)
{
    looper *lp = arg;
    for (int i = 0; i < ROUNDS; i++) {
        int rc = dlock_lock_acquire(lp->lock, 10000);
        if (rc == DLOCK_OK)
            rc = dlock_lock_release(lp->lock);
        if (rc != DLOCK_OK) {
            if (lp->first_error == 0)
                lp->first_error = rc;
            continue;
        }
        lp->ok_rounds++;
    }
    return NULL;
}

static void two_threads_share_one_client_for_different_locks(void **state)
{
    (void)state;
    looper lp[2] = {{.name = "cancel:shared-a"}, {.name = "cancel:shared-b"}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        lp[i].lock = lock_for(lp[i].name);
        assert_int_equal(pthread_create(&t[i], NULL, lock_loop, &lp[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < 2; i++) {
        if (lp[i].first_error != 0)
            fail_msg("%s: %s: %s", lp[i].name, dlock_errname(lp[i].first_error),
                     dlock_lock_errmsg(lp[i].lock));
        assert_int_equal(lp[i].ok_rounds, ROUNDS);
        dlock_node_status st;
        assert_int_equal(dlock_client_status(test_cl, lp[i].name, 1, &st, NULL), DLOCK_OK);
        assert_int_equal(st.held, 0);
        assert_int_equal(st.fence, ROUNDS);
        dlock_lock_free(lp[i].lock);
    }
}

/* What a handle left pending with an unknown outcome (a release, or a
 * counted attempt's undo) is settled before its next attempt; with the
 * server stalled that settling waits for a reply that does not come. A
 * cancel must end the wait at once there too (issue 34: every place that
 * waits without the cancel pipe), as it does during an attempt. */
static void cancel_is_prompt_while_an_earlier_outcome_is_settled(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        unsigned flags;
        int leave_release; /* 1: a lost release, 0: a lost try-once */
    } cases[] = {
        {"cancel:settle-release", 0, 1},
        {"cancel:settle-counted-release", DLOCK_REENTRANT, 1},
        {"cancel:settle-counted-undo", DLOCK_REENTRANT, 0},
    };
    dlock_lock *warm = lock_for("cancel:settle-warm");
    assert_int_equal(dlock_lock_acquire(warm, 0), DLOCK_OK); /* a pooled connection */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 30000;
        o.flags = cases[i].flags;
        dlock_lock *l = test_lock_with(test_cl, cases[i].name, &o);
        if (cases[i].leave_release)
            assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        test_redis_pause(&test_srv);
        int rc = cases[i].leave_release ? dlock_lock_release(l) : dlock_lock_acquire(l, 0);
        assert_int_equal(rc, DLOCK_EUNKNOWN);
        test_waiter w;
        assert_int_equal(test_waiter_start(&w, l, DLOCK_WAIT_FOREVER, TEST_WAITER_KEEP), 0);
        test_sleep_ms(300);
        int64_t t0 = test_now_ms();
        dlock_lock_cancel(l);
        rc = test_waiter_join(&w);
        int64_t took = atomic_load(&w.done_ms) - t0;
        test_redis_resume(&test_srv);
        printf("# %s: cancel 300 ms into the wait returned %s after %lld ms\n", cases[i].name,
               dlock_errname(rc), (long long)took);
        assert_int_equal(rc, DLOCK_ECANCELED);
        assert_true(took < 500);
        /* The server is back: the handle settles and takes the lock. */
        assert_int_equal(dlock_lock_acquire(l, 5000), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        dlock_lock_free(l);
        assert_int_equal(test_key_exists(&test_srv, cases[i].name), 0);
    }
    assert_int_equal(dlock_lock_release(warm), DLOCK_OK);
    dlock_lock_free(warm);
}

/* A loopback listener whose accept queue is full: a connect() to it stays
 * in SYN_SENT (Linux drops the SYNs), a node that never finishes
 * connecting. fds[0] is the listener, fds[1..2] fill its queue. */
static int blackhole(int fds[3])
{
    struct sockaddr_in a = {0};
    socklen_t len = sizeof a;
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fds[0] >= 0);
    assert_int_equal(bind(fds[0], (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fds[0], 0), 0);
    assert_int_equal(getsockname(fds[0], (struct sockaddr *)&a, &len), 0);
    for (int i = 1; i < 3; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        assert_true(fds[i] >= 0);
        (void)connect(fds[i], (struct sockaddr *)&a, sizeof a);
    }
    /* A third connect stays unanswered: the queue is full. */
    int probe = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(probe >= 0);
    (void)connect(probe, (struct sockaddr *)&a, sizeof a);
    struct pollfd p = {probe, POLLOUT, 0};
    assert_int_equal(poll(&p, 1, 200), 0);
    close(probe);
    return ntohs(a.sin_port);
}

/* The fan-out's slots of two nodes still connecting (a majority of three
 * out of reach), the cancel fd one more record on the same loop: a cancel
 * ends the round at once, not at the connect timeout. */
static void cancel_stops_a_round_whose_nodes_are_still_connecting(void **state)
{
    (void)state;
    int h1[3], h2[3];
    char u1[64], u2[64];
    snprintf(u1, sizeof u1, "redis://127.0.0.1:%d", blackhole(h1));
    snprintf(u2, sizeof u2, "redis://127.0.0.1:%d", blackhole(h2));
    const char *urls[3] = {test_srv.url, u1, u2};
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.connect_timeout_ms = 10000;
    co.io_timeout_ms = 10000;
    dlock_client *cl = test_client_new(urls, 3, &co);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 30000;
    dlock_lock *l = test_lock_with(cl, "cancel:connecting", &o);
    test_waiter w;
    assert_int_equal(test_waiter_start(&w, l, DLOCK_WAIT_FOREVER, TEST_WAITER_KEEP), 0);
    test_sleep_ms(300);
    assert_int_equal(atomic_load(&w.done), 0); /* two nodes still connecting */
    int64_t t0 = test_now_ms();
    dlock_lock_cancel(l);
    int rc = test_waiter_join(&w);
    int64_t took = atomic_load(&w.done_ms) - t0;
    printf("# cancel while connecting returned %s after %lld ms\n", dlock_errname(rc),
           (long long)took);
    assert_int_equal(rc, DLOCK_ECANCELED);
    assert_true(took < 500);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    dlock_lock_free(l);
    dlock_client_free(cl);
    for (int i = 0; i < 3; i++) {
        close(h1[i]);
        close(h2[i]);
    }
}

/* The attempt is a chain of requests on the wait's own loop (attempt.h):
 * a cancel from another thread ends a try stalled on a SIGSTOPped node at
 * once, whether it is the wait's first try (nothing slept yet: the loop
 * has no wake eventfd, a lone socket may wait in one blocking recv()) or
 * a try after a sleep (the loop's wake eventfd set up). */
static void cancel_ends_a_try_stalled_on_a_stopped_node(void **state)
{
    (void)state;
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.io_timeout_ms = 5000;
    const char *urls[1] = {test_srv.url};
    dlock_client *cl = test_client_new(urls, 1, &co);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 30000;
    for (int slept = 0; slept < 2; slept++) {
        const char *name = slept ? "cancel:stalled-after-sleep" : "cancel:stalled-first";
        dlock_lock *holder = test_lock_with(cl, name, &o), *l = test_lock_with(cl, name, &o);
        assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK); /* a pooled connection */
        if (!slept)
            assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
        test_waiter w;
        if (slept) { /* refused, asleep, then its next look stalls */
            assert_int_equal(test_waiter_start(&w, l, DLOCK_WAIT_FOREVER, TEST_WAITER_KEEP), 0);
            test_sleep_ms(300);
            test_redis_pause(&test_srv);
        } else {
            test_redis_pause(&test_srv);
            assert_int_equal(test_waiter_start(&w, l, DLOCK_WAIT_FOREVER, TEST_WAITER_KEEP), 0);
        }
        test_sleep_ms(600);
        assert_int_equal(atomic_load(&w.done), 0);
        int64_t t0 = test_now_ms();
        dlock_lock_cancel(l);
        int rc = test_waiter_join(&w);
        int64_t took = atomic_load(&w.done_ms) - t0;
        test_redis_resume(&test_srv);
        printf("# %s: cancel returned %s after %lld ms\n", name, dlock_errname(rc),
               (long long)took);
        assert_int_equal(rc, DLOCK_ECANCELED);
        assert_true(took < 500);
        assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
        if (slept)
            assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
        /* The server is back: the handle settles and takes the lock. */
        assert_int_equal(dlock_lock_acquire(l, 5000), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        dlock_lock_free(holder);
        dlock_lock_free(l);
    }
    dlock_client_free(cl);
}

#define T(f) cmocka_unit_test_teardown(f, test_srv_flush)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(cancel_interrupts_a_thread_waiting_forever),
        T(cancel_before_a_waiting_acquire_makes_it_return_at_once),
        T(cancel_is_kept_for_the_next_waiting_acquire_not_a_try),
        T(two_threads_share_one_client_for_different_locks),
        T(cancel_is_prompt_while_an_earlier_outcome_is_settled),
        T(cancel_stops_a_round_whose_nodes_are_still_connecting),
        T(cancel_ends_a_try_stalled_on_a_stopped_node),
    };
    return cmocka_run_group_tests(tests, test_srv_client_setup, test_srv_client_teardown);
}
