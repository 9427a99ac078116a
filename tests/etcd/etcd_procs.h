/* SPDX-License-Identifier: BSD-3-Clause */
/* Worker processes contending for one etcd lock through the public API,
 * shared by the etcd proof tests: each critical section checks that nobody
 * else is inside, bumps a plain (non-atomic) counter with a pause between
 * read and write, so any overlap loses an increment, and appends its
 * fencing token to a log that must grow strictly. Header-only: each test
 * executable is one file. */
#ifndef DLOCK_TEST_ETCD_PROCS_H
#define DLOCK_TEST_ETCD_PROCS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "dlock.h"

#define ETCD_PROCS_MAX_LOG 4096

typedef struct etcd_shared {
    atomic_int inside, overlaps, errors, lock_errors;
    atomic_long stale_fences; /* a token not above the last one */
    long counter;             /* updated only under the lock */
    uint64_t last_fence;      /* updated only under the lock */
    atomic_long sections;
    atomic_long longest_wait_ms;
    atomic_long failed_sections; /* acquire gave up (transient error) */
    char url[400];
    char name[64];
    int rounds;       /* sections per worker, at least */
    int until_stop;   /* and on until the parent sets stop */
    atomic_int stop;
    int64_t ttl_ms, wait_ms;
    unsigned flags;
} etcd_shared;

static inline etcd_shared *etcd_shared_new(void)
{
    void *p = mmap(NULL, sizeof(etcd_shared), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        abort();
    return (etcd_shared *)p;
}

static inline int64_t etcd_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void etcd_section(etcd_shared *sh, uint64_t fence)
{
    if (atomic_fetch_add(&sh->inside, 1) != 0)
        atomic_fetch_add(&sh->overlaps, 1);
    if (fence <= sh->last_fence)
        atomic_fetch_add(&sh->stale_fences, 1);
    sh->last_fence = fence;
    long v = sh->counter;
    struct timespec ts = {0, 200 * 1000}; /* 0.2 ms: overlaps would show */
    nanosleep(&ts, NULL);
    sh->counter = v + 1;
    atomic_fetch_sub(&sh->inside, 1);
}

/* One worker: its own client; rounds sections; acquire errors that a
 * member failure causes (DLOCK_EIO, DLOCK_EUNKNOWN, DLOCK_EBUSY,
 * DLOCK_ETIMEDOUT) are counted as failed sections and retried. */
static inline int etcd_worker(int i, void *arg)
{
    (void)i;
    etcd_shared *sh = arg;
    const char *url = sh->url;
    dlock_client_options co;
    dlock_client_options_init(&co, DLOCK_CLIENT_OPTIONS_VERSION);
    co.io_timeout_ms = 500;
    dlock_client *c;
    char err[256];
    if (dlock_client_new(&c, &url, 1, &co, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "worker: %s\n", err);
        return 1;
    }
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = sh->ttl_ms;
    lo.flags = sh->flags;
    dlock_lock *l;
    if (dlock_lock_new(&l, c, sh->name, &lo) != DLOCK_OK) {
        dlock_client_free(c);
        return 1;
    }
    int done = 0, bad = 0;
    while (!bad && (done < sh->rounds || (sh->until_stop && !atomic_load(&sh->stop)))) {
        int64_t t0 = etcd_now_ms();
        int rc = dlock_lock_acquire(l, sh->wait_ms);
        int64_t waited = etcd_now_ms() - t0;
        long prev = atomic_load(&sh->longest_wait_ms);
        while (waited > prev && !atomic_compare_exchange_weak(&sh->longest_wait_ms, &prev, waited))
            ;
        if (rc == DLOCK_EIO || rc == DLOCK_EUNKNOWN || rc == DLOCK_EBUSY ||
            rc == DLOCK_ETIMEDOUT) {
            atomic_fetch_add(&sh->failed_sections, 1);
            continue;
        }
        if (rc != DLOCK_OK) {
            fprintf(stderr, "worker: acquire: %s: %s\n", dlock_errname(rc), dlock_lock_errmsg(l));
            atomic_fetch_add(&sh->lock_errors, 1);
            bad = 1;
            break;
        }
        etcd_section(sh, dlock_lock_fence(l));
        atomic_fetch_add(&sh->sections, 1);
        done++;
        rc = dlock_lock_release(l);
        /* a release whose reply was lost is fine: the lease ends it */
        if (rc != DLOCK_OK && rc != DLOCK_EUNKNOWN && rc != DLOCK_EIO && rc != DLOCK_EBUSY) {
            fprintf(stderr, "worker: release: %s: %s\n", dlock_errname(rc), dlock_lock_errmsg(l));
            atomic_fetch_add(&sh->lock_errors, 1);
        }
    }
    dlock_lock_free(l);
    dlock_client_free(c);
    return bad;
}

#endif
