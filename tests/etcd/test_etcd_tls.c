/* SPDX-License-Identifier: BSD-3-Clause */
/* etcd over TLS (etcds:// URLs, or etcd:// with the tls option) against
 * real etcd members serving their clients over https only, with
 * certificates the harness makes with openssl (a CA, a server
 * certificate for 127.0.0.1 and localhost, one that names only
 * TEST_TLS_NAMED_HOST, a client certificate, an unrelated CA): locks are
 * taken, waited for (the watch), renewed and released over TLS;
 * verification is on by default and a failure is DLOCK_ETLS with a
 * message saying why, as on Redis (tests/threads/test_tls.c); the member
 * that asks for a client certificate gets one or refuses; a child of
 * fork() freeing its copy of the client leaves the parent's TLS
 * connection alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "etcd_server.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"
#include "test_waiter.h"

static test_tls_certs certs;
static test_etcd srv;   /* server certificate (127.0.0.1, localhost) */
static test_etcd mtls;  /* the same, --client-cert-auth */
static test_etcd named; /* a certificate naming TEST_TLS_NAMED_HOST only */

static int start(test_etcd *c, const char *cert, const char *key, int client_cert_auth)
{
    test_etcd_tls t = {.ca = certs.ca, .cert = cert, .key = key,
                       .client_cert = certs.client_cert, .client_key = certs.client_key,
                       .client_cert_auth = client_cert_auth};
    return test_etcd_start_tls(c, 1, &t);
}

static int setup(void **state)
{
    (void)state;
    if (test_tls_certs_make(&certs) != 0)
        return -1;
    if (start(&srv, certs.server_cert, certs.server_key, 0) != 0 ||
        start(&mtls, certs.server_cert, certs.server_key, 1) != 0 ||
        start(&named, certs.named_cert, certs.named_key, 0) != 0) {
        test_etcd_stop(&srv);
        test_etcd_stop(&mtls);
        test_tls_certs_remove(&certs);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_stop(&srv);
    test_etcd_stop(&mtls);
    test_etcd_stop(&named);
    test_tls_certs_remove(&certs);
    return 0;
}

static dlock_client_options tls_opts(void)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.tls_ca_file = certs.ca;
    return o;
}

static dlock_client *client_of(const char *url, const dlock_client_options *o)
{
    dlock_client *c = NULL;
    char err[256] = "";
    int rc = dlock_client_new(&c, &url, 1, o, err, sizeof err);
    if (rc != DLOCK_OK)
        fail_msg("dlock_client_new(%s): %s: %s", url, dlock_errname(rc), err);
    return c;
}

static dlock_lock *lock_of(dlock_client *c, const char *name, int64_t ttl_ms, unsigned flags)
{
    return test_lock_new(c, name, ttl_ms, flags, 5, 20);
}

static int try_acquire(const char *url, const dlock_client_options *o, char *msg, size_t len)
{
    return test_try_acquire(url, o, "tls:try", msg, len);
}

/* ---- locks over TLS -------------------------------------------------------- */

static void lock_is_taken_and_released_over_tls(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    dlock_client *c1 = client_of(srv.url, &o), *c2 = client_of(srv.url, &o);
    dlock_lock *a = lock_of(c1, "tls:basic", 5000, 0), *b = lock_of(c2, "tls:basic", 5000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    /* It is on the member: the other client finds it held. */
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_extend(a, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_free(c1);
    dlock_client_free(c2);
}

static void tls_option_makes_etcd_urls_speak_tls(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    char url[128], msg[1024];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d", srv.m[0].client_port);
    o.tls = 1;
    assert_int_equal(try_acquire(url, &o, msg, sizeof msg), DLOCK_OK);
    /* Without it, an etcd:// client speaks plain HTTP, which a TLS member
     * refuses: never a success. */
    o.tls = 0;
    o.io_timeout_ms = 500;
    int rc = try_acquire(url, &o, msg, sizeof msg);
    printf("# plain HTTP to a TLS member: %s: %s\n", dlock_errname(rc), msg);
    assert_int_not_equal(rc, DLOCK_OK);
}

/* The watch (a waiter told of the release) and the watchdog's renewals
 * run on handles of their own: they are over TLS too. */
static void waiter_is_woken_and_renewals_run_over_tls(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    dlock_client *c = client_of(srv.url, &o);
    dlock_lock *a = lock_of(c, "tls:wait", 1000, DLOCK_AUTO_RENEW);
    dlock_lock *b = lock_of(c, "tls:wait", 5000, 0);
    test_waiter w;
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(test_waiter_start(&w, b, 10000, TEST_WAITER_RELEASE), 0);
    /* Past the 1 s lease: only renewals keep it. */
    test_sleep_ms(2500);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_int_equal(atomic_load(&w.done), 0);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(test_waiter_join(&w), DLOCK_OK);
    int64_t woken_ms = atomic_load(&w.done_ms) - t0;
    printf("# the waiter had it %lld ms after the release\n", (long long)woken_ms);
    assert_true(woken_ms < 1000);
    dlock_lock_free(b);
    dlock_lock_free(a);
    dlock_client_free(c);
}

/* ---- verification ---------------------------------------------------------- */

static void wrong_ca_is_refused_with_the_verification_message(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    o.tls_ca_file = certs.other_ca;
    char msg[1024];
    int rc = try_acquire(srv.url, &o, msg, sizeof msg);
    /* curl's reason follows: "SSL certificate problem: self-signed
     * certificate in certificate chain" or "unable to get local issuer
     * certificate". */
    test_expect_tls_error(rc, msg, "certificate verification failed: ");
    /* OpenSSL's reason, as curl or gRPC's C core words it */
    assert_non_null(strstr(msg, test_etcd_grpc() ? "certificate verify failed"
                                                 : "certificate problem"));
    assert_non_null(strstr(msg, srv.url + 8)); /* which member */
}

static void host_name_mismatch_is_refused_unless_named_or_insecure(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    char msg[1024];
    /* The certificate names TEST_TLS_NAMED_HOST, not the address. */
    int rc = try_acquire(named.url, &o, msg, sizeof msg);
    test_expect_tls_error(rc, msg, "certificate verification failed");
    assert_non_null(strstr(msg, "127.0.0.1"));
    o.tls_server_name = "wrong.example";
    test_expect_tls_error(try_acquire(named.url, &o, msg, sizeof msg), msg,
                     "certificate verification failed");
    /* The name it holds, instead of the address connected to. */
    o.tls_server_name = TEST_TLS_NAMED_HOST;
    rc = try_acquire(named.url, &o, msg, sizeof msg);
    if (rc != DLOCK_OK)
        fail_msg("with the server name: %s: %s", dlock_errname(rc), msg);
    /* No verification at all: any CA, any name (gRPC's C core has no
     * such switch: refused there). */
    o = tls_opts();
    o.tls_ca_file = certs.other_ca;
    o.tls_insecure = 1;
    assert_int_equal(try_acquire(named.url, &o, msg, sizeof msg),
                     test_etcd_grpc() ? DLOCK_ENOTSUP : DLOCK_OK);
}

static void client_certificate_is_sent_when_asked_and_missing_one_refused(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    char msg[1024];
    int rc = try_acquire(mtls.url, &o, msg, sizeof msg);
    test_expect_tls_error(rc, msg, "TLS");
    o.tls_cert_file = certs.client_cert;
    o.tls_key_file = certs.client_key;
    rc = try_acquire(mtls.url, &o, msg, sizeof msg);
    if (rc != DLOCK_OK)
        fail_msg("with the client certificate: %s: %s", dlock_errname(rc), msg);
}

static void bad_tls_files_are_refused_at_client_creation(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    char msg[1024];
    o.tls_ca_file = "/nonexistent/ca.pem";
    assert_int_equal(try_acquire(srv.url, &o, msg, sizeof msg), DLOCK_EINVAL);
    assert_non_null(strstr(msg, "/nonexistent/ca.pem"));
    o = tls_opts();
    o.tls_cert_file = certs.client_cert;
    assert_int_equal(try_acquire(srv.url, &o, msg, sizeof msg), DLOCK_EINVAL);
    o.tls_key_file = certs.server_key; /* not the certificate's key */
    assert_int_equal(try_acquire(srv.url, &o, msg, sizeof msg), DLOCK_EINVAL);
    printf("# %s\n", msg);
    /* One cluster is TLS on every member or on none. */
    const char *mixed[] = {srv.url, "etcd://127.0.0.1:1"};
    dlock_client *c = NULL;
    o = tls_opts();
    assert_int_equal(dlock_client_new(&c, mixed, 2, &o, msg, sizeof msg), DLOCK_EINVAL);
    assert_non_null(strstr(msg, "cannot be mixed"));
}

/* ---- fork ------------------------------------------------------------------ */

/* curl's close of a TLS connection reads from it and sends a close_notify:
 * from a child, on the socket it shares with the parent, that would end
 * the parent's session. The child's copies are blinded first, so the
 * parent's pooled connection goes on: the same one, no new one. */
static void fork_child_freeing_the_client_leaves_the_parents_connection_alone(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    dlock_client *c = client_of(srv.url, &o);
    dlock_lock *l = lock_of(c, "tls:fork", 10000, 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    unsigned long before_inode = 0, after_inode = 0;
    int before = test_tcp_connections(srv.m[0].client_port, &before_inode);
    assert_int_equal(before, 1);
    pid_t pid = test_fork_child();
    if (pid == 0) {
        dlock_lock_free(l);
        dlock_client_free(c);
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    int after = test_tcp_connections(srv.m[0].client_port, &after_inode);
    printf("# connections to the member: %d before the fork (inode %lu), %d after (inode %lu)\n",
           before, before_inode, after, after_inode);
    assert_int_equal(after, 1);
    assert_true(after_inode == before_inode);
    dlock_lock_free(l);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lock_is_taken_and_released_over_tls),
        cmocka_unit_test(tls_option_makes_etcd_urls_speak_tls),
        cmocka_unit_test(waiter_is_woken_and_renewals_run_over_tls),
        cmocka_unit_test(wrong_ca_is_refused_with_the_verification_message),
        cmocka_unit_test(host_name_mismatch_is_refused_unless_named_or_insecure),
        cmocka_unit_test(client_certificate_is_sent_when_asked_and_missing_one_refused),
        cmocka_unit_test(bad_tls_files_are_refused_at_client_creation),
        cmocka_unit_test(fork_child_freeing_the_client_leaves_the_parents_connection_alone),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
