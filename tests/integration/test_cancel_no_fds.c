/* SPDX-License-Identifier: BSD-3-Clause */
/* A cancel ends a waiting acquire at once even when the process has no
 * file descriptor to spare. The engine's wait (src/engine/acquire.c)
 * sleeps on its call's loop, which another thread wakes through an
 * eventfd; when that eventfd cannot be made (EMFILE) the blocking call
 * sleeps on the handle's condition variable instead, which a cancel
 * broadcasts. Found by review: without that fallback the cancel was seen
 * only when the backoff timer fired (115..2108 ms measured). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

static test_redis srv;

static int setup(void **state)
{
    (void)state;
    return test_redis_start(&srv, NULL);
}

static int teardown(void **state)
{
    (void)state;
    test_redis_stop(&srv);
    return 0;
}

typedef struct waiter {
    dlock_lock *l;
    int rc;
} waiter;

static void *wait_long(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, 20000);
    return NULL;
}

static void cancel_ends_a_wait_at_once_without_spare_fds(void **state)
{
    (void)state;
    test_flushall(&srv);
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.wakeups = 0; /* the waiter backs off: no subscriber needing fds either */
    dlock_client *c = test_client_for(&srv, &co);
    dlock_lock *holder = test_lock_new(c, "busy", 60000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    /* Three waiters, their connections made while fds are still there
     * (a try needs one; the wait's eventfd is what must be missing). */
    waiter w[3];
    for (int i = 0; i < 3; i++)
        w[i] = (waiter){test_lock_new(c, "busy", 60000, 0, 4000, 4000), -1};

    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    struct rlimit low = old;
    low.rlim_cur = 256;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fds[256], nfd = 0;
    while (nfd < 256) {
        int fd = dup(0);
        if (fd < 0)
            break;
        fds[nfd++] = fd;
    }
    /* A backoff of 4 s each, cancelled 300 ms in. */
    int64_t worst = 0;
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, wait_long, &w[i]), 0);
        test_sleep_ms(300);
        int64_t t0 = test_now_us();
        dlock_lock_cancel(w[i].l);
        pthread_join(t, NULL);
        int64_t ms = (test_now_us() - t0) / 1000;
        if (ms > worst)
            worst = ms;
    }
    while (nfd > 0)
        close(fds[--nfd]);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(w[i].rc, DLOCK_ECANCELED);
        assert_non_null(strstr(dlock_lock_errmsg(w[i].l), "cancelled while waiting"));
        dlock_lock_free(w[i].l);
    }
    /* Far below the 4 s backoff that would end it otherwise. */
    if (worst >= 1000)
        fail_msg("a cancel took %lld ms to end the wait", (long long)worst);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cancel_ends_a_wait_at_once_without_spare_fds),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
