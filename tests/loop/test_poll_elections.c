/* SPDX-License-Identifier: BSD-3-Clause */
/* Elections on an application's event loop (the poll driver), against a
 * real redis-server, a Redlock of three (the term a plain lock, the value
 * written on every node) and, with those backends, a real etcd member
 * and a real ZooKeeper member:
 * dlock_election_campaign_start() leads and publishes its value (Redis:
 * a write on the loop after the grant; etcd: the key's own value), a
 * standby on the loop takes over when a blocking leader resigns, a cancel
 * and a free end a pending campaign, a free while the value's write is on
 * the wire leaves nothing on the loop and no leader behind, and the
 * blocking verbs are refused on a looped client; on Redis, a looped
 * resign to a standby that is stopped is heard by an observer at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "loop_driver.h"
#include "poll_support.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"
#if DLOCK_TEST_WITH_ETCD
#include "etcd_server.h"
#endif
#if DLOCK_TEST_WITH_ZOOKEEPER
#include "zk_server.h"
#endif

static const test_loop_driver *d = &test_poll_driver;
static test_redis rsrv, more[2];
static const char *urls[3]; /* the store of the group running */
static size_t n_urls;
static dlock_client *cl;  /* looped */
static dlock_client *blk; /* blocking, the other candidates' and the reads' */

typedef struct result {
    int calls;
    int rc;
} result;

static void done(dlock_election *e, int rc, void *arg)
{
    result *r = arg;
    (void)e;
    r->calls++;
    r->rc = rc;
}

static int wait_for(result *r, int max_ms)
{
    int64_t end = test_loop_now_ms() + max_ms;
    while (r->calls == 0 && test_loop_now_ms() < end)
        test_loop_turn(d, 20);
    return r->calls ? r->rc : -999;
}

static int open_clients(void **state)
{
    (void)state;
    if (test_loop_open_n(d, &cl, urls, n_urls, 3000) != 0)
        return -1;
    return dlock_client_new(&blk, urls, n_urls, NULL, NULL, 0) == DLOCK_OK ? 0 : -1;
}

static int close_clients(void **state)
{
    (void)state;
    dlock_client_free(blk);
    blk = NULL;
    assert_int_equal(test_loop_close(d, &cl, 10000), 0);
    return 0;
}

static dlock_election *election(dlock_client *c, const char *name)
{
    dlock_election_options o = DLOCK_ELECTION_OPTIONS_INIT;
    o.ttl_ms = 5000;
    dlock_election *e = NULL;
    assert_int_equal(dlock_election_new(&e, c, name, &o), DLOCK_OK);
    return e;
}

/* The leader a blocking client reads: its fence, and value into v. */
static uint64_t leader(const char *name, char *v, size_t n)
{
    dlock_election *r = election(blk, name);
    uint64_t fence = 0;
    assert_int_equal(dlock_election_leader(r, &fence, v, n, NULL), DLOCK_OK);
    dlock_election_free(r);
    return fence;
}

static void a_looped_campaign_leads_and_resigns(void **state)
{
    (void)state;
    dlock_election *e = election(cl, "loop-elect/lead");
    result r = {0};
    assert_int_equal(dlock_election_campaign_start(e, "alpha", 0, done, &r), DLOCK_OK);
    assert_int_equal(r.calls, 0); /* never inside the start */
    assert_int_equal(wait_for(&r, 5000), DLOCK_OK);
    assert_int_equal(r.calls, 1);
    char v[64];
    uint64_t f = leader("loop-elect/lead", v, sizeof v);
    assert_true(f > 0);
    assert_int_equal(f, dlock_election_fence(e));
    assert_string_equal(v, "alpha");
    memset(&r, 0, sizeof r);
    assert_int_equal(dlock_election_resign_start(e, done, &r), DLOCK_OK);
    assert_int_equal(wait_for(&r, 5000), DLOCK_OK);
    assert_int_equal(dlock_election_fence(e), 0);
    assert_int_equal(leader("loop-elect/lead", v, sizeof v), 0);
    dlock_election_free(e);
}

/* A blocking leader resigns; the standby waiting on the loop leads next,
 * with a larger fence, and its value is the one shown. */
static void a_standby_on_the_loop_takes_over(void **state)
{
    (void)state;
    dlock_election *b = election(blk, "loop-elect/over");
    dlock_election *a = election(cl, "loop-elect/over");
    assert_int_equal(dlock_election_campaign(b, "blocking", 0), DLOCK_OK);
    uint64_t fb = dlock_election_fence(b);
    result r = {0};
    assert_int_equal(dlock_election_campaign_start(a, "looped", 20000, done, &r), DLOCK_OK);
    test_loop_turn(d, 300);
    assert_int_equal(r.calls, 0); /* waiting in line */
    char v[64];
    assert_int_equal(leader("loop-elect/over", v, sizeof v), fb);
    assert_string_equal(v, "blocking");
    assert_int_equal(dlock_election_resign(b), DLOCK_OK);
    assert_int_equal(wait_for(&r, 10000), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    assert_true(fa > fb);
    assert_int_equal(leader("loop-elect/over", v, sizeof v), fa);
    assert_string_equal(v, "looped");
    memset(&r, 0, sizeof r);
    assert_int_equal(dlock_election_resign_start(a, done, &r), DLOCK_OK);
    assert_int_equal(wait_for(&r, 5000), DLOCK_OK);
    dlock_election_free(a);
    dlock_election_free(b);
}

static void the_blocking_verbs_are_refused_on_a_loop(void **state)
{
    (void)state;
    dlock_election *e = election(cl, "loop-elect/refused");
    dlock_election *other = election(blk, "loop-elect/refused");
    result r = {0};
    assert_int_equal(dlock_election_campaign(e, "x", 0), DLOCK_EINVAL);
    assert_int_equal(dlock_election_proclaim(e, "x"), DLOCK_EINVAL);
    assert_int_equal(dlock_election_resign(e), DLOCK_EINVAL);
    assert_int_equal(dlock_election_observe(e, 0, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_campaign_start(e, "x", 0, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_election_campaign_start(e, NULL, 0, done, &r), DLOCK_EINVAL);
    assert_int_equal(dlock_election_campaign_start(other, "x", 0, done, &r), DLOCK_EINVAL);
    assert_int_equal(dlock_election_resign_start(other, done, &r), DLOCK_EINVAL);
    assert_int_equal(dlock_election_campaign_start(e, "x", 0, done, &r), DLOCK_OK);
    result r2 = {0};
    assert_int_equal(dlock_election_campaign_start(e, "y", 0, done, &r2), DLOCK_EBUSY);
    assert_int_equal(dlock_election_resign_start(e, done, &r2), DLOCK_EBUSY);
    assert_int_equal(wait_for(&r, 5000), DLOCK_OK);
    assert_int_equal(dlock_election_campaign_start(e, "y", 0, done, &r2), DLOCK_EINVAL); /* leads */
    assert_int_equal(r2.calls, 0);
    /* A bad wait comes through the callback, as for a lock. */
    dlock_election *bad = election(cl, "loop-elect/refused-wait");
    memset(&r, 0, sizeof r);
    assert_int_equal(dlock_election_campaign_start(bad, "x", -5, done, &r), DLOCK_OK);
    assert_int_equal(wait_for(&r, 5000), DLOCK_EINVAL);
    dlock_election_free(bad);
    dlock_election_free(e); /* leads: the term goes on the loop */
    dlock_election_free(other);
}

static void a_cancel_ends_a_looped_campaign(void **state)
{
    (void)state;
    dlock_election *b = election(blk, "loop-elect/cancel");
    dlock_election *a = election(cl, "loop-elect/cancel");
    assert_int_equal(dlock_election_campaign(b, "b", 0), DLOCK_OK);
    result r = {0};
    assert_int_equal(dlock_election_campaign_start(a, "a", DLOCK_WAIT_FOREVER, done, &r),
                     DLOCK_OK);
    test_loop_turn(d, 200);
    assert_int_equal(r.calls, 0);
    dlock_election_cancel(a);
    assert_int_equal(wait_for(&r, 5000), DLOCK_ECANCELED);
    assert_int_equal(dlock_election_fence(a), 0);
    /* and it may campaign again */
    memset(&r, 0, sizeof r);
    assert_int_equal(dlock_election_campaign_start(a, "a", 0, done, &r), DLOCK_OK);
    assert_int_equal(wait_for(&r, 5000), DLOCK_ENOTACQUIRED);
    dlock_election_free(a);
    dlock_election_free(b);
}

/* A free with a wait pending answers inside it, and the standby's place
 * in line goes: the leader's resign leaves nobody leading. */
static void a_free_ends_a_pending_campaign(void **state)
{
    (void)state;
    dlock_election *b = election(blk, "loop-elect/free");
    dlock_election *a = election(cl, "loop-elect/free");
    assert_int_equal(dlock_election_campaign(b, "b", 0), DLOCK_OK);
    result r = {0};
    assert_int_equal(dlock_election_campaign_start(a, "a", 20000, done, &r), DLOCK_OK);
    test_loop_turn(d, 200);
    dlock_election_free(a);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.rc, DLOCK_ECANCELED);
    test_loop_turn(d, 300);
    assert_int_equal(dlock_election_resign(b), DLOCK_OK);
    char v[8];
    assert_int_equal(leader("loop-elect/free", v, sizeof v), 0);
    dlock_election_free(b);
}

/* Redis: the value's write comes after the grant. A free with the grant
 * in and the write held up (the server stopped) tells the caller at once;
 * the client's end waits for the write, and the term is let go: nobody
 * leads once the server answers again. */
static void a_free_while_the_value_is_written(void **state)
{
    (void)state;
    dlock_election *a = election(cl, "loop-elect/writing");
    result r = {0};
    assert_int_equal(dlock_election_campaign_start(a, "a", 0, done, &r), DLOCK_OK);
    dlock_lock *term = dlock_election_lock(a);
    int64_t end = test_loop_now_ms() + 5000;
    /* One turn at a time: the grant's turn starts the write on the loop,
     * which then waits for the server's next read. */
    while (dlock_lock_state_get(term) != DLOCK_STATE_HELD && r.calls == 0 &&
           test_loop_now_ms() < end)
        d->turn(5);
    if (r.calls) { /* the write answered in the grant's turn: nothing in flight to test */
        dlock_election_free(a);
        skip();
    }
    assert_int_equal(dlock_lock_state_get(term), DLOCK_STATE_HELD);
    test_redis_pause(&rsrv);
    dlock_election_free(a);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.rc, DLOCK_ECANCELED);
    test_redis_resume(&rsrv);
    assert_int_equal(test_loop_drain(d, 10000), 0);
    char v[8];
    assert_int_equal(leader("loop-elect/writing", v, sizeof v), 0);
}

/* An observer on a thread of its own: its reports, the last fence. */
typedef struct watcher {
    dlock_election *e;
    pthread_mutex_t mu;
    int calls;
    uint64_t fence;
} watcher;

static int watched(void *arg, uint64_t fence, const char *value, size_t len)
{
    watcher *w = arg;
    (void)value, (void)len;
    pthread_mutex_lock(&w->mu);
    w->calls++;
    w->fence = fence;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static void *watch_main(void *arg)
{
    watcher *w = arg;
    (void)dlock_election_observe(w->e, DLOCK_WAIT_FOREVER, watched, w);
    return NULL;
}

static int watched_calls(watcher *w, uint64_t *fence)
{
    pthread_mutex_lock(&w->mu);
    int n = w->calls;
    *fence = w->fence;
    pthread_mutex_unlock(&w->mu);
    return n;
}

/* The looped leader resigns (resign_start) to a standby in a process of
 * its own that is stopped: nothing of the new term is written, and the
 * resign's own word wakes the observer, which shows the leader gone
 * after the I/O timeout (1 s) rather than the old one until its lease's
 * end (5 s). */
static void a_looped_resign_to_a_stopped_standby_is_observed(void **state)
{
    (void)state;
    const char *name = "loop-elect/stopped";
    dlock_election *a = election(cl, name);
    result r = {0};
    assert_int_equal(dlock_election_campaign_start(a, "looped", 0, done, &r), DLOCK_OK);
    assert_int_equal(wait_for(&r, 5000), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a), seen = 0;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the standby: in line until it is killed */
        dlock_client *c = NULL;
        dlock_election *b = NULL;
        if (dlock_client_new(&c, urls, n_urls, NULL, NULL, 0) == DLOCK_OK &&
            dlock_election_new(&b, c, name, NULL) == DLOCK_OK)
            (void)dlock_election_campaign(b, "standby", DLOCK_WAIT_FOREVER);
        _exit(0);
    }
    test_sleep_ms(500); /* in line */
    assert_int_equal(test_proc_stop(pid, 2000), 0);
    watcher w = {.e = election(blk, name)};
    pthread_mutex_init(&w.mu, NULL);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, watch_main, &w), 0);
    int64_t end = test_now_ms() + 5000;
    while (watched_calls(&w, &seen) < 1 && test_now_ms() < end)
        test_sleep_ms(5);
    assert_int_equal(seen, fa);
    memset(&r, 0, sizeof r);
    int64_t resigned = test_now_ms();
    assert_int_equal(dlock_election_resign_start(a, done, &r), DLOCK_OK);
    assert_int_equal(wait_for(&r, 5000), DLOCK_OK);
    end = resigned + 3000;
    while (watched_calls(&w, &seen) < 2 && test_now_ms() < end)
        test_loop_turn(d, 5);
    int64_t heard = test_now_ms() - resigned;
    dlock_election_cancel(w.e);
    assert_int_equal(pthread_join(t, NULL), 0);
    kill(pid, SIGKILL);
    (void)waitpid(pid, NULL, 0);
    print_message("# the observer heard the looped resign after %lld ms\n", (long long)heard);
    int calls = watched_calls(&w, &seen);
    dlock_election_free(w.e);
    pthread_mutex_destroy(&w.mu);
    dlock_election_free(a);
    assert_true(calls >= 2);
    assert_int_not_equal(seen, fa);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(a_looped_campaign_leads_and_resigns, open_clients,
                                    close_clients),
    cmocka_unit_test_setup_teardown(a_standby_on_the_loop_takes_over, open_clients,
                                    close_clients),
    cmocka_unit_test_setup_teardown(the_blocking_verbs_are_refused_on_a_loop, open_clients,
                                    close_clients),
    cmocka_unit_test_setup_teardown(a_cancel_ends_a_looped_campaign, open_clients,
                                    close_clients),
    cmocka_unit_test_setup_teardown(a_free_ends_a_pending_campaign, open_clients,
                                    close_clients),
};

static const struct CMUnitTest redis_only[] = {
    cmocka_unit_test_setup_teardown(a_free_while_the_value_is_written, open_clients,
                                    close_clients),
    cmocka_unit_test_setup_teardown(a_looped_resign_to_a_stopped_standby_is_observed,
                                    open_clients, close_clients),
};

int main(void)
{
    if (test_redis_start(&rsrv, NULL) != 0)
        return 1;
    urls[0] = rsrv.url;
    n_urls = 1;
    int rc = cmocka_run_group_tests_name("redis", tests, NULL, NULL);
    rc |= cmocka_run_group_tests_name("redis, the write", redis_only, NULL, NULL);
    /* A Redlock of three: the same campaign (a plain term, no line). */
    if (test_redis_start(&more[0], NULL) != 0 || test_redis_start(&more[1], NULL) != 0)
        return 1;
    urls[1] = more[0].url;
    urls[2] = more[1].url;
    n_urls = 3;
    rc |= cmocka_run_group_tests_name("redlock", tests, NULL, NULL);
    test_redis_stop(&more[0]);
    test_redis_stop(&more[1]);
    test_redis_stop(&rsrv);
    n_urls = 1;
#if DLOCK_TEST_WITH_ETCD
    test_etcd esrv;
    if (test_etcd_start(&esrv, 1) != 0)
        return 1;
    urls[0] = esrv.url;
    rc |= cmocka_run_group_tests_name("etcd", tests, NULL, NULL);
    test_etcd_stop(&esrv);
#endif
#if DLOCK_TEST_WITH_ZOOKEEPER
    /* ZooKeeper's value is the node's data from its create, as etcd's. */
    test_zk zsrv;
    if (test_zk_available()) {
        if (test_zk_start(&zsrv) != 0)
            return 1;
        urls[0] = zsrv.url;
        rc |= cmocka_run_group_tests_name("zookeeper", tests, NULL, NULL);
        test_zk_stop(&zsrv);
    }
#endif
    return rc;
}
