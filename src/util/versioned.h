/* SPDX-License-Identifier: BSD-3-Clause */
/* Versioned option structs (STYLE.md, rule 3): a program built against an
 * older dlock.h passes a shorter struct, whose `version` (the first member)
 * says how many bytes it has; the library reads only those and keeps its
 * defaults for the rest (tests/integration/test_options_abi.c). Each struct
 * lists its versions' sizes once, oldest first: when a field is added, the
 * last entry becomes offsetof(<struct>, <first new field>) and sizeof
 * (<struct>) is appended. */
#ifndef DLOCK_VERSIONED_H
#define DLOCK_VERSIONED_H

#include <stddef.h>

/* At compile time: one size per version of `type` up to `newest`, and its
 * version first. */
#define DLOCK__VERSIONED_CHECK(type, sizes, newest)                                      \
    _Static_assert(sizeof(sizes) / sizeof((sizes)[0]) == (newest) &&                     \
                       offsetof(type, version) == 0,                                     \
                   #type ": one size per version, version first")

/* Bytes of version `version` (1-based) of a struct whose versions have the
 * sizes sizes[0..n-1]; 0 for a version this library does not know. */
size_t dlock__versioned_size(const size_t *sizes, size_t n, unsigned int version);

/* Fill *opts with the first dlock__versioned_size() bytes of *defaults
 * (a whole struct of the newest version) and set its version to
 * `version`. DLOCK_EINVAL for a NULL opts or an unknown version. */
int dlock__versioned_init(void *opts, const void *defaults, const size_t *sizes, size_t n,
                          unsigned int version);

#endif
