/* SPDX-License-Identifier: BSD-3-Clause */
/* Randomness and key helpers: retry backoff, jitter, owner tokens, and the
 * fencing counter's key name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "keys.h"
#include "rand.h"

#define SAMPLES 5000

static void backoff_stays_within_full_jitter_bounds(void **state)
{
    (void)state;
    const int64_t mins[] = {1, 10, 7, 100};
    const int64_t maxs[] = {1, 200, 1000, 60000};
    for (size_t k = 0; k < sizeof mins / sizeof mins[0]; k++) {
        for (unsigned attempt = 0; attempt < 24; attempt++) {
            int64_t cap = mins[k];
            for (unsigned i = 0; i < attempt && cap < maxs[k]; i++)
                cap *= 2;
            if (cap > maxs[k])
                cap = maxs[k];
            int64_t lo = INT64_MAX, hi = 0;
            for (int s = 0; s < SAMPLES; s++) {
                int64_t v = dlock__backoff_ms(attempt, mins[k], maxs[k]);
                if (v < 1 || v > cap)
                    fail_msg("backoff(%u, %lld, %lld) = %lld, outside [1, %lld]", attempt,
                             (long long)mins[k], (long long)maxs[k], (long long)v, (long long)cap);
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
            /* Spread: the samples reach both ends of a small range, and
             * the upper part of a large one. */
            if (cap <= 64) {
                assert_int_equal(lo, 1);
                assert_int_equal(hi, cap);
            } else {
                assert_true(hi > cap / 2);
                assert_true(lo < cap / 2);
            }
        }
    }
}

static void backoff_handles_degenerate_bounds(void **state)
{
    (void)state;
    for (int s = 0; s < 1000; s++) {
        /* min below 1 counts as 1; max below min counts as min. */
        int64_t v = dlock__backoff_ms(0, 0, 0);
        assert_int_equal(v, 1);
        v = dlock__backoff_ms(3, 50, 10);
        assert_true(v >= 1 && v <= 50);
        /* A huge attempt number stops doubling at the maximum. */
        v = dlock__backoff_ms(UINT_MAX, 10, 60000);
        assert_true(v >= 1 && v <= 60000);
    }
}

static void rand_below_stays_in_range_and_covers_it(void **state)
{
    (void)state;
    assert_int_equal(dlock__rand_below(0), 0);
    assert_int_equal(dlock__rand_below(1), 0);
    int seen[7] = {0};
    for (int s = 0; s < SAMPLES; s++) {
        uint64_t v = dlock__rand_below(7);
        assert_true(v < 7);
        seen[v]++;
    }
    for (int i = 0; i < 7; i++)
        assert_true(seen[i] > SAMPLES / 7 / 2);
    uint64_t big_seen_high = 0;
    for (int s = 0; s < 1000; s++) {
        uint64_t v = dlock__rand_below(UINT64_MAX);
        assert_true(v < UINT64_MAX);
        big_seen_high |= v >> 63;
    }
    assert_true(big_seen_high == 1);
}

static void token_is_32_lowercase_hex_digits(void **state)
{
    (void)state;
    char a[33], b[33];
    memset(a, 'X', sizeof a);
    memset(b, 'X', sizeof b);
    assert_int_equal(dlock__token_hex(a), DLOCK_OK);
    assert_int_equal(dlock__token_hex(b), DLOCK_OK);
    assert_int_equal(strlen(a), DLOCK_TOKEN_HEX_LEN);
    assert_int_equal(strlen(b), DLOCK_TOKEN_HEX_LEN);
    for (int i = 0; i < 32; i++)
        assert_true((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'f'));
    assert_string_not_equal(a, b);
}

/* Redis Cluster's key slot: CRC16 (XMODEM) of the hash tag or the key. */
static uint16_t crc16(const char *s, size_t n)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)((unsigned char)s[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

static unsigned key_slot(const char *key, size_t n)
{
    const char *open = memchr(key, '{', n);
    if (open) {
        const char *close = memchr(open + 1, '}', n - (size_t)(open + 1 - key));
        if (close && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) & 16383;
    }
    return crc16(key, n) & 16383;
}

typedef struct key {
    char *k;
    size_t len;
} key;

static key helper_of(const char *name, const char *kind, size_t kind_len)
{
    key k = {NULL, 0};
    k.k = dlock__derived_key(name, strlen(name), kind, kind_len, &k.len);
    assert_non_null(k.k);
    return k;
}

static void crc16_matches_the_redis_cluster_reference(void **state)
{
    (void)state;
    /* Values from the Redis Cluster specification and CLUSTER KEYSLOT. */
    assert_int_equal(crc16("123456789", 9), 0x31C3);
    assert_int_equal(key_slot("foo", 3), 12182);
    assert_int_equal(key_slot("{user1000}.following", 20), key_slot("user1000", 8));
}

static void fence_key_is_the_lock_key_a_nul_and_fence(void **state)
{
    (void)state;
    size_t len = 0;
    char *k = dlock__fence_key("lock:x", 6, &len);
    assert_int_equal(len, 12);
    assert_memory_equal(k, "lock:x\0fence", 13);
    dlock__free(k);
}

/* A user allowed ~lock:* for the lock key is allowed its helpers too. */
static void helper_keys_start_with_the_lock_key(void **state)
{
    (void)state;
    static const char *names[] = {"lock:x", "{order:42}:lock", "x", "{unclosed", "a}b"};
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(names); i++) {
        key h[3] = {helper_of(names[i], "fence", 5), helper_of(names[i], "q", 1),
                    helper_of(names[i], "w\0", 2)};
        for (size_t j = 0; j < 3; j++) {
            assert_true(h[j].len > strlen(names[i]));
            assert_memory_equal(h[j].k, names[i], strlen(names[i]));
            dlock__free(h[j].k);
        }
    }
}

/* Redis Cluster: a name with a hash tag keeps its helpers in its slot. */
static void helper_keys_share_the_slot_of_a_tagged_name(void **state)
{
    (void)state;
    static const char *names[] = {"{order:42}:lock", "jobs:{tenant7}:nightly", "{x}", "a{b}c}d"};
    for (size_t i = 0; i < DLOCK__ARRAY_LEN(names); i++) {
        key h = helper_of(names[i], "fence", 5);
        if (key_slot(h.k, h.len) != key_slot(names[i], strlen(names[i])))
            fail_msg("the fence key of \"%s\" is in another slot", names[i]);
        dlock__free(h.k);
    }
}

/* Issue 15 item 12: no lock name's key is another lock's helper key, and
 * no two (name, kind) pairs share a helper key, even for names built to
 * look like the old "{NAME}:fence" / "{NAME}:q" / "{NAME}:w:" helpers. */
static void no_helper_key_is_a_lock_key_or_another_helper(void **state)
{
    (void)state;
    static const char *names[] = {"x", "{x}", "{x}:fence", "{x}:q", "{x}:w:", "x:fence",
                                  "x:q", "xfence", "x\001fence", "{x}:w:abc", "w"};
    static const struct {
        const char *kind;
        size_t len;
    } kinds[] = {{"fence", 5}, {"q", 1}, {"w\0", 2}};
    enum { N = DLOCK__ARRAY_LEN(names), K = DLOCK__ARRAY_LEN(kinds) };
    key h[N * K];
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < K; j++)
            h[i * K + j] = helper_of(names[i], kinds[j].kind, kinds[j].len);
    for (size_t a = 0; a < N * K; a++) {
        for (size_t i = 0; i < N; i++)
            if (h[a].len == strlen(names[i]) && !memcmp(h[a].k, names[i], h[a].len))
                fail_msg("a helper key equals lock key \"%s\"", names[i]);
        for (size_t b = a + 1; b < N * K; b++)
            if (h[a].len == h[b].len && !memcmp(h[a].k, h[b].k, h[a].len))
                fail_msg("helpers %zu and %zu share a key", a, b);
    }
    for (size_t a = 0; a < N * K; a++)
        dlock__free(h[a].k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backoff_stays_within_full_jitter_bounds),
        cmocka_unit_test(backoff_handles_degenerate_bounds),
        cmocka_unit_test(rand_below_stays_in_range_and_covers_it),
        cmocka_unit_test(token_is_32_lowercase_hex_digits),
        cmocka_unit_test(crc16_matches_the_redis_cluster_reference),
        cmocka_unit_test(fence_key_is_the_lock_key_a_nul_and_fence),
        cmocka_unit_test(helper_keys_start_with_the_lock_key),
        cmocka_unit_test(helper_keys_share_the_slot_of_a_tagged_name),
        cmocka_unit_test(no_helper_key_is_a_lock_key_or_another_helper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
