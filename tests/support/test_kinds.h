/* SPDX-License-Identifier: BSD-3-Clause */
/* What the tests of the shared, semaphore and multi-name kinds share: a
 * census of who is inside, kept by the processes themselves in an anonymous
 * MAP_SHARED mapping (no sleeping and hoping: each holder counts itself in
 * and out, and checks what it sees on entry). */
#ifndef DLOCK_TEST_KINDS_H
#define DLOCK_TEST_KINDS_H

#include <stdatomic.h>

#include "dlock.h"
#include "redis_server.h"

typedef struct test_census {
    atomic_int readers;     /* shared holders inside now */
    atomic_int writers;     /* exclusive holders inside now */
    atomic_int max_readers; /* most shared holders seen inside at once */
    atomic_int max_inside;  /* most holders (any) seen inside at once */
    atomic_int violations;  /* a writer beside anyone, a reader beside a writer */
    atomic_int errors;      /* failed calls */
    atomic_int sections;    /* sections completed */
    atomic_int stop;        /* set by the parent: workers leave */
} test_census;

/* A zeroed census shared with children forked after it. */
test_census *test_census_new(void);
void test_census_free(test_census *c);

/* Enter and leave as a reader (shared: 1) or writer (0); entering checks
 * the rule and raises the maxima. `inside_limit` > 0: more holders than
 * that inside at once (any kind) is a violation too (semaphores). */
void test_census_enter(test_census *c, int shared, int inside_limit);
void test_census_leave(test_census *c, int shared);

/* A worker's loop: `rounds` sections on l (acquire waiting up to 60 s,
 * enter, sched_yield() `yields` times so holders overlap, leave, release);
 * a failed acquire or release counts in c->errors. Then frees l and cl
 * (the worker's own). Returns 0, a worker process's exit status. */
int test_census_rounds(test_census *c, dlock_client *cl, dlock_lock *l, int rounds, int shared,
                       int inside_limit, int yields);

/* A census worker's lock options: a 10 s lease, retries every 1 ms to
 * retry_max_ms, these flags. */
dlock_lock_options test_kinds_worker_options(int retry_max_ms, unsigned flags);

/* The three-node (Redlock) groups of the kinds' tests: servers started by
 * the group setup, stopped by its teardown. */
#define TEST_KINDS_NODES 3
extern test_redis test_kinds_nodes[TEST_KINDS_NODES];
int test_kinds_nodes_setup(void **state);
int test_kinds_nodes_teardown(void **state);

/* A client of all of test_kinds_nodes, default options; must succeed. */
dlock_client *test_kinds_nodes_client(void);

#endif
