/* SPDX-License-Identifier: BSD-3-Clause */
/* etcd with authentication on (real members, root user): a client with
 * credentials in its URL rides out its token going stale. With JWT
 * tokens (--auth-token jwt, which carry the auth store's revision), every
 * change of the auth store (a user added here) makes the tokens issued
 * before it "revision of auth store is old"; a member's simple tokens
 * are forgotten when it restarts ("invalid auth token"). The member
 * refuses such a request unapplied, and the backend authenticates again
 * and sends it once more (src/etcd/etcd_request.c). So acquire, extend,
 * release, the watchdog's renewals and a waiter's wait all go on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dlock.h"
#include "error.h"
#include "etcd_http.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_util.h"
#include "test_waiter.h"

static test_etcd srv;    /* JWT tokens */
static test_etcd simple; /* simple tokens (etcd's default) */
static char url[200];    /* etcd://root:pw@127.0.0.1:PORT of srv */
static int users;        /* users added so far (each moves the auth revision) */
static char keys[256];   /* a temp dir with the JWT signing keys */
static char jwt_arg[800];

static int64_t soon(void)
{
    return dlock__deadline_after_ms(3000);
}

/* POST body to path through a transport of its own (credentials in
 * text_url, or none); fails the test unless etcd says OK. */
static void admin_post(const char *text_url, const char *path, json_t *body)
{
    dlock__etcd_url u;
    char err[256];
    if (dlock__etcd_url_parse(&u, &text_url, 1, err, sizeof err) != DLOCK_OK)
        fail_msg("%s", err);
    dlock__etcd *e;
    assert_int_equal(dlock__etcd_new(&e, &u, 1000, 2000), DLOCK_OK);
    json_t *rep = NULL;
    dlock__errbuf eb = {0};
    int rc = dlock__etcd_post(e, path, body, &rep, soon(), -1, &eb, NULL, NULL);
    if (rc != DLOCK_OK)
        fail_msg("%s: %s: %s", path, dlock_errname(rc), dlock__err_str(&eb));
    json_decref(rep);
    json_decref(body);
    dlock__err_free(&eb);
    dlock__etcd_free(e);
}

/* Root with password pw, and authentication on. */
static void enable_auth(const test_etcd *c)
{
    admin_post(c->url, "/v3/auth/user/add", json_pack("{s:s, s:s}", "name", "root",
                                                      "password", "pw"));
    admin_post(c->url, "/v3/auth/user/grant", json_pack("{s:s, s:s}", "user", "root",
                                                        "role", "root"));
    admin_post(c->url, "/v3/auth/enable", json_object());
}

static int setup(void **state)
{
    (void)state;
    char cmd[700];
    if (test_make_dir(keys, sizeof keys, "jwt") != 0)
        return -1;
    snprintf(cmd, sizeof cmd, "cd '%s' && openssl ecparam -name prime256v1 -genkey -noout "
             "-out jwt.key 2>/dev/null && openssl ec -in jwt.key -pubout -out jwt.pub "
             "2>/dev/null", keys);
    if (system(cmd) != 0)
        return -1;
    snprintf(jwt_arg, sizeof jwt_arg, "jwt,pub-key=%s/jwt.pub,priv-key=%s/jwt.key,"
             "sign-method=ES256", keys, keys);
    const char *extra[] = {"--auth-token", jwt_arg, NULL};
    if (test_etcd_start_args(&srv, 1, extra) != 0)
        return -1;
    if (test_etcd_start(&simple, 1) != 0) {
        test_etcd_stop(&srv);
        return -1;
    }
    snprintf(url, sizeof url, "etcd://root:pw@127.0.0.1:%d", srv.m[0].client_port);
    enable_auth(&srv);
    enable_auth(&simple);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    test_etcd_stop(&srv);
    test_etcd_stop(&simple);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", keys);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", keys);
    return 0;
}

/* Move the auth store's revision: every token issued before is stale. */
static void change_auth_store(void)
{
    char name[32];
    snprintf(name, sizeof name, "u%d", ++users);
    admin_post(url, "/v3/auth/user/add", json_pack("{s:s, s:s}", "name", name,
                                                   "password", "x"));
}

static dlock_lock *lock_of(dlock_client *c, const char *name, int64_t ttl_ms, unsigned flags)
{
    return test_lock_new(c, name, ttl_ms, flags, 5, 20);
}

static void expect_ok(int rc, dlock_lock *l, const char *what)
{
    if (rc != DLOCK_OK)
        fail_msg("%s after the auth store changed: %s: %s", what, dlock_errname(rc),
                 dlock_lock_errmsg(l));
}

static void acquire_extend_release_go_on_after_the_auth_store_changed(void **state)
{
    (void)state;
    dlock_client *c = NULL;
    const char *u = url;
    assert_int_equal(dlock_client_new(&c, &u, 1, NULL, NULL, 0), DLOCK_OK);
    dlock_lock *l = lock_of(c, "auth:verbs", 5000, 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* the token is taken */
    change_auth_store();
    expect_ok(dlock_lock_extend(l, 0), l, "extend");
    change_auth_store();
    expect_ok(dlock_lock_release(l), l, "release");
    change_auth_store();
    expect_ok(dlock_lock_acquire(l, 0), l, "acquire");
    expect_ok(dlock_lock_release(l), l, "release");
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* The watchdog renews on its own thread and loop, and a waiter's wait
 * keeps its lease alive and watches: both outlive a change too. */
static void renewals_and_a_wait_go_on_after_the_auth_store_changed(void **state)
{
    (void)state;
    dlock_client *c = NULL;
    const char *u = url;
    assert_int_equal(dlock_client_new(&c, &u, 1, NULL, NULL, 0), DLOCK_OK);
    dlock_lock *a = lock_of(c, "auth:renew", 1000, DLOCK_AUTO_RENEW);
    dlock_lock *b = lock_of(c, "auth:renew", 2000, 0);
    test_waiter w;
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(test_waiter_start(&w, b, 10000, TEST_WAITER_KEEP), 0);
    test_sleep_ms(300);
    change_auth_store();
    /* Past the 1 s lease and the waiter's 2 s one: only renewals (and the
     * waiter's keep-alives) with a new token keep them. */
    test_sleep_ms(3000);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_int_equal(atomic_load(&w.done), 0);
    expect_ok(dlock_lock_release(a), a, "release");
    expect_ok(test_waiter_join(&w), b, "the waiter's acquire");
    expect_ok(dlock_lock_release(b), b, "release");
    dlock_lock_free(b);
    dlock_lock_free(a);
    dlock_client_free(c);
}

/* A restarted member forgot its simple tokens: "invalid auth token". */
static void a_member_restart_forgetting_the_token_is_ridden_out(void **state)
{
    (void)state;
    char u_text[200];
    snprintf(u_text, sizeof u_text, "etcd://root:pw@127.0.0.1:%d", simple.m[0].client_port);
    dlock_client *c = NULL;
    const char *u = u_text;
    assert_int_equal(dlock_client_new(&c, &u, 1, NULL, NULL, 0), DLOCK_OK);
    dlock_lock *l = lock_of(c, "auth:restart", 10000, 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_etcd_kill9(&simple, 0);
    assert_int_equal(test_etcd_restart(&simple, 0), 0);
    assert_int_equal(test_etcd_wait_leader(&simple, 10000), 0);
    expect_ok(dlock_lock_extend(l, 0), l, "extend");
    expect_ok(dlock_lock_release(l), l, "release");
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* The refusal a stale token gets, told apart from other refusals. */
static void stale_tokens_are_told_apart(void **state)
{
    (void)state;
    assert_true(dlock__etcd_token_stale(16, "etcdserver: invalid auth token"));
    assert_true(dlock__etcd_token_stale(3, "etcdserver: revision of auth store is old"));
    assert_false(dlock__etcd_token_stale(3, "etcdserver: authentication failed, invalid user "
                                            "ID or password"));
    assert_false(dlock__etcd_token_stale(7, "etcdserver: permission denied"));
    /* an old revision twice (the store changed again): busy, not fatal */
    assert_int_equal(dlock__etcd_map_error(3, "etcdserver: revision of auth store is old"),
                     DLOCK_EBUSY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stale_tokens_are_told_apart),
        cmocka_unit_test(acquire_extend_release_go_on_after_the_auth_store_changed),
        cmocka_unit_test(renewals_and_a_wait_go_on_after_the_auth_store_changed),
        cmocka_unit_test(a_member_restart_forgetting_the_token_is_ridden_out),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
