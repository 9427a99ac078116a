/* SPDX-License-Identifier: BSD-3-Clause */
/* ZooKeeper locks on an application's event loop (the poll driver,
 * <dlock/poll.h>), against a real member: the _start verbs, a waiter woken
 * by its predecessor's deletion on the loop's thread (the watch's event
 * comes from the session thread through an eventfd on the loop,
 * zk_call.c), a cancel, several waiters on one loop taking turns with
 * fences that only grow, and a client freed with waits pending leaving
 * nothing on the loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "dlock.h"
#include "loop_driver.h"
#include "poll_support.h"
#include "test_util.h"
#include "zk_server.h"

static test_zk srv;
static const test_loop_driver *d = &test_poll_driver;
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    return test_zk_start(&srv);
}

static int teardown(void **state)
{
    (void)state;
    test_zk_stop(&srv);
    return 0;
}

static int open_client(void **state)
{
    (void)state;
    return test_loop_open(d, &cl, srv.url, 3000);
}

static int close_client(void **state)
{
    (void)state;
    assert_int_equal(test_loop_close(d, &cl, 5000), 0);
    return 0;
}

static dlock_lock *new_lock(dlock_client *c, const char *name)
{
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, c, name, NULL), DLOCK_OK);
    return l;
}

/* The number of nodes in name's line, read by a blocking client. */
static size_t in_line(const char *name)
{
    dlock_client *c = NULL;
    const char *u = srv.url;
    assert_int_equal(dlock_client_new(&c, &u, 1, NULL, NULL, 0), DLOCK_OK);
    dlock_holders_info hi;
    assert_int_equal(dlock_client_holders(c, name, 0, &hi, NULL, 0), DLOCK_OK);
    dlock_client_free(c);
    return hi.count;
}

static void take_and_give_back(void **state)
{
    (void)state;
    dlock_lock *l = new_lock(cl, "/loop/take");
    test_loop_result r = {0};
    assert_int_equal(dlock_lock_acquire_start(l, 0, test_loop_done, &r), DLOCK_OK);
    assert_int_equal(r.calls, 0); /* never inside the start */
    assert_int_equal(test_loop_wait(d, &r, 5000), DLOCK_OK);
    assert_true(dlock_lock_fence(l) > 0);
    memset(&r, 0, sizeof r);
    assert_int_equal(dlock_lock_release_start(l, test_loop_done, &r), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &r, 5000), DLOCK_OK);
    dlock_lock_free(l);
}

/* A blocking holder on a client of its own; the loop's waiter wakes when
 * the holder's node goes, well before its own look every 2 s
 * (zk_wait.c, RECHECK_MS): only the watch, handed to the loop, can have
 * woken it. */
static void a_release_wakes_a_waiter_on_the_loop(void **state)
{
    (void)state;
    const char *u = srv.url;
    dlock_client *other = NULL;
    assert_int_equal(dlock_client_new(&other, &u, 1, NULL, NULL, 0), DLOCK_OK);
    dlock_lock *a = new_lock(other, "/loop/wake"), *b = new_lock(cl, "/loop/wake");
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    test_loop_result rb = {0};
    assert_int_equal(dlock_lock_acquire_start(b, 20000, test_loop_done, &rb), DLOCK_OK);
    test_loop_turn(d, 2500); /* in line, past one look of its own */
    assert_int_equal(rb.calls, 0);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    int64_t t0 = test_loop_now_ms();
    assert_int_equal(test_loop_wait(d, &rb, 10000), DLOCK_OK);
    int64_t after = test_loop_now_ms() - t0;
    if (after > 1000)
        fail_msg("the waiter got the lock %lld ms after the release", (long long)after);
    assert_true(dlock_lock_fence(b) > dlock_lock_fence(a));
    memset(&rb, 0, sizeof rb);
    assert_int_equal(dlock_lock_release_start(b, test_loop_done, &rb), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &rb, 5000), DLOCK_OK);
    dlock_lock_free(b);
    dlock_lock_free(a);
    dlock_client_free(other);
}

/* A cancelled waiter leaves the line: only the holder's node is left. */
static void a_cancel_ends_a_wait(void **state)
{
    (void)state;
    dlock_lock *a = new_lock(cl, "/loop/cancel"), *b = new_lock(cl, "/loop/cancel");
    test_loop_result ra = {0}, rb = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_loop_done, &ra), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &ra, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(b, DLOCK_WAIT_FOREVER, test_loop_done, &rb),
                     DLOCK_OK);
    test_loop_turn(d, 300);
    assert_int_equal(rb.calls, 0);
    dlock_lock_cancel(b);
    assert_int_equal(test_loop_wait(d, &rb, 5000), DLOCK_ECANCELED);
    test_loop_turn(d, 100);
    assert_int_equal(in_line("/loop/cancel"), 1);
    memset(&ra, 0, sizeof ra);
    assert_int_equal(dlock_lock_release_start(a, test_loop_done, &ra), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &ra, 5000), DLOCK_OK);
    dlock_lock_free(b);
    dlock_lock_free(a);
}

/* ---- several waiters on one loop take turns ---------------------------------- */

#define TURNS 6
#define ROUNDS 4

typedef struct turn {
    dlock_lock *l;
    int rounds, over;
} turn;

static int holding;       /* how many hold now: 0 or 1, or the test fails */
static uint64_t last_fence;
static int sections;

static void turn_acquired(dlock_lock *l, int rc, void *arg);

static void turn_released(dlock_lock *l, int rc, void *arg)
{
    turn *t = arg;
    assert_int_equal(rc, DLOCK_OK);
    if (++t->rounds == ROUNDS)
        t->over = 1;
    else
        assert_int_equal(dlock_lock_acquire_start(l, 30000, turn_acquired, t), DLOCK_OK);
}

/* A grant: nobody else holds, the fence is above every earlier one. The
 * release goes out at once; the next grant comes from a later turn. */
static void turn_acquired(dlock_lock *l, int rc, void *arg)
{
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(holding, 0);
    holding = 1;
    uint64_t f = dlock_lock_fence(l);
    if (f <= last_fence)
        fail_msg("fence %llu after %llu", (unsigned long long)f, (unsigned long long)last_fence);
    last_fence = f;
    sections++;
    holding = 0;
    assert_int_equal(dlock_lock_release_start(l, turn_released, arg), DLOCK_OK);
}

static void waiters_on_one_loop_take_turns(void **state)
{
    (void)state;
    turn t[TURNS];
    memset(t, 0, sizeof t);
    holding = 0, last_fence = 0, sections = 0;
    for (int i = 0; i < TURNS; i++) {
        t[i].l = new_lock(cl, "/loop/turns");
        assert_int_equal(dlock_lock_acquire_start(t[i].l, 30000, turn_acquired, &t[i]), DLOCK_OK);
    }
    int64_t end = test_loop_now_ms() + 60000;
    int over = 0;
    while (over < TURNS && test_loop_now_ms() < end) {
        test_loop_turn(d, 50);
        over = 0;
        for (int i = 0; i < TURNS; i++)
            over += t[i].over;
    }
    assert_int_equal(sections, TURNS * ROUNDS);
    for (int i = 0; i < TURNS; i++)
        dlock_lock_free(t[i].l);
}

/* Freeing the client with waiters pending: each hears DLOCK_ECANCELED
 * once, their nodes go, and nothing of dlock's is left on the loop (the
 * watches' eventfds included; close_client checks). */
static void a_free_with_waits_pending_leaves_the_loop_empty(void **state)
{
    (void)state;
    dlock_lock *a = new_lock(cl, "/loop/free"), *b = new_lock(cl, "/loop/free"),
               *c = new_lock(cl, "/loop/free");
    test_loop_result ra = {0}, rb = {0}, rc = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_loop_done, &ra), DLOCK_OK);
    assert_int_equal(test_loop_wait(d, &ra, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(b, DLOCK_WAIT_FOREVER, test_loop_done, &rb),
                     DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(c, DLOCK_WAIT_FOREVER, test_loop_done, &rc),
                     DLOCK_OK);
    test_loop_turn(d, 300);
    dlock_lock_free(c);
    dlock_lock_free(b);
    dlock_lock_free(a);
    assert_int_equal(rb.calls, 1);
    assert_int_equal(rb.rc, DLOCK_ECANCELED);
    assert_int_equal(rc.calls, 1);
    assert_int_equal(rc.rc, DLOCK_ECANCELED);
    assert_int_equal(test_loop_close(d, &cl, 5000), 0);
    assert_int_equal(in_line("/loop/free"), 0);
    assert_int_equal(test_loop_open(d, &cl, srv.url, 3000), 0); /* for close_client */
}

int main(void)
{
    if (!test_zk_available()) {
        printf("no ZooKeeper (apt-get install zookeeper): skipped\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(take_and_give_back, open_client, close_client),
        cmocka_unit_test_setup_teardown(a_release_wakes_a_waiter_on_the_loop, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(a_cancel_ends_a_wait, open_client, close_client),
        cmocka_unit_test_setup_teardown(waiters_on_one_loop_take_turns, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(a_free_with_waits_pending_leaves_the_loop_empty,
                                        open_client, close_client),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
