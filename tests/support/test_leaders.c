/* SPDX-License-Identifier: BSD-3-Clause */
/* An election's observer on a thread (test_leaders.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "proc.h"
#include "test_leaders.h"
#include "test_util.h"

int test_leaders_on_leader(void *arg, uint64_t fence, const char *value, size_t len)
{
    test_leaders *s = arg;
    pthread_mutex_lock(&s->mu);
    if (s->n < TEST_LEADERS_MAX) {
        s->fence[s->n] = fence;
        snprintf(s->value[s->n], sizeof s->value[0], "%.*s", (int)len, value);
        s->at_ms[s->n] = test_now_ms();
        s->n++;
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void *observe_main(void *arg)
{
    test_leaders *s = arg;
    s->rc = dlock_election_observe(s->e, DLOCK_WAIT_FOREVER, test_leaders_on_leader, s);
    return NULL;
}

void test_leaders_start(test_leaders *s, dlock_election *e)
{
    memset(s, 0, sizeof *s);
    assert_int_equal(pthread_mutex_init(&s->mu, NULL), 0);
    s->e = e;
    s->rc = 1;
    assert_int_equal(pthread_create(&s->thread, NULL, observe_main, s), 0);
}

static int count(test_leaders *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int64_t test_leaders_wait(test_leaders *s, int n, int64_t from_ms, int max_ms)
{
    int64_t end = test_now_ms() + max_ms;
    while (count(s) < n && test_now_ms() < end)
        test_sleep_ms(2);
    assert_int_equal(count(s), n);
    pthread_mutex_lock(&s->mu);
    int64_t at = s->at_ms[n - 1];
    pthread_mutex_unlock(&s->mu);
    return at - from_ms;
}

void test_leaders_stop(test_leaders *s)
{
    dlock_election_cancel(s->e);
    assert_int_equal(pthread_join(s->thread, NULL), 0);
    assert_int_equal(s->rc, DLOCK_ECANCELED);
    pthread_mutex_destroy(&s->mu);
}
