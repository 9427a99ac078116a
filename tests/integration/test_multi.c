/* SPDX-License-Identifier: BSD-3-Clause */
/* Several names at once (dlock_lock_new_multi()) against real
 * redis-servers: all or nothing, no deadlock between {a, b} and {b, a}
 * (processes counting themselves in and out), one validity, renewal and
 * loss of the set (and its start over), cancel (used once), extend when a
 * name was taken, the first name's token, forget, sets of shared locks,
 * bad arguments, and three nodes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_kinds.h"
#include "test_util.h"

static dlock_lock *multi(dlock_client *c, const char *const *names, size_t n, int64_t ttl_ms,
                         unsigned flags)
{
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = flags;
    o.retry_min_ms = 1;
    o.retry_max_ms = 20;
    assert_int_equal(dlock_lock_new_multi(&l, c, names, n, &o), DLOCK_OK);
    return l;
}

static void all_or_nothing(void **state)
{
    (void)state;
    const char *abc[] = {"m:c", "m:a", "m:b"};
    dlock_lock *other = test_lock_new(test_cl, "m:b", 10000, 0, 1, 20);
    dlock_lock *set = multi(test_cl, abc, 3, 10000, 0);
    assert_string_equal(dlock_lock_name(set), "m:a m:b m:c");
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_ENOTACQUIRED);
    assert_non_null(strstr(dlock_lock_errmsg(set), "m:b"));
    assert_int_equal(test_key_exists(&test_srv, "m:a"), 0); /* given back */
    assert_int_equal(test_key_exists(&test_srv, "m:c"), 0); /* never taken */
    assert_int_equal(dlock_lock_acquire(set, 200), DLOCK_ETIMEDOUT);
    assert_int_equal(test_key_exists(&test_srv, "m:a"), 0);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "m:a") + test_key_exists(&test_srv, "m:b") +
                         test_key_exists(&test_srv, "m:c"), 3);
    int64_t v = dlock_lock_validity_ms(set);
    assert_true(v > 9000 && v <= 10000);
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_EINVAL); /* held already */
    assert_int_equal(dlock_lock_adopt(set, "tok"), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_extend(set, 20000), DLOCK_OK);
    assert_true(test_key_pttl(&test_srv, "m:c") > 15000);
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "m:a") + test_key_exists(&test_srv, "m:b") +
                         test_key_exists(&test_srv, "m:c"), 0);
    assert_int_equal(dlock_lock_release(set), DLOCK_ENOTHELD);
    dlock_lock_free(other);
    dlock_lock_free(set);
}

typedef struct ctx {
    const char *url;
    test_census *cs;
} ctx;

/* Even i take {x, y}, odd i take {y, x}; each set is exclusive. */
static int order_worker(int i, void *arg)
{
    ctx *x = arg;
    const char *xy[] = {"m:x", "m:y"}, *yx[] = {"m:y", "m:x"};
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    dlock_lock_options o = test_kinds_worker_options(10, 0);
    if (dlock_client_new(&c, &x->url, 1, NULL, NULL, 0) != DLOCK_OK ||
        dlock_lock_new_multi(&l, c, i % 2 ? yx : xy, 2, &o) != DLOCK_OK)
        return 1;
    return test_census_rounds(x->cs, c, l, 40, 0, 0, 1000);
}

static void opposite_orders_do_not_deadlock(void **state)
{
    (void)state;
    test_census *cs = test_census_new();
    ctx x = {test_srv.url, cs};
    int64_t t0 = test_now_ms();
    assert_int_equal(test_run_procs(6, order_worker, &x), 0);
    printf("# %d sets taken in %lld ms by 6 processes ({x,y} and {y,x}), violations %d\n",
           atomic_load(&cs->sections), (long long)(test_now_ms() - t0),
           atomic_load(&cs->violations));
    assert_int_equal(atomic_load(&cs->errors), 0);
    assert_int_equal(atomic_load(&cs->violations), 0);
    assert_int_equal(atomic_load(&cs->sections), 6 * 40);
    test_census_free(cs);
}

static atomic_int lost_calls;
static dlock_lock *lost_handle;

static void on_lost(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)why;
    (void)arg;
    lost_handle = l;
    atomic_fetch_add(&lost_calls, 1);
}

static void renewal_and_loss_of_the_set(void **state)
{
    (void)state;
    const char *ab[] = {"m:r1", "m:r2"};
    dlock_lock *set = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 1500; /* renewed every 500 ms: room for a loaded machine */
    o.flags = DLOCK_AUTO_RENEW;
    o.on_lost = on_lost;
    assert_int_equal(dlock_lock_new_multi(&set, test_cl, ab, 2, &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    test_sleep_ms(3500); /* more than two leases */
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_HELD);
    assert_true(dlock_lock_validity_ms(set) > 0); /* the set's validity follows renewals */
    assert_int_equal(test_key_exists(&test_srv, "m:r2"), 1);
    /* One name taken away: the set is lost, on_lost once with the set. */
    test_cmd_status(&test_srv, "SET m:r2 thief PX 10000");
    assert_true(test_wait_for_state(set, DLOCK_STATE_LOST, 5000));
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_ptr_equal(lost_handle, set);
    assert_int_equal(dlock_lock_release(set), DLOCK_ELOST);
    assert_int_equal(test_key_exists(&test_srv, "m:r1"), 0); /* the other name given back */
    char *v = test_cmd_str(&test_srv, "GET m:r2");
    assert_string_equal(v, "thief");
    free(v);
    dlock_lock_free(set);
}

/* A set whose lease ended: extend says so and the set lets go of every
 * name, so that its next acquire starts clean (it used to keep the names'
 * handles held: DLOCK_EINVAL "already holds"). */
static void extend_after_the_lease_ended_lets_every_name_go(void **state)
{
    (void)state;
    const char *ab[] = {"m:e1", "m:e2"};
    dlock_lock *set = multi(test_cl, ab, 2, 200, 0);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    test_sleep_ms(300);
    assert_int_equal(dlock_lock_extend(set, 1000), DLOCK_EEXPIRED);
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    dlock_lock_free(set);
}

/* Free while the watchdog renews the names: every name is given back
 * (nothing is left in Redis). It is also the stress for the order of free
 * (a round renewing a later name reads the whole set, so names leave the
 * watchdog before any is freed); the race it stresses was not hit by ASan
 * runs of the earlier order, so that part is argued, not shown. */
#define FREE_NAMES 200

static void free_while_renewing(void **state)
{
    (void)state;
    static char buf[FREE_NAMES][16];
    const char *names[FREE_NAMES];
    for (int i = 0; i < FREE_NAMES; i++) {
        snprintf(buf[i], sizeof buf[i], "m:f%03d", i);
        names[i] = buf[i];
    }
    /* 200 names freed one by one take a round or more of a 300 ms lease
     * (renewed every 100 ms): rounds run while the set is half freed. (A
     * name the loaded watchdog let lapse is fine here: free must leave
     * nothing either way.) */
    for (int i = 0; i < 3; i++) {
        dlock_lock *set = multi(test_cl, names, FREE_NAMES, 300,
                                DLOCK_AUTO_RENEW | DLOCK_NO_FENCE);
        assert_int_equal(dlock_lock_acquire(set, DLOCK_WAIT_FOREVER), DLOCK_OK);
        test_sleep_ms(120);
        assert_true(test_cmd_int(&test_srv, "DBSIZE") > 0);
        dlock_lock_free(set);
        assert_int_equal(test_cmd_int(&test_srv, "DBSIZE"), 0);
    }
}

static void *cancel_later(void *arg)
{
    test_sleep_ms(200);
    dlock_lock_cancel(arg);
    return NULL;
}

static void cancel_and_shared_sets(void **state)
{
    (void)state;
    const char *ab[] = {"m:s1", "m:s2"};
    dlock_lock *w = test_lock_new(test_cl, "m:s2", 10000, DLOCK_EXCLUSIVE, 1, 20);
    dlock_lock *set = multi(test_cl, ab, 2, 10000, DLOCK_SHARED);
    dlock_lock *set2 = multi(test_cl, ab, 2, 10000, DLOCK_SHARED);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set2, 0), DLOCK_OK); /* shares, both sets */
    assert_int_equal(dlock_lock_fence(set), 0);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    assert_int_equal(dlock_lock_release(set2), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    /* A set waiting on m:s2 forever, cancelled from another thread:
     * m:s1, taken first, is given back. */
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, set);
    assert_int_equal(dlock_lock_acquire(set, DLOCK_WAIT_FOREVER), DLOCK_ECANCELED);
    pthread_join(th, NULL);
    assert_int_equal(test_key_exists(&test_srv, "m:s1"), 0);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK); /* no stale cancel left */
    dlock_lock_free(set); /* free gives back what it holds */
    assert_int_equal(test_key_exists(&test_srv, "m:s1"), 0);
    dlock_lock_free(set2);
    dlock_lock_free(w);
}

/* The cancel that ended a set's wait (on its second name) was that wait's:
 * the next waiting acquire is not cancelled by it. A cancel that came
 * before a waiting acquire still stops it, once. */
static void a_cancel_is_used_once(void **state)
{
    (void)state;
    const char *ab[] = {"m:c1", "m:c2"};
    dlock_lock *other = test_lock_new(test_cl, "m:c2", 10000, 0, 1, 20);
    dlock_lock *set = multi(test_cl, ab, 2, 10000, 0);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, set);
    assert_int_equal(dlock_lock_acquire(set, DLOCK_WAIT_FOREVER), DLOCK_ECANCELED);
    pthread_join(th, NULL);
    assert_non_null(strstr(dlock_lock_errmsg(set), "m:c2"));
    assert_int_equal(test_key_exists(&test_srv, "m:c1"), 0);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 2000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    dlock_lock_cancel(set);
    assert_int_equal(dlock_lock_acquire(set, 2000), DLOCK_ECANCELED);
    assert_int_equal(dlock_lock_acquire(set, 2000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    dlock_lock_free(set);
    dlock_lock_free(other);
}

/* One name taken by someone else: the set's extend says which, and the
 * set lets go of every name. */
static void extend_when_a_name_was_taken(void **state)
{
    (void)state;
    const char *ab[] = {"m:t1", "m:t2"};
    dlock_lock *set = multi(test_cl, ab, 2, 10000, 0);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    test_cmd_status(&test_srv, "SET m:t2 thief PX 10000");
    assert_int_equal(dlock_lock_extend(set, 20000), DLOCK_ENOTOWNER);
    assert_non_null(strstr(dlock_lock_errmsg(set), "m:t2"));
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_hold_count(set), 0);
    assert_int_equal(test_key_exists(&test_srv, "m:t1"), 0); /* given back */
    char *v = test_cmd_str(&test_srv, "GET m:t2");
    assert_string_equal(v, "thief");
    free(v);
    assert_int_equal(dlock_lock_release(set), DLOCK_ENOTHELD);
    dlock_lock_free(set);
}

/* The set's token and fence are its first name's (sorted); forget drops
 * every name and sends nothing. */
static void token_of_the_first_name_and_forget(void **state)
{
    (void)state;
    const char *ba[] = {"m:k2", "m:k1"};
    dlock_lock *set = multi(test_cl, ba, 2, 10000, 0);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_hold_count(set), 1);
    assert_true(dlock_lock_fence(set) > 0);
    char *v = test_cmd_str(&test_srv, "GET m:k1");
    assert_non_null(dlock_lock_token(set));
    assert_string_equal(v, dlock_lock_token(set));
    free(v);
    assert_int_equal(dlock_lock_forget(set), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_UNLOCKED);
    assert_null(dlock_lock_token(set));
    assert_int_equal(test_key_exists(&test_srv, "m:k1") + test_key_exists(&test_srv, "m:k2"), 2);
    assert_int_equal(dlock_lock_forget(set), DLOCK_ENOTHELD);
    /* The names forgot their holds too: theirs are someone else's now. */
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_ENOTACQUIRED);
    assert_non_null(strstr(dlock_lock_errmsg(set), "m:k1"));
    assert_int_equal(test_cmd_int(&test_srv, "DEL m:k1 m:k2"), 2);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    dlock_lock_free(set);
}

/* A set lost through one name: on_lost once, no validity; its next
 * acquire starts over, and gives back what it took when the taken name is
 * still someone else's. */
static void a_lost_set_starts_over(void **state)
{
    (void)state;
    const char *ab[] = {"m:l1", "m:l2"};
    dlock_lock *set = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 1500;
    o.flags = DLOCK_AUTO_RENEW;
    o.on_lost = on_lost;
    atomic_store(&lost_calls, 0);
    assert_int_equal(dlock_lock_new_multi(&set, test_cl, ab, 2, &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    test_cmd_status(&test_srv, "SET m:l2 thief PX 10000");
    assert_true(test_wait_for_state(set, DLOCK_STATE_LOST, 5000));
    assert_int_equal(dlock_lock_validity_ms(set), 0);
    assert_int_equal(dlock_lock_extend(set, 0), DLOCK_ELOST);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(test_key_exists(&test_srv, "m:l1"), 0);
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_UNLOCKED);
    assert_int_equal(test_cmd_int(&test_srv, "DEL m:l2"), 1);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_ptr_equal(lost_handle, set);
    dlock_lock_free(set);
}

static void bad_arguments(void **state)
{
    (void)state;
    dlock_lock *l = (dlock_lock *)1;
    const char *ok[] = {"m:a", "m:b"};
    const char *dup[] = {"m:a", "m:b", "m:a"};
    const char *empty[] = {"m:a", ""};
    const char *null_name[] = {"m:a", NULL};
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    assert_int_equal(dlock_lock_new_multi(&l, test_cl, ok, 0, NULL), DLOCK_EINVAL);
    assert_null(l);
    assert_int_equal(dlock_lock_new_multi(&l, test_cl, NULL, 2, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new_multi(NULL, test_cl, ok, 2, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new_multi(&l, NULL, ok, 2, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new_multi(&l, test_cl, dup, 3, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new_multi(&l, test_cl, empty, 2, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new_multi(&l, test_cl, null_name, 2, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new_multi(&l, test_cl, ok, DLOCK_MULTI_MAX + 1, NULL),
                     DLOCK_EINVAL);
    o.flags = DLOCK_FAIR;
    assert_int_equal(dlock_lock_new_multi(&l, test_cl, ok, 2, &o), DLOCK_ENOTSUP);
    o.flags = DLOCK_SHARED | DLOCK_EXCLUSIVE;
    assert_int_equal(dlock_lock_new_multi(&l, test_cl, ok, 2, &o), DLOCK_EINVAL);
    o.flags = 0;
    o.ttl_ms = -1;
    assert_int_equal(dlock_lock_new_multi(&l, test_cl, ok, 2, &o), DLOCK_EINVAL);
    assert_null(l);
    /* One name is a set too. */
    l = multi(test_cl, ok, 1, 1000, 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}


static void redlock_sets(void **state)
{
    (void)state;
    dlock_client *c = test_kinds_nodes_client();
    const char *ab[] = {"m:b", "m:a"};
    dlock_lock *set = multi(c, ab, 2, 10000, 0);
    dlock_lock *b = test_lock_new(c, "m:b", 10000, 0, 1, 20);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_ENOTACQUIRED);
    for (int i = 0; i < TEST_KINDS_NODES; i++)
        assert_int_equal(test_key_exists(&test_kinds_nodes[i], "m:a"), 0);
    dlock_lock_free(b);
    dlock_lock_free(set);
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = DLOCK_FAIR;
    assert_int_equal(dlock_lock_new_multi(&l, c, ab, 2, &o), DLOCK_ENOTSUP);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest one[] = {
        cmocka_unit_test_teardown(all_or_nothing, test_srv_flush),
        cmocka_unit_test_teardown(opposite_orders_do_not_deadlock, test_srv_flush),
        cmocka_unit_test_teardown(renewal_and_loss_of_the_set, test_srv_flush),
        cmocka_unit_test_teardown(cancel_and_shared_sets, test_srv_flush),
        cmocka_unit_test_teardown(extend_after_the_lease_ended_lets_every_name_go,
                                  test_srv_flush),
        cmocka_unit_test_teardown(free_while_renewing, test_srv_flush),
        cmocka_unit_test_teardown(a_cancel_is_used_once, test_srv_flush),
        cmocka_unit_test_teardown(extend_when_a_name_was_taken, test_srv_flush),
        cmocka_unit_test_teardown(token_of_the_first_name_and_forget, test_srv_flush),
        cmocka_unit_test_teardown(a_lost_set_starts_over, test_srv_flush),
        cmocka_unit_test_teardown(bad_arguments, test_srv_flush),
    };
    const struct CMUnitTest three[] = {
        cmocka_unit_test(redlock_sets),
    };
    int failed = cmocka_run_group_tests_name("multi, one node", one, test_srv_client_setup,
                                             test_srv_client_teardown);
    failed += cmocka_run_group_tests_name("multi, three nodes", three, test_kinds_nodes_setup,
                                          test_kinds_nodes_teardown);
    return failed;
}
