/* SPDX-License-Identifier: BSD-3-Clause */
/* etcd's wait is the engine's (src/engine/acquire.c driving
 * src/etcd/etcd_wait.c): a wait in line on a real etcd member runs on a
 * loop without blocking it, the watch stream on the key before ours wakes
 * it, and a cancel ends it at once, also while a member is stopped in
 * the middle of a look. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "acquire.h"
#include "backend.h"
#include "call.h"
#include "clock.h"
#include "dlock.h"
#include "etcd_server.h"
#include "loop_ticker.h"
#include "fsm.h"
#include "etcd_client.h"
#include "etcd_hold.h"
#include "etcd_kv.h"
#include "etcd_owed.h"
#include "etcd_step.h"
#include "handle.h"
#include "proc.h"
#include "proxy.h"
#include "test_util.h"

static test_etcd srv;
static dlock_client *cl;
static atomic_int wakes_pushed;

static void on_wake(void *arg, const dlock_wakeup_event *ev)
{
    (void)arg;
    atomic_fetch_add(&wakes_pushed, ev->pushed);
}

static const dlock_observer observer = {.version = DLOCK_OBSERVER_VERSION, .wakeup = on_wake};

static int setup(void **state)
{
    (void)state;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.observer = &observer;
    o.io_timeout_ms = 1000;
    return test_etcd_setup(&srv, 1, &o, &cl);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_teardown(&srv, cl);
    return 0;
}

/* A test's own setup and teardown: the client's settler off (the
 * handle's own resend alone) for the test, on again after it whatever
 * its outcome, so that a failed assertion leaves it on for the rest. */
static int settler_off(void **state)
{
    (void)state;
    dlock__etcd_owed_off_for_tests = 1;
    return 0;
}

static int settler_on(void **state)
{
    (void)state;
    dlock__etcd_owed_off_for_tests = 0;
    return 0;
}

/* ---- a wait on a loop ------------------------------------------------------- */

/* The engine's wait on a blocking call's loop (call.h), as
 * dlock__call_acquire() runs it, with a ticker on the same loop: each
 * tick notes the longest gap since the one before. */
typedef struct driven {
    dlock__call call;
    dlock__acq acq;
    test_ticker tick;
    int64_t done_ns;
} driven;

static void acquired(dlock__acq *a)
{
    driven *d = DLOCK__OWNER(a, driven, acq);
    d->done_ns = dlock__now_ns();
    test_ticker_stop(&d->tick);
    d->call.done = 1;
}

static int wakeable(void *arg)
{
    return dlock__call_wakeable(arg);
}

static void poked(void *arg)
{
    dlock__acq_poked(arg);
}

static int64_t release_at_ns;

static void *release_later(void *arg)
{
    test_sleep_ms(600);
    release_at_ns = dlock__now_ns();
    assert_int_equal(dlock_lock_release(arg), DLOCK_OK);
    return NULL;
}

static void a_wait_in_line_leaves_its_loop_free_and_the_watch_wakes_it(void **state)
{
    (void)state;
    dlock_lock *holder = test_lock_new(cl, "wait-loop", 30000, 0, 10, 50);
    dlock_lock *l = test_lock_new(cl, "wait-loop", 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    /* The engine's wait needs the backend's requests: etcd waited inside
     * a blocking acquire of its own before (no begin, no try). */
    assert_non_null(l->backend->begin);
    assert_non_null(l->backend->try);
    atomic_store(&wakes_pushed, 0);

    const int64_t wait_ms = 5000;
    driven *d = test_calloc(1, sizeof *d);
    dlock__call_init(&d->call);
    l->try_once = 0;
    (void)dlock__lock_open_cancel(l, wait_ms);
    dlock__acq_init(&d->acq, l, wait_ms, dlock__deadline_after_ms(wait_ms), &d->call.lp.loop,
                    acquired);
    d->acq.hooks.wakeable = wakeable;
    d->acq.hooks.wake = dlock__call_poke;
    d->acq.hooks.wake_arg = &d->call;
    d->call.on_poke = poked;
    d->call.poke_arg = &d->acq;
    test_ticker_start(&d->tick, &d->call.lp.loop);

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, holder), 0);
    int64_t t0 = dlock__now_ns();
    dlock__acq_start(&d->acq);
    /* the start only starts: the wait's first request runs from the loop */
    assert_true(dlock__now_ns() - t0 < 50 * DLOCK__NS_PER_MS);
    dlock__call_run(&d->call);
    pthread_join(t, NULL);
    dlock__call_close(&d->call);
    dlock__lock_close_cancel(l, wait_ms);

    print_message("ticks %d, longest gap %lld ms, grant %lld ms after the release\n", d->tick.ticks,
                  (long long)(d->tick.max_gap_ns / DLOCK__NS_PER_MS),
                  (long long)((d->done_ns - release_at_ns) / DLOCK__NS_PER_MS));
    assert_int_equal(d->acq.rc, DLOCK_OK);
    /* The loop turned all along: ticks every 20 ms, none held up by a
     * request or the watch (a blocking wait would hold it the 600 ms). */
    assert_true(d->tick.ticks >= 20);
    assert_true(d->tick.max_gap_ns < 150 * DLOCK__NS_PER_MS);
    /* Woken by the watch on the key before ours: well before the next
     * look (2 s after the one before), and the observer saw a push. */
    assert_true(d->done_ns - release_at_ns < 500 * DLOCK__NS_PER_MS);
    assert_int_equal(atomic_load(&wakes_pushed), 1);
    assert_true(l->fence > 0);

    /* what dlock__engine_acquire does with a grant, then let it go */
    dlock__fsm_fire(l, DLOCK__EV_GRANTED, l->granted_until_ns);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    test_free(d);
    dlock_lock_free(l);
    dlock_lock_free(holder);
}

/* ---- a cancel while a member is stopped -------------------------------------- */

typedef struct waiter {
    dlock_lock *l;
    int64_t wait_ms; /* 0: 20 s */
    int rc;
    int64_t end_ns;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, w->wait_ms ? w->wait_ms : 20000);
    w->end_ns = dlock__now_ns();
    return NULL;
}

static void a_cancel_ends_a_wait_whose_member_stopped_at_once(void **state)
{
    (void)state;
    dlock_lock *holder = test_lock_new(cl, "wait-stopped", 30000, 0, 10, 50);
    /* the waiter's lease short: a leave that could not reach the stopped
     * member leaves its key in line until the lease's TTL */
    waiter w = {.l = test_lock_new(cl, "wait-stopped", 2000, 0, 10, 50)};
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    test_sleep_ms(400); /* in line, watching */
    test_etcd_pause(&srv, 0);
    /* The next look (2 s after the last) hangs on the stopped member. */
    test_sleep_ms(2500);
    int64_t cancel_ns = dlock__now_ns();
    dlock_lock_cancel(w.l);
    pthread_join(t, NULL);
    test_etcd_resume(&srv, 0);
    print_message("the wait ended %lld ms after the cancel\n",
                  (long long)((w.end_ns - cancel_ns) / DLOCK__NS_PER_MS));
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    assert_non_null(strstr(dlock_lock_errmsg(w.l), "cancelled while waiting"));
    /* the leave's revoke gets 100 ms (DLOCK__CANCEL_LEAVE_MS) */
    assert_true(w.end_ns - cancel_ns < 400 * DLOCK__NS_PER_MS);
    /* The handle waits again as before: a try-once meets the holder; a
     * wait gets the lock once the holder left (and the cancelled wait's
     * key, should its revoke have missed, lapsed). */
    assert_int_equal(dlock_lock_acquire(w.l, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w.l, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
}

/* ---- a long wait, and a waiter whose lease ended ----------------------------- */

/* The waiter keeps its own lease alive from its looks: a wait three times
 * its TTL long still ends with the lock once the holder lets go. */
static void a_wait_longer_than_three_ttls_keeps_its_place(void **state)
{
    (void)state;
    dlock_lock *holder = test_lock_new(cl, "wait-long", 30000, 0, 10, 50);
    waiter w = {.l = test_lock_new(cl, "wait-long", 2000, 0, 10, 50)};
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    test_sleep_ms(7000); /* > 3 x the waiter's 2 s lease */
    int64_t release_ns = dlock__now_ns();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    /* through the watch, not a look 2 s later */
    assert_true(w.end_ns - release_ns < 1000 * DLOCK__NS_PER_MS);
    assert_true(w.l->fence > holder->fence);
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
}

/* The one lease etcd has that is not holder_lease, read from etcd: the
 * waiter's handle is its wait thread's while it waits. */
static int64_t other_lease(dlock__etcd *e, int64_t holder_lease)
{
    json_t *rep = NULL;
    json_t *req = json_object();
    assert_int_equal(dlock__etcd_post(e, "/v3/lease/leases", req, &rep,
                                      dlock__deadline_after_ms(2000), -1, NULL, NULL, NULL),
                     DLOCK_OK);
    json_decref(req);
    int64_t found = 0;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(rep, "leases"), i, v) {
        int64_t id;
        if (dlock__etcd_json_i64(v, "ID", &id) == 0 && id != holder_lease) {
            assert_int_equal(found, 0);
            found = id;
        }
    }
    json_decref(rep);
    assert_int_not_equal(found, 0);
    return found;
}

/* Our lease revoked under us while we wait (a pause longer than the TTL
 * does the same): the wait gets in line again and gets the lock. */
static void a_waiter_whose_lease_ended_gets_in_line_again(void **state)
{
    (void)state;
    dlock_lock *holder = test_lock_new(cl, "wait-expired", 30000, 0, 10, 50);
    waiter w = {.l = test_lock_new(cl, "wait-expired", 5000, 0, 10, 50)};
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    test_sleep_ms(500); /* in line */
    dlock__etcd *e = DLOCK__ETCD_LD(holder)->ec->e;
    int64_t lease = other_lease(e, DLOCK__ETCD_LD(holder)->sh->h.lease);
    assert_int_equal(dlock__etcd_lease_revoke(e, lease,
                                              dlock__deadline_after_ms(2000), -1, NULL, NULL),
                     DLOCK_OK);
    test_sleep_ms(2500); /* the next look (2 s) finds our key gone */
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_int_not_equal(DLOCK__ETCD_LD(w.l)->sh->h.lease, lease);
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    /* nothing left in line: a try-once gets it at once */
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
}

/* ---- a watch stream cut ------------------------------------------------------ */

/* A client of its own through a proxy in front of the member (started
 * here, in delay_ms's DELAY mode when not 0). */
static dlock_client *proxied_client(chaos_proxy *px, int delay_ms, int io_timeout_ms)
{
    assert_int_equal(chaos_proxy_start(px, srv.m[0].client_port), 0);
    if (delay_ms)
        assert_int_equal(chaos_proxy_set(px, CHAOS_PROXY_DELAY, delay_ms), 0);
    char url[100];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d", px->port);
    const char *up = url;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.io_timeout_ms = io_timeout_ms;
    dlock_client *pc;
    assert_int_equal(dlock_client_new(&pc, &up, 1, &o, NULL, 0), DLOCK_OK);
    return pc;
}

/* A holder on the test's client and a waiter on a proxied client of its
 * own, waiting for the holder's name in a thread. */
typedef struct proxied {
    chaos_proxy px;
    dlock_client *pc;
    dlock_lock *holder;
    waiter w;
    pthread_t t;
} proxied;

static void proxied_wait_start(proxied *p, int delay_ms, int io_timeout_ms, const char *name)
{
    p->pc = proxied_client(&p->px, delay_ms, io_timeout_ms);
    p->holder = test_lock_new(cl, name, 30000, 0, 10, 50);
    p->w = (waiter){.l = test_lock_new(p->pc, name, 30000, 0, 10, 50)};
    assert_int_equal(dlock_lock_acquire(p->holder, 0), DLOCK_OK);
    assert_int_equal(pthread_create(&p->t, NULL, wait_thread, &p->w), 0);
}

/* The holder lets go now: the waiter gets the lock within bound_ms (a
 * bound far from what each test expects), lets it go, and all is freed. */
static void proxied_release_and_grant(proxied *p, int64_t bound_ms)
{
    int64_t release_ns = dlock__now_ns();
    assert_int_equal(dlock_lock_release(p->holder), DLOCK_OK);
    pthread_join(p->t, NULL);
    print_message("granted %lld ms after the release\n",
                  (long long)((p->w.end_ns - release_ns) / DLOCK__NS_PER_MS));
    assert_int_equal(p->w.rc, DLOCK_OK);
    assert_true(p->w.end_ns - release_ns < bound_ms * DLOCK__NS_PER_MS);
    assert_true(p->w.l->fence > p->holder->fence);
    assert_int_equal(chaos_proxy_set(&p->px, CHAOS_PROXY_PASS, 0), 0);
    assert_int_equal(dlock_lock_release(p->w.l), DLOCK_OK);
    dlock_lock_free(p->w.l);
    dlock_lock_free(p->holder);
    dlock_client_free(p->pc);
    chaos_proxy_stop(&p->px);
}

/* The stream on the key before ours breaks (the connection reset; the
 * member itself fine) and the holder lets go right after: the waiter
 * looks again at once, not at its next recheck 2 s later, as the old
 * blocking wait did (a failed stream: a backoff, then a look). */
static void a_waiter_whose_watch_broke_looks_again_at_once(void **state)
{
    (void)state;
    proxied p;
    proxied_wait_start(&p, 0, 1000, "wait-cut");
    test_sleep_ms(300); /* in line, watching; the next look 2 s after the last */
    assert_int_equal(chaos_proxy_set(&p.px, CHAOS_PROXY_RESET, 0), 0);
    test_sleep_ms(50);
    assert_int_equal(chaos_proxy_set(&p.px, CHAOS_PROXY_PASS, 0), 0);
    proxied_release_and_grant(&p, 800);
}

/* ---- a release between the read and the watch's start ------------------------ */

static size_t waiters_of(const char *name);

/* The watch on the key before ours starts at the member's revision (etcd
 * 3.4 catches up one that starts in the past only every 100 ms, issue 38),
 * so a release between the waiter's read of that key and its stream's
 * start is not in the stream: the stream's "created" revision, later than
 * the read's, makes the waiter read once more, and that read finds the
 * lock free. The waiter talks through a proxy that holds every chunk
 * 250 ms, so its steps are 500 ms round trips at the member: after its
 * key appears (the create transaction), the holder's TTL read at +500 ms,
 * the read of the key before ours at +1000 ms and the watch's start at
 * +1500 ms; the holder lets go at +1250 ms. Granted about 1 s after the
 * release through the re-read; without it (a stream that says nothing of
 * the store moving on) the next look, 2 s after the last, about 2.5 s
 * after. (Before the start at the member's revision, the stream caught up
 * and delivered the deletion: this shows the re-read, not the start.) */
static void a_release_before_the_watch_starts_is_seen_by_a_read_at_its_start(void **state)
{
    (void)state;
    proxied p;
    proxied_wait_start(&p, 250, 3000, "wait-moved");
    int64_t in_line_ns = 0;
    for (int i = 0; i < 1000 && !in_line_ns; i++) {
        if (waiters_of("wait-moved") == 1)
            in_line_ns = dlock__now_ns();
        else
            test_sleep_ms(5);
    }
    assert_true(in_line_ns > 0);
    test_sleep_ms((int)(1250 - (dlock__now_ns() - in_line_ns) / DLOCK__NS_PER_MS));
    proxied_release_and_grant(&p, 1800);
}

/* ---- the only key before ours goes -------------------------------------------- */

/* Wait (up to 5 s) until name's line has n keys behind its holder. */
static void until_waiters(const char *name, size_t n)
{
    for (int i = 0; i < 1000 && waiters_of(name) != n; i++)
        test_sleep_ms(5);
    assert_int_equal(waiters_of(name), n);
}

/* A waiter whose only key before its own is the holder's takes the lock
 * on that key's DELETE event, without reading the line again: through a
 * proxy holding every chunk 250 ms, the event reaches it 250 ms after the
 * release and a read would cost 500 ms more. Granted about 250 ms after
 * the release (it was about 750 ms with the read). */
static void the_only_key_before_ours_going_grants_without_a_read(void **state)
{
    (void)state;
    proxied p;
    proxied_wait_start(&p, 250, 3000, "wait-only");
    until_waiters("wait-only", 1);
    test_sleep_ms(1800); /* its TTL read, its read of the line, its watch: 1.25 s */
    proxied_release_and_grant(&p, 600);
}

/* Two keys before ours (the holder's, then a waiter's): the waiter just
 * before ours leaves (cancelled), and ours is not first: the lock stays
 * the holder's until it lets go. (Counting the keys before ours by what
 * the read returned, at most one, would have taken it.) */
static void a_waiter_before_ours_leaving_is_not_the_holder_going(void **state)
{
    (void)state;
    dlock_lock *holder = test_lock_new(cl, "wait-two", 30000, 0, 10, 50);
    waiter a = {.l = test_lock_new(cl, "wait-two", 30000, 0, 10, 50)};
    waiter b = {.l = test_lock_new(cl, "wait-two", 30000, 0, 10, 50)};
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, wait_thread, &a), 0);
    until_waiters("wait-two", 1);
    assert_int_equal(pthread_create(&tb, NULL, wait_thread, &b), 0);
    until_waiters("wait-two", 2);
    test_sleep_ms(300); /* b watches a's key */
    dlock_lock_cancel(a.l);
    pthread_join(ta, NULL);
    assert_int_equal(a.rc, DLOCK_ECANCELED);
    test_sleep_ms(500);
    assert_int_equal(b.end_ns, 0); /* still waiting */
    assert_int_equal(waiters_of("wait-two"), 1);
    int64_t release_ns = dlock__now_ns();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    pthread_join(tb, NULL);
    assert_int_equal(b.rc, DLOCK_OK);
    assert_true(b.end_ns >= release_ns);
    assert_int_equal(dlock_lock_release(b.l), DLOCK_OK);
    dlock_lock_free(a.l);
    dlock_lock_free(b.l);
    dlock_lock_free(holder);
}

/* ---- the holder's TTL ------------------------------------------------------------ */

/* dlock_lock_holder_ttl_ms() tells of this acquire's place in line: one
 * that could not get in line (the member stopped) knows no holder TTL,
 * not the one an earlier acquire read (the blocking wait set -1). */
static void an_acquire_that_could_not_get_in_line_knows_no_holder_ttl(void **state)
{
    (void)state;
    dlock_lock *holder = test_lock_new(cl, "wait-ttl", 30000, 0, 10, 50);
    dlock_lock *l = test_lock_new(cl, "wait-ttl", 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED);
    assert_true(dlock_lock_holder_ttl_ms(l) > 0);
    test_etcd_pause(&srv, 0);
    int rc = dlock_lock_acquire(l, 0); /* the grant gets no answer */
    test_etcd_resume(&srv, 0);
    assert_int_not_equal(rc, DLOCK_OK);
    assert_int_not_equal(rc, DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_holder_ttl_ms(l), -1);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(holder);
}

/* ---- a member stopped during the wait ------------------------------------------ */

/* The member stops for 3 s during the wait (its looks fail, the watch is
 * silent) and comes back: the waiter is still in line and gets the lock
 * through the watch when the holder lets go. */
static void a_wait_rides_out_a_stopped_member(void **state)
{
    (void)state;
    dlock_lock *holder = test_lock_new(cl, "wait-sigstop", 30000, 0, 10, 50);
    waiter w = {.l = test_lock_new(cl, "wait-sigstop", 5000, 0, 10, 50)};
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    test_sleep_ms(300);
    test_etcd_pause(&srv, 0);
    test_sleep_ms(3000);
    test_etcd_resume(&srv, 0);
    test_sleep_ms(1500); /* a look after the member came back watches again */
    int64_t release_ns = dlock__now_ns();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    pthread_join(t, NULL);
    print_message("granted %lld ms after the release\n",
                  (long long)((w.end_ns - release_ns) / DLOCK__NS_PER_MS));
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.end_ns - release_ns < 800 * DLOCK__NS_PER_MS);
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
}

/* ---- the wait's deadline with a member stopped mid-look ----------------------- */

/* A 1.5 s wait in line behind a holder whose member stops 800 ms in (a
 * 2 s lease: a look, its keep-alive, every 667 ms, which then hangs); with
 * cancel_at_ms, the wait is cancelled that long after its start
 * (*cancel_ns: when). Returns when the wait began; the member runs again. */
static int64_t wait_through_a_stop(const char *name, waiter *w, dlock_lock **holder,
                                   int cancel_at_ms, int64_t *cancel_ns)
{
    *holder = test_lock_new(cl, name, 30000, 0, 10, 50);
    *w = (waiter){.l = test_lock_new(cl, name, 2000, 0, 10, 50), .wait_ms = 1500};
    assert_int_equal(dlock_lock_acquire(*holder, 0), DLOCK_OK);
    pthread_t t;
    int64_t t0 = dlock__now_ns();
    assert_int_equal(pthread_create(&t, NULL, wait_thread, w), 0);
    test_sleep_ms(800);
    test_etcd_pause(&srv, 0);
    if (cancel_at_ms > 0) {
        test_sleep_ms((int)(cancel_at_ms - (dlock__now_ns() - t0) / DLOCK__NS_PER_MS));
        *cancel_ns = dlock__now_ns();
        dlock_lock_cancel(w->l);
    }
    pthread_join(t, NULL);
    test_etcd_resume(&srv, 0);
    return t0;
}

/* A look that hangs on a stopped member ends at the wait's deadline, as
 * the blocking wait's did: the wait gives up one leave (an I/O timeout,
 * 1 s here) past its 1.5 s, not a look's I/O timeout more. */
static void a_look_on_a_stopped_member_ends_at_the_deadline(void **state)
{
    (void)state;
    waiter w;
    dlock_lock *holder;
    int64_t t0 = wait_through_a_stop("wait-deadline", &w, &holder, 0, NULL);
    print_message("gave up after %lld ms\n", (long long)((w.end_ns - t0) / DLOCK__NS_PER_MS));
    assert_int_equal(w.rc, DLOCK_ETIMEDOUT);
    assert_non_null(strstr(dlock_lock_errmsg(w.l), "gave up after 1500 ms"));
    assert_true(w.end_ns - t0 < 2800 * DLOCK__NS_PER_MS);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
}

/* A cancel during the leave that the deadline started ends it as a cancel
 * during the wait does: the revoke then gets 100 ms (DLOCK__CANCEL_LEAVE_MS),
 * not the rest of its I/O timeout (1 s here) on the stopped member. The
 * acquire's code stands (the deadline came first) and the cancel is used
 * up by it. */
static void a_cancel_cuts_the_leave_at_the_deadline(void **state)
{
    (void)state;
    waiter w;
    dlock_lock *holder;
    int64_t cancel_ns = 0;
    /* The look hangs until the deadline (1.5 s), then the leave's revoke
     * would until 2.5 s. */
    int64_t t0 = wait_through_a_stop("wait-deadline-cancel", &w, &holder, 1700, &cancel_ns);
    print_message("gave up after %lld ms, %lld ms after the cancel\n",
                  (long long)((w.end_ns - t0) / DLOCK__NS_PER_MS),
                  (long long)((w.end_ns - cancel_ns) / DLOCK__NS_PER_MS));
    assert_int_equal(w.rc, DLOCK_ETIMEDOUT);
    assert_true(w.end_ns - cancel_ns < 300 * DLOCK__NS_PER_MS);
    /* used up: the next wait is not cancelled by it */
    assert_int_equal(dlock_lock_acquire(w.l, 200), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
}

/* ---- a cancel's leave cut off ----------------------------------------------- */

static int count_waiters(void *arg, const dlock_list_entry *e)
{
    *(size_t *)arg = e->waiters;
    return 0;
}

/* The keys in the line of name behind its holder's. */
static size_t waiters_of(const char *name)
{
    size_t n = 0;
    assert_int_equal(dlock_client_list(cl, name, count_waiters, &n), DLOCK_OK);
    return n;
}

/* A cancel's leave cut off by a stopped member (its revoke gets 100 ms),
 * without the client's settler (etcd_owed.h; as when it is out of
 * memory): the member may still apply the revoke when it runs again (it
 * had the request; seen under load), else nothing takes the waiter's key
 * out of line: nothing renews its lease after the cancel, and etcd
 * deletes the key when the lease ends, one TTL (5 s here) after its last
 * keep-alive. Until then the key is the first in line once the holder
 * lets go: status reports it (its create revision the fence) and the
 * next waiter waits for it, as docs/backends.md says; nobody holds the
 * lock meanwhile. Either way the next waiter has the lock within one
 * TTL. */
/* A wait of a new handle on name (TTL 5 s), in line behind a holder, then
 * cancelled while the member is stopped (its revoke cut off), the member
 * resumed: the handle, its wait answered DLOCK_ECANCELED; *cancel_ns when
 * the cancel came. */
static dlock_lock *cut_once(const char *name, int64_t *cancel_ns)
{
    waiter w = {.l = test_lock_new(cl, name, 5000, 0, 10, 50), .wait_ms = 10000};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    /* in line (its key behind the holder's), then watching */
    for (int i = 0; i < 200 && waiters_of(name) < 1; i++)
        test_sleep_ms(10);
    assert_int_equal(waiters_of(name), 1);
    test_sleep_ms(200);
    test_etcd_pause(&srv, 0);
    test_sleep_ms(400);
    *cancel_ns = dlock__now_ns();
    dlock_lock_cancel(w.l);
    pthread_join(t, NULL);
    test_etcd_resume(&srv, 0);
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    return w.l;
}

static void a_cut_leave_leaves_the_key_in_line_until_its_lease_ends_at_most(void **state)
{
    (void)state;
    const char *name = "wait-cut-leave";
    dlock_lock *holder = test_lock_new(cl, name, 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    int64_t cancel_ns;
    dlock_lock *cut = cut_once(name, &cancel_ns);
    uint64_t held_fence = dlock_lock_fence(holder);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    int64_t released_ns = dlock__now_ns();
    dlock_node_status node;
    assert_int_equal(dlock_client_status(cl, name, 1, &node, NULL), DLOCK_OK);
    print_message("after the holder's release (%lld ms after the cancel): held %d, fence %llu "
                  "(the holder's %llu)\n",
                  (long long)((released_ns - cancel_ns) / DLOCK__NS_PER_MS), node.held,
                  (unsigned long long)node.fence, (unsigned long long)held_fence);
    if (node.held) /* the cancelled waiter's key */
        assert_true(node.fence > held_fence);
    dlock_lock *next = test_lock_new(cl, name, 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(next, 10000), DLOCK_OK);
    int64_t got_ns = dlock__now_ns();
    print_message("the next waiter got the lock %lld ms after the cancel\n",
                  (long long)((got_ns - cancel_ns) / DLOCK__NS_PER_MS));
    assert_true(dlock_lock_fence(next) > (node.held ? node.fence : held_fence));
    if (node.held) {
        /* the key lapsed with its lease: one TTL after its last
         * keep-alive (a third of the TTL before the cancel at most), and
         * etcd's expiry check (every 0.5 s) */
        assert_true(got_ns - cancel_ns > 2500 * DLOCK__NS_PER_MS);
        assert_true(got_ns - cancel_ns < 6500 * DLOCK__NS_PER_MS);
    } else {
        assert_true(got_ns - released_ns < 1000 * DLOCK__NS_PER_MS); /* the revoke ran late */
    }
    assert_int_equal(dlock_lock_release(next), DLOCK_OK);
    dlock_lock_free(next);
    dlock_lock_free(cut);
    dlock_lock_free(holder);
}

/* With the settler, a leave the member never got is sent again in the
 * background (0.1 s after it failed, then backing off to 1 s) once the
 * member is back: the next waiter has the lock soon after the holder
 * lets go, not one TTL (5 s) after the member's restart, which renews
 * every lease by its TTL. The member is killed (kill -9) and started
 * again, not stopped: a stopped member applies a revoke queued on its
 * socket when it runs again, which settles the leave without the settler
 * in some runs. */
static void a_cut_leave_is_sent_again_once_the_member_is_back(void **state)
{
    (void)state;
    const char *name = "wait-cut-settled";
    dlock_lock *holder = test_lock_new(cl, name, 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    waiter w = {.l = test_lock_new(cl, name, 5000, 0, 10, 50), .wait_ms = 10000};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    for (int i = 0; i < 200 && waiters_of(name) < 1; i++) /* in line, then watching */
        test_sleep_ms(10);
    assert_int_equal(waiters_of(name), 1);
    test_sleep_ms(200);
    test_etcd_kill9(&srv, 0);
    dlock_lock_cancel(w.l); /* its leave finds no member */
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    assert_int_equal(test_etcd_restart(&srv, 0), 0);
    int64_t back_ns = dlock__now_ns();
    /* Over gRPC the holder's release, the first call after the restart,
     * was once DLOCK_EUNKNOWN (CI, under ASan): it may leave while the
     * channel still holds its dead connection. The settler sends it again
     * then, so the waiter's bound below holds either way; over the
     * gateway it must be OK. */
    int rrc = dlock_lock_release(holder);
    const char *transport = getenv("DLOCK_ETCD_TRANSPORT");
    if (transport && strcmp(transport, "grpc") == 0)
        assert_true(rrc == DLOCK_OK || rrc == DLOCK_EUNKNOWN);
    else
        assert_int_equal(rrc, DLOCK_OK);
    dlock_lock *next = test_lock_new(cl, name, 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(next, 10000), DLOCK_OK);
    int64_t got_ns = dlock__now_ns();
    print_message("with the settler, the next waiter got the lock %lld ms after the member "
                  "was back\n",
                  (long long)((got_ns - back_ns) / DLOCK__NS_PER_MS));
    /* the settler's next resend at most 1 s after the restart; without
     * it the waiter's lease, renewed by the restart, lasts 5 s */
    assert_true(got_ns - back_ns < 2500 * DLOCK__NS_PER_MS);
    assert_int_equal(dlock_lock_release(next), DLOCK_OK);
    dlock_lock_free(next);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
}

/* A release that etcd applied but whose answer was lost (a proxy that
 * forwards requests and drops replies: DLOCK_EUNKNOWN) is owed; its
 * resend finds the lease gone ("not found"). The hold was valid when the
 * first copy went, so that copy was our clean release, and the settler
 * revokes the lock-delay companion too: the next waiter with a delay has
 * the lock within the settler's backoff, not after the companion's TTL
 * (the hold's 3 s and the delay's 5 s) as if the holder had died. */
static void an_owed_release_answered_not_found_frees_its_lock_delay(void **state)
{
    (void)state;
    enum { TTL_MS = 3000, DELAY_MS = 5000 };
    const char *name = "wait-owed-delay";
    chaos_proxy px;
    dlock_client *pc = proxied_client(&px, 0, 300);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = TTL_MS;
    o.lock_delay_ms = DELAY_MS;
    o.retry_max_ms = 50;
    dlock_lock *holder = test_lock_with(pc, name, &o);
    dlock_lock *next = test_lock_with(cl, name, &o);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    assert_int_equal(chaos_proxy_set(&px, CHAOS_PROXY_DEAF, 0), 0);
    int rc = dlock_lock_release(holder); /* applied, its answer lost */
    assert_int_equal(rc, DLOCK_EUNKNOWN);
    test_sleep_ms(300); /* a resend or two lost too */
    assert_int_equal(chaos_proxy_set(&px, CHAOS_PROXY_PASS, 0), 0);
    int64_t back_ns = dlock__now_ns();
    assert_int_equal(dlock_lock_acquire(next, 3 * (TTL_MS + DELAY_MS)), DLOCK_OK);
    int64_t took_ms = (dlock__now_ns() - back_ns) / DLOCK__NS_PER_MS;
    print_message("the next waiter (lock-delay %d ms) got the lock %lld ms after the "
                  "replies came through again\n",
                  (int)DELAY_MS, (long long)took_ms);
    /* the settler's backoff is 1 s at most by then; the companion's
     * TTL would be about 8 s */
    assert_true(took_ms < 2500);
    assert_int_equal(dlock_lock_release(next), DLOCK_OK);
    dlock_lock_free(next);
    dlock_lock_free(holder);
    dlock_client_free(pc);
    chaos_proxy_stop(&px);
}

/* ---- a cut leave's revoke, owed and sent again -------------------------------- */

/* cut_once(), until the handle's key outlived the resume by 300 ms (the
 * member did not apply the cut revoke late by itself, which it may: then
 * another round): the handle, or NULL after five rounds. */
static dlock_lock *cut_a_wait(const char *name)
{
    for (int round = 0; round < 5; round++) {
        int64_t cancel_ns;
        dlock_lock *l = cut_once(name, &cancel_ns);
        test_sleep_ms(300);
        if (waiters_of(name) == 1)
            return l;
        print_message("round %d: the member applied the cut revoke itself\n", round);
        dlock_lock_free(l);
    }
    return NULL;
}

/* A holder of name, and a handle whose cut leave outlived the resume
 * (cut_a_wait); the test is skipped if no round left one. */
static dlock_lock *held_and_cut(const char *name, dlock_lock **holder)
{
    *holder = test_lock_new(cl, name, 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(*holder, 0), DLOCK_OK);
    dlock_lock *l = cut_a_wait(name);
    if (!l) {
        dlock_lock_free(*holder);
        skip();
    }
    return l;
}

/* Nothing of the cancelled wait is left in line: once the holder lets
 * go, the next waiter has the lock at once, not one TTL (5 s) later. */
static void nothing_left_in_line(const char *name, dlock_lock *holder)
{
    assert_int_equal(waiters_of(name), 0);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    dlock_lock *next = test_lock_new(cl, name, 30000, 0, 10, 50);
    int64_t t0 = dlock__now_ns();
    assert_int_equal(dlock_lock_acquire(next, 0), DLOCK_OK); /* not held up */
    print_message("the next waiter got it in %lld ms\n",
                  (long long)((dlock__now_ns() - t0) / DLOCK__NS_PER_MS));
    assert_int_equal(dlock_lock_release(next), DLOCK_OK);
    dlock_lock_free(next);
    dlock_lock_free(holder);
}

/* The handle's next acquire (here a try-once, refused: the lock is held)
 * sends the cut revoke again before it gets in line: the cancelled
 * waiter's key is gone right after it (the try's own key too). */
static void the_next_acquire_revokes_what_a_cut_leave_left(void **state)
{
    (void)state;
    const char *name = "wait-owed-acquire";
    dlock_lock *holder;
    dlock_lock *l = held_and_cut(name, &holder);
    int64_t t0 = dlock__now_ns();
    assert_int_not_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    print_message("the try-once took %lld ms\n",
                  (long long)((dlock__now_ns() - t0) / DLOCK__NS_PER_MS));
    nothing_left_in_line(name, holder);
    dlock_lock_free(l);
}

/* So does the handle's free. */
static void the_free_revokes_what_a_cut_leave_left(void **state)
{
    (void)state;
    const char *name = "wait-owed-free";
    dlock_lock *holder;
    dlock_lock_free(held_and_cut(name, &holder));
    nothing_left_in_line(name, holder);
}

/* ---- a count left in the handle's wake eventfd -------------------------------- */

static int64_t thread_cpu_ms(void)
{
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_THREAD, &ru), 0);
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* The handle's eventfd is lent to each wait's loop (call.c) and not
 * drained first: a count a late wake left in it (here written by hand)
 * costs the next wait one turn, which drains it. The wait neither ends
 * before its deadline without the lock, nor counts it as a wake-up, nor
 * spins (its thread's CPU time stays far below the wait). */
static void a_count_left_in_the_wake_fd_does_not_end_the_next_wait(void **state)
{
    (void)state;
    dlock_lock *holder = test_lock_new(cl, "wait-wakefd", 30000, 0, 10, 50);
    dlock_lock *w = test_lock_new(cl, "wait-wakefd", 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    int fd = dlock__lock_wake_fd(w);
    assert_true(fd >= 0);
    uint64_t left = 3;
    assert_int_equal(write(fd, &left, sizeof left), (ssize_t)sizeof left);
    int pushed = atomic_load(&wakes_pushed);
    int64_t cpu0 = thread_cpu_ms(), t0 = dlock__now_ns();
    assert_int_equal(dlock_lock_acquire(w, 600), DLOCK_ETIMEDOUT);
    int64_t took_ms = (dlock__now_ns() - t0) / DLOCK__NS_PER_MS, cpu_ms = thread_cpu_ms() - cpu0;
    print_message("waited %lld ms, %lld ms of CPU\n", (long long)took_ms, (long long)cpu_ms);
    assert_true(took_ms >= 590);
    assert_true(cpu_ms < 200);
    assert_int_equal(atomic_load(&wakes_pushed), pushed);
    uint64_t count;
    assert_int_equal(read(fd, &count, sizeof count), -1); /* drained by that turn */
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    dlock_lock_free(w);
    dlock_lock_free(holder);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_wait_in_line_leaves_its_loop_free_and_the_watch_wakes_it),
        cmocka_unit_test(a_cancel_ends_a_wait_whose_member_stopped_at_once),
        cmocka_unit_test(a_wait_longer_than_three_ttls_keeps_its_place),
        cmocka_unit_test(a_waiter_whose_lease_ended_gets_in_line_again),
        cmocka_unit_test(a_waiter_whose_watch_broke_looks_again_at_once),
        cmocka_unit_test(a_release_before_the_watch_starts_is_seen_by_a_read_at_its_start),
        cmocka_unit_test(the_only_key_before_ours_going_grants_without_a_read),
        cmocka_unit_test(a_waiter_before_ours_leaving_is_not_the_holder_going),
        cmocka_unit_test(an_acquire_that_could_not_get_in_line_knows_no_holder_ttl),
        cmocka_unit_test(a_wait_rides_out_a_stopped_member),
        cmocka_unit_test(a_look_on_a_stopped_member_ends_at_the_deadline),
        cmocka_unit_test(a_cancel_cuts_the_leave_at_the_deadline),
        cmocka_unit_test_setup_teardown(
            a_cut_leave_leaves_the_key_in_line_until_its_lease_ends_at_most, settler_off,
            settler_on),
        cmocka_unit_test_setup_teardown(a_cut_leave_is_sent_again_once_the_member_is_back,
                                        settler_on, settler_on),
        cmocka_unit_test_setup_teardown(an_owed_release_answered_not_found_frees_its_lock_delay,
                                        settler_on, settler_on),
        cmocka_unit_test_setup_teardown(the_next_acquire_revokes_what_a_cut_leave_left,
                                        settler_off, settler_on),
        cmocka_unit_test_setup_teardown(the_free_revokes_what_a_cut_leave_left, settler_off,
                                        settler_on),
        cmocka_unit_test(a_count_left_in_the_wake_fd_does_not_end_the_next_wait),
    };
    if (getenv("DLOCK_TEST_ONLY")) /* local runs of one test */
        cmocka_set_test_filter(getenv("DLOCK_TEST_ONLY"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
