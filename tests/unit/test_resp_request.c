/* SPDX-License-Identifier: BSD-3-Clause */
/* A command's request bytes (src/redis/resp.c) are
 * exactly what hiredis's redisFormatCommandArgv writes for it: every
 * length, binary bytes (CR, LF, NUL) inside arguments, empty arguments,
 * argument counts and lengths across a digit boundary, and strings given
 * without lengths. No server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"

/* Ours, with a guard byte after the announced length that must stay. */
static void assert_same_as_hiredis(int argc, const char **argv, const size_t *argvlen)
{
    char *want = NULL;
    long long want_len = redisFormatCommandArgv(&want, argc, argv, argvlen);
    assert_true(want_len > 0);
    size_t len = dlock__resp_request_len(argc, argv, argvlen);
    assert_int_equal(len, (size_t)want_len);
    char *got = malloc(len + 1);
    assert_non_null(got);
    got[len] = '#';
    char *end = dlock__resp_request_write(got, argc, argv, argvlen);
    assert_ptr_equal(end, got + len);
    assert_int_equal(got[len], '#');
    assert_memory_equal(got, want, len);
    free(got);
    redisFreeCommand(want);
}

static void a_lock_command_is_framed_as_hiredis_frames_it(void **state)
{
    (void)state;
    const char *argv[] = {"EVALSHA", "0dda7ee6b71d3fd0b99b7511660fb51f4f8ac456", "2", "k",
                          "k\0fence", "8520b0ce04e73d25207ac2ee2c5bcd67", "10000"};
    size_t lens[] = {7, 40, 1, 1, 7, 32, 5};
    assert_same_as_hiredis(7, argv, lens);
}

static void empty_and_binary_arguments_keep_their_bytes(void **state)
{
    (void)state;
    const char *argv[] = {"SET", "", "a\r\nb\0c\r", "\0"};
    size_t lens[] = {3, 0, 7, 1};
    assert_same_as_hiredis(4, argv, lens);
}

static void strings_without_lengths_are_measured(void **state)
{
    (void)state;
    const char *argv[] = {"PING"};
    assert_same_as_hiredis(1, argv, NULL);
    const char *sub[] = {"SUBSCRIBE", "dlock:{a}:wake"};
    assert_same_as_hiredis(2, sub, NULL);
}

/* Counts and lengths of 1, 2, 3 and 6 digits, each side of a boundary. */
static void counts_and_lengths_across_digit_boundaries(void **state)
{
    (void)state;
    static char big[100001];
    memset(big, 'x', sizeof big);
    const size_t sizes[] = {0, 9, 10, 99, 100, 999, 1000, 99999, 100000, 100001};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const char *argv[] = {"SET", big};
        size_t lens[] = {3, sizes[i]};
        assert_same_as_hiredis(2, argv, lens);
    }
    const char *many[120];
    size_t lens[120];
    for (int i = 0; i < 120; i++) {
        many[i] = big;
        lens[i] = (size_t)i;
    }
    const int counts[] = {1, 9, 10, 11, 99, 100, 120};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        assert_same_as_hiredis(counts[i], many, lens);
}

/* Random arguments (a fixed seed: the same cases every run). */
static void random_commands_match(void **state)
{
    (void)state;
    static char bytes[4096];
    unsigned seed = 12345;
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (char)(rand_r(&seed) & 0xff);
    for (int round = 0; round < 2000; round++) {
        int argc = 1 + rand_r(&seed) % 24;
        const char *argv[24];
        size_t lens[24];
        for (int i = 0; i < argc; i++) {
            lens[i] = (size_t)(rand_r(&seed) % 300);
            argv[i] = bytes + rand_r(&seed) % (sizeof bytes - 300);
        }
        assert_same_as_hiredis(argc, argv, lens);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_lock_command_is_framed_as_hiredis_frames_it),
        cmocka_unit_test(empty_and_binary_arguments_keep_their_bytes),
        cmocka_unit_test(strings_without_lengths_are_measured),
        cmocka_unit_test(counts_and_lengths_across_digit_boundaries),
        cmocka_unit_test(random_commands_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
