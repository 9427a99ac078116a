/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_stats() under threads (runs under TSan with the threads
 * label): four threads acquire and release their own names on one client
 * while a fifth takes snapshots, and an observer counts on every thread.
 * Every snapshot is monotonic figure by figure, and the last one counts
 * exactly what the threads did and what the hooks saw. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "dlock.h"
#include "redis_server.h"
#include "test_util.h"

#define THREADS 4
#define ROUNDS 150

static atomic_int ends_seen, holds_seen;
static atomic_int workers_done;

static void on_end(void *arg, const dlock_acquire_event *ev)
{
    (void)arg;
    if (ev->result == DLOCK_OK)
        atomic_fetch_add(&ends_seen, 1);
}

static void on_hold(void *arg, const dlock_hold_event *ev)
{
    (void)arg;
    if (ev->how == DLOCK_HOLD_RELEASED)
        atomic_fetch_add(&holds_seen, 1);
}

static const dlock_observer observer = {
    .version = DLOCK_OBSERVER_VERSION, .acquire_end = on_end, .hold_end = on_hold};

typedef struct worker {
    dlock_client *c;
    int no;
    int failures;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    char name[32];
    snprintf(name, sizeof name, "stats:%d", w->no);
    dlock_lock *l = NULL;
    if (dlock_lock_new(&l, w->c, name, NULL) != DLOCK_OK) {
        w->failures = ROUNDS;
    } else {
        for (int i = 0; i < ROUNDS; i++)
            w->failures += dlock_lock_acquire(l, 1000) != DLOCK_OK ||
                           dlock_lock_release(l) != DLOCK_OK;
    }
    dlock_lock_free(l);
    atomic_fetch_add(&workers_done, 1);
    return NULL;
}

typedef struct reader {
    dlock_client *c;
    int snapshots, backwards;
} reader;

static void *read_stats(void *arg)
{
    reader *r = arg;
    dlock_stats prev;
    memset(&prev, 0, sizeof prev);
    while (atomic_load(&workers_done) < THREADS) {
        dlock_stats s;
        if (dlock_client_stats(r->c, &s, sizeof s) != DLOCK_OK) {
            r->backwards++;
            break;
        }
        r->backwards += s.acquires < prev.acquires || s.holds_released < prev.holds_released ||
                        s.acquire_duration.count < prev.acquire_duration.count;
        prev = s;
        r->snapshots++;
    }
    return NULL;
}

static void snapshots_under_threads_count_every_event_exactly(void **state)
{
    (void)state;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.observer = &observer;
    dlock_client *c = test_client_for(&test_srv, &o);
    worker w[THREADS];
    pthread_t t[THREADS + 1];
    reader r = {c, 0, 0};
    assert_int_equal(pthread_create(&t[THREADS], NULL, read_stats, &r), 0);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){c, i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i <= THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(w[i].failures, 0);
    assert_int_equal(r.backwards, 0);
    assert_true(r.snapshots > 0);

    dlock_stats s;
    assert_int_equal(dlock_client_stats(c, &s, sizeof s), DLOCK_OK);
    const uint64_t n = THREADS * ROUNDS;
    assert_int_equal(s.acquires, n);
    assert_int_equal(s.acquires_granted, n);
    assert_int_equal(s.acquire_attempts, n);
    assert_int_equal(s.holds_released, n);
    assert_int_equal(s.acquire_duration.count, n);
    assert_int_equal(s.hold_duration.count, n);
    uint64_t in_buckets = 0;
    for (int i = 0; i < DLOCK_STATS_BUCKETS; i++)
        in_buckets += s.acquire_duration.bucket[i];
    assert_int_equal(in_buckets, n);
    assert_int_equal(atomic_load(&ends_seen), n);
    assert_int_equal(atomic_load(&holds_seen), n);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(snapshots_under_threads_count_every_event_exactly),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
