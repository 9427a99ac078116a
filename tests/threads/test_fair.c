/* SPDX-License-Identifier: BSD-3-Clause */
/* Fair mode (DLOCK_FAIR) against a real redis-server: waiters are served
 * in arrival order; the release hands the lock to the next live waiter, who
 * needs no round trip of its own (fence + 1, validity > 0); a waiter that
 * gives up or is cancelled leaves the queue and blocks nobody; a waiter
 * that crashed (a child process killed by pid) is skipped once its
 * liveness key expires; fair mode over several nodes is refused; waiting
 * works by polling when wake-ups are off.
 *
 * Keys (src/lock.c, dlock__derived_key): the queue is "NAME\0q", each
 * waiter's liveness key "NAME\0w\0TOKEN". Worker threads never call cmocka
 * asserts; the main thread checks what they recorded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

static dlock_client *new_client(int wakeups)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.wakeups = wakeups;
    return test_client_for(&test_srv, &o);
}

static dlock_lock *new_fair(dlock_client *c, const char *name, int64_t ttl_ms)
{
    return test_lock_new(c, name, ttl_ms, DLOCK_FAIR, 1000, 5000);
}

/* ---- server-side helpers ------------------------------------------------ */

static long long queue_len(const char *name)
{
    char q[256];
    size_t n_q = test_helper_key(q, sizeof q, name, "q");
    redisReply *r = test_cmd_bin(&test_srv, "LLEN %b", q, n_q);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* Waiters' liveness keys present now. */
static size_t live_keys(const char *name)
{
    char pat[256];
    size_t n_pat = test_helper_key(pat, sizeof pat, name, "w");
    memcpy(pat + n_pat, "\0*", 3);
    redisReply *r = test_cmd_bin(&test_srv, "KEYS %b", pat, n_pat + 2);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    size_t n = r->elements;
    freeReplyObject(r);
    return n;
}

/* ---- a fair waiter on a thread ------------------------------------------ */

typedef struct waiter {
    dlock_lock *lock;
    int64_t wait_ms;
    int hold_ms;            /* hold this long, then release; < 0: keep it */
    atomic_int *turn;       /* shared: order of acquisition */
    atomic_int *go_release; /* if set, wait for it before releasing */
    atomic_int started;
    atomic_int done;
    int rc;
    int order;
    uint64_t fence;
    int64_t validity_ms;
    int64_t done_us;
    char token[DLOCK_TOKEN_MAX + 1];
    int release_rc;
} waiter;

static void *fair_wait(void *arg)
{
    waiter *w = arg;
    atomic_store(&w->started, 1);
    w->rc = dlock_lock_acquire(w->lock, w->wait_ms);
    w->done_us = test_now_us();
    if (w->rc == DLOCK_OK) {
        if (w->turn)
            w->order = atomic_fetch_add(w->turn, 1);
        w->fence = dlock_lock_fence(w->lock);
        w->validity_ms = dlock_lock_validity_ms(w->lock);
        snprintf(w->token, sizeof w->token, "%s", dlock_lock_token(w->lock));
    }
    atomic_store(&w->done, 1);
    if (w->rc != DLOCK_OK || w->hold_ms < 0)
        return NULL;
    if (w->go_release)
        while (!atomic_load(w->go_release))
            test_sleep_ms(1);
    test_sleep_ms(w->hold_ms);
    w->release_rc = dlock_lock_release(w->lock);
    return NULL;
}

static void start_waiter(pthread_t *t, waiter *w, dlock_lock *l, int64_t wait_ms, int hold_ms)
{
    w->lock = l;
    w->wait_ms = wait_ms;
    w->hold_ms = hold_ms;
    w->rc = 99;
    assert_int_equal(pthread_create(t, NULL, fair_wait, w), 0);
    while (!atomic_load(&w->started))
        test_sleep_ms(1);
}

/* A forked process that waits in line for `name` (fair, lock TTL ttl_ms)
 * for wait_ms, then exits 3 if it got the lock, 4 if it timed out, 2 on
 * anything else. The fork is safe while this process runs none of the
 * library's threads; the child starts its own when `wakeups`. */
static pid_t fork_fair_child(const char *name, int64_t ttl_ms, int wakeups, int64_t wait_ms)
{
    pid_t pid = test_fork_child();
    if (pid == 0) {
        dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
        dlock_client *cc = NULL;
        dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
        dlock_lock *l = NULL;
        const char *urls[] = {test_srv.url};
        o.wakeups = wakeups;
        lo.ttl_ms = ttl_ms;
        lo.flags = DLOCK_FAIR;
        if (dlock_client_new(&cc, urls, 1, &o, NULL, 0) != DLOCK_OK ||
            dlock_lock_new(&l, cc, name, &lo) != DLOCK_OK)
            _exit(2);
        int rc = dlock_lock_acquire(l, wait_ms);
        _exit(rc == DLOCK_OK ? 3 : rc == DLOCK_ETIMEDOUT ? 4 : 2);
    }
    return pid;
}

/* Waits in line until it is killed; no threads (wakeups off). */
static pid_t fork_fair_waiter(const char *name, int64_t ttl_ms)
{
    return fork_fair_child(name, ttl_ms, 0, 60000);
}

/* ---- tests -------------------------------------------------------------- */

/* The waiter got the lock straight from the holder's release at t0_us:
 * within bound_us, with the next fencing token, and it released it, leaving
 * neither a queue nor a key behind. */
static void assert_handed_over(const waiter *w, const char *name, uint64_t fence0,
                               int64_t t0_us, int64_t bound_us)
{
    assert_int_equal(w->rc, DLOCK_OK);
    assert_int_equal(w->fence, fence0 + 1);
    assert_true(w->done_us - t0_us < bound_us);
    assert_int_equal(w->release_rc, DLOCK_OK);
    assert_int_equal(queue_len(name), 0);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
}

static void fair_waiters_acquire_in_arrival_order(void **state)
{
    (void)state;
    enum { N = 5 };
    const char *name = "fair:order";
    dlock_client *c = new_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    uint64_t fence0 = dlock_lock_fence(holder);
    atomic_int turn = 0;
    waiter w[N];
    pthread_t t[N];
    memset(w, 0, sizeof w);
    for (int i = 0; i < N; i++) {
        w[i].turn = &turn;
        start_waiter(&t[i], &w[i], new_fair(c, name, 30000), 20000, 10);
        assert_true(test_wait_for_count(queue_len, name, i + 1, 3000)); /* it arrived */
        test_sleep_ms(50);
    }
    assert_int_equal(live_keys(name), N);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    printf("# fair order:");
    for (int i = 0; i < N; i++)
        printf(" waiter %d -> turn %d (fence %" PRIu64 ")", i, w[i].order, w[i].fence);
    printf("\n");
    for (int i = 0; i < N; i++) {
        assert_int_equal(w[i].rc, DLOCK_OK);
        assert_int_equal(w[i].order, i);
        assert_int_equal(w[i].fence, fence0 + 1 + (uint64_t)i);
        assert_true(w[i].validity_ms > 0);
        assert_int_equal(w[i].release_rc, DLOCK_OK);
    }
    assert_int_equal(queue_len(name), 0);
    assert_int_equal(live_keys(name), 0);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(holder);
    for (int i = 0; i < N; i++)
        dlock_lock_free(w[i].lock);
    dlock_client_free(c);
}

static long long pttl_of(const char *name)
{
    redisReply *r = test_cmd_bin(&test_srv, "PTTL %b", name, strlen(name));
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static int pttl_above_20s(void *name)
{
    return pttl_of(name) > 20000;
}

/* A holder of a 30 s fair lock with one waiter in line, which it releases
 * 100 ms after the waiter's look. Returns the script calls from the release
 * until the waiter's acquire returned. */
static long long hand_over(dlock_client *c, const char *name, waiter *w, pthread_t *t,
                           int hold_ms, uint64_t *fence0)
{
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    *fence0 = dlock_lock_fence(holder);
    start_waiter(t, w, new_fair(c, name, 30000), 20000, hold_ms);
    assert_true(test_wait_for_count(queue_len, name, 1, 3000));
    /* The waiter refreshes its place every second; release well between. */
    test_sleep_ms(100);
    long long calls0 = test_script_calls(&test_srv);
    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    int64_t until = test_now_ms() + 5000;
    while (!atomic_load(&w->done) && test_now_ms() < until)
        test_sleep_ms(1);
    assert_true(atomic_load(&w->done));
    long long calls = test_script_calls(&test_srv) - calls0;
    printf("# fair hand-over: acquire returned %.3f ms after the release; %lld script "
           "call(s) in between; fence %" PRIu64 " -> %" PRIu64 ", validity %" PRId64 " ms\n",
           (double)(w->done_us - t0) / 1000.0, calls, *fence0, w->fence, w->validity_ms);
    dlock_lock_free(holder);
    return calls;
}

/* The release hands the lock over in one step, and the waiter takes it on
 * the message, with no call of its own: its lease is the claim lease (4
 * refresh periods from its last look, at most 4 s), which the watchdog
 * makes the full TTL a third of the way in. A waiter that died never
 * confirms, so the line goes on after the claim (see
 * waiter_killed_just_before_the_release_...). */
static void fair_hand_over_is_taken_on_its_message_and_confirmed_later(void **state)
{
    (void)state;
    const char *name = "fair:handover";
    dlock_client *c = new_client(1);
    atomic_int go = 0;
    waiter w = {0};
    w.go_release = &go;
    pthread_t t;
    uint64_t fence0;
    assert_int_equal(hand_over(c, name, &w, &t, 0, &fence0), 1); /* the release script */
    assert_int_equal(w.rc, DLOCK_OK);
    assert_int_equal(w.fence, fence0 + 1);
    assert_true(w.validity_ms > 2000 && w.validity_ms < 4000);
    long long p0 = pttl_of(name);
    assert_true(p0 > 0 && p0 <= 4000);
    /* One renewal sets the full TTL, and the handle's validity follows. */
    long long calls0 = test_script_calls(&test_srv);
    int64_t t1 = test_now_ms();
    assert_true(test_wait_until(pttl_above_20s, (void *)name, 3000, 5));
    int64_t v = dlock_lock_validity_ms(w.lock);
    printf("# confirmed %" PRId64 " ms after the hand-over (PTTL %lld before), validity %" PRId64
           " ms\n", test_now_ms() - t1, p0, v);
    assert_true(v > 20000 && v <= 30000);
    test_sleep_ms(300);
    assert_int_equal(test_script_calls(&test_srv) - calls0, 1); /* one, not a renewal loop */
    atomic_store(&go, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.release_rc, DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

/* A holder that lets go before the confirmation is due sends none. */
static void a_hand_over_released_at_once_sends_no_confirmation(void **state)
{
    (void)state;
    const char *name = "fair:handover:short";
    dlock_client *c = new_client(1);
    waiter w = {0};
    pthread_t t;
    uint64_t fence0;
    long long calls0 = test_script_calls(&test_srv);
    hand_over(c, name, &w, &t, 0, &fence0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_int_equal(w.release_rc, DLOCK_OK);
    long long calls1 = test_script_calls(&test_srv);
    test_sleep_ms(2000); /* past when the confirmation would have gone */
    assert_int_equal(test_script_calls(&test_srv), calls1);
    /* holder acquire, waiter's look, holder release, waiter release */
    assert_int_equal(calls1 - calls0, 4);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

static void note_lost(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)l;
    atomic_store((atomic_int *)arg, 1 + (int)why);
}

/* The claim taken on the message is gone when the confirmation comes (here
 * deleted by hand): the handle is lost, on_lost says so, and the release
 * answers DLOCK_ELOST rather than pretending. If our token is back in the
 * key by then (a confirmation that reached a stalled node after the handle
 * gave up, put there by hand here), the release still takes it out, so the
 * line does not wait for a TTL. */
static void a_hand_over_gone_before_its_confirmation_is_reported_lost(void **state)
{
    (void)state;
    const char *name = "fair:handover:gone";
    dlock_client *c = new_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    atomic_int lost = 0;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 30000;
    o.flags = DLOCK_FAIR;
    o.on_lost = note_lost;
    o.on_lost_arg = &lost;
    atomic_int go = 0;
    waiter w = {0};
    w.go_release = &go;
    pthread_t t;
    start_waiter(&t, &w, test_lock_with(c, name, &o), 20000, 0);
    assert_true(test_wait_for_count(queue_len, name, 1, 3000));
    test_sleep_ms(100);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    while (!atomic_load(&w.done))
        test_sleep_ms(1);
    assert_int_equal(w.rc, DLOCK_OK);
    freeReplyObject(test_cmd_bin(&test_srv, "DEL %b", name, strlen(name)));
    assert_true(test_wait_for_state(w.lock, DLOCK_STATE_LOST, 3000));
    assert_int_equal(atomic_load(&lost), 1 + DLOCK_LOST_NOT_OWNER);
    freeReplyObject(test_cmd_bin(&test_srv, "SET %b %s PX 30000", name, strlen(name), w.token));
    atomic_store(&go, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.release_rc, DLOCK_ELOST);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(holder);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

/* The confirmation follows the claim's schedule, not the TTL's: with a
 * 60 s TTL it is not sent at once (that would put it back on the path of
 * a short section's release), but about 1.2 s into the claim. The node
 * then stalls (DEBUG SLEEP 2.5 s from 0.5 s in): the confirmation gets no
 * answer within the I/O timeout (1 s); the node runs it when it wakes,
 * which the client no longer hears. The next try must come while the claim
 * (about 3.9 s) lasts, so the handle keeps the lock with its full TTL
 * instead of being lost while its token holds the key for 60 s. */
static void a_confirmation_delayed_by_a_stalled_node_is_tried_again_in_time(void **state)
{
    (void)state;
    const char *name = "fair:handover:stalled";
    dlock_client *c = new_client(1);
    dlock_lock *holder = new_fair(c, name, 60000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    atomic_int go = 0;
    waiter w = {0};
    w.go_release = &go;
    pthread_t t;
    start_waiter(&t, &w, new_fair(c, name, 60000), 20000, 0);
    assert_true(test_wait_for_count(queue_len, name, 1, 3000));
    test_sleep_ms(100);
    long long calls0 = test_script_calls(&test_srv);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    while (!atomic_load(&w.done))
        test_sleep_ms(1);
    assert_int_equal(w.rc, DLOCK_OK);
    test_sleep_ms(500);
    long long early = test_script_calls(&test_srv) - calls0; /* the release's */
    redisContext *admin = test_redis_admin(&test_srv);
    assert_non_null(admin);
    struct timeval no_timeout = {0, 0};
    assert_int_equal(redisSetTimeout(admin, no_timeout), REDIS_OK);
    redisReply *r = redisCommand(admin, "DEBUG SLEEP 2.5");
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(admin);
    test_sleep_ms(1500); /* past the claim's end */
    dlock_lock_state st = dlock_lock_state_get(w.lock);
    int64_t v = dlock_lock_validity_ms(w.lock);
    long long p = pttl_of(name);
    printf("# script calls from the release to 500 ms after the take: %lld; after the stall: state %d, validity %" PRId64
           " ms, PTTL %lld ms\n", early, (int)st, v, p);
    atomic_store(&go, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(early, 1);
    assert_int_equal(st, DLOCK_STATE_HELD);
    assert_true(v > 40000);
    assert_int_equal(w.release_rc, DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(holder);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

static void fair_waiter_that_times_out_leaves_the_queue_and_blocks_nobody(void **state)
{
    (void)state;
    const char *name = "fair:timeout";
    dlock_client *c = new_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    uint64_t fence0 = dlock_lock_fence(holder);
    waiter a = {0}, b = {0};
    pthread_t ta, tb;
    start_waiter(&ta, &a, new_fair(c, name, 30000), 600, 0);
    assert_true(test_wait_for_count(queue_len, name, 1, 3000));
    start_waiter(&tb, &b, new_fair(c, name, 30000), 20000, 0);
    assert_true(test_wait_for_count(queue_len, name, 2, 3000)); /* b is behind a */
    int64_t t_a = test_now_us();
    assert_int_equal(pthread_join(ta, NULL), 0);
    assert_int_equal(a.rc, DLOCK_ETIMEDOUT);
    assert_true(a.done_us - t_a < 2000000);
    assert_int_equal(dlock_lock_state_get(a.lock), DLOCK_STATE_UNLOCKED);
    /* a left: only b is in line, with its liveness key. */
    assert_int_equal(queue_len(name), 1);
    assert_int_equal(live_keys(name), 1);

    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(pthread_join(tb, NULL), 0);
    printf("# after the first waiter timed out, the next got the lock %.3f ms after the "
           "release\n", (double)(b.done_us - t0) / 1000.0);
    assert_handed_over(&b, name, fence0, t0, 2000000); /* handed to b directly */
    dlock_lock_free(holder);
    dlock_lock_free(a.lock);
    dlock_lock_free(b.lock);
    dlock_client_free(c);
}

static void cancelled_fair_waiter_returns_ecanceled_and_leaves_the_queue(void **state)
{
    (void)state;
    const char *name = "fair:cancel";
    dlock_client *c = new_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    waiter w = {0};
    pthread_t t;
    start_waiter(&t, &w, new_fair(c, name, 30000), DLOCK_WAIT_FOREVER, 0);
    assert_true(test_wait_for_count(queue_len, name, 1, 3000));
    assert_int_equal(live_keys(name), 1);
    test_sleep_ms(100);
    int64_t t0 = test_now_us();
    dlock_lock_cancel(w.lock);
    assert_int_equal(pthread_join(t, NULL), 0);
    printf("# fair cancel returned after %.3f ms\n", (double)(w.done_us - t0) / 1000.0);
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    assert_true(w.done_us - t0 < 1000000);
    assert_int_equal(queue_len(name), 0);
    assert_int_equal(live_keys(name), 0);
    /* Nobody in line: the release frees the lock. */
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    assert_int_equal(dlock_lock_state_get(w.lock), DLOCK_STATE_UNLOCKED);
    dlock_lock_free(holder);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

static void crashed_fair_waiter_is_skipped_after_its_liveness_key_expires(void **state)
{
    (void)state;
    const char *name = "fair:crashed-waiter";
    dlock_client *c = new_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    uint64_t fence0 = dlock_lock_fence(holder);

    /* The child waits in line with a 1 s lock TTL: it refreshes its place
     * every 250 ms and its liveness key lives 750 ms. It starts no threads
     * (wakeups off), and this process runs none of the library's yet. */
    pid_t pid = fork_fair_waiter(name, 1000);
    int in_line = test_wait_for_count(queue_len, name, 1, 5000);
    kill(pid, SIGKILL);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(in_line);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    int64_t t_kill = test_now_ms();
    while (live_keys(name) != 0 && test_now_ms() - t_kill < 5000)
        test_sleep_ms(10);
    assert_int_equal(live_keys(name), 0);
    printf("# crashed waiter's liveness key gone %" PRId64 " ms after SIGKILL\n",
           test_now_ms() - t_kill);
    assert_int_equal(queue_len(name), 1); /* its token is still in line */

    waiter w = {0};
    pthread_t t;
    start_waiter(&t, &w, new_fair(c, name, 30000), 20000, 0);
    assert_true(test_wait_for_count(queue_len, name, 2, 3000)); /* behind the dead one */
    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    printf("# live waiter behind a crashed one got the lock %.3f ms after the release\n",
           (double)(w.done_us - t0) / 1000.0);
    /* fence0 + 1: the dead waiter was never granted */
    assert_handed_over(&w, name, fence0, t0, 2000000);
    dlock_lock_free(holder);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

static long long key_gone(const char *name)
{
    return test_key_exists(&test_srv, name) == 0;
}

/* A waiter stopped (SIGSTOP) after its last look is handed the lock; its
 * claim lapses while it is stopped, and another owner takes the lock. When
 * it runs again, the hand-over message it finds must not make it a holder:
 * the claim it implies is over (src/fair.c, take_handed), so it looks,
 * finds the lock taken, and times out. */
static void a_hand_over_found_after_its_claim_lapsed_is_not_taken(void **state)
{
    (void)state;
    const char *name = "fair:stopped-waiter";
    dlock_client *c = new_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    /* 1 s TTL: looks every 250 ms, a claim of at most 1 s after a look. */
    pid_t pid = fork_fair_child(name, 1000, 1, 4000);
    int in_line = test_wait_for_count(queue_len, name, 1, 3000);
    test_sleep_ms(50);
    kill(pid, SIGSTOP);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK); /* handed to the child */
    int lapsed = test_wait_for_count(key_gone, name, 1, 3000);
    dlock_lock *other = new_fair(c, name, 30000);
    int taken = dlock_lock_acquire(other, 0);
    test_sleep_ms(100); /* the message is on the child's socket, its timer long past */
    kill(pid, SIGCONT);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(in_line && lapsed);
    assert_int_equal(taken, DLOCK_OK);
    assert_true(WIFEXITED(st));
    printf("# the stopped waiter, resumed after its claim lapsed: %s\n",
           WEXITSTATUS(st) == 4 ? "timed out" : WEXITSTATUS(st) == 3 ? "HOLDS" : "error");
    assert_int_equal(WEXITSTATUS(st), 4);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(other);
    dlock_client_free(c);
}

/* A waiter SIGKILLed while its liveness key still lives is handed the lock
 * at the next release; it never confirms the claim, which lapses after the
 * rest of its liveness TTL plus one refresh period (3 s + 1 s with a 30 s
 * TTL). It used to get the whole 30 s TTL, and the line waited for it. */
static void waiter_killed_just_before_the_release_delays_the_line_by_seconds_not_the_ttl(
    void **state)
{
    (void)state;
    const char *name = "fair:killed-before-release";
    dlock_client *c = new_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    uint64_t fence0 = dlock_lock_fence(holder);

    pid_t pid = fork_fair_waiter(name, 30000);
    int in_line = test_wait_for_count(queue_len, name, 1, 5000);
    waiter w = {0};
    pthread_t t;
    start_waiter(&t, &w, new_fair(c, name, 30000), 20000, 0);
    int behind = test_wait_for_count(queue_len, name, 2, 3000);
    kill(pid, SIGKILL);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(in_line && behind);
    assert_int_equal(live_keys(name), 2); /* the dead one's key still lives */
    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    double waited_ms = (double)(w.done_us - t0) / 1000.0;
    printf("# live waiter behind a waiter SIGKILLed just before the release got the lock "
           "%.0f ms after the release (%s)\n", waited_ms, dlock_errname(w.rc));
    assert_int_equal(w.rc, DLOCK_OK);
    /* fence0 + 2: the dead waiter was granted the claim, then the live one */
    assert_int_equal(w.fence, fence0 + 2);
    assert_true(waited_ms < 6000); /* documented bound: 4 s; was the 30 s TTL */
    assert_int_equal(w.release_rc, DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

static void fair_try_once_does_not_join_the_queue(void **state)
{
    (void)state;
    const char *name = "fair:try-once";
    dlock_client *c = new_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    dlock_lock *l = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED);
    assert_true(dlock_lock_holder_ttl_ms(l) > 0);
    assert_int_equal(queue_len(name), 0);
    assert_int_equal(live_keys(name), 0);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_assert_key_value(&test_srv, name, dlock_lock_token(l));
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void fair_mode_over_several_nodes_is_not_supported(void **state)
{
    (void)state;
    /* Nothing is connected by dlock_client_new or dlock_lock_new, so the
     * nodes need not run. */
    const char *urls[] = {"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"};
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_new(&c, urls, 3, NULL, NULL, 0), DLOCK_OK);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = DLOCK_FAIR;
    static char sentinel;
    dlock_lock *l = (dlock_lock *)(void *)&sentinel; /* must be reset to NULL */
    assert_int_equal(dlock_lock_new(&l, c, "fair:redlock", &o), DLOCK_ENOTSUP);
    assert_null(l);
    o.flags = 0;
    assert_int_equal(dlock_lock_new(&l, c, "fair:redlock", &o), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);

    /* Fair counted locks are not offered on one node either. */
    c = new_client(1);
    o.flags = DLOCK_FAIR | DLOCK_REENTRANT;
    assert_int_equal(dlock_lock_new(&l, c, "fair:reentrant", &o), DLOCK_ENOTSUP);
    assert_null(l);
    dlock_client_free(c);
}

static void fair_waiting_works_by_polling_when_wakeups_are_off(void **state)
{
    (void)state;
    const char *name = "fair:polling";
    dlock_client *c = new_client(0);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    uint64_t fence0 = dlock_lock_fence(holder);
    waiter w = {0};
    pthread_t t;
    start_waiter(&t, &w, new_fair(c, name, 30000), 10000, 0);
    assert_true(test_wait_for_count(queue_len, name, 1, 3000));
    test_sleep_ms(200);
    redisReply *r = test_cmd(&test_srv, "PUBSUB NUMSUB dlock:wake:%s", name);
    assert_int_equal(r->element[1]->integer, 0); /* nobody listens */
    freeReplyObject(r);
    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    printf("# fair polling (refresh every 1 s): acquired %.3f ms after the release\n",
           (double)(w.done_us - t0) / 1000.0);
    assert_true(w.validity_ms > 0);
    assert_handed_over(&w, name, fence0, t0, 5000000);
    dlock_lock_free(holder);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

#define T(f) cmocka_unit_test(f)

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* First: it forks, best done before any library thread ran. */
        T(crashed_fair_waiter_is_skipped_after_its_liveness_key_expires),
        T(waiter_killed_just_before_the_release_delays_the_line_by_seconds_not_the_ttl),
        T(a_hand_over_found_after_its_claim_lapsed_is_not_taken),
        T(fair_waiters_acquire_in_arrival_order),
        T(fair_hand_over_is_taken_on_its_message_and_confirmed_later),
        T(a_hand_over_released_at_once_sends_no_confirmation),
        T(a_hand_over_gone_before_its_confirmation_is_reported_lost),
        T(a_confirmation_delayed_by_a_stalled_node_is_tried_again_in_time),
        T(fair_waiter_that_times_out_leaves_the_queue_and_blocks_nobody),
        T(cancelled_fair_waiter_returns_ecanceled_and_leaves_the_queue),
        T(fair_try_once_does_not_join_the_queue),
        T(fair_mode_over_several_nodes_is_not_supported),
        T(fair_waiting_works_by_polling_when_wakeups_are_off),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
