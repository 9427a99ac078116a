/* SPDX-License-Identifier: BSD-3-Clause */
/* The store-independent body of the lock-delay tests (issue 39;
 * docs/lock-delay.md): test_lock_delay (Redis: one node, Redlock,
 * Cluster) and test_etcd_lock_delay run it on their stores. A holder in
 * a forked child takes the lock with a delay, renews it for a while (so
 * the delay must follow the renewed lease, not the first one) and is
 * SIGKILLed; the next acquire must come at least the delay after the
 * lease's end (the last status look that still saw the key is a lower
 * bound of that end); a clean release frees the name at once. */
#ifndef DLOCK_TEST_LOCK_DELAY_BODY_H
#define DLOCK_TEST_LOCK_DELAY_BODY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlock.h"

#define TEST_DELAY_URLS_MAX 6

/* Where the locks live, and what the store promises about timing. */
typedef struct test_delay_target {
    const char *label;
    const char *urls[TEST_DELAY_URLS_MAX];
    size_t n;
    int cluster;
    int64_t ttl_ms, delay_ms;
    /* The child holds (renewing) this long before its death. */
    int64_t hold_ms;
    /* dlock_client_lock_delay() right after the name went: at most this. */
    int64_t left_max_ms;
    /* How much later than the delay's end the next holder may come: a
     * wait's slack on a loaded machine and the store's rounding,
     * generous (the lower bound is the test). */
    int64_t late_ms;
    /* The store's script calls so far (NULL: not counted), and how many
     * the waiting acquire may make for a kind (checked when counted). */
    long long (*calls)(const void *arg);
    const void *calls_arg;
    long long (*calls_max)(unsigned flags, int multi);
} test_delay_target;

/* What is locked: a kind of lock, a semaphore or a set of two names. */
typedef struct test_delay_kind {
    const char *label;
    unsigned flags;
    unsigned permits; /* a semaphore of this many permits (0: none) */
    int multi;        /* the set {NAME:a, NAME:b} */
    int one_node;     /* DLOCK_FAIR: one node only */
} test_delay_kind;

/* A client of t (NULL on failure; no cmocka: a child uses it too). */
dlock_client *test_delay_client(const test_delay_target *t);

/* A handle of kind k on name with t's TTL, flags added, delay_ms. */
int test_delay_lock(const test_delay_target *t, dlock_client *c, const test_delay_kind *k,
                    const char *name, unsigned flags, int64_t delay_ms, dlock_lock **out);

/* Fork a child that takes name (kind k, DLOCK_AUTO_RENEW, t's delay),
 * holds it t->hold_ms renewing and SIGKILLs itself; returns once it
 * holds: its pid. */
pid_t test_delay_dying_holder(const test_delay_target *t, const test_delay_kind *k,
                              const char *name);
/* The same with die 0: the child releases after t->hold_ms and exits 0. */
pid_t test_delay_holder(const test_delay_target *t, const test_delay_kind *k, const char *name,
                        int die);

/* Wait until status sees the name held by nobody: the end of that look;
 * *last_all the start of the last look that saw it held everywhere. */
int64_t test_delay_wait_gone(dlock_client *c, const char *name, int64_t *last_all);

/* The whole case: a killed holder keeps the name for the delay from a
 * handle with it (try-once refused, waiting acquire late enough; status
 * shows the time left), then a clean release frees it at once. */
void test_delay_killed_holder(const test_delay_target *t, const test_delay_kind *k);

#endif
