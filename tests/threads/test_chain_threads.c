/* SPDX-License-Identifier: BSD-3-Clause */
/* Threads: several threads wait for the same locks on one Redlock client
 * (three nodes, one of them SIGSTOPped for a while), each acquire's chain
 * of fan-outs on its own call loop (attempt.h) checking connections out
 * of and back into the shared pools, while another thread cancels at
 * random. Every acquire ends with a documented code, the lock is never
 * held by two handles at once, and (under TSan, ASan) nothing races or
 * is used after its chain ended. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"
#include "test_waiter.h"

#define N3 3
#define THREADS 4
#define ROUNDS 25

static dlock_client *cl;
static dlock_lock *locks[THREADS];
static atomic_int inside[2], overlaps, stop_cancel;
static atomic_int codes[16];

static void *worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    for (int k = 0; k < ROUNDS; k++) {
        int rc = dlock_lock_acquire(locks[i], 1500);
        atomic_fetch_add(&codes[-rc < 16 && rc <= 0 ? -rc : 15], 1);
        if (rc != DLOCK_OK && getenv("CHAIN_VERBOSE"))
            printf("# thread %d round %d: %s: %s\n", i, k, dlock_errname(rc),
                   dlock_lock_errmsg(locks[i]));
        if (rc != DLOCK_OK)
            continue;
        if (atomic_fetch_add(&inside[i / 2], 1) != 0)
            atomic_fetch_add(&overlaps, 1);
        test_sleep_ms(2);
        atomic_fetch_sub(&inside[i / 2], 1);
        (void)dlock_lock_release(locks[i]);
    }
    return NULL;
}

static void *canceller(void *arg)
{
    (void)arg;
    unsigned n = 0;
    while (!atomic_load(&stop_cancel)) {
        dlock_lock_cancel(locks[n++ % THREADS]);
        test_sleep_ms(7);
    }
    return NULL;
}

static void many_threads_wait_on_one_client_with_cancels_and_a_stopped_node(void **state)
{
    (void)state;
    cl = test_client_timeouts(test_nodes, N3, 300, 300);
    for (int i = 0; i < THREADS; i++)
        locks[i] = test_lock_new(cl, i >= 2 ? "chain:r" : "chain:a", 2000,
                                 i >= 2 ? DLOCK_REENTRANT : 0, 5, 30);
    pthread_t th[THREADS], ct;
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i), 0);
    assert_int_equal(pthread_create(&ct, NULL, canceller, NULL), 0);
    test_sleep_ms(300);
    test_redis_pause(&test_nodes[2]);
    test_sleep_ms(1500);
    test_redis_resume(&test_nodes[2]);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    atomic_store(&stop_cancel, 1);
    pthread_join(ct, NULL);
    printf("# OK %d, ENOTACQUIRED %d, ETIMEDOUT %d, ECANCELED %d, ENOQUORUM %d, EUNKNOWN %d, "
           "other %d, overlaps %d\n",
           atomic_load(&codes[0]), atomic_load(&codes[1]), atomic_load(&codes[2]),
           atomic_load(&codes[3]), atomic_load(&codes[7]), atomic_load(&codes[11]),
           atomic_load(&codes[15]), atomic_load(&overlaps));
    assert_int_equal(atomic_load(&overlaps), 0);
    assert_int_equal(atomic_load(&codes[15]), 0);
    assert_true(atomic_load(&codes[0]) > 0);
    for (int i = 0; i < THREADS; i++)
        dlock_lock_free(locks[i]);
    dlock_client_free(cl);
}

/* The grant of the test below is on no majority of the nodes still up. */
static int not_on_majority(void *arg)
{
    (void)arg;
    return !(test_key_exists(&test_nodes[0], "chain:grace") &&
             test_key_exists(&test_nodes[1], "chain:grace"));
}

/* A Redlock attempt decided by a majority still listens a grace
 * (DLOCK__DECIDED_GRACE_MS, 100 ms) for a silent node. A cancel in that
 * grace came after the decision: the majority's grant must not be left
 * on the nodes behind a DLOCK_ECANCELED (nothing releases it, and nobody,
 * this handle included, gets the lock until its TTL ends). Either the
 * grant stands (DLOCK_OK) or nothing of it stays on a majority. */
static void a_cancel_in_the_decided_grace_leaves_no_grant_behind(void **state)
{
    (void)state;
    dlock_client *c = test_client_timeouts(test_nodes, N3, 2000, 2000);
    dlock_lock *l = test_lock_new(c, "chain:grace", 20000, 0, 5, 30);
    dlock_lock *other = test_lock_new(c, "chain:grace", 20000, 0, 5, 30);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* warm pools */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    test_redis_pause(&test_nodes[2]);
    test_waiter w;
    assert_int_equal(test_waiter_start(&w, l, DLOCK_WAIT_FOREVER, TEST_WAITER_KEEP), 0);
    test_sleep_ms(50); /* node 0 and 1 granted; node 2's grace runs */
    dlock_lock_cancel(l);
    int rc = test_waiter_join(&w);
    /* The undo queued behind the grant runs as soon as the node reads it:
     * a grant left behind would stay for the whole TTL (20 s). */
    int gone = test_wait_until(not_on_majority, NULL, 1000, 10);
    long long on0 = test_key_exists(&test_nodes[0], "chain:grace");
    long long on1 = test_key_exists(&test_nodes[1], "chain:grace");
    printf("# cancel 50 ms into the grace: %s (%s), key on node 0: %lld, node 1: %lld\n",
           dlock_errname(rc), dlock_lock_errmsg(l), on0, on1);
    if (rc == DLOCK_OK) {
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    } else {
        assert_int_equal(rc, DLOCK_ECANCELED);
        assert_true(gone);
    }
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    test_redis_resume(&test_nodes[2]);
    dlock_lock_free(l);
    dlock_lock_free(other);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            many_threads_wait_on_one_client_with_cancels_and_a_stopped_node, test_nodes_revive,
            test_nodes_revive),
        cmocka_unit_test_setup_teardown(a_cancel_in_the_decided_grace_leaves_no_grant_behind,
                                        test_nodes_revive, test_nodes_revive),
    };
    return cmocka_run_group_tests(tests, test_nodes_setup, test_nodes_teardown);
}
