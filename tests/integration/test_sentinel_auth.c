/* SPDX-License-Identifier: BSD-3-Clause */
/* Sentinel with a password on the primary and replica (issue 19): the
 * credentials of a redis-sentinel:// URL, or the client's password option,
 * are the primary's; the sentinels are asked without AUTH. A missing or
 * wrong password is DLOCK_EAUTH from the primary's handshake, which ends a
 * wait at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "dlock.h"
#include "proc.h"
#include "redis_topology.h"
#include "test_util.h"

static test_sentinel_set S;

static int group_setup(void **state)
{
    (void)state;
    return test_sentinel_start_auth(&S, "s3cret");
}

static int group_teardown(void **state)
{
    (void)state;
    test_sentinel_stop(&S);
    return 0;
}

/* S.url with userinfo inserted after the scheme. */
static void url_with(char *out, size_t len, const char *userinfo)
{
    const char *hosts = S.url + strlen("redis-sentinel://");
    snprintf(out, len, "redis-sentinel://%s%s", userinfo, hosts);
}

static int try_lock(const char *url, const char *password, int64_t wait_ms, char *msg,
                    size_t msg_len)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.password = password;
    const char *urls[1] = {url};
    dlock_client *c = test_client_new(urls, 1, &o);
    dlock_lock *l = test_lock_new(c, "auth-lock", 30000, 0, 10, 100);
    int rc = dlock_lock_acquire(l, wait_ms);
    snprintf(msg, msg_len, "%s", dlock_lock_errmsg(l));
    if (rc == DLOCK_OK)
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
    return rc;
}

static void password_in_the_url_reaches_the_primary(void **state)
{
    (void)state;
    char url[500], msg[300];
    url_with(url, sizeof url, ":s3cret@");
    assert_int_equal(try_lock(url, NULL, 0, msg, sizeof msg), DLOCK_OK);
    url_with(url, sizeof url, "default:s3cret@");
    assert_int_equal(try_lock(url, NULL, 0, msg, sizeof msg), DLOCK_OK);
}

static void password_option_reaches_the_primary(void **state)
{
    (void)state;
    char msg[300];
    assert_int_equal(try_lock(S.url, "s3cret", 0, msg, sizeof msg), DLOCK_OK);
}

static void missing_or_wrong_password_is_eauth_at_once(void **state)
{
    (void)state;
    char url[500], msg[300];
    assert_int_equal(try_lock(S.url, NULL, 0, msg, sizeof msg), DLOCK_EAUTH);
    print_message("no password: %s\n", msg);
    assert_non_null(strstr(msg, "NOAUTH"));
    url_with(url, sizeof url, ":wrong@");
    int64_t t0 = test_now_ms();
    assert_int_equal(try_lock(url, NULL, 5000, msg, sizeof msg), DLOCK_EAUTH);
    assert_true(test_now_ms() - t0 < 3000);
    print_message("wrong password: %s\n", msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(password_in_the_url_reaches_the_primary),
        cmocka_unit_test(password_option_reaches_the_primary),
        cmocka_unit_test(missing_or_wrong_password_is_eauth_at_once),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
