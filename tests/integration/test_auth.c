/* SPDX-License-Identifier: BSD-3-Clause */
/* Authentication against a real redis-server with `requirepass` and ACL
 * users: right and wrong passwords, ACL users with and without the needed
 * permissions, percent-escaped passwords, unix-socket credentials. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

static const char conf[] =
    "requirepass secret\n"
    "user alice on >pw ~* &* +@all\n"
    "user bob on >pw ~* -@all +ping\n"
    "user carol on >p@ss:w/rd%x ~* &* +@all\n";

static int group_setup(void **state)
{
    (void)state;
    return test_redis_start(&test_srv, conf);
}

/* Try to take and release a lock through a client for `url`; returns the
 * acquire's code and copies the handle's message to msg. */
static int try_lock(const char *url, int64_t wait_ms, char *msg, size_t msg_len)
{
    dlock_client *c = test_client_new(&url, 1, NULL);
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, c, "auth:lock", NULL), DLOCK_OK);
    int rc = dlock_lock_acquire(l, wait_ms);
    snprintf(msg, msg_len, "%s", dlock_lock_errmsg(l));
    if (rc == DLOCK_OK)
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
    return rc;
}

/* redis://<userinfo>@127.0.0.1:PORT */
static void url_with(char *out, size_t len, const char *userinfo)
{
    snprintf(out, len, "redis://%s@127.0.0.1:%d", userinfo, test_srv.port);
}

static void right_password_acquires(void **state)
{
    (void)state;
    char url[400], msg[1024];
    url_with(url, sizeof url, ":secret");
    assert_int_equal(try_lock(url, 0, msg, sizeof msg), DLOCK_OK);
    url_with(url, sizeof url, "secret"); /* no colon: a password */
    assert_int_equal(try_lock(url, 0, msg, sizeof msg), DLOCK_OK);
    url_with(url, sizeof url, "default:secret");
    assert_int_equal(try_lock(url, 0, msg, sizeof msg), DLOCK_OK);
}

static void wrong_password_is_an_auth_error_naming_the_node(void **state)
{
    (void)state;
    char url[400], msg[1024], node[64];
    snprintf(node, sizeof node, "127.0.0.1:%d", test_srv.port);
    url_with(url, sizeof url, ":wrong");
    assert_int_equal(try_lock(url, 0, msg, sizeof msg), DLOCK_EAUTH);
    if (!strstr(msg, node))
        fail_msg("message does not name %s: %s", node, msg);
    /* Bad credentials are not retried: a wait ends at once. */
    int64_t t0 = test_now_ms();
    assert_int_equal(try_lock(url, 20000, msg, sizeof msg), DLOCK_EAUTH);
    assert_true(test_now_ms() - t0 < 10000);
}

static void missing_password_is_an_auth_error(void **state)
{
    (void)state;
    char msg[1024];
    assert_int_equal(try_lock(test_srv.url, 0, msg, sizeof msg), DLOCK_EAUTH);
    assert_non_null(strstr(msg, "NOAUTH"));
}

static void acl_user_with_permissions_acquires(void **state)
{
    (void)state;
    char url[400], msg[1024];
    url_with(url, sizeof url, "alice:pw");
    assert_int_equal(try_lock(url, 0, msg, sizeof msg), DLOCK_OK);
}

static void acl_user_with_wrong_password_is_an_auth_error(void **state)
{
    (void)state;
    char url[400], msg[1024];
    url_with(url, sizeof url, "alice:nope");
    assert_int_equal(try_lock(url, 0, msg, sizeof msg), DLOCK_EAUTH);
    url_with(url, sizeof url, "mallory:pw");
    assert_int_equal(try_lock(url, 0, msg, sizeof msg), DLOCK_EAUTH);
}

static void acl_user_without_permissions_is_an_auth_error(void **state)
{
    (void)state;
    char url[400], msg[1024];
    url_with(url, sizeof url, "bob:pw");
    assert_int_equal(try_lock(url, 0, msg, sizeof msg), DLOCK_EAUTH);
    if (!strstr(msg, "NOPERM"))
        fail_msg("message does not quote NOPERM: %s", msg);
    /* Nothing was taken on bob's behalf. */
    redisContext *ac = test_redis_admin(&test_srv);
    assert_non_null(ac);
    redisReply *r = redisCommand(ac, "AUTH secret");
    assert_non_null(r);
    freeReplyObject(r);
    r = redisCommand(ac, "EXISTS auth:lock");
    assert_non_null(r);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    redisFree(ac);
}

static void percent_escaped_password_authenticates(void **state)
{
    (void)state;
    char url[400], msg[1024];
    url_with(url, sizeof url, "carol:p%40ss%3Aw%2Frd%25x");
    assert_int_equal(try_lock(url, 0, msg, sizeof msg), DLOCK_OK);
}

static void unix_socket_credentials_in_parameters(void **state)
{
    (void)state;
    char url[600], msg[1024];
    snprintf(url, sizeof url, "%s?password=secret", test_srv.unix_url);
    assert_int_equal(try_lock(url, 0, msg, sizeof msg), DLOCK_OK);
    snprintf(url, sizeof url, "%s?user=alice&password=pw&db=1", test_srv.unix_url);
    assert_int_equal(try_lock(url, 0, msg, sizeof msg), DLOCK_OK);
    snprintf(url, sizeof url, "%s?user=alice&password=bad", test_srv.unix_url);
    assert_int_equal(try_lock(url, 0, msg, sizeof msg), DLOCK_EAUTH);
    assert_non_null(strstr(msg, test_srv.sock));
    assert_int_equal(try_lock(test_srv.unix_url, 0, msg, sizeof msg), DLOCK_EAUTH);
}

static void status_with_wrong_password_is_an_auth_error(void **state)
{
    (void)state;
    char url[400];
    url_with(url, sizeof url, ":wrong");
    const char *urls[] = {url};
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_new(&c, urls, 1, NULL, NULL, 0), DLOCK_OK);
    dlock_node_status st;
    assert_int_equal(dlock_client_status(c, "auth:lock", 1, &st, NULL), DLOCK_EAUTH);
    assert_int_equal(st.error, DLOCK_EAUTH);
    dlock_client_free(c);
}

/* The username/password options win over the URL's credentials, so a
 * password need not appear in any URL string. */
static int lock_with_credentials(const char *url, const char *user, const char *pass)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.username = user;
    o.password = pass;
    dlock_client *c = test_client_new(&url, 1, &o);
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, c, "auth:opt", NULL), DLOCK_OK);
    int rc = dlock_lock_acquire(l, 0);
    if (rc == DLOCK_OK)
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
    return rc;
}

static void password_option_overrides_the_url(void **state)
{
    (void)state;
    char url[400];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", test_srv.port);
    assert_int_equal(lock_with_credentials(url, NULL, "secret"), DLOCK_OK);
    assert_int_equal(lock_with_credentials(url, NULL, "wrong"), DLOCK_EAUTH);
    assert_int_equal(lock_with_credentials(url, "alice", "pw"), DLOCK_OK);
    url_with(url, sizeof url, ":wrong");
    assert_int_equal(lock_with_credentials(url, NULL, "secret"), DLOCK_OK);
    url_with(url, sizeof url, "alice:wrong");
    assert_int_equal(lock_with_credentials(url, NULL, "pw"), DLOCK_OK);   /* URL's user kept */
    assert_int_equal(lock_with_credentials(url, "bob", "pw"), DLOCK_EAUTH); /* bob may not */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(right_password_acquires),
        cmocka_unit_test(wrong_password_is_an_auth_error_naming_the_node),
        cmocka_unit_test(missing_password_is_an_auth_error),
        cmocka_unit_test(acl_user_with_permissions_acquires),
        cmocka_unit_test(acl_user_with_wrong_password_is_an_auth_error),
        cmocka_unit_test(acl_user_without_permissions_is_an_auth_error),
        cmocka_unit_test(percent_escaped_password_authenticates),
        cmocka_unit_test(unix_socket_credentials_in_parameters),
        cmocka_unit_test(status_with_wrong_password_is_an_auth_error),
        cmocka_unit_test(password_option_overrides_the_url),
    };
    return cmocka_run_group_tests(tests, group_setup, test_srv_teardown);
}
