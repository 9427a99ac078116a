/* SPDX-License-Identifier: BSD-3-Clause */
/* Fair mode's hand-over (DLOCK_FAIR, src/redis/fair.c) against a real
 * redis-server: the waiter a release hands the lock to takes it on the
 * release's message, with the claim's lease, and the watchdog sets the
 * full TTL later (one renewal, on the claim's schedule); a holder that
 * releases first sends none; a claim gone before the confirmation makes
 * the handle lost, and a lost handle's release still cleans up by its
 * token; a confirmation delayed by a stalled node is tried again within
 * the claim; a waiter stopped across its claim's lapse never takes the
 * stale message. Helpers: support/fair_line.h. */
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
#include "fair_line.h"
#include "test_util.h"

static long long key_gone(const char *name)
{
    return test_key_exists(&test_srv, name) == 0;
}

/* A waiter stopped (SIGSTOP) after its last look is handed the lock; its
 * claim lapses while it is stopped, and another owner takes the lock. When
 * it runs again, the hand-over message it finds must not make it a holder:
 * the claim it implies is over (src/redis/fair.c, dlock__fair_handed), so it looks,
 * finds the lock taken, and times out. */
static void a_hand_over_found_after_its_claim_lapsed_is_not_taken(void **state)
{
    (void)state;
    const char *name = "fair:stopped-waiter";
    dlock_client *c = fair_client(1);
    dlock_lock *holder = new_fair(c, name, 30000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    /* 1 s TTL: looks every 250 ms, a claim of at most 1 s after a look. */
    pid_t pid = fork_fair_child(name, 1000, 1, 4000);
    int in_line = test_wait_for_count(fair_queue_len, name, 1, 3000);
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

static int pttl_above_20s(void *name)
{
    return fair_pttl(name) > 20000;
}

static int validity_above_20s(void *lock)
{
    return dlock_lock_validity_ms(lock) > 20000;
}

/* A holder of a fair lock (TTL ttl_ms) with one waiter in line (`wl`, or a
 * new fair handle with that TTL), which it releases 100 ms after the
 * waiter's look. Returns the script calls from the release until the
 * waiter's acquire returned; *calls0: the server's count at the release. */
static long long hand_over(dlock_client *c, const char *name, int64_t ttl_ms, dlock_lock *wl,
                           waiter *w, pthread_t *t, int hold_ms, long long *calls0)
{
    dlock_lock *holder = new_fair(c, name, ttl_ms);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    uint64_t fence0 = dlock_lock_fence(holder);
    fair_start_waiter(t, w, wl ? wl : new_fair(c, name, ttl_ms), 20000, hold_ms);
    assert_true(test_wait_for_count(fair_queue_len, name, 1, 3000));
    /* The waiter refreshes its place every second; release well between. */
    test_sleep_ms(100);
    *calls0 = test_script_calls(&test_srv);
    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    int64_t until = test_now_ms() + 5000;
    while (!atomic_load(&w->done) && test_now_ms() < until)
        test_sleep_ms(1);
    assert_true(atomic_load(&w->done));
    long long calls = test_script_calls(&test_srv) - *calls0;
    printf("# fair hand-over: acquire returned %.3f ms after the release; %lld script "
           "call(s) in between; fence %" PRIu64 " -> %" PRIu64 ", validity %" PRId64 " ms\n",
           (double)(w->done_us - t0) / 1000.0, calls, fence0, w->fence, w->validity_ms);
    assert_int_equal(w->rc, DLOCK_OK);
    assert_int_equal(w->fence, fence0 + 1);
    dlock_lock_free(holder);
    return calls;
}

/* Let the waiter release (go), and check what its release answered and
 * that no key is left behind; frees the waiter's handle and the client. */
static void let_go(dlock_client *c, waiter *w, pthread_t t, atomic_int *go, int want_release_rc,
                   const char *name)
{
    atomic_store(go, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w->release_rc, want_release_rc);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(w->lock);
    dlock_client_free(c);
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
    dlock_client *c = fair_client(1);
    atomic_int go = 0;
    waiter w = {0};
    w.go_release = &go;
    pthread_t t;
    long long calls0;
    assert_int_equal(hand_over(c, name, 30000, NULL, &w, &t, 0, &calls0), 1); /* the release */
    assert_true(w.validity_ms > 2000 && w.validity_ms < 4000);
    long long p0 = fair_pttl(name);
    assert_true(p0 > 0 && p0 <= 4000);
    /* One renewal sets the full TTL, and the handle's validity follows
     * once the watchdog has read the answer: the PTTL is up as soon as the
     * server ran the script, the validity a moment later (seconds later
     * on a loaded machine under TSan), so the test waits for each. */
    long long calls1 = test_script_calls(&test_srv);
    int64_t t1 = test_now_ms();
    int confirmed = test_wait_until(pttl_above_20s, (void *)name, 3000, 5);
    int64_t t2 = test_now_ms();
    int followed = test_wait_until(validity_above_20s, w.lock, 3000, 1);
    int64_t v = dlock_lock_validity_ms(w.lock);
    printf("# confirmed %" PRId64 " ms after the hand-over (PTTL %lld before), the handle's "
           "validity %" PRId64 " ms %" PRId64 " ms later\n", t2 - t1, p0, v, test_now_ms() - t2);
    test_sleep_ms(300);
    long long calls = test_script_calls(&test_srv) - calls1;
    /* Checked after the waiter let go: a failed check here must not leave
     * its thread reading `go` in a stack frame the next test reuses. */
    let_go(c, &w, t, &go, DLOCK_OK, name);
    assert_true(confirmed && followed);
    assert_true(v > 20000 && v <= 30000);
    assert_int_equal(calls, 1); /* one, not a renewal loop */
}

/* A holder that lets go before the confirmation is due sends none. */
static void a_hand_over_released_at_once_sends_no_confirmation(void **state)
{
    (void)state;
    const char *name = "fair:handover:short";
    dlock_client *c = fair_client(1);
    waiter w = {0};
    pthread_t t;
    long long calls0;
    hand_over(c, name, 30000, NULL, &w, &t, 0, &calls0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.release_rc, DLOCK_OK);
    long long calls1 = test_script_calls(&test_srv);
    test_sleep_ms(2000); /* past when the confirmation would have gone */
    assert_int_equal(test_script_calls(&test_srv), calls1);
    assert_int_equal(calls1 - calls0, 2); /* the two releases */
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(w.lock);
    dlock_client_free(c);
}

static void note_lost(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)l;
    atomic_store((atomic_int *)arg, 1 + (int)why);
}

static int lost_noted(void *arg)
{
    return atomic_load((atomic_int *)arg) != 0;
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
    dlock_client *c = fair_client(1);
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
    long long calls0;
    hand_over(c, name, 30000, test_lock_with(c, name, &o), &w, &t, 0, &calls0);
    freeReplyObject(test_cmd_bin(&test_srv, "DEL %b", name, strlen(name)));
    /* on_lost runs after the state became LOST (dlock.h, dlock_lost_fn),
     * on a loaded machine some ms later: wait for the call itself. */
    int reported = test_wait_until(lost_noted, &lost, 3000, 5);
    dlock_lock_state st = dlock_lock_state_get(w.lock);
    printf("# the claim deleted: on_lost %s, state %d\n", reported ? "called" : "NOT called",
           (int)st);
    freeReplyObject(test_cmd_bin(&test_srv, "SET %b %s PX 30000", name, strlen(name), w.token));
    let_go(c, &w, t, &go, DLOCK_ELOST, name);
    assert_true(reported);
    assert_int_equal(st, DLOCK_STATE_LOST);
    assert_int_equal(atomic_load(&lost), 1 + DLOCK_LOST_NOT_OWNER);
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
    dlock_client *c = fair_client(1);
    atomic_int go = 0;
    waiter w = {0};
    w.go_release = &go;
    pthread_t t;
    long long calls0;
    hand_over(c, name, 60000, NULL, &w, &t, 0, &calls0);
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
    long long p = fair_pttl(name);
    printf("# script calls from the release to 500 ms after the take: %lld; after the stall: "
           "state %d, validity %" PRId64 " ms, PTTL %lld ms\n", early, (int)st, v, p);
    let_go(c, &w, t, &go, DLOCK_OK, name);
    assert_int_equal(early, 1);
    assert_int_equal(st, DLOCK_STATE_HELD);
    assert_true(v > 40000);
}

#define T(f) cmocka_unit_test(f)

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* First: it forks, best done before any library thread ran. */
        T(a_hand_over_found_after_its_claim_lapsed_is_not_taken),
        T(fair_hand_over_is_taken_on_its_message_and_confirmed_later),
        T(a_hand_over_released_at_once_sends_no_confirmation),
        T(a_hand_over_gone_before_its_confirmation_is_reported_lost),
        T(a_confirmation_delayed_by_a_stalled_node_is_tried_again_in_time),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
