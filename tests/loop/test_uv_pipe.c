/* SPDX-License-Identifier: BSD-3-Clause */
/* A looped client's shared pipelined connection (src/redis/pipe.c), against
 * a real redis-server, where sharing could change what a request reports or
 * when it runs: commands still queued behind a handshake or a connect when
 * their request times out or is cancelled (they may run: never "not
 * sent"), replica acknowledgements (WAIT blocks a connection: those runs
 * keep connections of their own), an undo queued behind a cancelled
 * attempt when the client is freed at once, the loop left idle with only
 * undos owed, and NOSCRIPT with many requests in flight. Each case failed
 * against the first version of the pipe (an adversarial review's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "uv_support.h"

static test_redis srv;

static int setup(void **state)
{
    (void)state;
    /* alice needs AUTH (the handshake holds the caller's commands until
     * its reply); the default user stays open for the admin helpers. */
    return test_redis_start(&srv, "user alice on >pw ~* &* +@all\n");
}

static int teardown(void **state)
{
    (void)state;
    test_redis_stop(&srv);
    return 0;
}

static int key_exists(const char *name)
{
    redisReply *r = test_redis_cmd(&srv, "EXISTS %s", name);
    assert_non_null(r);
    int e = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
    freeReplyObject(r);
    return e;
}

static void del_key(const char *name)
{
    redisReply *r = test_redis_cmd(&srv, "DEL %s", name);
    if (r)
        freeReplyObject(r);
}

static dlock_client *auth_client(uv_loop_t *loop, int timeout_ms)
{
    char url[400];
    snprintf(url, sizeof url, "redis://alice:pw@127.0.0.1:%d", srv.port);
    const char *urls[1] = {url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = timeout_ms;
    o.io_timeout_ms = timeout_ms;
    dlock_client *cl = NULL;
    assert_int_equal(test_uv_client_with(&cl, loop, urls, 1, &o), 0);
    return cl;
}

/* A client of the plain URL with 1 s timeouts on loop. */
static dlock_client *plain_client(uv_loop_t *loop)
{
    const char *urls[1] = {srv.url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = 1000;
    o.io_timeout_ms = 1000;
    dlock_client *cl = NULL;
    assert_int_equal(test_uv_client_with(&cl, loop, urls, 1, &o), 0);
    return cl;
}

/* l taken and given back: the shared connection exists and is idle. */
static void take_and_give(uv_loop_t *loop, dlock_lock *l)
{
    test_uv_result r = {0};
    assert_int_equal(dlock_lock_acquire_start(l, 0, test_uv_done, &r), DLOCK_OK);
    assert_int_equal(test_uv_wait(loop, &r, 3000), DLOCK_OK);
    memset(&r, 0, sizeof r);
    assert_int_equal(dlock_lock_release_start(l, test_uv_done, &r), DLOCK_OK);
    assert_int_equal(test_uv_wait(loop, &r, 3000), DLOCK_OK);
}

/* A try-once acquire A whose commands are still held behind the
 * handshake's AUTH (server stopped) times out: DLOCK_EIO ("the command was
 * not sent"). A second acquire B joined the same shared connection 80 ms
 * later, so the connection outlives A. The server resumes before B's
 * deadline: A's held SET goes out with B's and runs, although A was told
 * it was never sent (no undo, the key stays for its TTL). */
static void timed_out_as_not_sent_then_runs(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    dlock_client *cl = auth_client(&loop, 300);
    del_key("pr:a");
    del_key("pr:b");
    dlock_lock *a = test_uv_lock(cl, "pr:a", 20000, 0);
    dlock_lock *b = test_uv_lock(cl, "pr:b", 20000, 0);
    test_uv_result ra = {0}, rb = {0};
    test_redis_pause(&srv);
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    test_uv_turn(&loop, 80);
    assert_int_equal(dlock_lock_acquire_start(b, 0, test_uv_done, &rb), DLOCK_OK);
    int rc = test_uv_wait(&loop, &ra, 2000);
    test_redis_resume(&srv);
    print_message("A: %s (%s)\n", dlock_errname(rc), dlock_lock_errmsg(a));
    test_uv_wait(&loop, &rb, 3000);
    print_message("B: %s (%s)\n", dlock_errname(rb.rc), dlock_lock_errmsg(b));
    test_uv_turn(&loop, 300);
    int ran = key_exists("pr:a");
    print_message("A's key on the server after A reported %s: %s\n", dlock_errname(rc),
                  ran ? "SET (the acquire ran)" : "absent");
    dlock_lock_free(a);
    dlock_lock_free(b);
    assert_int_equal(test_uv_close(&loop, &cl, 5000), 0);
    del_key("pr:a");
    del_key("pr:b");
    /* EIO promises the command was not sent: it must not have run. */
    assert_false(rc == DLOCK_EIO && ran);
}

/* A waiting acquire is cancelled while its attempt's commands are held
 * behind AUTH (server stopped): reported as not sent, so no undo is queued
 * behind it. The shared connection stays (it is the node's current one);
 * when the server resumes the cancelled waiter's SET runs and the key is
 * held by nobody for its TTL. */
static void cancelled_as_not_sent_then_runs(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    dlock_client *cl = auth_client(&loop, 1000);
    del_key("pr:c");
    dlock_lock *c = test_uv_lock(cl, "pr:c", 20000, 0);
    test_uv_result rc_ = {0};
    test_redis_pause(&srv);
    assert_int_equal(dlock_lock_acquire_start(c, 5000, test_uv_done, &rc_), DLOCK_OK);
    test_uv_turn(&loop, 100);
    dlock_lock_cancel(c);
    int rc = test_uv_wait(&loop, &rc_, 2000);
    print_message("cancelled waiter: %s (%s)\n", dlock_errname(rc), dlock_lock_errmsg(c));
    test_redis_resume(&srv);
    test_uv_turn(&loop, 500);
    int ran = key_exists("pr:c");
    print_message("its key after the resume: %s\n", ran ? "SET by the cancelled waiter" : "absent");
    dlock_lock_free(c);
    assert_int_equal(test_uv_close(&loop, &cl, 5000), 0);
    del_key("pr:c");
    assert_int_equal(rc, DLOCK_ECANCELED);
    assert_false(ran);
}

/* min_replicas on a server with no replica: every acquire's WAIT blocks
 * min_replicas_timeout_ms and fails DLOCK_ENOREPLICAS. N acquires of N
 * names started in one turn: on a connection each (before stage D) they
 * wait in parallel; on the shared connection Redis serves one client's
 * WAITs one after the other, so the later ones time out (DLOCK_EUNKNOWN)
 * and a release queued behind them waits too. */
static void waits_serialize_on_shared_connection(void **state)
{
    (void)state;
    enum { N = 4 };
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    const char *urls[1] = {srv.url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = 1000;
    o.io_timeout_ms = 500;
    o.min_replicas = 1;
    o.min_replicas_timeout_ms = 400;
    dlock_client *cl = NULL;
    assert_int_equal(test_uv_client_with(&cl, &loop, urls, 1, &o), 0);
    /* The connection exists and is idle. */
    dlock_lock *warm = test_uv_lock(cl, "pr:w:warm", 20000, 0);
    test_uv_result rw = {0};
    assert_int_equal(dlock_lock_acquire_start(warm, 0, test_uv_done, &rw), DLOCK_OK);
    int wrc = test_uv_wait(&loop, &rw, 3000);
    print_message("warm-up acquire: %s\n", dlock_errname(wrc));
    dlock_lock *ls[N];
    test_uv_result rs[N];
    memset(rs, 0, sizeof rs);
    char name[32];
    int64_t t0 = test_uv_now_ms();
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "pr:w:%d", i);
        del_key(name);
        ls[i] = test_uv_lock(cl, name, 20000, 0);
        assert_int_equal(dlock_lock_acquire_start(ls[i], 0, test_uv_done, &rs[i]), DLOCK_OK);
    }
    int bad = 0;
    for (int i = 0; i < N; i++) {
        test_uv_wait(&loop, &rs[i], 5000);
        print_message("acquire %d: %s after %lld ms (%s)\n", i, dlock_errname(rs[i].rc),
                      (long long)(test_uv_now_ms() - t0), dlock_lock_errmsg(ls[i]));
        bad += rs[i].rc != DLOCK_ENOREPLICAS;
    }
    for (int i = 0; i < N; i++)
        dlock_lock_free(ls[i]);
    dlock_lock_free(warm);
    assert_int_equal(test_uv_close(&loop, &cl, 10000), 0);
    assert_int_equal(bad, 0);
}

/* A waiting acquire whose attempt was written (the server stopped: it
 * waits in the socket) is cut by dlock_lock_free(), and the client is
 * freed at once. The attempt's undo is queued behind it (cancel_behind);
 * with a connection per request it was written before the connection
 * was handed back; on the shared connection it waits for the loop to find
 * the socket writable, and the client's end may close the connection
 * first. After the resume the key must be gone (the undo ran). */
static void freed_client_keeps_the_undo(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    dlock_client *cl = plain_client(&loop);
    del_key("pr:f");
    dlock_lock *warm = test_uv_lock(cl, "pr:f:warm", 20000, 0);
    take_and_give(&loop, warm);
    dlock_lock_free(warm);
    dlock_lock *l = test_uv_lock(cl, "pr:f", 20000, 0);
    test_uv_result r = {0};
    test_redis_pause(&srv);
    assert_int_equal(dlock_lock_acquire_start(l, 5000, test_uv_done, &r), DLOCK_OK);
    test_uv_turn(&loop, 60);
    dlock_lock_free(l);
    print_message("freed waiter's callback: %d call(s), %s\n", r.calls, dlock_errname(r.rc));
    dlock_client_free(cl);
    cl = NULL;
    int drained = test_uv_drain(&loop, 5000);
    test_redis_resume(&srv);
    test_sleep_ms(300);
    int left = key_exists("pr:f");
    print_message("key after the resume: %s\n", left ? "SET (no undo ran)" : "absent (undone)");
    assert_int_equal(test_uv_close(&loop, &cl, 5000), 0);
    del_key("pr:f");
    assert_int_equal(drained, 0);
    assert_false(left);
}

/* dlock.h: "With nothing owed the connection is off the loop, so the loop
 * can end while the client lives." A waiting acquire is cancelled while
 * its attempt waits on a stopped server: its undo goes behind it, and
 * nobody waits for either reply. The loop should then have nothing of
 * dlock's on it (before stage D the connection went back to the pool);
 * the shared connection stays on it for as long as the server is
 * stopped. */
static void loop_ends_after_cancel_on_stopped_server(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    dlock_client *cl = plain_client(&loop);
    del_key("pr:g");
    dlock_lock *l = test_uv_lock(cl, "pr:g", 20000, 0);
    take_and_give(&loop, l);
    test_uv_result r = {0};
    test_redis_pause(&srv);
    assert_int_equal(dlock_lock_acquire_start(l, 5000, test_uv_done, &r), DLOCK_OK);
    test_uv_turn(&loop, 60);
    dlock_lock_cancel(l);
    int rc = test_uv_wait(&loop, &r, 2000);
    int idle = test_uv_drain(&loop, 2000);
    print_message("cancelled: %s; loop idle within 2 s with the server stopped: %s\n",
                  dlock_errname(rc), idle == 0 ? "yes" : "no");
    test_redis_resume(&srv);
    dlock_lock_free(l);
    assert_int_equal(test_uv_close(&loop, &cl, 5000), 0);
    del_key("pr:g");
    assert_int_equal(rc, DLOCK_ECANCELED);
    assert_int_equal(idle, 0);
}

/* SCRIPT FLUSH with many acquires in flight on the shared connection:
 * each EVALSHA comes back NOSCRIPT and its EVAL goes behind the others';
 * every acquire must still be granted, then released. */
static void noscript_with_many_in_flight(void **state)
{
    (void)state;
    enum { N = 64 };
    uv_loop_t loop;
    dlock_client *cl = NULL;
    assert_int_equal(test_uv_open(&loop, &cl, srv.url, 2000), 0);
    dlock_lock *warm = test_uv_lock(cl, "pr:ns:warm", 20000, 0);
    test_uv_result rw = {0};
    assert_int_equal(dlock_lock_acquire_start(warm, 0, test_uv_done, &rw), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rw, 3000), DLOCK_OK);
    static dlock_lock *ls[N];
    static test_uv_result rs[N];
    memset(rs, 0, sizeof rs);
    char name[32];
    redisReply *fr = test_redis_cmd(&srv, "SCRIPT FLUSH");
    assert_non_null(fr);
    freeReplyObject(fr);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "pr:ns:%d", i);
        del_key(name);
        ls[i] = test_uv_lock(cl, name, 20000, 0);
        assert_int_equal(dlock_lock_acquire_start(ls[i], 0, test_uv_done, &rs[i]), DLOCK_OK);
    }
    int bad = 0;
    for (int i = 0; i < N; i++) {
        int rc = test_uv_wait(&loop, &rs[i], 5000);
        if (rc != DLOCK_OK) {
            bad++;
            print_message("acquire %d: %s (%s)\n", i, dlock_errname(rc), dlock_lock_errmsg(ls[i]));
        }
    }
    fr = test_redis_cmd(&srv, "SCRIPT FLUSH");
    freeReplyObject(fr);
    for (int i = 0; i < N; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        if (dlock_lock_release_start(ls[i], test_uv_done, &rs[i]) != DLOCK_OK)
            bad++;
    }
    memset(&rw, 0, sizeof rw);
    assert_int_equal(dlock_lock_release_start(warm, test_uv_done, &rw), DLOCK_OK);
    for (int i = 0; i < N; i++) {
        int rc = test_uv_wait(&loop, &rs[i], 5000);
        if (rc != DLOCK_OK) {
            bad++;
            print_message("release %d: %s (%s)\n", i, dlock_errname(rc), dlock_lock_errmsg(ls[i]));
        }
        dlock_lock_free(ls[i]);
    }
    assert_int_equal(test_uv_wait(&loop, &rw, 3000), DLOCK_OK);
    dlock_lock_free(warm);
    assert_int_equal(test_uv_close(&loop, &cl, 5000), 0);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(noscript_with_many_in_flight),
        cmocka_unit_test(timed_out_as_not_sent_then_runs),
        cmocka_unit_test(cancelled_as_not_sent_then_runs),
        cmocka_unit_test(waits_serialize_on_shared_connection),
        cmocka_unit_test(freed_client_keeps_the_undo),
        cmocka_unit_test(loop_ends_after_cancel_on_stopped_server),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
