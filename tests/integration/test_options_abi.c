/* SPDX-License-Identifier: BSD-3-Clause */
/* Option structs across versions: a program built against an older dlock.h
 * passes a shorter dlock_client_options (or dlock_lock_options) with its
 * older version number, and the library must read only the fields that
 * version had (defaults for the rest) and write only those in
 * dlock_*_options_init(). Each test lays the old struct out as the 0.1.0
 * header did, followed by bytes that would be wild pointers if the library
 * read past it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock.h"
#include "redis_server.h"
#include "test_util.h"

/* dlock_client_options as dlock 0.1.0 defined it (version 1). */
typedef struct v1_client_options {
    unsigned int version;
    int connect_timeout_ms;
    int io_timeout_ms;
    int pool_size;
    double drift_factor;
    int64_t min_node_uptime_ms;
    int wakeups;
} v1_client_options;

/* A version 1 struct with garbage after it, as it may sit in a caller's
 * memory (the library sees only the pointer). */
typedef union v1_in_memory {
    unsigned char bytes[sizeof(dlock_client_options) + 64];
    v1_client_options v1;
} v1_in_memory;

#define GARBAGE 0xA5

static void version_1_options_are_read_without_the_fields_added_later(void **state)
{
    (void)state;
    v1_in_memory m;
    memset(m.bytes, GARBAGE, sizeof m.bytes);
    m.v1 = (v1_client_options){1, 1000, 1000, 4, 0.01, 0, 1};
    memset(m.bytes + sizeof m.v1, GARBAGE, sizeof m.bytes - sizeof m.v1);

    const char *urls[] = {test_srv.url};
    dlock_client *c = NULL;
    char err[256] = "";
    int rc = dlock_client_new(&c, urls, 1, (const dlock_client_options *)(void *)m.bytes, err,
                              sizeof err);
    assert_int_equal(rc, DLOCK_OK);

    /* No key prefix, credentials or TLS were taken from the garbage: the
     * lock key is the name itself, over a plain connection. */
    dlock_lock *l = test_lock_new(c, "abi:v1", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "abi:v1"), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void init_of_version_1_writes_only_a_version_1_struct(void **state)
{
    (void)state;
    v1_in_memory m;
    memset(m.bytes, GARBAGE, sizeof m.bytes);
    assert_int_equal(dlock_client_options_init((dlock_client_options *)(void *)m.bytes, 1),
                     DLOCK_OK);
    assert_int_equal(m.v1.version, 1);
    assert_int_equal(m.v1.connect_timeout_ms, 1000);
    assert_int_equal(m.v1.wakeups, 1);
    for (size_t i = sizeof m.v1; i < sizeof m.bytes; i++)
        assert_int_equal(m.bytes[i], GARBAGE);
}

/* A client made from version v options followed by garbage: init writes
 * nothing from `end` (the first field v lacks) on, and dlock_client_new()
 * takes the struct as it is. */
static dlock_client *client_of_version(unsigned v, size_t end)
{
    union {
        unsigned char bytes[sizeof(dlock_client_options) + 64];
        dlock_client_options o;
    } m;
    memset(m.bytes, GARBAGE, sizeof m.bytes);
    assert_int_equal(dlock_client_options_init(&m.o, v), DLOCK_OK);
    for (size_t i = end; i < sizeof m.bytes; i++)
        assert_int_equal(m.bytes[i], GARBAGE);
    const char *urls[] = {test_srv.url};
    dlock_client *c = NULL;
    char err[256] = "";
    assert_int_equal(dlock_client_new(&c, urls, 1, &m.o, err, sizeof err), DLOCK_OK);
    return c;
}

/* Version 3 ended at cluster: its struct followed by garbage where the
 * version 4 observer pointer would be must not be called through. */
static void version_3_options_take_no_observer_from_the_bytes_after_them(void **state)
{
    (void)state;
    dlock_client *c = client_of_version(3, offsetof(dlock_client_options, observer));
    dlock_lock *l = test_lock_new(c, "abi:v3", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* no hook called */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Version 4 ended at observer: garbage where the version 5 identity
 * fields would be is not read (no identity kept, no text copied). */
static void version_4_options_take_no_identity_from_the_bytes_after_them(void **state)
{
    (void)state;
    dlock_client *c = client_of_version(4, offsetof(dlock_client_options, identity));
    dlock_lock *l = test_lock_new(c, "abi:v4", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    static const char id_key[] = "abi:v4\0id"; /* KEY NUL "id" */
    redisReply *r = test_cmd_bin(&test_srv, "EXISTS %b", id_key, sizeof id_key - 1);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Version 5 ended at identity_text: garbage where the version 6 loop
 * would be is not read (the client is not a looped one: the blocking
 * verbs work). */
static void version_5_options_take_no_loop_from_the_bytes_after_them(void **state)
{
    (void)state;
    dlock_client *c = client_of_version(5, offsetof(dlock_client_options, loop));
    dlock_lock *l = test_lock_new(c, "abi:v5", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void unknown_option_versions_are_refused(void **state)
{
    (void)state;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    const char *urls[] = {test_srv.url};
    dlock_client *c = NULL;
    char err[256] = "";
    o.version = 0;
    assert_int_equal(dlock_client_new(&c, urls, 1, &o, err, sizeof err), DLOCK_EINVAL);
    assert_null(c);
    o.version = DLOCK_CLIENT_OPTIONS_VERSION + 1;
    assert_int_equal(dlock_client_new(&c, urls, 1, &o, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "version"));
    assert_int_equal(dlock_client_options_init(&o, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION + 1),
                     DLOCK_EINVAL);
}

/* dlock_lock_options as dlock 0.1.0 defined it (version 1). Version 2
 * added lock_delay_ms after it: the library must read only these bytes of
 * a version 1 struct (the garbage after them would be a negative delay,
 * DLOCK_EINVAL, or a delay of years). */
typedef struct v1_lock_options {
    unsigned int version;
    int64_t ttl_ms;
    unsigned int flags;
    int64_t renew_interval_ms;
    int64_t retry_min_ms;
    int64_t retry_max_ms;
    dlock_lost_fn on_lost;
    void *on_lost_arg;
} v1_lock_options;

typedef union v1_lock_in_memory {
    unsigned char bytes[sizeof(dlock_lock_options) + 64];
    v1_lock_options v1;
} v1_lock_in_memory;

static void version_1_lock_options_are_read_without_the_fields_added_later(void **state)
{
    (void)state;
    v1_lock_in_memory m;
    memset(m.bytes, GARBAGE, sizeof m.bytes);
    m.v1 = (v1_lock_options){1, 4000, 0u, 0, 10, 200, NULL, NULL};
    memset(m.bytes + sizeof m.v1, GARBAGE, sizeof m.bytes - sizeof m.v1);

    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, c, "abi:lock-v1", (const dlock_lock_options *)(void *)m.bytes),
                     DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    long long pttl = test_key_pttl(&test_srv, "abi:lock-v1");
    assert_true(pttl > 0 && pttl <= 4000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void lock_options_init_of_version_1_writes_only_a_version_1_struct(void **state)
{
    (void)state;
    v1_lock_in_memory m;
    memset(m.bytes, GARBAGE, sizeof m.bytes);
    assert_int_equal(dlock_lock_options_init((dlock_lock_options *)(void *)m.bytes, 1), DLOCK_OK);
    assert_int_equal(m.v1.version, 1);
    assert_int_equal(m.v1.ttl_ms, 30000);
    assert_int_equal(m.v1.retry_max_ms, 200);
    assert_null(m.v1.on_lost_arg);
    for (size_t i = sizeof m.v1; i < sizeof m.bytes; i++)
        assert_int_equal(m.bytes[i], GARBAGE);
}

/* The same garbage behind a version 1 struct leaves a lock without a
 * delay: a clean-up of its lease lets the next holder in at once. */
static void version_1_lock_options_take_no_lock_delay_from_the_bytes_after_them(void **state)
{
    (void)state;
    v1_lock_in_memory m;
    memset(m.bytes, 0, sizeof m.bytes);
    m.v1 = (v1_lock_options){1, 300, 0u, 0, 10, 200, NULL, NULL};
    /* A valid delay after it, so a library that read it would accept it. */
    dlock_lock_options v2 = DLOCK_LOCK_OPTIONS_INIT;
    v2.lock_delay_ms = 60000;
    memcpy(m.bytes + offsetof(dlock_lock_options, lock_delay_ms), &v2.lock_delay_ms,
           sizeof v2.lock_delay_ms);
    assert_true(offsetof(dlock_lock_options, lock_delay_ms) >= sizeof m.v1);

    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *a = NULL, *b = NULL;
    const dlock_lock_options *o = (const dlock_lock_options *)(void *)m.bytes;
    assert_int_equal(dlock_lock_new(&a, c, "abi:delay-v1", o), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&b, c, "abi:delay-v1", o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    /* a's lease runs out: b waits for it, not for a minute more. */
    assert_int_equal(dlock_lock_acquire(b, 5000), DLOCK_OK);
    int64_t left = -1;
    assert_int_equal(dlock_client_lock_delay(c, "abi:delay-v1", 0, &left), DLOCK_OK);
    assert_int_equal(left, 0);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);

    /* And version 2 reads it. */
    v2.ttl_ms = 300;
    v2.lock_delay_ms = 700;
    assert_int_equal(dlock_lock_new(&a, c, "abi:delay-v2", &v2), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&b, c, "abi:delay-v2", &v2), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 400), DLOCK_ETIMEDOUT); /* lease over, delay not */
    assert_int_equal(dlock_client_lock_delay(c, "abi:delay-v2", 0, &left), DLOCK_OK);
    assert_true(left > 0 && left <= 700);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_free(c);
}

static void lock_options_init_of_version_2_sets_no_delay(void **state)
{
    (void)state;
    dlock_lock_options o;
    memset(&o, 0x5a, sizeof o);
    assert_int_equal(dlock_lock_options_init(&o, 2), DLOCK_OK);
    assert_int_equal(o.version, 2);
    assert_int_equal(o.lock_delay_ms, 0);
}

static void unknown_lock_option_versions_are_refused(void **state)
{
    (void)state;
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *l = NULL;
    o.version = 0;
    assert_int_equal(dlock_lock_new(&l, c, "abi:x", &o), DLOCK_EINVAL);
    assert_null(l);
    o.version = DLOCK_LOCK_OPTIONS_VERSION + 1;
    assert_int_equal(dlock_lock_new(&l, c, "abi:x", &o), DLOCK_EINVAL);
    assert_null(l);
    assert_int_equal(dlock_lock_options_init(&o, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_options_init(&o, DLOCK_LOCK_OPTIONS_VERSION + 1), DLOCK_EINVAL);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(version_1_options_are_read_without_the_fields_added_later,
                                  test_srv_flush),
        cmocka_unit_test(init_of_version_1_writes_only_a_version_1_struct),
        cmocka_unit_test_teardown(version_3_options_take_no_observer_from_the_bytes_after_them,
                                  test_srv_flush),
        cmocka_unit_test_teardown(version_5_options_take_no_loop_from_the_bytes_after_them,
                                  test_srv_flush),
        cmocka_unit_test_teardown(version_4_options_take_no_identity_from_the_bytes_after_them,
                                  test_srv_flush),
        cmocka_unit_test(unknown_option_versions_are_refused),
        cmocka_unit_test_teardown(version_1_lock_options_are_read_without_the_fields_added_later,
                                  test_srv_flush),
        cmocka_unit_test(lock_options_init_of_version_1_writes_only_a_version_1_struct),
        cmocka_unit_test_teardown(
            version_1_lock_options_take_no_lock_delay_from_the_bytes_after_them, test_srv_flush),
        cmocka_unit_test(lock_options_init_of_version_2_sets_no_delay),
        cmocka_unit_test(unknown_lock_option_versions_are_refused),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
