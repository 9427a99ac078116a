/* SPDX-License-Identifier: BSD-3-Clause */
/* TLS session resumption on reconnect (issue 20): a connection made after
 * the server closed the pooled ones (a restart, an idle timeout, CLIENT
 * KILL) offers the node's newest session and resumes it, an abbreviated
 * handshake without the certificate chain, instead of a full one. The
 * session is a node's own: verification is unchanged (a wrong CA still
 * fails, test_tls), and a server that forgot the session (a restart) just
 * makes a full handshake. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>

#include "client.h"
#include "conn.h"
#include "dlock.h"
#include "node.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"
#include "tls.h"

static test_tls_certs certs;
static test_redis srv;

static int setup(void **state)
{
    (void)state;
    if (test_tls_certs_make(&certs) != 0)
        return -1;
    return test_redis_start_tls(&srv, &certs, 0, NULL);
}

static int teardown(void **state)
{
    (void)state;
    test_redis_stop(&srv);
    test_tls_certs_remove(&certs);
    return 0;
}

/* Whether node 0's pooled connection (the one the last call used) resumed
 * its session. */
static int pooled_resumed(dlock_client *c)
{
    dlock__node *n = &c->nodes[0];
    assert_non_null(n->idle);
    assert_non_null(n->idle->tls);
    return dlock__tls_resumed(n->idle->tls);
}

static void cycle(dlock_lock *l)
{
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
}

static void reconnect_resumes_the_tls_session(void **state)
{
    (void)state;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.tls_ca_file = certs.ca;
    dlock_client *c = test_client_for(&srv, &o);
    dlock_lock *l = test_lock_new(c, "tls:resume", 10000, 0, 5, 50);
    int64_t t0 = test_now_us();
    cycle(l);
    printf("# first connection: full handshake, cycle took %lld us\n",
           (long long)(test_now_us() - t0));
    assert_false(pooled_resumed(c)); /* the first connection: a full handshake */
    for (int i = 0; i < 3; i++) {
        test_cmd_int(&srv, "CLIENT KILL TYPE normal SKIPME yes");
        test_sleep_ms(20); /* idle long enough to be probed, and found closed */
        t0 = test_now_us();
        cycle(l);
        printf("# reconnect %d: session %s, cycle took %lld us\n", i + 1,
               pooled_resumed(c) ? "resumed" : "new", (long long)(test_now_us() - t0));
        assert_true(pooled_resumed(c));
    }
    /* A restarted server knows none of our sessions: a full handshake,
     * and the call works. */
    test_redis_stop(&srv);
    assert_int_equal(test_redis_start_tls(&srv, &certs, 0, NULL), 0);
    o.tls_ca_file = certs.ca;
    dlock_lock_free(l);
    dlock_client_free(c);
    c = test_client_for(&srv, &o);
    l = test_lock_new(c, "tls:resume", 10000, 0, 5, 50);
    cycle(l);
    dlock_lock_free(l);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reconnect_resumes_the_tls_session),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
