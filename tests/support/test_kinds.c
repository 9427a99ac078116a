/* SPDX-License-Identifier: BSD-3-Clause */
/* The holders' census (test_kinds.h). */
#include <sched.h>
#include <sys/mman.h>

#include "test_kinds.h"
#include "test_util.h"

test_census *test_census_new(void)
{
    void *p = mmap(NULL, sizeof(test_census), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p; /* anonymous: already zero */
}

void test_census_free(test_census *c)
{
    if (c)
        munmap(c, sizeof *c);
}

static void raise_max(atomic_int *max, int v)
{
    int m = atomic_load(max);
    while (v > m && !atomic_compare_exchange_weak(max, &m, v))
        ;
}

void test_census_enter(test_census *c, int shared, int inside_limit)
{
    int r, w;
    if (shared) {
        r = atomic_fetch_add(&c->readers, 1) + 1;
        w = atomic_load(&c->writers);
        if (w > 0)
            atomic_fetch_add(&c->violations, 1);
        raise_max(&c->max_readers, r);
    } else {
        w = atomic_fetch_add(&c->writers, 1) + 1;
        r = atomic_load(&c->readers);
        if (w > 1 || r > 0)
            atomic_fetch_add(&c->violations, 1);
    }
    raise_max(&c->max_inside, r + w);
    if (inside_limit > 0 && r + w > inside_limit)
        atomic_fetch_add(&c->violations, 1);
    sched_yield(); /* give the others a chance to come in beside us */
}

void test_census_leave(test_census *c, int shared)
{
    atomic_fetch_sub(shared ? &c->readers : &c->writers, 1);
    atomic_fetch_add(&c->sections, 1);
}

int test_census_rounds(test_census *c, dlock_client *cl, dlock_lock *l, int rounds, int shared,
                       int inside_limit, int yields)
{
    for (int r = 0; r < rounds; r++) {
        if (dlock_lock_acquire(l, 60000) != DLOCK_OK) {
            atomic_fetch_add(&c->errors, 1);
            continue;
        }
        test_census_enter(c, shared, inside_limit);
        for (int k = 0; k < yields; k++)
            sched_yield();
        test_census_leave(c, shared);
        if (dlock_lock_release(l) != DLOCK_OK)
            atomic_fetch_add(&c->errors, 1);
    }
    dlock_lock_free(l);
    dlock_client_free(cl);
    return 0;
}

dlock_lock_options test_kinds_worker_options(int retry_max_ms, unsigned flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    o.retry_min_ms = 1;
    o.retry_max_ms = retry_max_ms;
    o.flags = flags;
    return o;
}

test_redis test_kinds_nodes[TEST_KINDS_NODES];

int test_kinds_nodes_setup(void **state)
{
    (void)state;
    return test_redis_start_many(test_kinds_nodes, TEST_KINDS_NODES, NULL);
}

int test_kinds_nodes_teardown(void **state)
{
    (void)state;
    test_redis_stop_many(test_kinds_nodes, TEST_KINDS_NODES);
    return 0;
}

dlock_client *test_kinds_nodes_client(void)
{
    const char *urls[TEST_KINDS_NODES];
    for (int i = 0; i < TEST_KINDS_NODES; i++)
        urls[i] = test_kinds_nodes[i].url;
    return test_client_new(urls, TEST_KINDS_NODES, NULL);
}
