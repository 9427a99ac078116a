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
#include "lock.h"
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

static unsigned key_slot(const char *key)
{
    size_t n = strlen(key);
    const char *open = memchr(key, '{', n);
    if (open) {
        const char *close = memchr(open + 1, '}', n - (size_t)(open + 1 - key));
        if (close && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) & 16383;
    }
    return crc16(key, n) & 16383;
}

static char *fence_key_of(const char *name)
{
    size_t len = 0;
    char *k = dlock__fence_key(name, strlen(name), &len);
    assert_non_null(k);
    assert_int_equal(len, strlen(k));
    return k;
}

static void crc16_matches_the_redis_cluster_reference(void **state)
{
    (void)state;
    /* Values from the Redis Cluster specification and CLUSTER KEYSLOT. */
    assert_int_equal(crc16("123456789", 9), 0x31C3);
    assert_int_equal(key_slot("foo"), 12182);
    assert_int_equal(key_slot("{user1000}.following"), key_slot("user1000"));
}

static void fence_key_reuses_an_existing_hash_tag(void **state)
{
    (void)state;
    char *k = fence_key_of("{order:42}:lock");
    assert_string_equal(k, "{order:42}:lock:fence");
    assert_int_equal(key_slot(k), key_slot("{order:42}:lock"));
    dlock__free(k);
    k = fence_key_of("jobs:{tenant7}:nightly");
    assert_string_equal(k, "jobs:{tenant7}:nightly:fence");
    assert_int_equal(key_slot(k), key_slot("jobs:{tenant7}:nightly"));
    dlock__free(k);
}

static void fence_key_wraps_plain_names_in_braces(void **state)
{
    (void)state;
    static const char *names[] = {"orders", "a:b:c", "x", "{unclosed", "q{", "name with spaces"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *k = fence_key_of(names[i]);
        char want[128];
        snprintf(want, sizeof want, "{%s}:fence", names[i]);
        assert_string_equal(k, want);
        if (key_slot(k) != key_slot(names[i]))
            fail_msg("fence key \"%s\" is not in the slot of \"%s\"", k, names[i]);
        dlock__free(k);
    }
}

static void fence_key_of_a_name_with_an_empty_tag_is_distinct(void **state)
{
    (void)state;
    /* "{}" is no tag and a '}' cannot be wrapped: the key just gets the
     * suffix, distinct from the lock key. */
    char *k = fence_key_of("{}x");
    assert_string_equal(k, "{}x:fence");
    dlock__free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backoff_stays_within_full_jitter_bounds),
        cmocka_unit_test(backoff_handles_degenerate_bounds),
        cmocka_unit_test(rand_below_stays_in_range_and_covers_it),
        cmocka_unit_test(token_is_32_lowercase_hex_digits),
        cmocka_unit_test(crc16_matches_the_redis_cluster_reference),
        cmocka_unit_test(fence_key_reuses_an_existing_hash_tag),
        cmocka_unit_test(fence_key_wraps_plain_names_in_braces),
        cmocka_unit_test(fence_key_of_a_name_with_an_empty_tag_is_distinct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
