/* SPDX-License-Identifier: BSD-3-Clause */
/* The ZooKeeper backend (src/zk/) on a real member (support/zk_server.c),
 * through the public API: URLs, exclusion under contention (the chaos
 * history's checker), fences that grow, a waiter woken by the release
 * (its watch on the node before its own), a dead holder's lock passed on
 * once its session expired, a hold lost when its session expired (ended
 * from outside, or the member paused past it), try-once, status,
 * extend. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "dlock.h"
#include "history.h"
#include "proc.h"
#include "proxy.h"
#include "test_util.h"
#include "zk_contend.h"
#include "zk_server.h"
#include "zk_session.h"

static test_zk srv;
static chaos_proxy proxy; /* in front of srv: a holder's connection to cut */

static int setup(void **state)
{
    (void)state;
    if (test_zk_start(&srv) != 0)
        return -1;
    if (chaos_proxy_start(&proxy, srv.port) == 0) /* forked: before any thread */
        return 0;
    test_zk_stop(&srv);
    return -1;
}

static int teardown(void **state)
{
    (void)state;
    chaos_proxy_stop(&proxy);
    test_zk_stop(&srv);
    return 0;
}

/* A client of the member at url (srv's or the proxy's); url_tail is
 * appended to it ("" none). */
static dlock_client *client_at(const char *base, const char *url_tail)
{
    char url[400], err[256] = "";
    snprintf(url, sizeof url, "%s%s", base, url_tail);
    const char *u = url;
    dlock_client *c = NULL;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    int rc = dlock_client_new(&c, &u, 1, &o, err, sizeof err);
    if (rc != DLOCK_OK)
        fail_msg("client of %s: %s (%s)", url, dlock_strerror(rc), err);
    return c;
}

static dlock_client *client_of(const char *url_tail)
{
    return client_at(srv.url, url_tail);
}

static dlock_lock *lock_of(dlock_client *c, const char *name, unsigned flags)
{
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = flags;
    assert_int_equal(dlock_lock_new(&l, c, name, &o), DLOCK_OK);
    return l;
}

static int new_client_rc(const char *url)
{
    dlock_client *c = NULL;
    char err[256] = "";
    int rc = dlock_client_new(&c, &url, 1, NULL, err, sizeof err);
    dlock_client_free(c);
    return rc;
}

static void bad_urls_are_einval(void **state)
{
    (void)state;
    const char *bad[] = {"zk://", "zk://host", "zk://host:", "zk://host:0", "zk://host:65536",
                         "zk://host:x1", "zk://h:1/", "zk://h:1//a", "zk://h:1/a/./b",
                         "zk://h:1/a/..", "zk://user@h:1", "zk://:pw@h:1", "zk://h:1?x=1",
                         "zk://h:1?session_timeout_ms=5", "zk://h:1?session_timeout_ms=1e3",
                         "zk://[::1]:2181", "zk://h:1,,h:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = new_client_rc(bad[i]);
        if (rc != DLOCK_EINVAL)
            fail_msg("%s: %s, not DLOCK_EINVAL", bad[i], dlock_strerror(rc));
    }
    /* A second URL that is another store's is no continuation. */
    const char *two[] = {"zk://h:1", "redis://h:2"};
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_new(&c, two, 2, NULL, NULL, 0), DLOCK_EINVAL);
}

static void an_unreachable_member_fails_the_client_with_eio(void **state)
{
    (void)state;
    dlock_client *c = NULL;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = 300;
    char url[64], err[256] = "";
    snprintf(url, sizeof url, "zk://127.0.0.1:%d", test_free_port());
    const char *u = url;
    assert_int_equal(dlock_client_new(&c, &u, 1, &o, err, sizeof err), DLOCK_EIO);
    assert_non_null(strstr(err, "answered"));
}

static void fences_grow_and_try_once_is_refused_while_held(void **state)
{
    (void)state;
    dlock_client *a = client_of(""), *b = client_of("");
    dlock_lock *la = lock_of(a, "fence", 0), *lb = lock_of(b, "fence", 0);
    assert_int_equal(dlock_lock_acquire(la, 0), DLOCK_OK);
    uint64_t f1 = dlock_lock_fence(la);
    assert_true(f1 > 0);
    assert_int_equal(dlock_lock_acquire(lb, 0), DLOCK_ENOTACQUIRED);
    dlock_node_status st;
    dlock_lock_status sum;
    assert_int_equal(dlock_client_status(b, "fence", 1, &st, &sum), DLOCK_OK);
    assert_int_equal(st.held, 1);
    assert_int_equal(st.fence, f1);
    assert_int_equal(sum.state, DLOCK_STATUS_HELD);
    dlock_holders_info hi;
    dlock_holder h[2];
    assert_int_equal(dlock_client_holders(b, "fence", 0, &hi, h, 2), DLOCK_OK);
    assert_int_equal(hi.mode, DLOCK_HOLD_EXCLUSIVE);
    assert_int_equal(hi.count, 1);
    assert_string_equal(h[0].token, dlock_lock_token(la)); /* the node's name */
    assert_non_null(strstr(h[0].token, "-lock-"));
    assert_int_equal(strncmp(h[0].token, "_c_", 3), 0);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    /* The refused try left no node in line: b gets it at once. */
    assert_int_equal(dlock_lock_acquire(lb, 0), DLOCK_OK);
    uint64_t f2 = dlock_lock_fence(lb);
    assert_true(f2 > f1);
    assert_int_equal(dlock_lock_release(lb), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, 0), DLOCK_OK);
    assert_true(dlock_lock_fence(la) > f2);
    /* extend: the node is still ours, and our session's */
    assert_int_equal(dlock_lock_extend(la, 0), DLOCK_OK);
    assert_true(dlock_lock_validity_ms(la) > 0);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    assert_int_equal(dlock_client_status(b, "fence", 1, &st, &sum), DLOCK_OK);
    assert_int_equal(st.held, 0);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_free(a);
    dlock_client_free(b);
}

/* ---- a waiter woken by the release ----------------------------------------- */

typedef struct waiting {
    dlock_lock *l;
    dlock_lock *holder; /* the hold it waits behind */
    int rc;
    int64_t got_ms;
    dlock_lock_state holder_state; /* the holder's, the moment the acquire returned */
    atomic_int over;
} waiting;

/* The wait is long: ending a session by hand can take several tries of
 * 2 s each (end_session_until_new: the client wins its session back one
 * time in five here, more under load), and a waiter that timed out while
 * a test still needs it waiting fails that test for the wrong reason, as
 * it did once in CI under TSan with a 10 s wait. */
#define WAITER_WAIT_MS 60000

static void *wait_for(void *arg)
{
    waiting *w = arg;
    w->rc = dlock_lock_acquire(w->l, WAITER_WAIT_MS);
    w->holder_state = dlock_lock_state_get(w->holder);
    w->got_ms = test_now_ms();
    atomic_store(&w->over, 1);
    return NULL;
}

/* A holder on client a and a waiter in line behind it on client b (b's
 * URL with its tail), the waiter's acquire on a thread of its own. */
typedef struct in_line {
    dlock_client *a, *b;
    dlock_lock *la;
    uint64_t fence; /* the holder's */
    waiting w;
    pthread_t t;
} in_line;

static void line_up_behind(in_line *p, dlock_client *a, const char *name, const char *b_tail,
                           const dlock_lock_options *a_opts)
{
    memset(p, 0, sizeof *p);
    p->a = a;
    p->b = client_of(b_tail);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    assert_int_equal(dlock_lock_new(&p->la, p->a, name, a_opts ? a_opts : &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p->la, 0), DLOCK_OK);
    p->fence = dlock_lock_fence(p->la);
    p->w.l = lock_of(p->b, name, 0);
    p->w.holder = p->la;
    assert_int_equal(pthread_create(&p->t, NULL, wait_for, &p->w), 0);
    test_sleep_ms(400); /* the waiter is in line, watching the holder's node */
}

/* The same, a's URL with its tail too. */
static void line_up(in_line *p, const char *name, const char *a_tail, const char *b_tail,
                    const dlock_lock_options *a_opts)
{
    line_up_behind(p, client_of(a_tail), name, b_tail, a_opts);
}

static void line_free(in_line *p)
{
    dlock_lock_free(p->la);
    dlock_lock_free(p->w.l);
    dlock_client_free(p->a);
    dlock_client_free(p->b);
}

static void a_waiter_is_woken_by_the_release_not_its_recheck(void **state)
{
    (void)state;
    in_line p;
    line_up(&p, "/dlock-test/wake", "", "", NULL);
    int64_t released = test_now_ms();
    assert_int_equal(dlock_lock_release(p.la), DLOCK_OK);
    pthread_join(p.t, NULL);
    assert_int_equal(p.w.rc, DLOCK_OK);
    /* Its own look comes every 2 s (zk_wait.c RECHECK_MS): well before,
     * only the watch on our node can have woken it. */
    int64_t after = p.w.got_ms - released;
    if (after > 1000)
        fail_msg("the waiter got the lock %lld ms after the release", (long long)after);
    assert_int_equal(dlock_lock_release(p.w.l), DLOCK_OK);
    line_free(&p);
}

/* A cancelled waiter leaves the line: its node goes, so the holder's
 * release leaves the lock free, not handed to a waiter that left. */
static void a_cancelled_waiter_leaves_no_node_in_line(void **state)
{
    (void)state;
    in_line p;
    line_up(&p, "cancelled", "", "", NULL);
    int64_t cancelled = test_now_ms();
    dlock_lock_cancel(p.w.l);
    pthread_join(p.t, NULL);
    assert_int_equal(p.w.rc, DLOCK_ECANCELED);
    assert_true(p.w.got_ms - cancelled < 1000);
    assert_int_equal(dlock_lock_release(p.la), DLOCK_OK);
    dlock_holders_info hi;
    assert_int_equal(dlock_client_holders(p.a, "cancelled", 0, &hi, NULL, 0), DLOCK_OK);
    assert_int_equal(hi.count, 0);
    line_free(&p);
}

/* ---- exclusion under contention --------------------------------------------- */

#define WORKERS 4
#define ROUNDS 8

typedef struct contender {
    int slot, fd, errors;
} contender;

static void *contend(void *arg)
{
    contender *k = arg;
    const char *u = srv.url;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    if (dlock_client_new(&c, &u, 1, NULL, NULL, 0) != DLOCK_OK ||
        dlock_lock_new(&l, c, "contended", &o) != DLOCK_OK) {
        k->errors++;
        dlock_client_free(c);
        return NULL;
    }
    for (uint32_t cs = 0; cs < ROUNDS; cs++) {
        if (dlock_lock_acquire(l, 30000) != DLOCK_OK) {
            k->errors++;
            continue;
        }
        uint64_t fence = dlock_lock_fence(l);
        chaos_history_note(k->fd, CHAOS_REC_ENTER, k->slot, (uint32_t)k->slot + 1, cs, fence,
                           CHAOS_KIND_EXCLUSIVE, 0);
        test_sleep_ms(5);
        chaos_history_note(k->fd, CHAOS_REC_EXIT, k->slot, (uint32_t)k->slot + 1, cs, fence, 0,
                           0);
        if (dlock_lock_release(l) != DLOCK_OK)
            k->errors++;
    }
    dlock_lock_free(l);
    dlock_client_free(c);
    return NULL;
}

static void contenders_never_overlap_and_fences_only_grow(void **state)
{
    (void)state;
    char hist[300];
    test_tmp_path(hist, sizeof hist, "dlock-zk-history");
    unlink(hist);
    int fd = chaos_history_open(hist);
    assert_true(fd >= 0);
    pthread_t t[WORKERS];
    contender k[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        k[i] = (contender){.slot = i, .fd = fd};
        assert_int_equal(pthread_create(&t[i], NULL, contend, &k[i]), 0);
    }
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(k[i].errors, 0);
    }
    close(fd);
    chaos_verdict v;
    assert_int_equal(chaos_history_check(hist, &v), 0);
    unlink(hist);
    assert_int_equal(v.cs, WORKERS * ROUNDS);
    assert_int_equal(v.cs_unclosed, 0);
    assert_int_equal(v.overlaps, 0);
    assert_int_equal(v.max_concurrent, 1);
    assert_int_equal(v.fence_violations, 0);
}

/* ---- a holder that dies ---------------------------------------------------- */

static void a_dead_holders_lock_passes_on_when_its_session_expires(void **state)
{
    (void)state;
    /* The child takes "dead" on a session of 1 s and waits to be killed
     * (no release, no close: its session ends by expiring). */
    char url[400];
    snprintf(url, sizeof url, "%s?session_timeout_ms=1000", srv.url);
    pid_t pid = 0;
    uint64_t dead_fence = zk_hold_in_child(url, "dead", &pid); /* before any thread */
    assert_true(dead_fence > 0);
    dlock_client *c = client_of("");
    dlock_lock *l = lock_of(c, "dead", 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    int64_t killed = test_now_ms();
    assert_int_equal(dlock_lock_acquire(l, 10000), DLOCK_OK);
    int64_t after = test_now_ms() - killed;
    /* Not at once (a closed socket is no closed session), and about the
     * session's 1 s (the server expires sessions on its 100 ms ticks). */
    if (after < 500 || after > 4000)
        fail_msg("the lock passed on %lld ms after the holder died", (long long)after);
    assert_true(dlock_lock_fence(l) > dead_fence);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- a session that expires ------------------------------------------------- */

static void quiet(const char *message)
{
    (void)message; /* the C client's own complaints, as the session moved */
}

static void session_event(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh, (void)type, (void)path;
    *(int *)ctx = state;
}

/* End client c's session on the server from a handle of our own on the
 * same session id, as ZooKeeper's tests expire one: connect with its id
 * and password, then close. The client's nodes go at once; the client
 * learns at its next word that its session expired. */
static void end_session_once(dlock_client *c)
{
    clientid_t id;
    dlock__zk_session_id(c->store, &id);
    assert_true(id.client_id != 0);
    int state = 0;
    dlock__zk_lib_lock(); /* the library's log buffers are shared (zk_session.h) */
    zhandle_t *zh = zookeeper_init2(srv.url + 5, session_event, 2000, &id, &state, 0, quiet);
    if (!zh) {
        dlock__zk_lib_unlock();
        fail_msg("zookeeper_init2 failed");
    }
    int64_t end = test_now_ms() + 5000;
    while (state != ZOO_CONNECTED_STATE && test_now_ms() < end) {
        int fd = -1, interest = 0;
        struct timeval tv;
        zookeeper_interest(zh, &fd, &interest, &tv);
        dlock__zk_lib_unlock();
        struct pollfd p = {.fd = fd,
                           .events = (short)((interest & ZOOKEEPER_READ ? POLLIN : 0) |
                                             (interest & ZOOKEEPER_WRITE ? POLLOUT : 0))};
        int ms = (int)(tv.tv_sec * 1000 + tv.tv_usec / 1000);
        int n = poll(&p, fd >= 0 ? 1 : 0, ms < 50 ? ms : 50);
        int events = n > 0 ? ((p.revents & (POLLIN | POLLHUP | POLLERR) ? ZOOKEEPER_READ : 0) |
                              (p.revents & POLLOUT ? ZOOKEEPER_WRITE : 0))
                           : 0;
        dlock__zk_lib_lock();
        zookeeper_process(zh, events);
    }
    zookeeper_close(zh);
    dlock__zk_lib_unlock();
    assert_int_equal(state, ZOO_CONNECTED_STATE);
}

/* The same until the lock `name` (looked at through `other`) is no longer
 * held with `fence`: a's session thread may win the session back by
 * reconnecting before our close (one run in three here), so the close is
 * tried again. When the session ended (ms). */
static int64_t end_session_of(dlock_client *c, dlock_client *other, const char *name,
                              uint64_t fence)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        end_session_once(c);
        int64_t ended = test_now_ms();
        dlock_node_status st = {0};
        while (test_now_ms() - ended < 500) {
            if (dlock_client_status(other, name, 1, &st, NULL) == DLOCK_OK &&
                (!st.held || st.fence != fence))
                return ended;
            test_sleep_ms(10);
        }
    }
    fail_msg("the session of \"%s\"'s holder did not end", name);
    return 0;
}

/* The same until c is on a new session (its session thread saw the old
 * one expire and opened another). */
static void end_session_until_new(dlock_client *c)
{
    clientid_t before, now;
    dlock__zk_session_id(c->store, &before);
    for (int attempt = 0; attempt < 5; attempt++) {
        end_session_once(c);
        int64_t t0 = test_now_ms();
        while (test_now_ms() - t0 < 2000) {
            dlock__zk_session_id(c->store, &now);
            if (now.client_id != before.client_id)
                return;
            test_sleep_ms(10);
        }
    }
    fail_msg("the client's session did not end");
}

static atomic_int lost_calls;
static atomic_llong lost_ms; /* when on_lost ran (the last time) */

static void on_lost(dlock_lock *l, dlock_lost_reason reason, void *arg)
{
    (void)l, (void)reason, (void)arg;
    atomic_store(&lost_ms, test_now_ms());
    atomic_fetch_add(&lost_calls, 1);
}

/* An auto-renewed lock's options, on_lost counting. */
static dlock_lock_options renewed_counting_losses(void)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = DLOCK_AUTO_RENEW;
    o.renew_interval_ms = 200;
    o.on_lost = on_lost;
    atomic_store(&lost_calls, 0);
    atomic_store(&lost_ms, 0);
    return o;
}

static void a_hold_is_lost_when_its_session_expires_and_the_waiter_gets_it(void **state)
{
    (void)state;
    dlock_lock_options o = renewed_counting_losses();
    in_line p;
    line_up(&p, "expiring", "?session_timeout_ms=2000", "", &o);
    dlock_lock *la = p.la;
    int64_t ended = end_session_of(p.a, p.b, "expiring", p.fence);
    pthread_join(p.t, NULL);
    assert_int_equal(p.w.rc, DLOCK_OK);
    /* the waiter's watch saw a's node go with its session */
    assert_true(p.w.got_ms - ended < 1500);
    assert_true(dlock_lock_fence(p.w.l) > p.fence);
    /* a's watchdog finds the node gone: on_lost, once */
    int64_t end = test_now_ms() + 5000;
    while (atomic_load(&lost_calls) == 0 && test_now_ms() < end)
        test_sleep_ms(20);
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_int_equal(dlock_lock_state_get(la), DLOCK_STATE_LOST);
    assert_int_equal(dlock_lock_release(la), DLOCK_ELOST);
    /* a's client is on a new session, and works */
    assert_int_equal(dlock_lock_release(p.w.l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    line_free(&p);
}

/* ---- a server paused past the session timeout -------------------------------- */

/* The holder's session is 2 s; the member is paused (SIGSTOP) for 2.5
 * times that. The waiter's session (30 s) outlives the pause. */
#define PAUSE_MS 5000

/* After the resume: the waiter's acquire ends within 10 s (else the hold
 * outlived the pause: say whether a's session did). */
static void wait_for_the_waiter(in_line *p, const clientid_t *before)
{
    int64_t end = test_now_ms() + 10000;
    while (!atomic_load(&p->w.over) && test_now_ms() < end)
        test_sleep_ms(10);
    if (atomic_load(&p->w.over)) {
        pthread_join(p->t, NULL);
        return;
    }
    clientid_t now;
    dlock__zk_session_id(p->a->store, &now);
    fail_msg("the waiter was not served 10 s after the resume (the holder's session %s, "
             "%d on_lost)",
             now.client_id == before->client_id ? "survived" : "was replaced",
             atomic_load(&lost_calls));
}

/* The member is paused (SIGSTOP) for 2.5 times the holder's session
 * timeout. ZooKeeper times sessions on the monotonic clock, which a
 * SIGSTOP does not stop, and once continued its expirer ends the session
 * at once, unless a packet of the session is read first: with a's client
 * connected straight to the member, 2 runs in 15 kept the session
 * (evidently a's reconnect, queued during the pause, got there first; the
 * holder had given up, on_lost, and the waiter waited on). So a's
 * connection goes through the proxy, cut for the pause and until the
 * waiter is served: no reconnect reaches the member, and the session ends
 * within one timeout of the resume every time (2-14 ms after it, or about
 * 2 s after when what was left in the socket touched it). Meanwhile a's
 * watchdog heard nothing for the session timeout and gave the hold up:
 * on_lost ran before the waiter was served (never two holders), once. */
static void a_hold_is_lost_when_the_member_is_paused_past_its_session(void **state)
{
    (void)state;
    dlock_lock_options o = renewed_counting_losses();
    char via[64];
    snprintf(via, sizeof via, "zk://127.0.0.1:%d", proxy.port);
    in_line p;
    line_up_behind(&p, client_at(via, "?session_timeout_ms=2000"), "paused",
                   "?session_timeout_ms=30000", &o);
    clientid_t before, after;
    dlock__zk_session_id(p.a->store, &before);
    int64_t paused = test_now_ms();
    test_zk_pause(&srv);
    assert_int_equal(chaos_proxy_set(&proxy, CHAOS_PROXY_DROP, 0), 0);
    test_sleep_ms(PAUSE_MS);
    int64_t resumed = test_now_ms();
    test_zk_resume(&srv);
    wait_for_the_waiter(&p, &before);
    assert_int_equal(chaos_proxy_set(&proxy, CHAOS_PROXY_PASS, 0), 0);
    int64_t lost = atomic_load(&lost_ms);
    printf("paused %d ms: on_lost %lld ms after the pause (%lld ms from the resume), "
           "the waiter served %lld ms after the resume\n",
           PAUSE_MS, (long long)(lost - paused), (long long)(lost - resumed),
           (long long)(p.w.got_ms - resumed));
    assert_int_equal(p.w.rc, DLOCK_OK);
    assert_int_equal(p.w.holder_state, DLOCK_STATE_LOST); /* never two holders */
    assert_true(lost > 0 && lost <= p.w.got_ms);
    uint64_t waiter_fence = dlock_lock_fence(p.w.l);
    assert_true(waiter_fence > p.fence);
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_int_equal(dlock_lock_state_get(p.la), DLOCK_STATE_LOST);
    assert_int_equal(dlock_lock_release(p.la), DLOCK_ELOST);
    /* a's client is on a new session once its reconnect (the proxy lets
     * it through again) was told that the old one expired, and works */
    for (;;) {
        dlock__zk_session_id(p.a->store, &after);
        if (after.client_id != before.client_id || test_now_ms() - resumed > 10000)
            break;
        test_sleep_ms(10);
    }
    printf("the holder's client on a new session %lld ms after the resume\n",
           (long long)(test_now_ms() - resumed));
    assert_true(after.client_id != before.client_id);
    assert_int_equal(dlock_lock_release(p.w.l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p.la, 5000), DLOCK_OK);
    assert_true(dlock_lock_fence(p.la) > waiter_fence);
    assert_int_equal(dlock_lock_release(p.la), DLOCK_OK);
    assert_int_equal(atomic_load(&lost_calls), 1);
    line_free(&p);
}

/* A partition: the holder's connection goes silent (the proxy keeps its
 * connections, new ones too, and forwards nothing: BLACKHOLE, as a cut
 * network; the member runs on), so the ensemble ends its session
 * about 2 s after it last heard from it and serves the waiter. The
 * holder's hold must be over by then: its watchdog's look at the node
 * gets no answer, and the hold's lease's end (last answered look + the
 * session timeout, never later than the server's) is its verdict. Before,
 * the watchdog waited for the ZooKeeper client to fail the look, which it
 * does only as it gives the connection up, and the holder still read
 * HELD when the waiter was served (on_lost 2.6 s in). */
static void a_partitioned_holder_is_lost_before_the_waiter_is_served(void **state)
{
    (void)state;
    dlock_lock_options o = renewed_counting_losses();
    char via[64];
    snprintf(via, sizeof via, "zk://127.0.0.1:%d", proxy.port);
    in_line p;
    line_up_behind(&p, client_at(via, "?session_timeout_ms=2000"), "partitioned",
                   "?session_timeout_ms=30000", &o);
    clientid_t before;
    dlock__zk_session_id(p.a->store, &before);
    int64_t cut = test_now_ms();
    assert_int_equal(chaos_proxy_set(&proxy, CHAOS_PROXY_BLACKHOLE, 0), 0);
    wait_for_the_waiter(&p, &before);
    assert_int_equal(chaos_proxy_set(&proxy, CHAOS_PROXY_PASS, 0), 0);
    int64_t lost = atomic_load(&lost_ms);
    printf("cut off: on_lost %lld ms after the cut, the waiter served %lld ms after it\n",
           (long long)(lost - cut), (long long)(p.w.got_ms - cut));
    assert_int_equal(p.w.rc, DLOCK_OK);
    assert_int_equal(p.w.holder_state, DLOCK_STATE_LOST); /* never two holders */
    assert_true(lost > 0 && lost <= p.w.got_ms);
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_true(dlock_lock_fence(p.w.l) > p.fence);
    assert_int_equal(dlock_lock_release(p.la), DLOCK_ELOST);
    assert_int_equal(dlock_lock_release(p.w.l), DLOCK_OK);
    line_free(&p);
}

/* The waiter's own session ends while it waits: its node goes, its next
 * look finds that and it gets back in line (a node of its new session),
 * behind the holder, never past it. */
static void a_waiter_whose_session_expires_gets_back_in_line(void **state)
{
    (void)state;
    in_line p;
    line_up(&p, "requeue", "", "?session_timeout_ms=2000", NULL);
    end_session_until_new(p.b);
    test_sleep_ms(2500); /* its watch's session event, a look, back in line */
    if (atomic_load(&p.w.over)) /* still waiting: a holds */
        fail_msg("the waiter's acquire ended while a held: %s (%s)", dlock_strerror(p.w.rc),
                 dlock_lock_errmsg(p.w.l));
    assert_int_equal(dlock_lock_release(p.la), DLOCK_OK);
    pthread_join(p.t, NULL);
    assert_int_equal(p.w.rc, DLOCK_OK);
    assert_true(dlock_lock_fence(p.w.l) > p.fence);
    assert_int_equal(dlock_lock_release(p.w.l), DLOCK_OK);
    line_free(&p);
}

/* A key that is no ZooKeeper path is refused by dlock_lock_new(), for a
 * handle and for a set of names, before anything is sent. */
static void a_name_that_is_no_path_is_einval_at_new(void **state)
{
    (void)state;
    dlock_client *c = client_of("");
    static const char *const bad[] = {"a//b", "a/", "a/./b", "a/../b", "/"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        dlock_lock *l = (dlock_lock *)&l; /* not NULL: the refusal sets it so */
        if (dlock_lock_new(&l, c, bad[i], NULL) != DLOCK_EINVAL)
            fail_msg("\"%s\" was not refused", bad[i]);
        assert_null(l);
    }
    dlock_lock *ok = lock_of(c, "a/b", 0);
    dlock_lock_free(ok);
    dlock_client_free(c); /* (the other kinds: test_zk_kinds.c) */
}

int main(void)
{
    if (!test_zk_available()) {
        printf("no ZooKeeper (apt-get install zookeeper): skipped\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_urls_are_einval),
        cmocka_unit_test(a_dead_holders_lock_passes_on_when_its_session_expires),
        cmocka_unit_test(an_unreachable_member_fails_the_client_with_eio),
        cmocka_unit_test(fences_grow_and_try_once_is_refused_while_held),
        cmocka_unit_test(a_waiter_is_woken_by_the_release_not_its_recheck),
        cmocka_unit_test(a_cancelled_waiter_leaves_no_node_in_line),
        cmocka_unit_test(contenders_never_overlap_and_fences_only_grow),
        cmocka_unit_test(a_hold_is_lost_when_its_session_expires_and_the_waiter_gets_it),
        cmocka_unit_test(a_waiter_whose_session_expires_gets_back_in_line),
        cmocka_unit_test(a_hold_is_lost_when_the_member_is_paused_past_its_session),
        cmocka_unit_test(a_partitioned_holder_is_lost_before_the_waiter_is_served),
        cmocka_unit_test(a_name_that_is_no_path_is_einval_at_new),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
