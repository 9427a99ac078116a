/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "common.h"
#include "rand.h"

static int fill_random(unsigned char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom(buf + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return DLOCK_EIO;
        }
        got += (size_t)n;
    }
    return DLOCK_OK;
}

int dlock__token_hex(char out[33])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[16];
    int rc = fill_random(b, sizeof b);
    if (rc != DLOCK_OK)
        return rc;
    for (size_t i = 0; i < sizeof b; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[32] = '\0';
    return DLOCK_OK;
}

/* xorshift64* with per-thread state: jitter needs spread, not secrecy. */
static _Thread_local uint64_t rng_state;

uint64_t dlock__rand_below(uint64_t bound)
{
    if (bound == 0)
        return 0;
    if (rng_state == 0) {
        uint64_t seed = 0;
        if (fill_random((unsigned char *)&seed, sizeof seed) != DLOCK_OK ||
            seed == 0)
            seed = (uint64_t)(uintptr_t)&rng_state ^ UINT64_C(0x9E3779B97F4A7C15);
        rng_state = seed;
    }
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return (x * UINT64_C(2685821657736338717)) % bound;
}

int64_t dlock__backoff_ms(unsigned attempt, int64_t min_ms, int64_t max_ms)
{
    if (min_ms < 1)
        min_ms = 1;
    if (max_ms < min_ms)
        max_ms = min_ms;
    int64_t cap = min_ms;
    for (unsigned i = 0; i < attempt && cap < max_ms; i++)
        cap *= 2;
    if (cap > max_ms)
        cap = max_ms;
    return 1 + (int64_t)dlock__rand_below((uint64_t)cap);
}
