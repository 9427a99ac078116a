/* SPDX-License-Identifier: BSD-3-Clause */
/* etcd URLs: dlock__etcd_url_parse(). Pure, built with or without etcd. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "dlock.h"
#include "etcd_url.h"

static void parse_ok(dlock__etcd_url *u, const char *const *urls, size_t n)
{
    char err[256] = "";
    int rc = dlock__etcd_url_parse(u, urls, n, err, sizeof err);
    if (rc != DLOCK_OK)
        fail_msg("\"%s\" rejected: %s (%s)", urls[0], dlock_errname(rc), err);
}

static void parse_bad(const char *text, const char *why)
{
    dlock__etcd_url u;
    char err[256] = "";
    int rc = dlock__etcd_url_parse(&u, &text, 1, err, sizeof err);
    if (rc != DLOCK_EINVAL)
        fail_msg("\"%s\": expected DLOCK_EINVAL, got %s", text, dlock_errname(rc));
    if (!strstr(err, why))
        fail_msg("\"%s\": message \"%s\" lacks \"%s\"", text, err, why);
    assert_int_equal(u.n, 0);
    assert_null(u.user);
}

static void one_url_lists_every_member(void **state)
{
    (void)state;
    const char *url = "etcd://10.0.0.1:2379,10.0.0.2:2379,[::1]:2380";
    dlock__etcd_url u;
    parse_ok(&u, &url, 1);
    assert_int_equal(u.n, 3);
    assert_string_equal(u.name[0], "10.0.0.1:2379");
    assert_string_equal(u.endpoint[1], "http://10.0.0.2:2379");
    assert_string_equal(u.endpoint[2], "http://[::1]:2380");
    assert_null(u.user);
    dlock__etcd_url_clear(&u);
}

static void several_urls_add_up_and_credentials_apply_to_all(void **state)
{
    (void)state;
    const char *urls[] = {"ETCD://root:s3:cr@t@h1:1", "etcd://h2:2/"};
    dlock__etcd_url u;
    parse_ok(&u, urls, 2);
    assert_int_equal(u.n, 2);
    assert_string_equal(u.user, "root");
    assert_string_equal(u.password, "s3:cr@t");
    assert_string_equal(u.name[1], "h2:2");
    dlock__etcd_url_clear(&u);
}

static void a_list_split_at_its_commas_is_one_list(void **state)
{
    (void)state;
    const char *urls[] = {"etcd://h1:1", "h2:2", "[::1]:3"};
    dlock__etcd_url u;
    parse_ok(&u, urls, 3);
    assert_int_equal(u.n, 3);
    assert_string_equal(u.name[2], "[::1]:3");
    dlock__etcd_url_clear(&u);
    const char *first_bare[] = {"h2:2"};
    char err[256] = "";
    assert_int_equal(dlock__etcd_url_parse(&u, first_bare, 1, err, sizeof err), DLOCK_EINVAL);
}

static void bad_urls_say_what_is_wrong(void **state)
{
    (void)state;
    parse_bad("redis://h:1", "not an etcd:// or etcds:// URL");
    parse_bad("etcd://", "no host");
    parse_bad("etcd://h1", "needs a port");
    parse_bad("etcd://h1:0", "1..65535");
    parse_bad("etcd://h1:65536", "1..65535");
    parse_bad("etcd://h1:2379,", "empty host");
    parse_bad("etcd://h1:2379,h1:2379", "the same endpoint twice");
    parse_bad("etcd://h1:2379/v3", "no path");
    parse_bad("etcd://::1:2379", "brackets");
    parse_bad("etcd://[::1:2379", "unclosed");
    parse_bad("etcd://user@h:1", "user:password@");
    parse_bad("etcd://h:x1", "1..65535");
}

static void etcds_urls_are_https_and_never_mixed_with_plain(void **state)
{
    (void)state;
    const char *urls[] = {"etcds://root:pw@h1:1,h2:2", "h3:3", "etcds://h4:4"};
    dlock__etcd_url u;
    parse_ok(&u, urls, 3);
    assert_int_equal(u.tls, 1);
    assert_int_equal(u.n, 4);
    assert_string_equal(u.endpoint[0], "https://h1:1");
    assert_string_equal(u.endpoint[2], "https://h3:3"); /* a bare entry continues the list */
    assert_string_equal(u.name[3], "h4:4");
    dlock__etcd_url_clear(&u);
    /* The tls option makes plain endpoints https too. */
    const char *plain = "etcd://h1:1,[::1]:2";
    parse_ok(&u, &plain, 1);
    assert_int_equal(u.tls, 0);
    assert_string_equal(u.endpoint[1], "http://[::1]:2");
    assert_int_equal(dlock__etcd_url_use_tls(&u), DLOCK_OK);
    assert_int_equal(u.tls, 1);
    assert_string_equal(u.endpoint[0], "https://h1:1");
    assert_string_equal(u.endpoint[1], "https://[::1]:2");
    dlock__etcd_url_clear(&u);
    /* One cluster is TLS on every member or on none. */
    const char *mixed[] = {"etcds://h1:1", "etcd://h2:2"};
    char err[256] = "";
    assert_int_equal(dlock__etcd_url_parse(&u, mixed, 2, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "cannot be mixed"));
    parse_bad("etcds://", "no host");
}

static void credentials_that_disagree_are_refused(void **state)
{
    (void)state;
    const char *urls[] = {"etcd://a:b@h1:1", "etcd://a:c@h2:2"};
    dlock__etcd_url u;
    char err[256] = "";
    assert_int_equal(dlock__etcd_url_parse(&u, urls, 2, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "different users or passwords"));
}

static void scheme_test_ignores_case_only(void **state)
{
    (void)state;
    assert_true(dlock__etcd_url_is("etcd://h:1"));
    assert_true(dlock__etcd_url_is("EtCd://h:1"));
    assert_true(dlock__etcd_url_is("etcds://h:1"));
    assert_true(dlock__etcd_url_is("ETCDS://h:1"));
    assert_false(dlock__etcd_url_is("etcdx://h:1"));
    assert_false(dlock__etcd_url_is("redis://h:1"));
    assert_false(dlock__etcd_url_is(NULL));
}

/* dlock_client_new() on etcd:// URLs: a client (nothing is connected yet)
 * with the etcd backend, DLOCK_ENOTSUP saying so without it; never a bad
 * Redis URL. Mixed backends are refused either way. */
static void client_on_etcd_urls_depends_on_the_build(void **state)
{
    (void)state;
    const char *urls[] = {"etcd://127.0.0.1:1,127.0.0.1:2"};
    dlock_client *c = NULL;
    char err[256] = "";
    int rc = dlock_client_new(&c, urls, 1, NULL, err, sizeof err);
#if DLOCK_TEST_WITH_ETCD
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(dlock_client_node_count(c), 1);
    assert_string_equal(dlock_client_node_name(c, 0), "127.0.0.1:1,127.0.0.1:2");
    dlock_client_free(c);
    const char *mixed[] = {"etcd://127.0.0.1:1", "redis://127.0.0.1:2"};
    assert_int_equal(dlock_client_new(&c, mixed, 2, NULL, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "cannot be mixed"));
#else
    assert_int_equal(rc, DLOCK_ENOTSUP);
    assert_null(c);
    assert_non_null(strstr(err, "without etcd support"));
#endif
}

/* DLOCK_ETCD_TRANSPORT at dlock_client_new(): grpc is a client of its own
 * in a build with the gRPC transport (nothing connected yet; TLS too, but
 * not tls_insecure, which gRPC's C core has no switch for), refused with
 * DLOCK_ENOTSUP without it; gateway and empty are the default; anything
 * else is DLOCK_EINVAL. */
static void the_transport_switch_depends_on_the_build(void **state)
{
    (void)state;
    const char *plain[] = {"etcd://127.0.0.1:1"}, *tls[] = {"etcds://127.0.0.1:1"};
    dlock_client *c = NULL, *t = NULL;
    char err[512] = "";
    setenv("DLOCK_ETCD_TRANSPORT", "grpc", 1);
    int rc = dlock_client_new(&c, plain, 1, NULL, err, sizeof err);
    int tls_rc = dlock_client_new(&t, tls, 1, NULL, err, sizeof err);
#if DLOCK_TEST_WITH_ETCD_GRPC
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(tls_rc, DLOCK_OK);
    dlock_client_free(t);
    t = NULL;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.tls_insecure = 1;
    assert_int_equal(dlock_client_new(&t, tls, 1, &o, err, sizeof err), DLOCK_ENOTSUP);
    assert_non_null(strstr(err, "tls_insecure"));
#elif DLOCK_TEST_WITH_ETCD
    assert_int_equal(rc, DLOCK_ENOTSUP);
    assert_int_equal(tls_rc, DLOCK_ENOTSUP);
    assert_non_null(strstr(err, "no gRPC transport"));
#else
    assert_int_equal(rc, DLOCK_ENOTSUP);
    (void)tls_rc;
#endif
    assert_null(t);
    dlock_client_free(c);
    c = NULL;
    setenv("DLOCK_ETCD_TRANSPORT", "carrier-pigeon", 1);
    rc = dlock_client_new(&c, plain, 1, NULL, err, sizeof err);
#if DLOCK_TEST_WITH_ETCD
    assert_int_equal(rc, DLOCK_EINVAL);
    assert_non_null(strstr(err, "DLOCK_ETCD_TRANSPORT"));
#endif
    const char *fine[] = {"gateway", ""};
    for (size_t i = 0; i < 2; i++) {
        setenv("DLOCK_ETCD_TRANSPORT", fine[i], 1);
        rc = dlock_client_new(&c, plain, 1, NULL, err, sizeof err);
        assert_int_equal(rc, DLOCK_TEST_WITH_ETCD ? DLOCK_OK : DLOCK_ENOTSUP);
        dlock_client_free(c);
        c = NULL;
    }
    unsetenv("DLOCK_ETCD_TRANSPORT");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_url_lists_every_member),
        cmocka_unit_test(several_urls_add_up_and_credentials_apply_to_all),
        cmocka_unit_test(a_list_split_at_its_commas_is_one_list),
        cmocka_unit_test(bad_urls_say_what_is_wrong),
        cmocka_unit_test(etcds_urls_are_https_and_never_mixed_with_plain),
        cmocka_unit_test(credentials_that_disagree_are_refused),
        cmocka_unit_test(scheme_test_ignores_case_only),
        cmocka_unit_test(client_on_etcd_urls_depends_on_the_build),
        cmocka_unit_test(the_transport_switch_depends_on_the_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
