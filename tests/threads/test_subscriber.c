/* SPDX-License-Identifier: BSD-3-Clause */
/* The wake-up thread's subscriber connection (issue 20): one that never
 * becomes usable (a connect, TLS handshake or AUTH that hangs, or a node
 * that went silent before confirming the SUBSCRIBE) is dropped after
 * connect + I/O timeout and made again, so the node's waiters get their
 * wake-ups back once the path heals. Before, such a connection was kept
 * for as long as the kernel kept it, and every later wait on that client
 * paid connect + I/O timeout for a confirmation that never came, then
 * polled.
 *
 * The fault is the chaos proxy's BLACKHOLE (tests/chaos/proxy.c): in
 * front of a real redis-server, it accepts connections and forwards
 * nothing; a connection blackholed once stays so until it is closed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "dlock.h"
#include "proc.h"
#include "proxy.h"
#include "redis_server.h"
#include "test_util.h"
#include "wakeup.h"

#define TIMEOUT_MS 200

static chaos_proxy proxy;

static int setup(void **state)
{
    if (test_srv_setup(state) != 0)
        return -1;
    return chaos_proxy_start(&proxy, test_srv.port);
}

static int teardown(void **state)
{
    chaos_proxy_stop(&proxy);
    return test_srv_teardown(state);
}

/* A client whose every connection goes through the proxy, with
 * connect and I/O timeouts of timeout_ms. */
static dlock_client *proxied_client(int timeout_ms)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", proxy.port);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = timeout_ms;
    o.io_timeout_ms = timeout_ms;
    const char *urls[] = {url};
    return test_client_new(urls, 1, &o);
}

/* A waiter record as the waiting acquire makes one (src/redis/wait.c),
 * with the mutex, condition and cancel flag it points to. */
typedef struct test_waiter {
    dlock__waiter w;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int canceled;
} test_waiter;

static void test_waiter_init(test_waiter *t, const char *channel)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cond, NULL);
    t->w.channel = channel;
    t->w.channel_len = strlen(channel);
    t->w.mu = &t->mu;
    t->w.cond = &t->cond;
    t->w.canceled = &t->canceled;
}

static void test_waiter_clear(test_waiter *t)
{
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->mu);
}

/* Watch and wait for the confirmation, at most connect + I/O timeout (the
 * engine's wait does the same on its loop): DLOCK_OK if confirmed, else
 * not watched. */
static int watch_confirmed(dlock_client *c, dlock__waiter *w, int timeout_ms)
{
    int rc = dlock__wakeup_watch_start(c, w);
    if (rc != DLOCK_OK)
        return rc;
    if (dlock__wakeup_watch_ready(c, w, dlock__deadline_after_ms(2 * (int64_t)timeout_ms)) == 1)
        return DLOCK_OK;
    dlock__wakeup_unwatch(c, w);
    return DLOCK_EIO;
}

static void subscriber_that_never_confirms_is_made_again(void **state)
{
    (void)state;
    dlock_client *c = proxied_client(TIMEOUT_MS);
    test_waiter tw;
    test_waiter_init(&tw, "dlock:wake:sub:blackholed");
    dlock__waiter *w = &tw.w;

    assert_int_equal(chaos_proxy_set(&proxy, CHAOS_PROXY_BLACKHOLE, 0), 0);
    /* The subscriber connects (the proxy accepts) and its SUBSCRIBE goes
     * nowhere: no confirmation within connect + I/O timeout. */
    assert_int_not_equal(watch_confirmed(c, w, TIMEOUT_MS), DLOCK_OK);
    assert_int_equal(chaos_proxy_set(&proxy, CHAOS_PROXY_PASS, 0), 0);

    /* Healed: a new subscriber connection goes through. The old one stays
     * blackholed for as long as it is kept. */
    int ok = 0;
    for (int i = 0; i < 20 && !ok; i++) {
        ok = watch_confirmed(c, w, TIMEOUT_MS) == DLOCK_OK;
        if (ok)
            dlock__wakeup_unwatch(c, w);
        else
            test_sleep_ms(100);
    }
    printf("# watch after the path healed: %s\n", ok ? "confirmed" : "never confirmed");
    assert_true(ok);
    dlock_client_free(c);
    test_waiter_clear(&tw);
}

/* The engine's wait does not block in a watch (issue 36): a subscription
 * that no node confirms delays the next try until the wait's own
 * deadline at most, not connect + I/O timeout. Before, a 300 ms wait
 * returned only after the watch gave up (here 1500 ms). */
static void wait_ends_at_its_deadline(unsigned flags, const char *name)
{
    dlock_client *c = proxied_client(750);
    dlock_client *other = test_client_for(&test_srv, NULL);
    dlock_lock *holder = test_lock_new(other, name, 10000, flags, 10, 50);
    dlock_lock *l = test_lock_new(c, name, 10000, flags, 1000, 1000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);

    /* The client's subscriber connection is made now, and blackholed for
     * as long as it lives (connect + I/O timeout): its SUBSCRIBE is lost.
     * (The proxy blackholes every connection open then: the lock's are
     * made after.) */
    test_waiter tw;
    test_waiter_init(&tw, "dlock:wake:sub:other");
    dlock__waiter *w = &tw.w;
    assert_int_equal(chaos_proxy_set(&proxy, CHAOS_PROXY_BLACKHOLE, 0), 0);
    assert_int_equal(dlock__wakeup_watch_start(c, w), DLOCK_OK);
    test_sleep_ms(100);
    assert_int_equal(dlock__wakeup_watch_ready(c, w, 0), 0);
    assert_int_equal(chaos_proxy_set(&proxy, CHAOS_PROXY_PASS, 0), 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED); /* the path is clear */

    /* The try goes through the pooled connection; the watch that follows
     * is never confirmed in time. */
    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(l, 300);
    int64_t took = test_now_ms() - t0;
    printf("# a 300 ms %s wait with its watch unconfirmed: %s after %lld ms\n",
           flags & DLOCK_FAIR ? "fair" : "default", dlock_errname(rc), (long long)took);
    assert_int_equal(rc, DLOCK_ETIMEDOUT);
    assert_true(took < 1000);
    dlock__wakeup_unwatch(c, w);
    dlock_lock_free(l);
    dlock_lock_free(holder);
    dlock_client_free(other);
    dlock_client_free(c);
    test_waiter_clear(&tw);
}

static void a_wait_ends_at_its_deadline_while_its_watch_is_unconfirmed(void **state)
{
    (void)state;
    wait_ends_at_its_deadline(0, "sub:deadline");
}

/* The same of a fair wait, which watches before its first look (its
 * hand-over may come right after it): it was the last wait that blocked
 * in its watch, 1500 ms here, until it moved into the engine. */
static void a_fair_wait_ends_at_its_deadline_while_its_watch_is_unconfirmed(void **state)
{
    (void)state;
    wait_ends_at_its_deadline(DLOCK_FAIR, "sub:deadline:fair");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(subscriber_that_never_confirms_is_made_again),
        cmocka_unit_test(a_wait_ends_at_its_deadline_while_its_watch_is_unconfirmed),
        cmocka_unit_test(a_fair_wait_ends_at_its_deadline_while_its_watch_is_unconfirmed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
