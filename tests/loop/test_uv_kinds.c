/* SPDX-License-Identifier: BSD-3-Clause */
/* Every kind of lock on one libuv loop, under contention, against a real
 * redis-server: many handles of one thread each take their lock, hold it
 * a few ms (a uv timer), give it back and go again, all at once. The
 * grants and releases are checked as they come (one thread: no two
 * writers of a name, at most N permits, no reader beside a writer, fences
 * rising), every cycle ends, and no request is left pending. Then many
 * waiters at once on a few names, and a cancel of every kind's pending
 * wait. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "redis_server.h"
#include "uv_contend.h"
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
    return test_uv_open(&loop, &cl, srv.url, 1000);
}

static int close_client(void **state)
{
    (void)state;
    assert_int_equal(test_uv_close(&loop, &cl, 10000), 0);
    return 0;
}

/* contend(), then the board checked: every worker done, nothing failed,
 * no violation, no request left pending. */
static void contend(test_uv_board *b, int n, int n_names, int cycles, test_uv_make_fn make)
{
    test_uv_contend(&loop, b, n, n_names, cycles, 120000, make, NULL);
    assert_int_equal(b->done, n);
    assert_int_equal(b->violations, 0);
    assert_int_equal(b->failed, 0);
    assert_int_equal(b->starts_refused, 0);
    assert_int_equal(b->still_pending, 0);
}

static char names_buf[TEST_UV_MAX_NAMES][32];
static unsigned make_flags;

static dlock_lock *make_plain(void *arg, int i, int name, int *reader, int *name2)
{
    (void)arg;
    (void)i;
    (void)name2;
    *reader = 0;
    snprintf(names_buf[name], sizeof names_buf[name], "uvk:%u:%d", make_flags, name);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 5000;
    o.flags = make_flags;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, cl, names_buf[name], &o), DLOCK_OK);
    return l;
}

static void plain_locks(void **state)
{
    (void)state;
    test_uv_board b = {.fenced = 1};
    make_flags = 0;
    contend(&b, 24, 3, 8, make_plain);
}

static void reentrant_locks(void **state)
{
    (void)state;
    test_uv_board b = {.fenced = 1};
    make_flags = DLOCK_REENTRANT;
    contend(&b, 16, 2, 6, make_plain);
}

static void fair_locks(void **state)
{
    (void)state;
    test_uv_board b = {.fenced = 1};
    make_flags = DLOCK_FAIR;
    contend(&b, 16, 2, 6, make_plain);
}

static void auto_renewed_locks(void **state)
{
    (void)state;
    test_uv_board b = {.fenced = 1};
    make_flags = DLOCK_AUTO_RENEW;
    contend(&b, 16, 2, 6, make_plain);
}

/* Every third worker a writer, the others readers. */
static dlock_lock *make_shared(void *arg, int i, int name, int *reader, int *name2)
{
    (void)arg;
    (void)name2;
    *reader = i % 3 != 0;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 5000;
    o.flags = *reader ? DLOCK_SHARED : DLOCK_EXCLUSIVE;
    snprintf(names_buf[name], sizeof names_buf[name], "uvk:rw:%d", name);
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, cl, names_buf[name], &o), DLOCK_OK);
    return l;
}

static void shared_locks(void **state)
{
    (void)state;
    test_uv_board b = {0};
    contend(&b, 18, 2, 6, make_shared);
}

static dlock_lock *make_semaphore(void *arg, int i, int name, int *reader, int *name2)
{
    (void)arg;
    (void)i;
    (void)name2;
    *reader = 0;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 5000;
    snprintf(names_buf[name], sizeof names_buf[name], "uvk:sem:%d", name);
    dlock_lock *l = NULL;
    assert_int_equal(dlock_semaphore_new(&l, cl, names_buf[name], 3, &o), DLOCK_OK);
    return l;
}

static void semaphores(void **state)
{
    (void)state;
    test_uv_board b = {.permits = 3};
    contend(&b, 16, 1, 6, make_semaphore);
}

/* Sets of two of three names ({a,b}, {b,c}, {c,a}): a set holds both of its
 * names, so two sets sharing a name exclude each other; the board marks
 * both. */
static dlock_lock *make_set(void *arg, int i, int name, int *reader, int *name2)
{
    (void)arg;
    (void)name;
    *reader = 0;
    *name2 = (i + 1) % 3;
    static const char *all[] = {"uvk:set:a", "uvk:set:b", "uvk:set:c"};
    const char *pair[] = {all[i % 3], all[(i + 1) % 3]};
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 5000;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new_multi(&l, cl, pair, 2, &o), DLOCK_OK);
    return l;
}

static void sets_of_names(void **state)
{
    (void)state;
    test_uv_board b = {0};
    contend(&b, 12, 3, 5, make_set);
}

/* Many waiters at once on a few names, one cycle each: 400 on 20 names,
 * or DLOCK_TEST_UV_WAITERS on a hundredth as many (make soak: 10,000 on
 * 100). */
static void many_waiters(void **state)
{
    (void)state;
    test_uv_board b = {.fenced = 1};
    make_flags = 0;
    const char *env = getenv("DLOCK_TEST_UV_WAITERS");
    int n = env ? atoi(env) : 400;
    /* Each waiter holds its cancel's eventfd; the tries in flight share
     * one connection per node (pipe.h): the soft limit is raised to the
     * hard one, and a machine whose hard limit is lower than that needs
     * gets fewer waiters, said on stdout. */
    struct rlimit lim;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
    lim.rlim_cur = lim.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
    if (lim.rlim_cur != RLIM_INFINITY && (rlim_t)(n + 200) > lim.rlim_cur) {
        n = (int)(lim.rlim_cur - 200);
        printf("# RLIMIT_NOFILE %llu: %d waiters\n", (unsigned long long)lim.rlim_cur, n);
    }
    int names = n >= 2000 ? n / 100 : 20;
    assert_true(n > 0 && names <= TEST_UV_MAX_NAMES);
    contend(&b, n, names, 1, make_plain);
}

/* Many locks held at once on one loop with a TTL far shorter than the
 * hold: the watchdog renews every one of them on the loop (their renewal
 * rounds share the node's one connection), so after 2.7 TTLs every key is
 * still on the server, then each release finds its own. 1000 by default,
 * DLOCK_TEST_UV_HELD more (make soak: 10,000). */
static void many_held_locks_renewed(void **state)
{
    (void)state;
    const char *env = getenv("DLOCK_TEST_UV_HELD");
    int n = env ? atoi(env) : 1000;
    assert_true(n > 0);
    dlock_lock **ls = calloc((size_t)n, sizeof *ls);
    test_uv_result *rs = calloc((size_t)n, sizeof *rs);
    assert_non_null(ls);
    assert_non_null(rs);
    char name[48];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "uvk:held:%d", i);
        ls[i] = test_uv_lock(cl, name, 1500, DLOCK_AUTO_RENEW);
        assert_int_equal(dlock_lock_acquire_start(ls[i], 0, test_uv_done, &rs[i]), DLOCK_OK);
    }
    for (int i = 0; i < n; i++)
        assert_int_equal(test_uv_wait(&loop, &rs[i], 30000), DLOCK_OK);
    test_uv_turn(&loop, 4000);
    int gone = 0;
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "uvk:held:%d", i);
        redisReply *r = test_redis_cmd(&srv, "PTTL %s", name);
        assert_non_null(r);
        gone += r->type != REDIS_REPLY_INTEGER || r->integer <= 0;
        freeReplyObject(r);
    }
    printf("# %d locks of 1500 ms held 4 s on one loop: %d lost\n", n, gone);
    assert_int_equal(gone, 0);
    for (int i = 0; i < n; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        assert_int_equal(dlock_lock_release_start(ls[i], test_uv_done, &rs[i]), DLOCK_OK);
    }
    for (int i = 0; i < n; i++) {
        assert_int_equal(test_uv_wait(&loop, &rs[i], 30000), DLOCK_OK);
        dlock_lock_free(ls[i]);
    }
    free(ls);
    free(rs);
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* Requests in flight at once share the node's one connection (pipe.h):
 * 256 acquires started together open no socket of their own (with a
 * connection per request, as before, this process held 256 more fds). */
static void requests_in_flight_share_one_connection(void **state)
{
    (void)state;
    enum { N = 256 };
    static dlock_lock *ls[N];
    static test_uv_result rs[N];
    char name[48];
    /* The shared connection exists and is idle. */
    ls[0] = test_uv_lock(cl, "uvk:pipe:warm", 5000, 0);
    assert_int_equal(dlock_lock_acquire_start(ls[0], 0, test_uv_done, &rs[0]), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rs[0], 5000), DLOCK_OK);
    dlock_lock_free(ls[0]);
    int before = open_fds(), most = before;
    for (int i = 0; i < N; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        snprintf(name, sizeof name, "uvk:pipe:%d", i);
        ls[i] = test_uv_lock(cl, name, 5000, 0);
        assert_int_equal(dlock_lock_acquire_start(ls[i], 0, test_uv_done, &rs[i]), DLOCK_OK);
    }
    for (int done = 0; done < N;) {
        uv_run(&loop, UV_RUN_ONCE);
        int fds = open_fds();
        most = fds > most ? fds : most;
        done = 0;
        for (int i = 0; i < N; i++)
            done += rs[i].calls;
    }
    printf("# %d acquires in flight: %d fds before, %d at most\n", N, before, most);
    for (int i = 0; i < N; i++) {
        assert_int_equal(rs[i].rc, DLOCK_OK);
        dlock_lock_free(ls[i]); /* its release goes on the loop */
    }
    assert_int_equal(test_uv_drain(&loop, 5000), 0);
    assert_true(most - before <= 2);
}

/* A pending wait of every kind, cancelled: each answers DLOCK_ECANCELED. */
static void a_cancel_of_every_kind(void **state)
{
    (void)state;
    const unsigned flags[] = {0, DLOCK_REENTRANT, DLOCK_FAIR, DLOCK_SHARED, DLOCK_EXCLUSIVE};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0] + 2; k++) {
        dlock_lock *holder = NULL, *waiter = NULL;
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 10000;
        if (k < sizeof flags / sizeof flags[0]) {
            /* a writer holds, so a shared reader waits too */
            o.flags = flags[k] == DLOCK_SHARED ? DLOCK_EXCLUSIVE : flags[k];
            assert_int_equal(dlock_lock_new(&holder, cl, "uvk:cancel", &o), DLOCK_OK);
            o.flags = flags[k];
            assert_int_equal(dlock_lock_new(&waiter, cl, "uvk:cancel", &o), DLOCK_OK);
        } else if (k == sizeof flags / sizeof flags[0]) {
            assert_int_equal(dlock_semaphore_new(&holder, cl, "uvk:cancel:sem", 1, &o), DLOCK_OK);
            assert_int_equal(dlock_semaphore_new(&waiter, cl, "uvk:cancel:sem", 1, &o), DLOCK_OK);
        } else {
            const char *pair[] = {"uvk:cancel:x", "uvk:cancel:y"};
            assert_int_equal(dlock_lock_new(&holder, cl, "uvk:cancel:y", &o), DLOCK_OK);
            assert_int_equal(dlock_lock_new_multi(&waiter, cl, pair, 2, &o), DLOCK_OK);
        }
        test_uv_result rh = {0}, rw = {0};
        assert_int_equal(dlock_lock_acquire_start(holder, 0, test_uv_done, &rh), DLOCK_OK);
        assert_int_equal(test_uv_wait(&loop, &rh, 5000), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire_start(waiter, DLOCK_WAIT_FOREVER, test_uv_done, &rw),
                         DLOCK_OK);
        test_uv_turn(&loop, 150);
        assert_int_equal(rw.calls, 0);
        dlock_lock_cancel(waiter);
        assert_int_equal(test_uv_wait(&loop, &rw, 3000), DLOCK_ECANCELED);
        test_uv_turn(&loop, 50);
        assert_int_equal(rw.calls, 1);
        memset(&rh, 0, sizeof rh);
        assert_int_equal(dlock_lock_release_start(holder, test_uv_done, &rh), DLOCK_OK);
        assert_int_equal(test_uv_wait(&loop, &rh, 5000), DLOCK_OK);
        dlock_lock_free(waiter);
        dlock_lock_free(holder);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(plain_locks, open_client, close_client),
        cmocka_unit_test_setup_teardown(many_held_locks_renewed, open_client, close_client),
        cmocka_unit_test_setup_teardown(requests_in_flight_share_one_connection, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(reentrant_locks, open_client, close_client),
        cmocka_unit_test_setup_teardown(fair_locks, open_client, close_client),
        cmocka_unit_test_setup_teardown(auto_renewed_locks, open_client, close_client),
        cmocka_unit_test_setup_teardown(shared_locks, open_client, close_client),
        cmocka_unit_test_setup_teardown(semaphores, open_client, close_client),
        cmocka_unit_test_setup_teardown(sets_of_names, open_client, close_client),
        cmocka_unit_test_setup_teardown(many_waiters, open_client, close_client),
        cmocka_unit_test_setup_teardown(a_cancel_of_every_kind, open_client, close_client),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
