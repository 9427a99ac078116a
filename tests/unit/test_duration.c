/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_duration_parse(): "250ms", "30s", "5m", "1h", "1d", plain seconds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dlock.h"

static int64_t parse_ok(const char *text)
{
    int64_t ms = -42;
    int rc = dlock_duration_parse(&ms, text);
    if (rc != DLOCK_OK)
        fail_msg("\"%s\" rejected with %s", text, dlock_errname(rc));
    return ms;
}

static void units_are_converted_to_milliseconds(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("250ms"), 250);
    assert_int_equal(parse_ok("30s"), 30000);
    assert_int_equal(parse_ok("5m"), 300000);
    assert_int_equal(parse_ok("1h"), 3600000);
    assert_int_equal(parse_ok("0.25s"), 250);
    assert_int_equal(parse_ok("1.5m"), 90000);
    assert_int_equal(parse_ok("1d"), 86400000);
    assert_int_equal(parse_ok("0.5d"), 43200000);
    assert_int_equal(parse_ok("24d"), INT64_C(2073600000));
}

static void plain_numbers_are_seconds(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("1.5"), 1500);
    assert_int_equal(parse_ok("2"), 2000);
    assert_int_equal(parse_ok("007"), 7000);
    assert_int_equal(parse_ok("0.001"), 1);
}

static void zero_is_accepted(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("0"), 0);
    assert_int_equal(parse_ok("0ms"), 0);
    assert_int_equal(parse_ok("0s"), 0);
    assert_int_equal(parse_ok("0.0"), 0);
}

static void fractions_round_to_the_nearest_millisecond(void **state)
{
    (void)state;
    assert_int_equal(parse_ok("0.0004"), 0);
    assert_int_equal(parse_ok("0.0006"), 1);
    assert_int_equal(parse_ok("1.9999"), 2000);
    assert_int_equal(parse_ok("1.123456789123"), 1123);
}

static void large_values_that_fit_are_accepted(void **state)
{
    (void)state;
    /* 24 days: more than DLOCK_TTL_MAX_MS / 1000 seconds. */
    assert_int_equal(parse_ok("2073600"), INT64_C(2073600000));
    assert_int_equal(parse_ok("1000000h"), INT64_C(3600000000000));
}

static void malformed_text_is_rejected_and_output_untouched(void **state)
{
    (void)state;
    static const char *bad[] = {
        "", "-1", "-0", "+1", "1x", "1.2.3", "s", ".", "ms", " 1", "1 ", "1s ", "1 s",
        "1e3", "0x10", "1sec", "1S", "1mss", "1..2", "\t1", "1,5",
        "99999999999999999999", "99999999999999999999ms", "9223372036854775807",
        "9223372036854775808", "9999999999999h", "9999999999999999s",
        "1D", "1dd", "d", "999999999999d",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = -42;
        int rc = dlock_duration_parse(&ms, bad[i]);
        if (rc != DLOCK_EINVAL)
            fail_msg("\"%s\" gave %s (%lld ms)", bad[i], dlock_errname(rc), (long long)ms);
        assert_int_equal(ms, -42);
    }
}

static void null_arguments_are_rejected(void **state)
{
    (void)state;
    int64_t ms = -42;
    assert_int_equal(dlock_duration_parse(&ms, NULL), DLOCK_EINVAL);
    assert_int_equal(ms, -42);
    assert_int_equal(dlock_duration_parse(NULL, "1s"), DLOCK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(units_are_converted_to_milliseconds),
        cmocka_unit_test(plain_numbers_are_seconds),
        cmocka_unit_test(zero_is_accepted),
        cmocka_unit_test(fractions_round_to_the_nearest_millisecond),
        cmocka_unit_test(large_values_that_fit_are_accepted),
        cmocka_unit_test(malformed_text_is_rejected_and_output_untouched),
        cmocka_unit_test(null_arguments_are_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
