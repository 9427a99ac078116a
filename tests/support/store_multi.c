/* SPDX-License-Identifier: BSD-3-Clause */
/* Several names at once (dlock_lock_new_multi()) on a store whose every
 * wait is a place in line (etcd, ZooKeeper: backend.h, in_line), one test
 * body run by a main per store (tests/etcd/test_etcd_multi.c,
 * tests/zk/test_zk_multi.c) against a real server. Each name is the
 * store's own lock; the set takes them in one sorted order and all or
 * nothing, as on Redis (src/engine/set.c drives them through the engine,
 * whatever the store). All or nothing, a plain lock on one name waiting
 * for the whole set, no deadlock between sets taking the same names in
 * opposite orders (6 threads, every section counted), renewal of the
 * names and the loss of one of them ending the set (where the store can
 * break a hold), and a cancel. */
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
#include "proc.h"
#include "store_multi.h"
#include "test_kinds.h"
#include "test_util.h"

static const char *url;
static dlock_client *cl;

static dlock_lock *multi(const char *const *names, size_t n, int64_t ttl_ms, unsigned flags,
                         dlock_lost_fn on_lost)
{
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = flags;
    o.retry_min_ms = 5;
    o.retry_max_ms = 50;
    o.on_lost = on_lost;
    assert_int_equal(dlock_lock_new_multi(&l, cl, names, n, &o), DLOCK_OK);
    return l;
}

static dlock_lock *plain(const char *name)
{
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    assert_int_equal(dlock_lock_new(&l, cl, name, &o), DLOCK_OK);
    return l;
}

static int held(const char *name)
{
    dlock_node_status st;
    assert_int_equal(dlock_client_status(cl, name, 1, &st, NULL), DLOCK_OK);
    return st.held;
}

static void all_or_nothing(void **state)
{
    (void)state;
    const char *abc[] = {"m/c", "m/a", "m/b"};
    dlock_lock *other = plain("m/b");
    dlock_lock *set = multi(abc, 3, 10000, 0, NULL);
    assert_string_equal(dlock_lock_name(set), "m/a m/b m/c");
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_ENOTACQUIRED);
    assert_non_null(strstr(dlock_lock_errmsg(set), "m/b"));
    assert_int_equal(held("m/a"), 0); /* given back */
    assert_int_equal(held("m/c"), 0); /* never taken */
    assert_int_equal(dlock_lock_acquire(set, 300), DLOCK_ETIMEDOUT);
    assert_int_equal(held("m/a"), 0);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    assert_int_equal(held("m/a") + held("m/b") + held("m/c"), 3);
    assert_true(dlock_lock_fence(set) > 0);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_extend(set, 20000), DLOCK_OK);
    /* ZooKeeper's lease is the session's (its timeout, 10 s), whatever
     * the TTL asked; etcd's is the new TTL */
    assert_true(dlock_lock_validity_ms(set) > (strncmp(url, "zk://", 5) == 0 ? 5000 : 15000));
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    assert_int_equal(held("m/a") + held("m/b") + held("m/c"), 0);
    assert_int_equal(dlock_lock_release(set), DLOCK_ENOTHELD);
    dlock_lock_free(other);
    dlock_lock_free(set);
}

/* A plain lock on a name of the set waits in that name's line for the
 * whole set's release, and gets it then. */
typedef struct waiter {
    dlock_lock *l;
    int rc;
    int64_t got_ms;
} waiter;

static void *wait_for(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, 20000);
    w->got_ms = test_now_ms();
    return NULL;
}

static void a_plain_waiter_gets_a_name_when_the_set_lets_go(void **state)
{
    (void)state;
    const char *ab[] = {"w/a", "w/b"};
    dlock_lock *set = multi(ab, 2, 10000, 0, NULL);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    waiter w = {.l = plain("w/b")};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for, &w), 0);
    test_sleep_ms(500);
    assert_int_equal(w.got_ms, 0); /* still waiting */
    int64_t released = test_now_ms();
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.got_ms - released < 2000);
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(set);
}

typedef struct orderer {
    test_census *cs;
    int i, rc;
} orderer;

/* Even i take {x, y}, odd i take {y, x}; each set is exclusive. Threads,
 * each with a client of its own, not processes: a ZooKeeper client has
 * its session thread, and TSan refuses a fork after threads. */
static void *order_worker(void *arg)
{
    orderer *w = arg;
    const char *xy[] = {"o/x", "o/y"}, *yx[] = {"o/y", "o/x"};
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    dlock_lock_options o = test_kinds_worker_options(20, 0);
    w->rc = 1;
    if (dlock_client_new(&c, &url, 1, NULL, NULL, 0) != DLOCK_OK)
        return NULL;
    if (dlock_lock_new_multi(&l, c, w->i % 2 ? yx : xy, 2, &o) != DLOCK_OK) {
        dlock_client_free(c);
        return NULL;
    }
    w->rc = test_census_rounds(w->cs, c, l, 15, 0, 0, 1000); /* frees l and c */
    return NULL;
}

static void opposite_orders_do_not_deadlock(void **state)
{
    (void)state;
    test_census *cs = test_census_new();
    orderer w[6];
    pthread_t t[6];
    int64_t t0 = test_now_ms();
    for (int i = 0; i < 6; i++) {
        w[i] = (orderer){cs, i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, order_worker, &w[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].rc, 0);
    }
    printf("# %d sets taken in %lld ms by 6 threads ({x,y} and {y,x}), violations %d\n",
           atomic_load(&cs->sections), (long long)(test_now_ms() - t0),
           atomic_load(&cs->violations));
    assert_int_equal(atomic_load(&cs->errors), 0);
    assert_int_equal(atomic_load(&cs->violations), 0);
    assert_int_equal(atomic_load(&cs->sections), 6 * 15);
    test_census_free(cs);
}

static atomic_int lost_calls;

static void on_lost(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)l, (void)why, (void)arg;
    atomic_fetch_add(&lost_calls, 1);
}

/* The names are renewed past several leases; one of them broken (its key
 * deleted, as an operator would) loses the whole set, on_lost once. */
static void renewal_and_loss_of_the_set(void **state)
{
    (void)state;
    const char *ab[] = {"r/1", "r/2"};
    atomic_store(&lost_calls, 0);
    dlock_lock *set = multi(ab, 2, 2000, DLOCK_AUTO_RENEW, on_lost);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    test_sleep_ms(4500); /* more than two leases */
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_HELD);
    assert_int_equal(atomic_load(&lost_calls), 0);
    dlock_break_result res;
    int rc = dlock_client_break(cl, "r/2", 0, &res);
    if (rc == DLOCK_ENOTSUP) { /* ZooKeeper, stage 1: no break */
        printf("# no dlock_client_break() on this store: the loss is not checked\n");
        assert_int_equal(dlock_lock_release(set), DLOCK_OK);
        dlock_lock_free(set);
        return;
    }
    assert_int_equal(rc, DLOCK_OK);
    int64_t end = test_now_ms() + 6000;
    while (atomic_load(&lost_calls) == 0 && test_now_ms() < end)
        test_sleep_ms(20);
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_LOST);
    assert_int_equal(dlock_lock_release(set), DLOCK_ELOST);
    assert_int_equal(held("r/1"), 0); /* the names still held were let go */
    dlock_lock_free(set);
}

static void *cancel_later(void *arg)
{
    test_sleep_ms(300);
    dlock_lock_cancel(arg);
    return NULL;
}

static void a_cancel_ends_a_sets_wait(void **state)
{
    (void)state;
    const char *ab[] = {"c/a", "c/b"};
    dlock_lock *other = plain("c/b");
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    dlock_lock *set = multi(ab, 2, 10000, 0, NULL);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cancel_later, set), 0);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(set, DLOCK_WAIT_FOREVER), DLOCK_ECANCELED);
    pthread_join(t, NULL);
    assert_true(test_now_ms() - t0 < 3000);
    assert_int_equal(held("c/a"), 0);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    assert_int_equal(held("c/b"), 0); /* the cancelled wait left c/b's line */
    dlock_lock_free(other);
    dlock_lock_free(set);
}

int test_store_multi_run(const char *store_url)
{
    url = store_url;
    if (dlock_client_new(&cl, &url, 1, NULL, NULL, 0) != DLOCK_OK) {
        fprintf(stderr, "store_multi: no client of %s\n", url);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_or_nothing),
        cmocka_unit_test(a_plain_waiter_gets_a_name_when_the_set_lets_go),
        cmocka_unit_test(opposite_orders_do_not_deadlock),
        cmocka_unit_test(renewal_and_loss_of_the_set),
        cmocka_unit_test(a_cancel_ends_a_sets_wait),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (!failed) /* a failed case may have left handles: the free would abort */
        dlock_client_free(cl);
    cl = NULL;
    return failed;
}
