/* SPDX-License-Identifier: BSD-3-Clause */
/* Error codes: dlock_strerror(), dlock_errname(), the mapping of Redis error
 * replies, the version, and the option initialisers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <string.h>

#include "dlock.h"
#include "error.h"

static const struct {
    int code;
    const char *name;
} codes[] = {
    {DLOCK_OK, "DLOCK_OK"},
    {DLOCK_ENOTACQUIRED, "DLOCK_ENOTACQUIRED"},
    {DLOCK_ETIMEDOUT, "DLOCK_ETIMEDOUT"},
    {DLOCK_ECANCELED, "DLOCK_ECANCELED"},
    {DLOCK_ENOTOWNER, "DLOCK_ENOTOWNER"},
    {DLOCK_EEXPIRED, "DLOCK_EEXPIRED"},
    {DLOCK_ELOST, "DLOCK_ELOST"},
    {DLOCK_ENOQUORUM, "DLOCK_ENOQUORUM"},
    {DLOCK_EINVAL, "DLOCK_EINVAL"},
    {DLOCK_ENOTHELD, "DLOCK_ENOTHELD"},
    {DLOCK_EIO, "DLOCK_EIO"},
    {DLOCK_EUNKNOWN, "DLOCK_EUNKNOWN"},
    {DLOCK_EAUTH, "DLOCK_EAUTH"},
    {DLOCK_EWRONGTYPE, "DLOCK_EWRONGTYPE"},
    {DLOCK_EREFUSED, "DLOCK_EREFUSED"},
    {DLOCK_EBUSY, "DLOCK_EBUSY"},
    {DLOCK_ENOMEM, "DLOCK_ENOMEM"},
    {DLOCK_ENOTSUP, "DLOCK_ENOTSUP"},
    {DLOCK_EPROTO, "DLOCK_EPROTO"},
    {DLOCK_ETLS, "DLOCK_ETLS"},
    {DLOCK_ENOREPLICAS, "DLOCK_ENOREPLICAS"},
};
#define N_CODES (sizeof codes / sizeof codes[0])

static void every_code_has_a_distinct_static_description(void **state)
{
    (void)state;
    const char *unknown = dlock_strerror(12345);
    for (size_t i = 0; i < N_CODES; i++) {
        const char *s = dlock_strerror(codes[i].code);
        assert_non_null(s);
        assert_true(strlen(s) > 0);
        assert_ptr_equal(s, dlock_strerror(codes[i].code)); /* static */
        if (strcmp(s, unknown) == 0)
            fail_msg("%s has the unknown-code text", codes[i].name);
        for (size_t j = 0; j < i; j++)
            if (strcmp(s, dlock_strerror(codes[j].code)) == 0)
                fail_msg("%s and %s share \"%s\"", codes[i].name, codes[j].name, s);
    }
}

static void every_code_has_its_symbolic_name(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CODES; i++) {
        assert_string_equal(dlock_errname(codes[i].code), codes[i].name);
        assert_ptr_equal(dlock_errname(codes[i].code), dlock_errname(codes[i].code));
    }
}

static void codes_are_negative_and_contiguous(void **state)
{
    (void)state;
    /* The table above is the header's list: -1..-19 without gaps. */
    for (size_t i = 0; i < N_CODES; i++)
        assert_int_equal(codes[i].code, -(int)i);
}

static void unknown_codes_get_a_static_text_and_placeholder_name(void **state)
{
    (void)state;
    const int unknown[] = {1, 2, -21, -100, 4711, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = dlock_strerror(unknown[i]);
        assert_non_null(s);
        assert_true(strlen(s) > 0);
        assert_ptr_equal(s, dlock_strerror(unknown[i]));
        assert_string_equal(dlock_errname(unknown[i]), "DLOCK_E?");
    }
}

static int map(const char *msg)
{
    return dlock__map_redis_error(msg, strlen(msg));
}

static void redis_error_classes_map_to_codes(void **state)
{
    (void)state;
    assert_int_equal(map("NOAUTH Authentication required."), DLOCK_EAUTH);
    assert_int_equal(map("WRONGPASS invalid username-password pair or user is disabled."), DLOCK_EAUTH);
    assert_int_equal(map("NOPERM this user has no permissions to run the 'evalsha' command"), DLOCK_EAUTH);
    assert_int_equal(map("WRONGTYPE Operation against a key holding the wrong kind of value"),
                     DLOCK_EWRONGTYPE);
    assert_int_equal(map("OOM command not allowed when used memory > 'maxmemory'."), DLOCK_EREFUSED);
    assert_int_equal(map("READONLY You can't write against a read only replica."), DLOCK_EREFUSED);
    assert_int_equal(map("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."),
                     DLOCK_EREFUSED);
    assert_int_equal(map("NOREPLICAS Not enough good replicas to write."), DLOCK_EREFUSED);
    assert_int_equal(map("EXECABORT Transaction discarded because of previous errors."), DLOCK_EREFUSED);
    assert_int_equal(map("NOSCRIPT No matching script. Please use EVAL."), DLOCK_EREFUSED);
    assert_int_equal(map("LOADING Redis is loading the dataset in memory"), DLOCK_EBUSY);
    assert_int_equal(map("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."),
                     DLOCK_EBUSY);
    assert_int_equal(map("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
                     DLOCK_EBUSY);
    assert_int_equal(map("TRYAGAIN Multiple keys request during rehashing of slot"), DLOCK_EBUSY);
    assert_int_equal(map("CLUSTERDOWN The cluster is down"), DLOCK_EBUSY);
    /* A bare class word, without a message. */
    assert_int_equal(map("WRONGTYPE"), DLOCK_EWRONGTYPE);
    assert_int_equal(map("LOADING"), DLOCK_EBUSY);
}

static void redis5_password_errors_are_auth_errors(void **state)
{
    (void)state;
    assert_int_equal(map("ERR invalid password"), DLOCK_EAUTH);
    assert_int_equal(map("ERR invalid username-password pair"), DLOCK_EAUTH);
}

static void errors_inside_redis6_scripts_keep_their_class(void **state)
{
    (void)state;
    assert_int_equal(map("ERR Error running script (call to f_0123456789abcdef0123456789abcdef01234567): "
                         "@user_script:1: WRONGTYPE Operation against a key holding the wrong kind of value"),
                     DLOCK_EWRONGTYPE);
    assert_int_equal(map("ERR Error running script (call to f_x): @user_script:1: NOPERM this user has no "
                         "permissions to access one of the keys used as arguments"),
                     DLOCK_EAUTH);
    assert_int_equal(map("ERR Error running script (call to f_x): @user_script:1: OOM command not allowed "
                         "when used memory > 'maxmemory'."),
                     DLOCK_EREFUSED);
    assert_int_equal(map("ERR Error running script (call to f_x): @user_script:1: READONLY You can't write "
                         "against a read only replica."),
                     DLOCK_EREFUSED);
}

static void acl_refusals_inside_redis7_scripts_are_auth_errors(void **state)
{
    (void)state;
    assert_int_equal(map("ERR The user executing the script can't run this command or subcommand "
                         "script: 54018df73bcb1735808f08ceccbd154edc7da0d6, on @user_script:14."),
                     DLOCK_EAUTH);
    assert_int_equal(map("ERR The user executing the script can't access at least one of the keys "
                         "mentioned in the command arguments script: f, on @user_script:1."),
                     DLOCK_EAUTH);
    assert_int_equal(map("ERR ACL failure in script: User locker has no permissions to run the 'zscore' "
                         "command script: f, on @user_script:14."),
                     DLOCK_EAUTH);
    /* Redis 6 wraps it as it wraps every error raised in a script. */
    assert_int_equal(map("ERR Error running script (call to f_x): @user_script:14: @user_script: 14: "
                         "The user executing the script can't run this command or subcommand"),
                     DLOCK_EAUTH);
    /* Only the given length counts, and another script error is not one. */
    const char *m = "ERR The user executing the script can't run this command";
    assert_int_equal(dlock__map_redis_error(m, 20), DLOCK_EREFUSED);
    assert_int_equal(map("ERR Error running script: @user_script:3: user_script:3: Script attempted "
                         "to access nonexistent global variable 'user'"),
                     DLOCK_EREFUSED);
}

static void other_errors_are_refusals(void **state)
{
    (void)state;
    assert_int_equal(map("ERR foo"), DLOCK_EREFUSED);
    assert_int_equal(map("ERR unknown command 'EVALSHA'"), DLOCK_EREFUSED);
    assert_int_equal(map(""), DLOCK_EREFUSED);
    /* A class name must be a whole word. */
    assert_int_equal(map("BUSYKEY Target key name already exists."), DLOCK_EREFUSED);
    assert_int_equal(map("OOMPH"), DLOCK_EREFUSED);
    assert_int_equal(dlock__map_redis_error(NULL, 0), DLOCK_EPROTO);
}

static void mapping_reads_only_the_given_length(void **state)
{
    (void)state;
    /* "BUSYKEY" cut to 4 bytes is "BUSY"; "ERR foo WRONGTYPE" cut before the
     * class word is a generic refusal. */
    assert_int_equal(dlock__map_redis_error("BUSYKEY", 4), DLOCK_EBUSY);
    assert_int_equal(dlock__map_redis_error("ERR foo WRONGTYPE x", 8), DLOCK_EREFUSED);
}

static void mapping_never_returns_success(void **state)
{
    (void)state;
    static const char *msgs[] = {"OK", "+OK", "PONG", "1", "ERR", "NOAUTH", "x y z"};
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++)
        assert_int_not_equal(map(msgs[i]), DLOCK_OK);
}

static void version_matches_the_header(void **state)
{
    (void)state;
    assert_string_equal(dlock_version(), DLOCK_VERSION_STRING);
    assert_int_equal(DLOCK_VERSION_NUMBER,
                     (DLOCK_VERSION_MAJOR << 16) | (DLOCK_VERSION_MINOR << 8) | DLOCK_VERSION_PATCH);
}

static void lock_options_init_fills_defaults_or_rejects(void **state)
{
    (void)state;
    dlock_lock_options want = DLOCK_LOCK_OPTIONS_INIT, o;
    memset(&o, 0x7f, sizeof o);
    assert_int_equal(dlock_lock_options_init(&o, DLOCK_LOCK_OPTIONS_VERSION), DLOCK_OK);
    assert_int_equal(o.version, DLOCK_LOCK_OPTIONS_VERSION);
    assert_int_equal(o.ttl_ms, want.ttl_ms);
    assert_int_equal(o.ttl_ms, 30000);
    assert_int_equal(o.flags, 0);
    assert_int_equal(o.renew_interval_ms, 0);
    assert_int_equal(o.retry_min_ms, 10);
    assert_int_equal(o.retry_max_ms, 200);
    assert_null(o.on_lost);
    assert_null(o.on_lost_arg);
    assert_int_equal(dlock_lock_options_init(NULL, DLOCK_LOCK_OPTIONS_VERSION), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_options_init(&o, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_options_init(&o, DLOCK_LOCK_OPTIONS_VERSION + 1), DLOCK_EINVAL);
}

static void client_options_init_fills_defaults_or_rejects(void **state)
{
    (void)state;
    dlock_client_options o;
    memset(&o, 0x7f, sizeof o);
    assert_int_equal(dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION), DLOCK_OK);
    assert_int_equal(o.version, DLOCK_CLIENT_OPTIONS_VERSION);
    assert_int_equal(o.connect_timeout_ms, 1000);
    assert_int_equal(o.io_timeout_ms, 1000);
    assert_int_equal(o.pool_size, 4);
    assert_true(o.drift_factor > 0.0099 && o.drift_factor < 0.0101);
    assert_int_equal(o.min_node_uptime_ms, 0);
    assert_int_equal(o.wakeups, 1);
    assert_int_equal(dlock_client_options_init(NULL, DLOCK_CLIENT_OPTIONS_VERSION), DLOCK_EINVAL);
    assert_int_equal(dlock_client_options_init(&o, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION + 1), DLOCK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_code_has_a_distinct_static_description),
        cmocka_unit_test(every_code_has_its_symbolic_name),
        cmocka_unit_test(codes_are_negative_and_contiguous),
        cmocka_unit_test(unknown_codes_get_a_static_text_and_placeholder_name),
        cmocka_unit_test(redis_error_classes_map_to_codes),
        cmocka_unit_test(redis5_password_errors_are_auth_errors),
        cmocka_unit_test(errors_inside_redis6_scripts_keep_their_class),
        cmocka_unit_test(acl_refusals_inside_redis7_scripts_are_auth_errors),
        cmocka_unit_test(other_errors_are_refusals),
        cmocka_unit_test(mapping_reads_only_the_given_length),
        cmocka_unit_test(mapping_never_returns_success),
        cmocka_unit_test(version_matches_the_header),
        cmocka_unit_test(lock_options_init_fills_defaults_or_rejects),
        cmocka_unit_test(client_options_init_fills_defaults_or_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
