/* SPDX-License-Identifier: BSD-3-Clause */
/* Wake-ups on release (default mode) against a real redis-server: a waiter
 * returns within milliseconds of a release although its polls are a second
 * apart; waiters of a crashed holder (a child process that exits without
 * releasing) get the lock at its expiry; several waiters take turns as each
 * release wakes them; a waiter can be cancelled; with wakeups = 0 waiting
 * still works by polling and nothing subscribes.
 *
 * Worker threads never call cmocka asserts; they record results (atomics
 * where the main thread reads them before the join) and the main thread
 * checks them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
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

/* Long TTL and slow retries: only a wake-up explains a fast return. */
static dlock_lock *new_lock(dlock_client *c, const char *name, int64_t ttl_ms,
                            int64_t retry_min_ms, int64_t retry_max_ms)
{
    return test_lock_new(c, name, ttl_ms, 0, retry_min_ms, retry_max_ms);
}

/* Subscribers of the lock's wake-up channel ("dlock:wake:" + name). */
static long long subscribers(const char *name)
{
    redisReply *r = test_cmd(&test_srv, "PUBSUB NUMSUB dlock:wake:%s", name);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 2);
    long long n = r->element[1]->integer;
    freeReplyObject(r);
    return n;
}

/* One waiting acquire on a thread. */
typedef struct waiter {
    dlock_lock *lock;
    int64_t wait_ms;
    int hold_ms;                /* hold this long, then release */
    atomic_int *in_critical;    /* shared: holders right now */
    atomic_int *turn;           /* shared: order of acquisition */
    atomic_int started;
    atomic_int rc;
    _Atomic int64_t done_us;    /* when the acquire returned */
    int order;
    int overlap;                /* saw another holder inside */
    int release_rc;
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    atomic_store(&w->started, 1);
    int rc = dlock_lock_acquire(w->lock, w->wait_ms);
    atomic_store(&w->done_us, test_now_us());
    atomic_store(&w->rc, rc);
    if (rc != DLOCK_OK || w->hold_ms < 0)
        return NULL;
    if (w->turn)
        w->order = atomic_fetch_add(w->turn, 1);
    if (w->in_critical && atomic_fetch_add(w->in_critical, 1) != 0)
        w->overlap = 1;
    test_sleep_ms(w->hold_ms);
    if (w->in_critical)
        atomic_fetch_sub(w->in_critical, 1);
    w->release_rc = dlock_lock_release(w->lock);
    return NULL;
}

static void start_waiter(pthread_t *t, waiter *w, dlock_lock *l, int64_t wait_ms, int hold_ms)
{
    w->lock = l;
    w->wait_ms = wait_ms;
    w->hold_ms = hold_ms;
    atomic_store(&w->rc, 99);
    assert_int_equal(pthread_create(t, NULL, wait_for_lock, w), 0);
    while (!atomic_load(&w->started))
        test_sleep_ms(1);
}

/* ---- tests -------------------------------------------------------------- */

static void waiter_wakes_within_milliseconds_of_a_release(void **state)
{
    (void)state;
    enum { REPS = 5 };
    dlock_client *c = new_client(1);
    double lat_ms[REPS];
    for (int i = 0; i < REPS; i++) {
        char name[64];
        snprintf(name, sizeof name, "wk:latency:%d", i);
        /* TTL 30 s, retries 1..5 s, the waiter's safety poll 1 s: the
         * release comes ~500 ms after the waiter went to sleep, far from any
         * poll. */
        dlock_lock *holder = new_lock(c, name, 30000, 1000, 5000);
        dlock_lock *l = new_lock(c, name, 30000, 1000, 5000);
        assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
        waiter w = {0};
        pthread_t t;
        start_waiter(&t, &w, l, 20000, -1);
        assert_true(test_wait_for_count(subscribers, name, 1, 3000));
        test_sleep_ms(500);
        assert_int_equal(atomic_load(&w.rc), 99); /* still waiting */
        int64_t t_release = test_now_us();
        assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(atomic_load(&w.rc), DLOCK_OK);
        lat_ms[i] = (double)(atomic_load(&w.done_us) - t_release) / 1000.0;
        printf("# wake-up latency %d: %.3f ms from release call to acquire return\n", i,
               lat_ms[i]);
        assert_true(lat_ms[i] < 200.0);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        dlock_lock_free(holder);
        dlock_lock_free(l);
    }
    double lo = lat_ms[0], hi = lat_ms[0], sum = 0;
    for (int i = 0; i < REPS; i++) {
        lo = lat_ms[i] < lo ? lat_ms[i] : lo;
        hi = lat_ms[i] > hi ? lat_ms[i] : hi;
        sum += lat_ms[i];
    }
    printf("# wake-up latency over %d runs: min %.3f ms, mean %.3f ms, max %.3f ms\n", REPS, lo,
           sum / REPS, hi);
    dlock_client_free(c);
}

static void waiters_of_a_crashed_holder_get_the_lock_after_its_expiry(void **state)
{
    (void)state;
    const char *name = "wk:crashed-holder";
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    /* Fork first, while this process runs no library threads. */
    pid_t pid = test_fork_child();
    if (pid == 0) {
        close(pfd[0]);
        dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
        dlock_client *c = NULL;
        dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
        dlock_lock *l = NULL;
        const char *urls[] = {test_srv.url};
        o.wakeups = 0; /* no threads in the child */
        lo.ttl_ms = 500;
        char ok = 'x';
        if (dlock_client_new(&c, urls, 1, &o, NULL, 0) == DLOCK_OK &&
            dlock_lock_new(&l, c, name, &lo) == DLOCK_OK && dlock_lock_acquire(l, 0) == DLOCK_OK)
            ok = 'k';
        if (write(pfd[1], &ok, 1) != 1)
            _exit(2);
        _exit(0); /* the crash: no release, no free */
    }
    close(pfd[1]);
    char ok = 0;
    assert_int_equal(read(pfd[0], &ok, 1), 1);
    int64_t t_held = test_now_ms();
    close(pfd[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(ok, 'k');
    long long pttl = test_key_pttl(&test_srv, name);
    assert_true(pttl > 0 && pttl <= 500);

    dlock_client *c = new_client(1);
    atomic_int in_critical = 0, turn = 0;
    waiter w[2];
    pthread_t t[2];
    memset(w, 0, sizeof w);
    for (int i = 0; i < 2; i++) {
        w[i].in_critical = &in_critical;
        w[i].turn = &turn;
        start_waiter(&t[i], &w[i], new_lock(c, name, 30000, 1000, 5000), 10000, 20);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    int64_t got_ms[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(atomic_load(&w[i].rc), DLOCK_OK);
        assert_int_equal(w[i].release_rc, DLOCK_OK);
        assert_false(w[i].overlap);
        got_ms[w[i].order] = atomic_load(&w[i].done_us) / 1000 - t_held;
    }
    printf("# crashed holder (TTL 500 ms): waiters got the lock %" PRId64 " and %" PRId64
           " ms after it was taken\n", got_ms[0], got_ms[1]);
    /* Not before the lease could end; long before the 10 s deadline. */
    assert_true(got_ms[0] >= 300 && got_ms[0] < 3000);
    assert_true(got_ms[1] >= got_ms[0] && got_ms[1] < 5000);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    for (int i = 0; i < 2; i++)
        dlock_lock_free(w[i].lock);
    dlock_client_free(c);
}

static void each_release_wakes_the_waiters_and_they_take_turns(void **state)
{
    (void)state;
    enum { N = 4 };
    const char *name = "wk:turns";
    dlock_client *c = new_client(1);
    dlock_lock *holder = new_lock(c, name, 30000, 1000, 5000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    atomic_int in_critical = 0, turn = 0;
    waiter w[N];
    pthread_t t[N];
    memset(w, 0, sizeof w);
    for (int i = 0; i < N; i++) {
        w[i].in_critical = &in_critical;
        w[i].turn = &turn;
        start_waiter(&t[i], &w[i], new_lock(c, name, 30000, 1000, 5000), 20000, 5);
    }
    assert_true(test_wait_for_count(subscribers, name, 1, 3000)); /* one shared subscriber */
    test_sleep_ms(100);
    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    int64_t last = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(atomic_load(&w[i].rc), DLOCK_OK);
        assert_int_equal(w[i].release_rc, DLOCK_OK);
        assert_false(w[i].overlap);
        int64_t d = atomic_load(&w[i].done_us);
        last = d > last ? d : last;
    }
    printf("# %d waiters took turns in %.1f ms after the first release\n", N,
           (double)(last - t0) / 1000.0);
    assert_int_equal(atomic_load(&turn), N);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(holder);
    for (int i = 0; i < N; i++)
        dlock_lock_free(w[i].lock);
    dlock_client_free(c);
}

static void cancelled_waiter_returns_ecanceled_promptly(void **state)
{
    (void)state;
    const char *name = "wk:cancel";
    dlock_client *c = new_client(1);
    dlock_lock *holder = new_lock(c, name, 30000, 1000, 5000);
    dlock_lock *l = new_lock(c, name, 30000, 1000, 5000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    waiter w = {0};
    pthread_t t;
    start_waiter(&t, &w, l, DLOCK_WAIT_FOREVER, -1);
    assert_true(test_wait_for_count(subscribers, name, 1, 3000));
    test_sleep_ms(300);
    int64_t t0 = test_now_us();
    dlock_lock_cancel(l);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&w.rc), DLOCK_ECANCELED);
    printf("# cancel returned after %.3f ms\n", (double)(atomic_load(&w.done_us) - t0) / 1000.0);
    assert_true(atomic_load(&w.done_us) - t0 < 1000000);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    /* The cancel was consumed: the next wait works. */
    assert_int_equal(dlock_lock_acquire(l, 1000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void waiting_works_by_polling_when_wakeups_are_off(void **state)
{
    (void)state;
    const char *name = "wk:polling";
    dlock_client *c = new_client(0);
    dlock_lock *holder = new_lock(c, name, 30000, 10, 50);
    dlock_lock *l = new_lock(c, name, 30000, 10, 50);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    waiter w = {0};
    pthread_t t;
    start_waiter(&t, &w, l, 10000, -1);
    test_sleep_ms(300);
    assert_int_equal(subscribers(name), 0); /* nobody listens */
    assert_int_equal(atomic_load(&w.rc), 99);
    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&w.rc), DLOCK_OK);
    printf("# polling (retry 10..50 ms): acquired %.3f ms after the release\n",
           (double)(atomic_load(&w.done_us) - t0) / 1000.0);
    assert_true(atomic_load(&w.done_us) - t0 < 5000000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* The waiter's sleep is a 5 s backoff here, not the 200 ms look of a
 * watcher: the holder's key has no TTL (PERSIST), so the waiter knows no
 * expiry to look at. Only the release message, through the waiter
 * record's wake hook, ends that sleep early (the engine's wait sleeps on
 * its call's loop, not on a condition variable). */
static void release_by_another_handle_ends_the_waiters_backoff_sleep(void **state)
{
    (void)state;
    const char *name = "wk:backoff-sleep";
    dlock_client *c = new_client(1);
    dlock_lock *holder = new_lock(c, name, 30000, 5000, 5000);
    dlock_lock *l = new_lock(c, name, 30000, 5000, 5000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    freeReplyObject(test_cmd(&test_srv, "PERSIST %s", name));
    waiter w = {0};
    pthread_t t;
    start_waiter(&t, &w, l, 20000, -1);
    assert_true(test_wait_for_count(subscribers, name, 1, 3000));
    test_sleep_ms(300); /* past the try after subscribing: asleep now */
    assert_int_equal(atomic_load(&w.rc), 99);
    int64_t t0 = test_now_us();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&w.rc), DLOCK_OK);
    int64_t took_us = atomic_load(&w.done_us) - t0;
    printf("# woken out of a 5 s backoff %.3f ms after the release\n", (double)took_us / 1000.0);
    assert_true(took_us < 1000000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Without wake-ups a waiter sleeps its whole backoff (5 s here) between
 * looks: a cancel from another thread must still end that sleep at once
 * (it wakes the call's loop). */
static void cancel_ends_a_backoff_sleep_at_once(void **state)
{
    (void)state;
    const char *name = "wk:cancel-backoff";
    dlock_client *c = new_client(0);
    dlock_lock *holder = new_lock(c, name, 30000, 5000, 5000);
    dlock_lock *l = new_lock(c, name, 30000, 5000, 5000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    waiter w = {0};
    pthread_t t;
    start_waiter(&t, &w, l, 20000, -1);
    test_sleep_ms(300);
    assert_int_equal(atomic_load(&w.rc), 99);
    int64_t t0 = test_now_us();
    dlock_lock_cancel(l);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&w.rc), DLOCK_ECANCELED);
    int64_t took_us = atomic_load(&w.done_us) - t0;
    printf("# cancel ended a 5 s backoff after %.3f ms\n", (double)took_us / 1000.0);
    assert_true(took_us < 1000000);
    assert_string_equal(dlock_lock_errmsg(l), "cancelled while waiting for \"wk:cancel-backoff\"");
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 1000), DLOCK_OK); /* the cancel was used up */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(l);
    dlock_client_free(c);
}

#define T(f) cmocka_unit_test(f)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(waiters_of_a_crashed_holder_get_the_lock_after_its_expiry),
        T(waiter_wakes_within_milliseconds_of_a_release),
        T(each_release_wakes_the_waiters_and_they_take_turns),
        T(cancelled_waiter_returns_ecanceled_promptly),
        T(waiting_works_by_polling_when_wakeups_are_off),
        T(release_by_another_handle_ends_the_waiters_backoff_sleep),
        T(cancel_ends_a_backoff_sleep_at_once),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
