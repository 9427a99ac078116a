/* SPDX-License-Identifier: BSD-3-Clause */
/* Randomness: owner tokens from the OS CSPRNG; jitter from a fast PRNG. */
#ifndef DLOCK_RAND_H
#define DLOCK_RAND_H

#include <stdint.h>

/* Fill out with 32 hex digits of 128 fresh bits from getrandom(2), plus a
 * NUL. Returns DLOCK_OK or DLOCK_EIO if the kernel gives no randomness. */
int dlock__token_hex(char out[33]);

/* A uniformly distributed number in [0, bound) for jitter; not for secrets.
 * bound 0 gives 0. Thread-safe (per-thread state seeded from getrandom). */
uint64_t dlock__rand_below(uint64_t bound);

/* The sleep before retry number `attempt` (0-based) of a waiting acquire:
 * uniform in [1, min(max_ms, min_ms * 2^attempt)] ms ("full jitter"), so
 * contending waiters spread out instead of retrying in lock step. */
int64_t dlock__backoff_ms(unsigned attempt, int64_t min_ms, int64_t max_ms);

#endif
