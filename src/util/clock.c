/* SPDX-License-Identifier: BSD-3-Clause */
#include <limits.h>

#include "clock.h"
#include "common.h"

int64_t dlock__now_ns(void)
{
    struct timespec ts;
    /* CLOCK_MONOTONIC cannot fail on Linux with a valid pointer. */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

int64_t dlock__deadline_after_ms(int64_t ms)
{
    if (ms < 0)
        return INT64_MAX;
    int64_t now = dlock__now_ns();
    if (ms > (INT64_MAX - now) / DLOCK__NS_PER_MS)
        return INT64_MAX;
    return now + ms * DLOCK__NS_PER_MS;
}

int dlock__ms_until(int64_t deadline_ns)
{
    if (deadline_ns == INT64_MAX)
        return INT_MAX;
    int64_t left = deadline_ns - dlock__now_ns();
    if (left <= 0)
        return 0;
    int64_t ms = (left + DLOCK__NS_PER_MS - 1) / DLOCK__NS_PER_MS;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

struct timespec dlock__timespec_of(int64_t deadline_ns)
{
    struct timespec ts;
    if (deadline_ns == INT64_MAX) {
        /* Far enough: a year from now. */
        deadline_ns = dlock__now_ns() + INT64_C(365) * 86400 * INT64_C(1000000000);
    }
    ts.tv_sec = (time_t)(deadline_ns / INT64_C(1000000000));
    ts.tv_nsec = (long)(deadline_ns % INT64_C(1000000000));
    return ts;
}

void dlock__cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    DLOCK__CHECK_PTHREAD(pthread_condattr_init(&attr));
    DLOCK__CHECK_PTHREAD(pthread_condattr_setclock(&attr, CLOCK_MONOTONIC));
    DLOCK__CHECK_PTHREAD(pthread_cond_init(cond, &attr));
    DLOCK__CHECK_PTHREAD(pthread_condattr_destroy(&attr));
}
