/* SPDX-License-Identifier: BSD-3-Clause */
/* Node URLs: dlock__url_parse() and the argument checks of
 * dlock_client_new(). No server: connecting is lazy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dlock.h"
#include "url.h"

/* Parse text that must be accepted; fails the test otherwise. */
static void parse_ok(dlock__url *u, const char *text)
{
    char err[256] = "";
    int rc = dlock__url_parse(u, text, err, sizeof err);
    if (rc != DLOCK_OK)
        fail_msg("\"%s\" rejected: %s (%s)", text, dlock_errname(rc), err);
}

/* Parse text that must be rejected with code; err receives the reason. */
static void parse_bad(const char *text, int code, char *err, size_t err_len)
{
    dlock__url u;
    memset(&u, 0x5a, sizeof u);
    int rc = dlock__url_parse(&u, text, err, err_len);
    if (rc != code)
        fail_msg("\"%s\": expected %s, got %s", text ? text : "(null)",
                 dlock_errname(code), dlock_errname(rc));
    assert_true(err[0] != '\0');
    if (text) /* "On error `out` holds nothing to free." */
        assert_true(u.host == NULL && u.user == NULL && u.password == NULL);
}

static void redis_url_with_host_only_uses_defaults(void **state)
{
    (void)state;
    dlock__url u;
    parse_ok(&u, "redis://cache.example");
    assert_int_equal(u.is_unix, 0);
    assert_string_equal(u.host, "cache.example");
    assert_int_equal(u.port, 6379);
    assert_int_equal(u.db, 0);
    assert_null(u.user);
    assert_null(u.password);
    dlock__url_clear(&u);
}

static void redis_url_with_port_and_db(void **state)
{
    (void)state;
    dlock__url u;
    parse_ok(&u, "redis://10.0.0.7:6380/5");
    assert_string_equal(u.host, "10.0.0.7");
    assert_int_equal(u.port, 6380);
    assert_int_equal(u.db, 5);
    dlock__url_clear(&u);
    parse_ok(&u, "redis://h:1/");
    assert_int_equal(u.port, 1);
    assert_int_equal(u.db, 0);
    dlock__url_clear(&u);
    parse_ok(&u, "redis://h:65535/0");
    assert_int_equal(u.port, 65535);
    dlock__url_clear(&u);
    parse_ok(&u, "REDIS://h"); /* schemes are case-insensitive */
    assert_string_equal(u.host, "h");
    dlock__url_clear(&u);
}

static void redis_url_userinfo_forms(void **state)
{
    (void)state;
    dlock__url u;
    parse_ok(&u, "redis://alice:s3cret@h:7000");
    assert_string_equal(u.user, "alice");
    assert_string_equal(u.password, "s3cret");
    assert_string_equal(u.host, "h");
    assert_int_equal(u.port, 7000);
    dlock__url_clear(&u);

    parse_ok(&u, "redis://:s3cret@h"); /* password for the default user */
    assert_null(u.user);
    assert_string_equal(u.password, "s3cret");
    dlock__url_clear(&u);

    parse_ok(&u, "redis://s3cret@h"); /* no colon: it is the password */
    assert_null(u.user);
    assert_string_equal(u.password, "s3cret");
    dlock__url_clear(&u);
}

static void percent_escapes_are_decoded_in_user_and_password(void **state)
{
    (void)state;
    dlock__url u;
    parse_ok(&u, "redis://us%40er:p%3Aa%2Fs%25s%40@h");
    assert_string_equal(u.user, "us@er");
    assert_string_equal(u.password, "p:a/s%s@");
    assert_string_equal(u.host, "h");
    dlock__url_clear(&u);
    /* The last '@' ends the userinfo, so a raw '@' in a password works. */
    parse_ok(&u, "redis://:p@ss@h");
    assert_string_equal(u.password, "p@ss");
    assert_string_equal(u.host, "h");
    dlock__url_clear(&u);
}

static void ipv6_literal_in_brackets(void **state)
{
    (void)state;
    dlock__url u;
    parse_ok(&u, "redis://[::1]:6380");
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 6380);
    dlock__url_clear(&u);
    parse_ok(&u, "redis://u:p@[fe80::1]/2");
    assert_string_equal(u.host, "fe80::1");
    assert_int_equal(u.port, 6379);
    assert_int_equal(u.db, 2);
    dlock__url_clear(&u);
}

static void unix_url_with_parameters(void **state)
{
    (void)state;
    dlock__url u;
    parse_ok(&u, "unix:///var/run/redis.sock?db=2&password=x&user=u");
    assert_int_equal(u.is_unix, 1);
    assert_string_equal(u.host, "/var/run/redis.sock");
    assert_int_equal(u.port, 0);
    assert_int_equal(u.db, 2);
    assert_string_equal(u.password, "x");
    assert_string_equal(u.user, "u");
    dlock__url_clear(&u);
    parse_ok(&u, "unix:///tmp/r.sock");
    assert_string_equal(u.host, "/tmp/r.sock");
    assert_int_equal(u.db, 0);
    assert_null(u.password);
    assert_null(u.user);
    dlock__url_clear(&u);
    parse_ok(&u, "unix:///tmp/r.sock?password=a%26b");
    assert_string_equal(u.password, "a&b");
    dlock__url_clear(&u);
}

static void malformed_urls_are_rejected(void **state)
{
    (void)state;
    static const char *bad[] = {
        "", "redis://ho st", "redis://host\t", "redis://h\x01", " redis://h",
        "redis://h:0", "redis://h:65536", "redis://h:abc", "redis://h:", "redis://h:-1",
        "redis://h/-1", "redis://h/abc", "redis://h/1x", "redis://", "redis://:6379",
        "redis://u:p@", "redis://u:p@:6379/0", "redis://u:%zz@h", "redis://u:%4@h",
        "redis://u:%@h", "redis://u:%00@h", "redis://%0a:p@h", "redis://[::1",
        "redis://[::1]x", "redis://[]:6379", "redis://h?db=1", "redis://h#x", "redis://h/99999999999",
        "unix://tmp/redis.sock", "unix://", "unix:///tmp/s?foo=1", "unix:///tmp/s?db",
        "unix:///tmp/s?db=-1", "unix:///tmp/s?password=%zz", "localhost:6379",
        "http://h", "tcp://h:6379",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        parse_bad(bad[i], DLOCK_EINVAL, err, sizeof err);
    }
}

static void null_and_over_long_urls_are_rejected(void **state)
{
    (void)state;
    char err[256] = "";
    dlock__url u;
    assert_int_equal(dlock__url_parse(&u, NULL, err, sizeof err), DLOCK_EINVAL);
    assert_int_equal(dlock__url_parse(NULL, "redis://h", err, sizeof err), DLOCK_EINVAL);
    char longurl[5000];
    memcpy(longurl, "redis://", 8);
    memset(longurl + 8, 'a', sizeof longurl - 9);
    longurl[sizeof longurl - 1] = '\0';
    parse_bad(longurl, DLOCK_EINVAL, err, sizeof err);
    assert_non_null(strstr(err, "longer"));
    /* A NULL or tiny error buffer is fine. */
    assert_int_equal(dlock__url_parse(&u, "http://h", NULL, 0), DLOCK_EINVAL);
    char tiny[4];
    assert_int_equal(dlock__url_parse(&u, "http://h", tiny, sizeof tiny), DLOCK_EINVAL);
    assert_true(strlen(tiny) < sizeof tiny);
}

static void error_messages_say_what_is_wrong(void **state)
{
    (void)state;
    char err[256] = "";
    parse_bad("http://h", DLOCK_EINVAL, err, sizeof err);
    assert_non_null(strstr(err, "scheme"));
    assert_non_null(strstr(err, "http"));
    parse_bad("redis://h:0", DLOCK_EINVAL, err, sizeof err);
    assert_non_null(strstr(err, "port"));
    parse_bad("redis://h/x", DLOCK_EINVAL, err, sizeof err);
    assert_non_null(strstr(err, "database"));
    parse_bad("unix:///tmp/s?color=red", DLOCK_EINVAL, err, sizeof err);
    assert_non_null(strstr(err, "color"));
    parse_bad("unix://relative/s", DLOCK_EINVAL, err, sizeof err);
    assert_non_null(strstr(err, "absolute"));
}

static void rediss_url_is_tcp_with_tls(void **state)
{
    (void)state;
    dlock__url u;
    char err[256] = "";
    parse_ok(&u, "rediss://alice:s%40cret@secure.example:6380/3");
    assert_int_equal(u.tls, 1);
    assert_int_equal(u.is_unix, 0);
    assert_string_equal(u.host, "secure.example");
    assert_int_equal(u.port, 6380);
    assert_int_equal(u.db, 3);
    assert_string_equal(u.user, "alice");
    assert_string_equal(u.password, "s@cret");
    dlock__url_clear(&u);
    parse_ok(&u, "REDISS://[::1]");
    assert_int_equal(u.tls, 1);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 6379);
    dlock__url_clear(&u);
    parse_ok(&u, "redis://h");
    assert_int_equal(u.tls, 0);
    dlock__url_clear(&u);
    /* The same rules as redis:// for the rest. */
    parse_bad("rediss://h:0", DLOCK_EINVAL, err, sizeof err);
    assert_non_null(strstr(err, "port"));
    parse_bad("rediss://", DLOCK_EINVAL, err, sizeof err);
    assert_non_null(strstr(err, "host"));
}

/* ---- dlock_client_new() argument validation ---------------------------- */

static void client_new_accepts_valid_urls_without_connecting(void **state)
{
    (void)state;
    /* Port 1 on loopback: nobody listens, and nothing is connected yet. */
    const char *urls[] = {"redis://127.0.0.1:1", "redis://[::1]:6380/2", "unix:///nonexistent/s"};
    dlock_client *c = NULL;
    char err[256] = "x";
    assert_int_equal(dlock_client_new(&c, urls, 3, NULL, err, sizeof err), DLOCK_OK);
    assert_non_null(c);
    assert_int_equal(dlock_client_node_count(c), 3);
    assert_string_equal(dlock_client_node_name(c, 0), "127.0.0.1:1");
    assert_string_equal(dlock_client_node_name(c, 1), "[::1]:6380");
    assert_string_equal(dlock_client_node_name(c, 2), "/nonexistent/s");
    assert_null(dlock_client_node_name(c, 3));
    dlock_client_free(c);
}

static void client_new_rejects_bad_url_lists(void **state)
{
    (void)state;
    const char *one[] = {"redis://127.0.0.1:1"};
    const char *many[65];
    for (int i = 0; i < 65; i++)
        many[i] = "redis://127.0.0.1:1";
    char err[256];
    dlock_client *c = (dlock_client *)(uintptr_t)1;

    assert_int_equal(dlock_client_new(NULL, one, 1, NULL, err, sizeof err), DLOCK_EINVAL);
    assert_int_equal(dlock_client_new(&c, NULL, 1, NULL, err, sizeof err), DLOCK_EINVAL);
    assert_null(c);
    c = (dlock_client *)(uintptr_t)1;
    err[0] = '\0';
    assert_int_equal(dlock_client_new(&c, one, 0, NULL, err, sizeof err), DLOCK_EINVAL);
    assert_null(c);
    assert_true(err[0] != '\0');
    assert_int_equal(dlock_client_new(&c, many, 65, NULL, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "65"));
    /* The same node twice is not two independent votes. */
    assert_int_equal(dlock_client_new(&c, many, 2, NULL, err, sizeof err), DLOCK_EINVAL);
    assert_null(c);
    assert_non_null(strstr(err, "same node"));
    /* 64 is the most nodes a client may span. */
    static char distinct[64][32];
    const char *ok64[64];
    for (int i = 0; i < 64; i++) {
        snprintf(distinct[i], sizeof distinct[i], "redis://127.0.0.1:%d", 1 + i);
        ok64[i] = distinct[i];
    }
    assert_int_equal(dlock_client_new(&c, ok64, 64, NULL, err, sizeof err), DLOCK_OK);
    assert_int_equal(dlock_client_node_count(c), 64);
    dlock_client_free(c);
    /* A NULL error buffer is fine. */
    assert_int_equal(dlock_client_new(&c, one, 0, NULL, NULL, 0), DLOCK_EINVAL);
}

static void client_new_names_the_bad_url(void **state)
{
    (void)state;
    const char *urls[] = {"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://h:99999"};
    const char *with_null[] = {"redis://127.0.0.1:1", NULL};
    const char *tls[] = {"rediss://127.0.0.1:1"};
    char err[256] = "";
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_new(&c, urls, 3, NULL, err, sizeof err), DLOCK_EINVAL);
    assert_null(c);
    assert_non_null(strstr(err, "URL 3"));
    assert_non_null(strstr(err, "port"));
    assert_int_equal(dlock_client_new(&c, with_null, 2, NULL, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "URL 2"));
    /* rediss:// is accepted (verified against the system CA store). */
    assert_int_equal(dlock_client_new(&c, tls, 1, NULL, err, sizeof err), DLOCK_OK);
    dlock_client_free(c);
    c = NULL;
    /* A TLS file that cannot be read names itself. */
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.tls_ca_file = "/nonexistent/ca.pem";
    assert_int_equal(dlock_client_new(&c, tls, 1, &o, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "URL 1"));
    assert_non_null(strstr(err, "/nonexistent/ca.pem"));
    assert_null(c);
}

/* Create a client with opts changed by `tweak`; returns the code. */
static int client_with(void (*tweak)(dlock_client_options *), char *err, size_t len)
{
    const char *urls[] = {"redis://127.0.0.1:1"};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_client *c = NULL;
    tweak(&o);
    int rc = dlock_client_new(&c, urls, 1, &o, err, len);
    if (rc != DLOCK_OK)
        assert_null(c);
    dlock_client_free(c);
    return rc;
}

static void t_version(dlock_client_options *o) { o->version = DLOCK_CLIENT_OPTIONS_VERSION + 1; }
static void t_tls_2(dlock_client_options *o) { o->tls = 2; }
static void t_insecure_2(dlock_client_options *o) { o->tls_insecure = -1; }
static void t_version0(dlock_client_options *o) { o->version = 0; }
static void t_connect0(dlock_client_options *o) { o->connect_timeout_ms = 0; }
static void t_io_neg(dlock_client_options *o) { o->io_timeout_ms = -5; }
static void t_drift_neg(dlock_client_options *o) { o->drift_factor = -0.01; }
static void t_drift_half(dlock_client_options *o) { o->drift_factor = 0.5; }
static void t_drift_nan(dlock_client_options *o) { o->drift_factor = NAN; }
static void t_pool_neg(dlock_client_options *o) { o->pool_size = -1; }
static void t_pool_big(dlock_client_options *o) { o->pool_size = 1025; }
static void t_uptime_neg(dlock_client_options *o) { o->min_node_uptime_ms = -1; }
static void t_wakeups_2(dlock_client_options *o) { o->wakeups = 2; }
static void t_pool_zero(dlock_client_options *o) { o->pool_size = 0; }
static void t_drift_zero(dlock_client_options *o) { o->drift_factor = 0.0; }

static void client_new_rejects_bad_options(void **state)
{
    (void)state;
    void (*bad[])(dlock_client_options *) = {
        t_version, t_version0, t_connect0, t_io_neg, t_drift_neg, t_drift_half,
        t_drift_nan, t_pool_neg, t_pool_big, t_uptime_neg, t_wakeups_2, t_tls_2, t_insecure_2,
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        if (client_with(bad[i], err, sizeof err) != DLOCK_EINVAL)
            fail_msg("bad option set %zu accepted", i);
        assert_true(err[0] != '\0');
    }
    char err[256] = "";
    assert_int_equal(client_with(t_version, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "version"));
    /* Edge values that are allowed. */
    assert_int_equal(client_with(t_pool_zero, err, sizeof err), DLOCK_OK);
    assert_int_equal(client_with(t_drift_zero, err, sizeof err), DLOCK_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(redis_url_with_host_only_uses_defaults),
        cmocka_unit_test(redis_url_with_port_and_db),
        cmocka_unit_test(redis_url_userinfo_forms),
        cmocka_unit_test(percent_escapes_are_decoded_in_user_and_password),
        cmocka_unit_test(ipv6_literal_in_brackets),
        cmocka_unit_test(unix_url_with_parameters),
        cmocka_unit_test(malformed_urls_are_rejected),
        cmocka_unit_test(null_and_over_long_urls_are_rejected),
        cmocka_unit_test(error_messages_say_what_is_wrong),
        cmocka_unit_test(rediss_url_is_tcp_with_tls),
        cmocka_unit_test(client_new_accepts_valid_urls_without_connecting),
        cmocka_unit_test(client_new_rejects_bad_url_lists),
        cmocka_unit_test(client_new_names_the_bad_url),
        cmocka_unit_test(client_new_rejects_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
