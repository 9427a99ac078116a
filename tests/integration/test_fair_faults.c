/* SPDX-License-Identifier: BSD-3-Clause */
/* Fair mode when a node runs a waiter's commands but its answers are lost
 * (the chaos suite's fault proxy in DEAF mode in front of the waiter's
 * node). A waiter that gives up at its deadline leaves the line; a leave
 * that goes unanswered may still have run and confirmed a hand-over the
 * line made to the waiter meanwhile (fair_leave.lua), which gives the lock
 * the whole TTL. The release by the waiter's token is queued behind the
 * leave, as after a cancel (src/redis/fair.c), so the node lets the lock
 * go right after the leave, rather than at the TTL or at the handle's
 * next acquire or free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "dlock.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_deadline_leave_left_unanswered_lets_the_handed_lock_go),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
