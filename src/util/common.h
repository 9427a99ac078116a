/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal definitions shared by every module. Never installed. */
#ifndef DLOCK_COMMON_H
#define DLOCK_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "dlock.h"

#define DLOCK__MIN(a, b) ((a) < (b) ? (a) : (b))
#define DLOCK__MAX(a, b) ((a) > (b) ? (a) : (b))
#define DLOCK__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The most nodes one client may span. */
#define DLOCK__MAX_NODES 64

/* Allocation goes through these so that the allocation-failure test can make
 * every call fail in turn (alloc.c). */
void *dlock__malloc(size_t n);
void *dlock__calloc(size_t n, size_t size);
void *dlock__realloc(void *p, size_t n);
char *dlock__strdup(const char *s);
char *dlock__strndup(const char *s, size_t n);
void dlock__free(void *p);

/* Test hook: after `n` more successful allocations, every allocation fails.
 * n < 0 turns failure injection off. Returns the number of allocations made
 * since the last call (so a test can learn how many a path needs). */
long dlock__alloc_fail_after(long n);

/* A failed pthread call is a bug, not a condition to limp on (STYLE.md). */
#define DLOCK__CHECK_PTHREAD(call)                                             \
    do {                                                                       \
        int dlock__rc_ = (call);                                               \
        if (dlock__rc_ != 0)                                                   \
            dlock__pthread_abort(#call, dlock__rc_, __FILE__, __LINE__);       \
    } while (0)
/* Misuse the library detects and cannot survive (dlock.h lists it): one
 * line on stderr, "dlock: " and the message, then abort(). */
void dlock__misuse(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void dlock__pthread_abort(const char *what, int rc, const char *file,
                          int line);

#endif
