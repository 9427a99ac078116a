/* SPDX-License-Identifier: BSD-3-Clause */
/* Allocation wrappers with a failure-injection hook for tests. */
#include <stdatomic.h>
#include <string.h>

#include "common.h"

/* -1: no injection. >= 0: allocations left before they start failing. */
static atomic_long fail_after = -1;
static atomic_long made;

static int alloc_should_fail(void)
{
    atomic_fetch_add(&made, 1);
    long left = atomic_load(&fail_after);
    if (left < 0)
        return 0;
    while (left > 0) {
        if (atomic_compare_exchange_weak(&fail_after, &left, left - 1))
            return 0;
        if (left < 0)
            return 0;
    }
    return 1;
}

long dlock__alloc_fail_after(long n)
{
    atomic_store(&fail_after, n);
    return atomic_exchange(&made, 0);
}

void *dlock__malloc(size_t n)
{
    return alloc_should_fail() ? NULL : malloc(n ? n : 1);
}

void *dlock__calloc(size_t n, size_t size)
{
    return alloc_should_fail() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

void *dlock__realloc(void *p, size_t n)
{
    return alloc_should_fail() ? NULL : realloc(p, n ? n : 1);
}

char *dlock__strndup(const char *s, size_t n)
{
    char *d = dlock__malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

char *dlock__strdup(const char *s)
{
    return dlock__strndup(s, strlen(s));
}

void dlock__free(void *p)
{
    free(p);
}
