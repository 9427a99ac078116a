/* SPDX-License-Identifier: BSD-3-Clause */
/* An election's observer on a thread of its own (test_observer.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "proc.h"
#include "test_observer.h"

int test_obs_on_leader(void *arg, uint64_t fence, const char *value, size_t len)
{
    test_obs *o = arg;
    (void)value, (void)len;
    pthread_mutex_lock(&o->mu);
    o->calls++;
    o->fence = fence;
    pthread_mutex_unlock(&o->mu);
    return 0;
}

static void *obs_main(void *arg)
{
    test_obs *o = arg;
    int rc = dlock_election_observe(o->e, o->wait_ms, test_obs_on_leader, o);
    pthread_mutex_lock(&o->mu);
    o->rc = rc;
    o->done = 1;
    o->returned_ms = test_now_ms();
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

void test_obs_start(test_obs *o, dlock_election *e, int64_t wait_ms)
{
    *o = (test_obs){.e = e, .wait_ms = wait_ms};
    pthread_mutex_init(&o->mu, NULL);
    assert_int_equal(pthread_create(&o->t, NULL, obs_main, o), 0);
}

int test_obs_calls(test_obs *o, uint64_t *fence)
{
    pthread_mutex_lock(&o->mu);
    int n = o->calls;
    if (fence)
        *fence = o->fence;
    pthread_mutex_unlock(&o->mu);
    return n;
}

int test_obs_done(test_obs *o)
{
    pthread_mutex_lock(&o->mu);
    int done = o->done;
    pthread_mutex_unlock(&o->mu);
    return done;
}

void test_obs_first_report(test_obs *o)
{
    int64_t end = test_now_ms() + 10000;
    while (test_obs_calls(o, NULL) < 1 && test_now_ms() < end)
        test_sleep_ms(1);
    assert_int_equal(test_obs_calls(o, NULL), 1);
}

void test_obs_join(test_obs *o)
{
    assert_int_equal(pthread_join(o->t, NULL), 0);
    pthread_mutex_destroy(&o->mu);
}
