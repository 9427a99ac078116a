/* SPDX-License-Identifier: BSD-3-Clause */
/* The public lock API on an etcd:// client, one real etcd member: the
 * same calls and codes as on Redis (try-once, wait, cancel, reentrancy,
 * auto-renew, on_lost, status, adopt), fencing tokens that grow, what is
 * refused with DLOCK_ENOTSUP (an extend to a new TTL is
 * test_etcd_extend_ttl's), many processes excluding each other with an
 * exact counter, and a SIGKILLed holder freeing the lock when its lease
 * ends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "etcd_procs.h"
#include "etcd_server.h"
#include "test_util.h"
#include "proc.h"
#include "watchdog.h"

static test_etcd srv;
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    return test_etcd_setup(&srv, 1, NULL, &cl);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_teardown(&srv, cl);
    return 0;
}

static dlock_lock *lock_of(dlock_client *c, const char *name, int64_t ttl_ms, unsigned flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = flags;
    dlock_lock *l = NULL;
    int rc = dlock_lock_new(&l, c, name, &o);
    if (rc != DLOCK_OK)
        fail_msg("dlock_lock_new(%s): %s", name, dlock_errname(rc));
    return l;
}

static void client_reports_one_node_named_by_its_members(void **state)
{
    (void)state;
    assert_int_equal(dlock_client_node_count(cl), 1);
    assert_string_equal(dlock_client_node_name(cl, 0), srv.url + 7);
    assert_null(dlock_client_node_name(cl, 1));
}

static void try_once_then_release_and_fences_grow(void **state)
{
    (void)state;
    dlock_lock *a = lock_of(cl, "api-basic", 5000, 0);
    dlock_lock *b = lock_of(cl, "api-basic", 5000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_int_equal(strlen(dlock_lock_token(a)), 16);
    uint64_t f1 = dlock_lock_fence(a);
    assert_true(f1 > 0);
    assert_true(dlock_lock_validity_ms(a) > 4000);
    assert_int_equal(dlock_lock_hold_count(a), 1);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    assert_true(dlock_lock_holder_ttl_ms(b) > 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_EINVAL); /* not reentrant */
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_ENOTHELD);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_true(dlock_lock_fence(b) > f1);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

typedef struct waiter {
    dlock_lock *l;
    int64_t wait_ms;
    int rc;
    int64_t done_ms;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, w->wait_ms);
    w->done_ms = etcd_now_ms();
    return NULL;
}

static void waiter_wakes_on_release_times_out_and_cancels(void **state)
{
    (void)state;
    dlock_lock *a = lock_of(cl, "api-wait", 5000, 0);
    dlock_lock *b = lock_of(cl, "api-wait", 5000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    int64_t t0 = etcd_now_ms();
    assert_int_equal(dlock_lock_acquire(b, 300), DLOCK_ETIMEDOUT);
    assert_true(etcd_now_ms() - t0 >= 290);
    /* released while b waits: b has it soon after, not at a poll */
    waiter w = {b, 20000, -99, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    test_sleep_ms(300);
    t0 = etcd_now_ms();
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.done_ms - t0 < 1500);
    /* now a waits, and is cancelled */
    waiter wa = {a, DLOCK_WAIT_FOREVER, -99, 0};
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &wa), 0);
    test_sleep_ms(300);
    t0 = etcd_now_ms();
    dlock_lock_cancel(a);
    pthread_join(t, NULL);
    assert_int_equal(wa.rc, DLOCK_ECANCELED);
    assert_true(wa.done_ms - t0 < 1000);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void reentrant_holds_count_per_handle_and_thread(void **state)
{
    (void)state;
    dlock_lock *a = lock_of(cl, "api-reent", 5000, DLOCK_REENTRANT);
    dlock_lock *a2 = lock_of(cl, "api-reent", 5000, DLOCK_REENTRANT);
    dlock_lock *other = lock_of(cl, "api-reent", 5000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    uint64_t f = dlock_lock_fence(a);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_hold_count(a), 2);
    /* another handle of the same owner (client x thread) enters too */
    assert_int_equal(dlock_lock_acquire(a2, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(a2), f);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_hold_count(a), 1);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_ENOTACQUIRED); /* a2 holds */
    assert_int_equal(dlock_lock_release(a2), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(a2);
    dlock_lock_free(other);
}

/* The owner of a counted hold is client x thread, and a thread's identity
 * must never pass to another thread: a thread that ends while its handle
 * holds leaves the hold to that handle (handed to whoever releases it),
 * not to the next thread, which glibc often gives the same pthread_t. */
typedef struct reent_try {
    dlock_lock *l;
    int rc;
    uint64_t fence;
} reent_try;

static void *acquire_once(void *arg)
{
    reent_try *t = arg;
    t->rc = dlock_lock_acquire(t->l, 0);
    t->fence = dlock_lock_fence(t->l);
    return NULL;
}

static int acquire_in_new_thread(dlock_lock *l, uint64_t *fence)
{
    reent_try t = {l, -99, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, acquire_once, &t), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    *fence = t.fence;
    return t.rc;
}

static void a_reentrant_hold_is_not_inherited_by_the_next_thread(void **state)
{
    (void)state;
    dlock_lock *a = lock_of(cl, "api-reent-thread", 10000, DLOCK_REENTRANT);
    dlock_lock *b = lock_of(cl, "api-reent-thread", 10000, DLOCK_REENTRANT);
    uint64_t fa = 0, fb = 0;
    assert_int_equal(acquire_in_new_thread(a, &fa), DLOCK_OK); /* T1 holds, ends */
    assert_true(fa > 0);
    for (int i = 0; i < 3; i++) { /* T2, T3, T4: each a new owner */
        int rc = acquire_in_new_thread(b, &fb);
        if (rc != DLOCK_ENOTACQUIRED)
            fail_msg("a new thread got %s (fence %llu; the holder's is %llu)",
                     dlock_errname(rc), (unsigned long long)fb, (unsigned long long)fa);
    }
    assert_int_equal(dlock_lock_release(a), DLOCK_OK); /* handed over: released here */
    assert_int_equal(acquire_in_new_thread(b, &fb), DLOCK_OK);
    assert_true(fb > fa);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* A reentrant hold whose lease ended (revoked here by its token, as
 * `dlock release --token` would) is no hold to re-enter: the owner's next
 * acquire, through another handle or through the dead one, gets a new
 * hold, as on Redis, where the acquire finds the key gone and makes a new
 * one. */
static void a_reentrant_hold_whose_lease_ended_is_not_reentered(void **state)
{
    (void)state;
    dlock_lock *a = lock_of(cl, "api-reent-dead", 10000, DLOCK_REENTRANT);
    dlock_lock *b = lock_of(cl, "api-reent-dead", 10000, DLOCK_REENTRANT);
    dlock_lock *c = lock_of(cl, "api-reent-dead", 10000, DLOCK_REENTRANT);
    dlock_lock *thief = lock_of(cl, "api-reent-dead", 10000, 0);
    dlock_lock *other = lock_of(cl, "api-reent-dead", 10000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    uint64_t fa = dlock_lock_fence(a);
    assert_int_equal(dlock_lock_adopt(thief, dlock_lock_token(a)), DLOCK_OK);
    assert_int_equal(dlock_lock_release(thief), DLOCK_OK); /* a's lease is gone */
    int rc = dlock_lock_acquire(b, 0);
    if (rc != DLOCK_OK)
        fail_msg("try-once after the hold ended: %s (%s)", dlock_errname(rc),
                 dlock_lock_errmsg(b));
    uint64_t fb = dlock_lock_fence(b);
    assert_true(fb > fa);
    assert_int_equal(dlock_lock_hold_count(b), 1);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    /* the same with a wait, which used to fail at once as well */
    assert_int_equal(dlock_lock_acquire(c, DLOCK_WAIT_FOREVER), DLOCK_OK);
    uint64_t fc = dlock_lock_fence(c);
    assert_true(fc > fb);
    /* the dead handle itself: its hold is dropped, it enters c's live one */
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_hold_count(a), 1);
    assert_int_equal(dlock_lock_fence(a), fc);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_ENOTACQUIRED); /* c holds */
    assert_int_equal(dlock_lock_release(c), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(c);
    dlock_lock_free(thief);
    dlock_lock_free(other);
}

/* A re-entry with a wait rides out a member that does not answer, as
 * every waiting acquire does (dlock.h): its keep-alive is tried again
 * until the deadline, and a cancel ends it at once. A try-once re-entry
 * still reports the fault at once. (Review 34, finding 4: the re-entry
 * gave up with DLOCK_EUNKNOWN after one keep-alive.) */
static void a_waiting_reentry_rides_out_a_paused_member(void **state)
{
    (void)state;
    dlock_lock *a = lock_of(cl, "api-reent-stall", 10000, DLOCK_REENTRANT);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    uint64_t f = dlock_lock_fence(a);
    test_etcd_pause(&srv, 0);
    int rc = dlock_lock_acquire(a, 0);
    assert_true(rc == DLOCK_EUNKNOWN || rc == DLOCK_EIO);
    assert_int_equal(dlock_lock_hold_count(a), 1);
    /* paused for 2.5 s under a re-entry that may wait 8 s */
    waiter w = {a, 8000, -99, 0};
    pthread_t t;
    int64_t t0 = etcd_now_ms(), t_pause = t0;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    test_sleep_ms(2500);
    test_etcd_resume(&srv, 0);
    pthread_join(t, NULL);
    if (w.rc != DLOCK_OK)
        fail_msg("re-entry during a 2.5 s pause: %s after %lld ms (%s)", dlock_errname(w.rc),
                 (long long)(w.done_ms - t0), dlock_lock_errmsg(a));
    assert_true(w.done_ms - t0 >= 2400 && w.done_ms - t0 < 8000);
    assert_int_equal(dlock_lock_hold_count(a), 2);
    assert_int_equal(dlock_lock_fence(a), f);
    /* cancelled while it retries: at once, and the holds are as before */
    test_etcd_pause(&srv, 0);
    waiter wc = {a, 8000, -99, 0};
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &wc), 0);
    test_sleep_ms(1500);
    t0 = etcd_now_ms();
    dlock_lock_cancel(a);
    pthread_join(t, NULL);
    test_etcd_resume(&srv, 0);
    assert_int_equal(wc.rc, DLOCK_ECANCELED);
    assert_true(wc.done_ms - t0 < 500);
    printf("# re-entry held %lld ms into a 2.5 s pause; cancelled in %lld ms\n",
           (long long)(w.done_ms - t_pause), (long long)(wc.done_ms - t0));
    assert_int_equal(dlock_lock_hold_count(a), 2);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_hold_count(a), 0);
    dlock_lock_free(a);
}

/* forget drops the handle's hold but leaves the lease in etcd: the lock
 * stays busy until someone releases it by its token. */
static void forget_leaves_the_lock_for_another_handle(void **state)
{
    (void)state;
    dlock_lock *a = lock_of(cl, "api-forget", 30000, 0);
    dlock_lock *b = lock_of(cl, "api-forget", 30000, 0);
    char token[DLOCK_TOKEN_MAX + 1];
    assert_int_equal(dlock_lock_forget(a), DLOCK_ENOTHELD);
    assert_non_null(strstr(dlock_lock_errmsg(a), "does not hold"));
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    snprintf(token, sizeof token, "%s", dlock_lock_token(a));
    assert_int_equal(dlock_lock_forget(a), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_hold_count(a), 0);
    assert_int_equal(dlock_lock_release(a), DLOCK_ENOTHELD);
    dlock_lock_free(a); /* must not release what was forgotten */
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_adopt(b, token), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(b);
}

static void auto_renew_keeps_a_short_lease_and_extend_refreshes_it(void **state)
{
    (void)state;
    dlock_lock *a = lock_of(cl, "api-renew", 2000, DLOCK_AUTO_RENEW);
    dlock_lock *b = lock_of(cl, "api-renew", 2000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    test_sleep_ms(4500);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_true(dlock_lock_validity_ms(a) > 0);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_extend(a, 0), DLOCK_OK);
    assert_true(dlock_lock_validity_ms(a) > 1500);
    assert_int_equal(dlock_lock_extend(a, 60000), DLOCK_OK); /* a new lease (issue 38) */
    assert_true(dlock_lock_validity_ms(a) > 50000);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* etcd raises a lease below its minimum to that minimum (2 s with etcd's
 * default timing, which this test's own member keeps): extend(0) still
 * means "renew to the granted TTL", and so does the handle's own TTL,
 * which etcd would raise the same way. */
static void extend_zero_renews_a_lease_etcd_raised(void **state)
{
    (void)state;
    test_etcd slow;
    assert_int_equal(test_etcd_start_timed(&slow, 1, 100, 1000), 0);
    const char *url = slow.url;
    dlock_client *c;
    assert_int_equal(dlock_client_new(&c, &url, 1, NULL, NULL, 0), DLOCK_OK);
    dlock_lock *a = lock_of(c, "api-extend-raised", 1000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_true(dlock_lock_validity_ms(a) > 1500); /* 1 s asked, 2 s granted */
    test_sleep_ms(600);
    int rc = dlock_lock_extend(a, 0);
    if (rc != DLOCK_OK)
        fail_msg("extend(0): %s (%s)", dlock_errname(rc), dlock_lock_errmsg(a));
    assert_true(dlock_lock_validity_ms(a) > 1500);
    assert_int_equal(dlock_lock_extend(a, 1000), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(a, 2000), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(a, 9000), DLOCK_OK); /* moved to a 9 s lease */
    assert_true(dlock_lock_validity_ms(a) > 8000);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_client_free(c);
    test_etcd_stop(&slow);
}

/* An extend to another TTL than a lease the owner's other handles share
 * is refused and sends nothing (dlock.h): an auto-renewed lock's renewal
 * keeps its schedule. It used to be taken out of the watchdog for the
 * extend and put back due at once: a keep-alive per refused extend. */
static void a_refused_extend_sends_no_keep_alive(void **state)
{
    (void)state;
    dlock_client *c;
    const char *url = srv.url;
    assert_int_equal(dlock_client_new(&c, &url, 1, NULL, NULL, 0), DLOCK_OK);
    dlock_lock *a = lock_of(c, "api-refused-extend", 30000, DLOCK_AUTO_RENEW | DLOCK_REENTRANT);
    dlock_lock *a2 = lock_of(c, "api-refused-extend", 30000, DLOCK_REENTRANT);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a2, 0), DLOCK_OK); /* shares a's lease */
    dlock__watchdog_stats before, after;
    dlock__watchdog_get_stats(c, &before);
    for (int i = 0; i < 5; i++)
        assert_int_equal(dlock_lock_extend(a, 120000), DLOCK_ENOTSUP);
    test_sleep_ms(1000); /* renewals are due every 10 s */
    dlock__watchdog_get_stats(c, &after);
    assert_int_equal(after.rounds, before.rounds);
    assert_int_equal(after.renewed, before.renewed);
    assert_int_equal(dlock_lock_release(a2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(a2);
    dlock_client_free(c);
}

static atomic_int lost_calls, lost_reason;

static void on_lost(dlock_lock *l, dlock_lost_reason reason, void *arg)
{
    (void)l;
    (void)arg;
    atomic_store(&lost_reason, (int)reason);
    atomic_fetch_add(&lost_calls, 1);
}

/* An auto-renewed lock of `name` with this on_lost, acquired, with
 * lost_calls at 0. */
static dlock_lock *acquire_with_on_lost(const char *name, dlock_lost_fn cb)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 3000;
    o.flags = DLOCK_AUTO_RENEW;
    o.on_lost = cb;
    dlock_lock *a;
    assert_int_equal(dlock_lock_new(&a, cl, name, &o), DLOCK_OK);
    atomic_store(&lost_calls, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    return a;
}

/* Another process releases a by its token (dlock release --token); waits
 * (5 s at most) for a's on_lost and checks it ran once. Returns the
 * thief's handle, for the caller to free. */
static dlock_lock *steal_by_token(dlock_lock *a, const char *name)
{
    dlock_lock *thief = lock_of(cl, name, 3000, 0);
    assert_int_equal(dlock_lock_adopt(thief, dlock_lock_token(a)), DLOCK_OK);
    assert_int_equal(dlock_lock_release(thief), DLOCK_OK);
    int64_t t0 = etcd_now_ms();
    while (atomic_load(&lost_calls) == 0 && etcd_now_ms() - t0 < 5000)
        test_sleep_ms(20);
    assert_int_equal(atomic_load(&lost_calls), 1);
    return thief;
}

static void a_revoked_lease_is_reported_lost(void **state)
{
    (void)state;
    dlock_lock *a = acquire_with_on_lost("api-lost", on_lost);
    dlock_lock *thief = steal_by_token(a, "api-lost");
    assert_int_equal(atomic_load(&lost_reason), DLOCK_LOST_NOT_OWNER);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_LOST);
    assert_int_equal(dlock_lock_release(a), DLOCK_ELOST);
    dlock_lock_free(thief);
    dlock_lock_free(a);
}

static atomic_int release_in_callback_rc;

static void on_lost_release(dlock_lock *l, dlock_lost_reason reason, void *arg)
{
    (void)reason;
    (void)arg;
    /* allowed in on_lost: a release that says it was lost */
    atomic_store(&release_in_callback_rc, dlock_lock_release(l));
    atomic_fetch_add(&lost_calls, 1);
}

static void on_lost_may_release_its_lock(void **state)
{
    (void)state;
    atomic_store(&release_in_callback_rc, 1);
    dlock_lock *a = acquire_with_on_lost("api-lost-release", on_lost_release);
    dlock_lock *thief = steal_by_token(a, "api-lost-release");
    assert_int_equal(atomic_load(&release_in_callback_rc), DLOCK_ELOST);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_release(a), DLOCK_ENOTHELD);
    /* and the handle can take the lock again */
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(thief);
    dlock_lock_free(a);
}

/* A reentrant handle lost with two holds: its on_lost gives them back
 * (the first release is not the last, and says DLOCK_ELOST) and takes the
 * lock again. The new hold is auto-renewed like any other: the watchdog
 * record of the lost one is taken out by that release, not left for the
 * round to take out after the callback, which would drop the new hold's
 * registration with it and let its lease run out unseen. */
static atomic_int reacquire_in_callback_rc;

static void on_lost_release_and_take_again(dlock_lock *l, dlock_lost_reason reason, void *arg)
{
    (void)reason;
    (void)arg;
    atomic_store(&release_in_callback_rc, dlock_lock_release(l));
    atomic_store(&reacquire_in_callback_rc, dlock_lock_acquire(l, 0));
    atomic_fetch_add(&lost_calls, 1);
}

static void a_hold_taken_again_in_on_lost_after_a_non_last_release_is_renewed(void **state)
{
    (void)state;
    const char *name = "api-lost-reent-again";
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 2000;
    o.flags = DLOCK_AUTO_RENEW | DLOCK_REENTRANT;
    o.on_lost = on_lost_release_and_take_again;
    dlock_lock *a;
    assert_int_equal(dlock_lock_new(&a, cl, name, &o), DLOCK_OK);
    atomic_store(&lost_calls, 0);
    atomic_store(&release_in_callback_rc, 1);
    atomic_store(&reacquire_in_callback_rc, 1);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_hold_count(a), 2);
    dlock_lock *thief = steal_by_token(a, name);
    assert_int_equal(atomic_load(&release_in_callback_rc), DLOCK_ELOST);
    assert_int_equal(atomic_load(&reacquire_in_callback_rc), DLOCK_OK);
    test_sleep_ms(5000); /* over twice the lease: only renewals keep it */
    dlock_lock *other = lock_of(cl, name, 2000, 0);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_true(dlock_lock_validity_ms(a) > 0);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(other);
    dlock_lock_free(thief);
    dlock_lock_free(a);
}

static void status_shows_holder_fence_and_ttl(void **state)
{
    (void)state;
    dlock_node_status st[1];
    dlock_lock_status sum;
    assert_int_equal(dlock_client_status(cl, "api-status", 1, st, &sum), DLOCK_OK);
    assert_int_equal(st[0].error, DLOCK_OK);
    assert_int_equal(st[0].held, 0);
    assert_int_equal(sum.state, DLOCK_STATUS_FREE);
    dlock_lock *a = lock_of(cl, "api-status", 8000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_client_status(cl, "api-status", 1, st, &sum), DLOCK_OK);
    assert_int_equal(st[0].held, 1);
    assert_true(st[0].ttl_ms > 0 && st[0].ttl_ms <= 8000);
    assert_int_equal(st[0].fence, dlock_lock_fence(a));
    assert_int_equal(sum.state, DLOCK_STATUS_HELD);
    assert_int_equal(sum.nodes, 1);
    assert_int_equal(sum.held_on, 1);
    dlock_lock_free(a); /* releases */
    assert_int_equal(dlock_client_status(cl, "api-status", 1, st, NULL), DLOCK_OK);
    assert_int_equal(st[0].held, 0);
}

/* ---- the pool of HTTP transfers ---------------------------------------------- */

typedef struct pooled_try {
    dlock_lock *l;
    int rc;
} pooled_try;

static void *try_in_thread(void *arg)
{
    pooled_try *t = arg;
    t->rc = dlock_lock_acquire(t->l, 0);
    return NULL;
}

/* Six acquires in flight at once (the member paused under them) need six
 * transfers; once they are over, the pool keeps pool_size of them, as a
 * Redis node's does, not one connection per request ever in flight. */
static void the_pool_keeps_pool_size_connections(void **state)
{
    (void)state;
    enum { N = 6 };
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.pool_size = 1;
    o.io_timeout_ms = 5000;
    dlock_client *c = NULL;
    const char *url = srv.url;
    assert_int_equal(dlock_client_new(&c, &url, 1, &o, NULL, 0), DLOCK_OK);
    int port = srv.m[0].client_port;
    int before = test_tcp_connections(port, NULL);
    pooled_try t[N];
    pthread_t th[N];
    test_etcd_pause(&srv, 0);
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "pool-%d", i);
        t[i].l = lock_of(c, name, 10000, 0);
        assert_int_equal(pthread_create(&th[i], NULL, try_in_thread, &t[i]), 0);
    }
    usleep(500 * 1000); /* every try sent, none answered */
    int in_flight = test_tcp_connections(port, NULL) - before;
    test_etcd_resume(&srv, 0);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].rc, DLOCK_OK);
        assert_int_equal(dlock_lock_release(t[i].l), DLOCK_OK);
        dlock_lock_free(t[i].l);
    }
    /* the gateway: one connection per call in flight; gRPC: one HTTP/2
     * connection carries them all */
    assert_int_equal(in_flight, test_etcd_grpc() ? 1 : N);
    assert_true(test_tcp_connections(port, NULL) - before <= 1);
    dlock_client_free(c);
    assert_int_equal(test_tcp_connections(port, NULL), before);
}

static void what_does_not_apply_is_refused(void **state)
{
    (void)state;
    /* extending a lease the owner's other handles share to another TTL:
     * etcd leases keep theirs, and a move would leave those handles on a
     * revoked one */
    dlock_lock *a = lock_of(cl, "api-enotsup", 5000, DLOCK_REENTRANT);
    dlock_lock *a2 = lock_of(cl, "api-enotsup", 5000, DLOCK_REENTRANT);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a2, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(a, 9000), DLOCK_ENOTSUP);
    assert_non_null(strstr(dlock_lock_errmsg(a), "etcd"));
    assert_int_equal(dlock_lock_extend(a, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(a2);
    /* DLOCK_FAIR is what etcd does anyway (arrival order): accepted */
    dlock_lock *f = lock_of(cl, "api-fair", 5000, DLOCK_FAIR);
    assert_int_equal(dlock_lock_acquire(f, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(f), DLOCK_OK);
    dlock_lock_free(f);
    /* adopt: a lease ID only, and no reentrant handle (re-entry is
     * counted per owner, which a token from elsewhere does not carry) */
    dlock_lock *r = lock_of(cl, "api-adopt", 5000, DLOCK_REENTRANT);
    assert_int_equal(dlock_lock_adopt(r, "0123456789abcdef"), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_state_get(r), DLOCK_STATE_UNLOCKED);
    dlock_lock_free(r);
    dlock_lock *p = lock_of(cl, "api-adopt", 5000, 0);
    assert_int_equal(dlock_lock_adopt(p, "not-a-lease-id!!"), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_adopt(p, "0000000000000000"), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_state_get(p), DLOCK_STATE_UNLOCKED);
    dlock_lock_free(p);
    /* a set of names is made (test_etcd_multi takes them); a shared one
     * too, its names readers (test_etcd_rw): two such sets share */
    const char *ab[] = {"api-set-b", "api-set-a"};
    dlock_lock *set = NULL, *set2 = NULL;
    assert_int_equal(dlock_lock_new_multi(&set, cl, ab, 2, NULL), DLOCK_OK);
    dlock_lock_free(set);
    dlock_lock_options so = DLOCK_LOCK_OPTIONS_INIT;
    so.flags = DLOCK_SHARED;
    assert_int_equal(dlock_lock_new_multi(&set, cl, ab, 2, &so), DLOCK_OK);
    assert_int_equal(dlock_lock_new_multi(&set2, cl, ab, 2, &so), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set2, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(set2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    dlock_lock_free(set);
    dlock_lock_free(set2);
    /* a lock-delay (test_etcd_lock_delay has its behaviour): made, none
     * pending on a name never held; the bounds are checked as on Redis */
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.lock_delay_ms = 1000;
    dlock_lock *delayed = NULL;
    assert_int_equal(dlock_lock_new(&delayed, cl, "api-delay", &lo), DLOCK_OK);
    dlock_lock_free(delayed);
    lo.lock_delay_ms = DLOCK_LOCK_DELAY_MAX_MS + 1;
    delayed = (dlock_lock *)1;
    assert_int_equal(dlock_lock_new(&delayed, cl, "api-delay", &lo), DLOCK_EINVAL);
    assert_null(delayed);
    int64_t left = -1;
    assert_int_equal(dlock_client_lock_delay(cl, "api-delay", 0, &left), DLOCK_OK);
    assert_int_equal(left, 0);
    assert_int_equal(dlock_client_lock_delay(cl, "api-delay", 1, &left), DLOCK_EINVAL);
    /* a Redis URL and an etcd URL in one client */
    const char *mixed[] = {srv.url, "redis://127.0.0.1:6379"};
    dlock_client *c = NULL;
    char err[256] = "";
    assert_int_equal(dlock_client_new(&c, mixed, 2, NULL, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "etcd"));
    /* min_replicas (Redis's WAIT) is refused, not silently ignored */
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.min_replicas = 1;
    const char *one = srv.url;
    err[0] = '\0';
    assert_int_equal(dlock_client_new(&c, &one, 1, &co, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "min_replicas"));
    assert_null(c);
}

/* ---- processes ------------------------------------------------------------ */

static void many_processes_exclude_each_other_exactly(void **state)
{
    (void)state;
    etcd_shared *sh = etcd_shared_new();
    assert_non_null(sh);
    snprintf(sh->url, sizeof sh->url, "%s", srv.url);
    snprintf(sh->name, sizeof sh->name, "api-procs");
    sh->rounds = 25;
    sh->ttl_ms = 5000;
    sh->wait_ms = 30000;
    enum { N = 6 };
    assert_int_equal(test_run_procs(N, etcd_worker, sh), 0);
    printf("# %d procs x %d sections: counter %ld, overlaps %d, stale fences %ld, "
           "failed sections %ld, longest wait %ld ms\n",
           N, sh->rounds, sh->counter, atomic_load(&sh->overlaps),
           atomic_load(&sh->stale_fences), atomic_load(&sh->failed_sections),
           atomic_load(&sh->longest_wait_ms));
    assert_int_equal(sh->counter, N * sh->rounds);
    assert_int_equal(atomic_load(&sh->overlaps), 0);
    assert_int_equal(atomic_load(&sh->stale_fences), 0);
    assert_int_equal(atomic_load(&sh->lock_errors), 0);
    munmap(sh, sizeof *sh);
}

static void a_killed_holder_frees_the_lock_when_its_lease_ends(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const char *url = srv.url;
        dlock_client *c;
        dlock_lock *l;
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 3000;
        o.flags = DLOCK_AUTO_RENEW;
        if (dlock_client_new(&c, &url, 1, NULL, NULL, 0) != DLOCK_OK ||
            dlock_lock_new(&l, c, "api-killed", &o) != DLOCK_OK ||
            dlock_lock_acquire(l, 0) != DLOCK_OK)
            _exit(1);
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]); /* a child that dies before writing ends the read */
    char x;
    assert_int_equal(read(p[0], &x, 1), 1);
    dlock_lock *b = lock_of(cl, "api-killed", 3000, 0);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    /* the holder renews (auto-renew) and then dies without a release */
    test_sleep_ms(1500);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    int64_t t0 = etcd_now_ms();
    assert_int_equal(dlock_lock_acquire(b, 15000), DLOCK_OK);
    int64_t waited = etcd_now_ms() - t0;
    printf("# lock free %lld ms after the holder's SIGKILL (lease 3 s)\n", (long long)waited);
    /* not before its lease could end (a renewal may be up to 1 s old),
     * and not long after it */
    assert_true(waited >= 1000);
    assert_true(waited < 8000);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(b);
    close(p[0]);
}

/* fork(): the child's copies of the client and handle refuse every call
 * and free without releasing the parent's lock. Over gRPC the client's
 * free in the child closes its copies of the spare eventfds the calls
 * left (etcd_grpc.c), and touches nothing of gRPC's C core. */
static void a_child_of_fork_neither_uses_nor_releases_the_parents_lock(void **state)
{
    (void)state;
    dlock_lock *a = lock_of(cl, "api-fork", 5000, DLOCK_AUTO_RENEW);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int bad = dlock_lock_acquire(a, 0) != DLOCK_EINVAL ||
                  dlock_lock_release(a) != DLOCK_EINVAL ||
                  dlock_lock_state_get(a) != DLOCK_STATE_UNLOCKED;
        dlock_lock_free(a);
        int efds = test_eventfds();
        dlock_client_free(cl);
        /* the client's own eventfd (the gateway's row closes it too) and
         * the spares: one at least, the calls above having ended */
        int kept = test_etcd_grpc() && efds - test_eventfds() < 2;
        _exit(bad ? 1 : kept ? 2 : 0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    dlock_node_status ns[1];
    assert_int_equal(dlock_client_status(cl, "api-fork", 1, ns, NULL), DLOCK_OK);
    assert_int_equal(ns[0].held, 1);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(client_reports_one_node_named_by_its_members),
        cmocka_unit_test(try_once_then_release_and_fences_grow),
        cmocka_unit_test(waiter_wakes_on_release_times_out_and_cancels),
        cmocka_unit_test(reentrant_holds_count_per_handle_and_thread),
        cmocka_unit_test(a_reentrant_hold_is_not_inherited_by_the_next_thread),
        cmocka_unit_test(a_reentrant_hold_whose_lease_ended_is_not_reentered),
        cmocka_unit_test(a_waiting_reentry_rides_out_a_paused_member),
        cmocka_unit_test(forget_leaves_the_lock_for_another_handle),
        cmocka_unit_test(auto_renew_keeps_a_short_lease_and_extend_refreshes_it),
        cmocka_unit_test(extend_zero_renews_a_lease_etcd_raised),
        cmocka_unit_test(a_refused_extend_sends_no_keep_alive),
        cmocka_unit_test(a_revoked_lease_is_reported_lost),
        cmocka_unit_test(on_lost_may_release_its_lock),
        cmocka_unit_test(a_hold_taken_again_in_on_lost_after_a_non_last_release_is_renewed),
        cmocka_unit_test(status_shows_holder_fence_and_ttl),
        cmocka_unit_test(what_does_not_apply_is_refused),
        cmocka_unit_test(the_pool_keeps_pool_size_connections),
        cmocka_unit_test(many_processes_exclude_each_other_exactly),
        cmocka_unit_test(a_killed_holder_frees_the_lock_when_its_lease_ends),
        cmocka_unit_test(a_child_of_fork_neither_uses_nor_releases_the_parents_lock),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
