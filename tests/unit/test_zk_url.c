/* SPDX-License-Identifier: BSD-3-Clause */
/* ZooKeeper URLs: dlock__zk_url_parse(). Pure, built with or without
 * ZooKeeper; and what a client on a zk:// URL gets from a build without
 * it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "dlock.h"
#include "zk_url.h"

static void parse_ok(dlock__zk_url *u, const char *const *urls, size_t n)
{
    char err[256] = "";
    int rc = dlock__zk_url_parse(u, urls, n, err, sizeof err);
    if (rc != DLOCK_OK)
        fail_msg("\"%s\" rejected: %s (%s)", urls[0], dlock_errname(rc), err);
}

static void parse_bad(const char *text, const char *why)
{
    dlock__zk_url u;
    char err[256] = "";
    int rc = dlock__zk_url_parse(&u, &text, 1, err, sizeof err);
    if (rc != DLOCK_EINVAL)
        fail_msg("\"%s\": expected DLOCK_EINVAL, got %s", text, dlock_errname(rc));
    if (!strstr(err, why))
        fail_msg("\"%s\": message \"%s\" lacks \"%s\"", text, err, why);
    assert_null(u.hosts);
    assert_null(u.user);
}

static void one_url_names_the_ensemble_and_its_chroot(void **state)
{
    (void)state;
    const char *url = "ZK://10.0.0.1:2181,zk2:2182/apps/locks?session_timeout_ms=3000";
    dlock__zk_url u;
    parse_ok(&u, &url, 1);
    assert_string_equal(u.hosts, "10.0.0.1:2181,zk2:2182/apps/locks");
    assert_int_equal(u.session_timeout_ms, 3000);
    assert_null(u.user);
    dlock__zk_url_clear(&u);
    url = "zk://h:1";
    parse_ok(&u, &url, 1);
    assert_int_equal(u.session_timeout_ms, DLOCK__ZK_SESSION_DEFAULT_MS);
    dlock__zk_url_clear(&u);
}

static void a_list_split_at_its_commas_is_one_ensemble(void **state)
{
    (void)state;
    const char *urls[] = {"zk://app:s3:cr@t@h1:1", "h2:2", "h3:3/root"};
    dlock__zk_url u;
    parse_ok(&u, urls, 3);
    assert_string_equal(u.hosts, "h1:1,h2:2,h3:3/root");
    assert_string_equal(u.user, "app");
    assert_string_equal(u.password, "s3:cr@t");
    dlock__zk_url_clear(&u);
}

static void bad_urls_say_what_is_wrong(void **state)
{
    (void)state;
    parse_bad("redis://h:1", "starts with zk://");
    parse_bad("zk://", "empty host");
    parse_bad("zk://h", "needs a port");
    parse_bad("zk://h:", "empty port");
    parse_bad("zk://h:0", "out of range");
    parse_bad("zk://h:65536", "out of range");
    parse_bad("zk://h:2x", "not a number");
    parse_bad("zk://h:1,", "empty host");
    parse_bad("zk://[::1]:1", "IPv6");
    parse_bad("zk://h:1/", "chroot");
    parse_bad("zk://h:1/a/", "chroot");
    parse_bad("zk://h:1/a//b", "empty segment");
    parse_bad("zk://h:1/a/../b", ". or ..");
    parse_bad("zk://user@h:1", "user:password");
    parse_bad("zk://:pw@h:1", "user:password");
    parse_bad("zk://h:1?ttl=3", "session_timeout_ms");
    parse_bad("zk://h:1?session_timeout_ms=99", "100..600000");
    parse_bad("zk://h:1?session_timeout_ms=", "100..600000");
    const char *mixed[] = {"zk://h:1", "etcd://h:2"};
    dlock__zk_url u;
    char err[256] = "";
    assert_int_equal(dlock__zk_url_parse(&u, mixed, 2, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "one zk:// URL"));
}

static void a_client_on_zk_is_refused_only_without_zookeeper(void **state)
{
    (void)state;
    /* A port nobody serves: with ZooKeeper the client fails to connect
     * (DLOCK_EIO), without it the URL is refused before any I/O. */
    const char *url = "zk://127.0.0.1:1";
    dlock_client *c = NULL;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = 200;
    int rc = dlock_client_new(&c, &url, 1, &o, NULL, 0);
    assert_int_equal(rc, DLOCK_TEST_WITH_ZOOKEEPER ? DLOCK_EIO : DLOCK_ENOTSUP);
    assert_null(c);
    /* A bad zk:// URL is EINVAL with ZooKeeper; without it, ENOTSUP. */
    url = "zk://nohost";
    rc = dlock_client_new(&c, &url, 1, &o, NULL, 0);
    assert_int_equal(rc, DLOCK_TEST_WITH_ZOOKEEPER ? DLOCK_EINVAL : DLOCK_ENOTSUP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_url_names_the_ensemble_and_its_chroot),
        cmocka_unit_test(a_list_split_at_its_commas_is_one_ensemble),
        cmocka_unit_test(bad_urls_say_what_is_wrong),
        cmocka_unit_test(a_client_on_zk_is_refused_only_without_zookeeper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
