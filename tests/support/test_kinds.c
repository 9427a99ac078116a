/* SPDX-License-Identifier: BSD-3-Clause */
/* The holders' census (test_kinds.h). */
#include <sched.h>
#include <sys/mman.h>

#include "test_kinds.h"

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
