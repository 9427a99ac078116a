/* SPDX-License-Identifier: BSD-3-Clause */
/* The one clock. Every validity and deadline computation in dlock goes
 * through these helpers; they read CLOCK_MONOTONIC and nothing else. */
#ifndef DLOCK_CLOCK_H
#define DLOCK_CLOCK_H

#include <stdint.h>
#include <time.h>

#define DLOCK__NS_PER_MS INT64_C(1000000)

/* Nanoseconds on the monotonic clock. */
int64_t dlock__now_ns(void);

/* now + ms, saturating; ms < 0 means "never" (INT64_MAX). */
int64_t dlock__deadline_after_ms(int64_t ms);

/* Milliseconds left until deadline_ns, rounded up, clamped to [0, INT_MAX]
 * so it can be handed to poll(). INT64_MAX deadlines give INT_MAX. */
int dlock__ms_until(int64_t deadline_ns);

/* A CLOCK_MONOTONIC timespec for pthread_cond_timedwait on a condition
 * variable created with dlock__cond_init_monotonic(). */
struct timespec dlock__timespec_of(int64_t deadline_ns);

#include <pthread.h>
void dlock__cond_init_monotonic(pthread_cond_t *cond);

#endif
