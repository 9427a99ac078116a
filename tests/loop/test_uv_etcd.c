/* SPDX-License-Identifier: BSD-3-Clause */
/* Locks on a libuv loop against a real etcd member (the etcd backend's
 * HTTP exchanges run on the application's loop through curl's
 * multi_socket interface): handles of one loop contend on two names (one
 * holder at a time, fences rising), a held lock's lease is kept alive by
 * the loop's watchdog past its TTL, a pending wait is cancelled, and once
 * the client is freed nothing of dlock's is left on the loop. Without the
 * etcd backend the test is skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "dlock.h"
#include "uv_contend.h"
#include "uv_support.h"

#if DLOCK_TEST_WITH_ETCD
#include "etcd_server.h"
#include "test_util.h"

static test_etcd srv;
static uv_loop_t loop;
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    return test_etcd_start(&srv, 1);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_stop(&srv);
    return 0;
}

static int open_client(void **state)
{
    (void)state;
    return test_uv_open(&loop, &cl, srv.url, 2000);
}

static int close_client(void **state)
{
    (void)state;
    assert_int_equal(test_uv_close(&loop, &cl, 10000), 0);
    return 0;
}

/* Plain and reentrant handles alternate on each name: both kinds wait in
 * one line there. */
static dlock_lock *make(void *arg, int i, int name, int *reader, int *name2)
{
    static const char *names[] = {"uve:a", "uve:b"};
    (void)arg;
    (void)reader;
    (void)name2;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 5000;
    o.flags = i % 2 ? DLOCK_REENTRANT : 0;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, cl, names[name], &o), DLOCK_OK);
    return l;
}

/* dlock makes no thread for a looped client; gRPC's C core has its own,
 * and the transport its queue thread (test_uv_etcd_grpc), so the count
 * is checked over the gateway only. */
static void assert_no_thread_made(void)
{
    const char *transport = getenv("DLOCK_ETCD_TRANSPORT");
    if (!transport || strcmp(transport, "grpc") != 0)
        assert_int_equal(test_uv_threads(), 1);
}

static void handles_of_one_loop_contend(void **state)
{
    (void)state;
    test_uv_board b = {.fenced = 1};
    test_uv_contend(&loop, &b, 6, 2, 4, 60000, make, NULL);
    assert_int_equal(b.done, 6);
    assert_int_equal(b.violations, 0);
    assert_int_equal(b.failed, 0);
    assert_int_equal(b.starts_refused, 0);
    assert_int_equal(b.still_pending, 0);
    assert_true(b.longest_gap_ms < 250); /* nothing blocked the loop */
}

static void the_loop_keeps_the_lease_and_a_cancel_ends_a_wait(void **state)
{
    (void)state;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 2000; /* etcd's lease unit is the second */
    o.flags = DLOCK_AUTO_RENEW;
    dlock_lock *a = NULL, *b = NULL;
    assert_int_equal(dlock_lock_new(&a, cl, "uve:kept", &o), DLOCK_OK);
    o.flags = 0;
    assert_int_equal(dlock_lock_new(&b, cl, "uve:kept", &o), DLOCK_OK);
    test_uv_result ra = {0}, rb = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(b, DLOCK_WAIT_FOREVER, test_uv_done, &rb),
                     DLOCK_OK);
    test_uv_turn(&loop, 4500); /* past two TTLs: only the keep-alives keep a */
    assert_int_equal(rb.calls, 0);
    assert_no_thread_made();
    dlock_lock_cancel(b);
    assert_int_equal(test_uv_wait(&loop, &rb, 3000), DLOCK_ECANCELED);
    memset(&ra, 0, sizeof ra);
    assert_int_equal(dlock_lock_release_start(a, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    dlock_lock_free(b);
    dlock_lock_free(a);
}

/* A waiter freed in its wait (its watch stream open), its holder freed
 * holding, and the client freed at once after them: their ends (the
 * waiter's leave, the holder's revoke) finish on the loop, which is then
 * empty (close_client()). */
static void everything_freed_with_a_watch_open(void **state)
{
    (void)state;
    dlock_lock *a = test_uv_lock(cl, "uve:freed", 5000, 0);
    dlock_lock *b = test_uv_lock(cl, "uve:freed", 5000, 0);
    assert_non_null(a);
    assert_non_null(b);
    test_uv_result ra = {0}, rb = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(b, DLOCK_WAIT_FOREVER, test_uv_done, &rb),
                     DLOCK_OK);
    test_uv_turn(&loop, 500); /* b waits in line, watching a's key */
    assert_int_equal(rb.calls, 0);
    dlock_lock_free(b);
    assert_int_equal(rb.calls, 1);
    dlock_lock_free(a);
}

/* A blocking call on the looped client (an inspection: its request on a
 * private loop of the calling thread) while the loop's requests are in
 * flight, and the loop's requests while a blocking call waits: each
 * finishes. Over gRPC (the row test_uv_etcd_grpc) one queue takes both
 * kinds' completions, polled by the blocking caller while its call is
 * alone on its loop and by the client's queue thread for the loop's
 * (etcd_grpc.c): a loop's call left to a poller that never comes would
 * hang here. */
static void a_blocking_call_and_the_loops_calls_both_finish(void **state)
{
    (void)state;
    dlock_lock *a = test_uv_lock(cl, "uve:mixed", 5000, 0);
    assert_non_null(a);
    for (int i = 0; i < 20; i++) {
        test_uv_result ra = {0};
        assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
        dlock_node_status node;
        dlock_lock_status sum;
        /* the acquire's first request is on the wire, nobody turns the loop */
        assert_int_equal(dlock_client_status(cl, "uve:other", 1, &node, &sum), DLOCK_OK);
        assert_int_equal(sum.state, DLOCK_STATUS_FREE);
        assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
        memset(&ra, 0, sizeof ra);
        assert_int_equal(dlock_lock_release_start(a, test_uv_done, &ra), DLOCK_OK);
        assert_int_equal(dlock_client_status(cl, "uve:other", 1, &node, &sum), DLOCK_OK);
        assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    }
    dlock_lock_free(a);
}

/* A release the member never answered (killed) is owed: the client's
 * settler sends it again on this loop (no thread of its own) once the
 * member is back, and another client's waiter gets the lock long before
 * the 10 s lease ends (a restarted member renews every lease by its TTL).
 * Then one owed with the member down does not hold up its client's free,
 * which leaves nothing on the loop (close_client() drains it). */
static void an_owed_release_is_sent_again_on_the_loop(void **state)
{
    (void)state;
    dlock_client *other = NULL;
    assert_int_equal(test_uv_client(&other, &loop, srv.url, 500), 0);
    dlock_lock *a = test_uv_lock(cl, "uve:owed", 10000, 0);
    dlock_lock *w = test_uv_lock(other, "uve:owed", 10000, 0);
    assert_non_null(a);
    assert_non_null(w);
    test_uv_result ra = {0}, rw = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    test_etcd_kill9(&srv, 0);
    memset(&ra, 0, sizeof ra);
    assert_int_equal(dlock_lock_release_start(a, test_uv_done, &ra), DLOCK_OK);
    int rc = test_uv_wait(&loop, &ra, 5000);
    assert_true(rc == DLOCK_EIO || rc == DLOCK_EUNKNOWN);
    assert_int_equal(test_etcd_restart(&srv, 0), 0);
    int64_t t0 = (int64_t)(test_now_us() / 1000);
    assert_int_equal(dlock_lock_acquire_start(w, 9000, test_uv_done, &rw), DLOCK_OK);
    rc = test_uv_wait(&loop, &rw, 10000);
    int64_t took = (int64_t)(test_now_us() / 1000) - t0;
    printf("# looped: the release owed while the member was down, the waiter got it %lld ms "
           "after the restart (%s; lease 10 s)\n", (long long)took, dlock_errname(rc));
    assert_int_equal(rc, DLOCK_OK);
    assert_true(took < 5000);
    assert_no_thread_made(); /* the settler runs on the loop */
    /* owed again with the member down, and the client freed at once */
    test_etcd_kill9(&srv, 0);
    memset(&rw, 0, sizeof rw);
    assert_int_equal(dlock_lock_release_start(w, test_uv_done, &rw), DLOCK_OK);
    rc = test_uv_wait(&loop, &rw, 5000);
    assert_true(rc == DLOCK_EIO || rc == DLOCK_EUNKNOWN);
    dlock_lock_free(w);
    t0 = (int64_t)(test_now_us() / 1000);
    dlock_client_free(other);
    took = (int64_t)(test_now_us() / 1000) - t0;
    /* the point is that the free does not wait out the outage (a resend
     * would, for ever): a generous bound, not a timing of the free */
    printf("# the client's free with a release owed took %lld ms\n", (long long)took);
    assert_true(took < 2000);
    assert_int_equal(test_etcd_restart(&srv, 0), 0);
    dlock_lock_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_blocking_call_and_the_loops_calls_both_finish,
                                        open_client, close_client),
        cmocka_unit_test_setup_teardown(handles_of_one_loop_contend, open_client, close_client),
        cmocka_unit_test_setup_teardown(the_loop_keeps_the_lease_and_a_cancel_ends_a_wait,
                                        open_client, close_client),
        cmocka_unit_test_setup_teardown(everything_freed_with_a_watch_open, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(an_owed_release_is_sent_again_on_the_loop, open_client,
                                        close_client),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

#else

static void skipped(void **state)
{
    (void)state;
    skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(skipped)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
