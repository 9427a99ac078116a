/* SPDX-License-Identifier: BSD-3-Clause */
/* Fair mode when a node runs a waiter's commands but its answers are lost
 * (the chaos suite's fault proxy in DEAF mode in front of the waiter's
 * node). A waiter that gives up at its deadline leaves the line; a leave
 * that goes unanswered may still have run and confirmed a hand-over the
 * line made to the waiter meanwhile (fair_leave.lua), which gives the lock
 * the whole TTL. The release by the waiter's token is queued behind the
 * leave, as after a cancel (src/redis/fair.c), so the node lets the lock
 * go right after the leave, rather than at the TTL or at the handle's
 * next acquire or free.
 *
 * And under contention: waiters whose short waits end at their deadline
 * and leave the line, while the node is stopped (SIGSTOP) and continued
 * again and again, keep the lock exclusive and let every long wait get
 * it. (Fair mode is one node only: DLOCK_ENOTSUP on a Redlock.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlock.h"
#include "history.h"
#include "proc.h"
#include "proxy.h"
#include "redis_server.h"
#include "test_util.h"

#define TIMEOUT_MS 300
#define WAIT_MS 600

static test_redis node;
static chaos_proxy proxy; /* in front of node, for the waiter */

static int setup(void **state)
{
    (void)state;
    if (test_redis_start(&node, NULL) != 0)
        return -1;
    if (chaos_proxy_start(&proxy, node.port) != 0) {
        test_redis_stop(&node);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    chaos_proxy_stop(&proxy);
    test_redis_stop(&node);
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The holder's side, while the waiter waits: the waiter stops hearing its
 * node (its hand-over message too), then the holder (not behind the
 * proxy) releases, which hands the lock to the waiter in line. */
typedef struct hand_over {
    dlock_lock *holder;
    int set_rc, release_rc;
} hand_over;

static void *slow_then_release(void *arg)
{
    hand_over *h = arg;
    sleep_ms(200); /* the waiter's first look is in line */
    h->set_rc = chaos_proxy_set(&proxy, CHAOS_PROXY_DEAF, 0);
    h->release_rc = dlock_lock_release(h->holder);
    return NULL;
}

static void a_deadline_leave_left_unanswered_lets_the_handed_lock_go(void **state)
{
    (void)state;
    const char *name = "ff:deadline";
    assert_int_equal(chaos_proxy_set(&proxy, CHAOS_PROXY_PASS, 0), 0);
    assert_int_equal(test_flushall(&node), 0);
    dlock_client *hc = test_client_for(&node, NULL);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", proxy.port);
    const char *urls[] = {url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = o.io_timeout_ms = TIMEOUT_MS;
    dlock_client *wc = test_client_new(urls, 1, &o);
    dlock_lock *holder = test_lock_new(hc, name, 60000, DLOCK_FAIR, 10, 200);
    dlock_lock *waiter = test_lock_new(wc, name, 60000, DLOCK_FAIR, 10, 200);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);

    hand_over h = {holder, -1, -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_then_release, &h), 0);
    int rc = dlock_lock_acquire(waiter, WAIT_MS);
    pthread_join(t, NULL);
    assert_int_equal(h.set_rc, 0);
    assert_int_equal(h.release_rc, DLOCK_OK);
    sleep_ms(100); /* what the waiter wrote last has run */
    long long pttl = test_key_pttl(&node, name);
    print_message("waiter: %s; the lock's key on the node after the waiter gave up: pttl "
                  "%lld (-2: gone)\n", dlock_errname(rc), pttl);
    assert_int_not_equal(rc, DLOCK_OK);
    assert_int_equal(pttl, -2);

    assert_int_equal(chaos_proxy_set(&proxy, CHAOS_PROXY_PASS, 0), 0);
    dlock_lock_free(waiter);
    dlock_lock_free(holder);
    dlock_client_free(wc);
    dlock_client_free(hc);
}

/* ---- a cancel during the deadline's leave ------------------------------ */

typedef struct waiting {
    dlock_lock *l;
    int64_t wait_ms;
    int rc;
    int64_t end_ms;
} waiting;

static void *wait_then_note(void *arg)
{
    waiting *w = arg;
    w->rc = dlock_lock_acquire(w->l, w->wait_ms);
    w->end_ms = test_now_ms();
    return NULL;
}

/* A waiter in line on a node that stops: at the deadline it leaves the
 * line, a request with a whole I/O timeout (1 s here), and the cleanup of
 * that leave's unknown outcome another. A cancel during them ends them
 * at once, as one during the wait does; the leave and the release by our
 * token go out behind, and the handle's next acquire cleans up
 * (fair_cleanup_pending). The acquire keeps its code: the deadline came
 * first. */
static void a_cancel_cuts_the_leave_at_the_deadline(int cancel_at_ms)
{
    const char *name = "ff:leave-cancel";
    unsigned flags = DLOCK_FAIR;
    assert_int_equal(test_flushall(&node), 0);
    dlock_client *hc = test_client_for(&node, NULL);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = o.io_timeout_ms = 1000;
    dlock_client *wc = test_client_for(&node, &o);
    dlock_lock *holder = test_lock_new(hc, name, 60000, flags, 10, 200);
    waiting w = {test_lock_new(wc, name, 60000, flags, 10, 2000), 600, -1, 0};
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    int64_t t0 = test_now_ms();
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_then_note, &w), 0);
    sleep_ms(300); /* in line (fair) or listed (plain), sleeping */
    test_redis_pause(&node);
    /* The deadline (600 ms) starts the leave, which would last to 1.6 s,
     * and its cleanup to 2.6 s. */
    sleep_ms((int)(cancel_at_ms - (test_now_ms() - t0)));
    int64_t cancel_ms = test_now_ms();
    dlock_lock_cancel(w.l);
    pthread_join(t, NULL);
    test_redis_resume(&node);
    print_message("cancel at %d ms: %s after %lld ms, %lld ms after the cancel\n", cancel_at_ms,
                  dlock_errname(w.rc), (long long)(w.end_ms - t0),
                  (long long)(w.end_ms - cancel_ms));
    assert_int_equal(w.rc, DLOCK_ETIMEDOUT);
    assert_true(w.end_ms - cancel_ms < 300);
    /* The cancel is used up; the waiter takes the lock once it is free. */
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w.l, 2000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
    dlock_client_free(wc);
    dlock_client_free(hc);
}

static void a_cancel_cuts_a_fair_leave_at_the_deadline(void **state)
{
    (void)state;
    a_cancel_cuts_the_leave_at_the_deadline(800);
}

static void a_cancel_cuts_the_cleanup_after_a_fair_leave_at_the_deadline(void **state)
{
    (void)state;
    a_cancel_cuts_the_leave_at_the_deadline(1900);
}

/* ---- contention: deadline leaves while the node stalls ----------------- */

#define C_THREADS 5
#define C_RUN_MS 4500
#define C_TTL_MS 10000     /* a key left behind would block the line for long */
#define C_LONG_WAIT_MS 5000
#define C_HOLD_MS 10
#define C_STOP_MS 400      /* more than the I/O timeout: leaves go unanswered */

typedef struct contend {
    int fd; /* the chaos history */
    _Atomic int64_t end_ms;
    _Atomic int inside;
    _Atomic long seen_inside; /* sections that found another inside */
    _Atomic long sections, deadline_leaves, long_waits, long_failed, other_failed;
    _Atomic int64_t max_wait_ms;
    _Atomic int last_long_rc; /* the code of a failed long wait */
} contend;

typedef struct contender {
    contend *c;
    int slot;
} contender;

static void note_max(_Atomic int64_t *max, int64_t v)
{
    int64_t m = atomic_load(max);
    while (v > m && !atomic_compare_exchange_weak(max, &m, v))
        ;
}

/* One section: the shared counter says whether another is inside too; the
 * history records it for the checker. */
static void section(contend *c, int slot, uint32_t cs, uint64_t fence)
{
    chaos_history_note(c->fd, CHAOS_REC_ENTER, slot, (uint32_t)slot + 1, cs, fence, 0, 0);
    if (atomic_fetch_add(&c->inside, 1) != 0)
        atomic_fetch_add(&c->seen_inside, 1);
    sleep_ms(C_HOLD_MS);
    atomic_fetch_sub(&c->inside, 1);
    chaos_history_note(c->fd, CHAOS_REC_EXIT, slot, (uint32_t)slot + 1, cs, fence, 0, 0);
}

/* Waits in turn: three short (20-60 ms: most end at the deadline, in
 * line, and leave it), then one long, which must get the lock. */
static void *contender_run(void *arg)
{
    contender *me = arg;
    contend *c = me->c;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = o.io_timeout_ms = TIMEOUT_MS;
    const char *urls[] = {node.url};
    dlock_client *cl = NULL;
    dlock_lock *l = NULL;
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = C_TTL_MS;
    lo.flags = DLOCK_FAIR;
    lo.retry_min_ms = 10;
    lo.retry_max_ms = 100;
    if (dlock_client_new(&cl, urls, 1, &o, NULL, 0) != DLOCK_OK ||
        dlock_lock_new(&l, cl, "ff:contend", &lo) != DLOCK_OK) {
        atomic_fetch_add(&c->other_failed, 1000);
        dlock_client_free(cl);
        return NULL;
    }
    uint32_t cs = 0;
    for (int i = 0; test_now_ms() < atomic_load(&c->end_ms); i++) {
        int is_long = i % 4 == 3;
        int64_t wait_ms = is_long ? C_LONG_WAIT_MS : 20 + (me->slot * 7 + i * 13) % 41;
        int64_t t0 = test_now_ms();
        int rc = dlock_lock_acquire(l, wait_ms);
        int64_t waited = test_now_ms() - t0;
        if (rc == DLOCK_OK) {
            note_max(&c->max_wait_ms, waited);
            section(c, me->slot, cs++, dlock_lock_fence(l));
            atomic_fetch_add(&c->sections, 1);
            (void)dlock_lock_release(l); /* may go unanswered: the node stalls */
        } else if (rc == DLOCK_ETIMEDOUT && !is_long) {
            atomic_fetch_add(&c->deadline_leaves, 1);
        } else if (is_long) {
            atomic_fetch_add(&c->long_failed, 1);
            atomic_store(&c->last_long_rc, rc);
        } else {
            atomic_fetch_add(&c->other_failed, 1);
        }
        atomic_fetch_add(&c->long_waits, is_long);
    }
    dlock_lock_free(l);
    dlock_client_free(cl);
    return NULL;
}

/* Five threads contend; the node is stopped for C_STOP_MS every 700 ms. */
static void contended_deadline_leaves_through_node_stops(void **state)
{
    (void)state;
    assert_int_equal(test_flushall(&node), 0);
    static contend c;
    memset(&c, 0, sizeof c);
    char hist[300];
    test_tmp_path(hist, sizeof hist, "dlock-fair-faults-history");
    unlink(hist);
    c.fd = chaos_history_open(hist);
    assert_true(c.fd >= 0);
    atomic_store(&c.end_ms, test_now_ms() + C_RUN_MS);
    pthread_t t[C_THREADS];
    contender me[C_THREADS];
    for (int i = 0; i < C_THREADS; i++) {
        me[i] = (contender){&c, i};
        assert_int_equal(pthread_create(&t[i], NULL, contender_run, &me[i]), 0);
    }
    int stops = 0;
    while (test_now_ms() + 700 + C_STOP_MS < atomic_load(&c.end_ms)) {
        sleep_ms(700);
        test_redis_pause(&node);
        chaos_history_note(c.fd, CHAOS_REC_FAULT, 0, 0, 0, 0, 1, 0);
        sleep_ms(C_STOP_MS);
        test_redis_resume(&node);
        stops++;
    }
    for (int i = 0; i < C_THREADS; i++)
        pthread_join(t[i], NULL);
    close(c.fd);
    chaos_verdict v;
    assert_int_equal(chaos_history_check(hist, &v), 0);
    print_message("fair contention, %d threads, %d node stops of %d ms: %ld sections, %ld "
                  "deadline leaves, %ld long waits (%ld failed, last %s), %ld other failures, "
                  "longest wait that got the lock %lld ms; overlaps %ld (counter: %ld), most "
                  "at once %ld\n",
                  C_THREADS, stops, C_STOP_MS, atomic_load(&c.sections),
                  atomic_load(&c.deadline_leaves), atomic_load(&c.long_waits),
                  atomic_load(&c.long_failed), dlock_errname(atomic_load(&c.last_long_rc)),
                  atomic_load(&c.other_failed), (long long)atomic_load(&c.max_wait_ms),
                  v.overlaps, atomic_load(&c.seen_inside), v.max_concurrent);
    unlink(hist);
    assert_int_equal(v.torn, 0);
    assert_int_equal(v.cs_unclosed, 0);
    assert_int_equal(v.overlaps, 0);
    assert_int_equal(atomic_load(&c.seen_inside), 0);
    assert_true(v.max_concurrent <= 1);
    assert_true(stops >= 4);
    assert_true(atomic_load(&c.deadline_leaves) > 20);
    /* Progress: every long wait got the lock. */
    assert_true(atomic_load(&c.long_waits) >= C_THREADS);
    assert_int_equal(atomic_load(&c.long_failed), 0);
    assert_true(atomic_load(&c.max_wait_ms) < C_LONG_WAIT_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_deadline_leave_left_unanswered_lets_the_handed_lock_go),
        cmocka_unit_test(contended_deadline_leaves_through_node_stops),
        cmocka_unit_test(a_cancel_cuts_a_fair_leave_at_the_deadline),
        cmocka_unit_test(a_cancel_cuts_the_cleanup_after_a_fair_leave_at_the_deadline),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
