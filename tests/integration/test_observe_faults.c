/* SPDX-License-Identifier: BSD-3-Clause */
/* The observer's node events under faults (dlock.h, dlock_node_what;
 * docs/observing.md, issue 40), against real redis-servers and the chaos
 * suite's fault proxy: a node that takes the TCP connect but never answers
 * (the proxy in BLACKHOLE mode) is DLOCK_NODE_TIMEOUT, after the connect
 * timeout when its handshake is unanswered and after the I/O timeout when
 * the command is; a port nobody listens on is DLOCK_NODE_CONNECT_FAILED;
 * on a 3-node Redlock with one bad node the acquire and release still
 * succeed by majority and every node event names the bad node, and the
 * bad node only, on the caller's thread. dlock_client_stats() counts each
 * event as a node error.
 *
 * tests/integration/test_observer.c covers the events of a single node
 * (stalled by SIGSTOP on a pooled connection, refused, out of memory). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "dlock.h"
#include "proc.h"
#include "proxied_redlock.h"
#include "redis_server.h"
#include "test_recorder.h"
#include "test_util.h"

#define N TEST_PROXIED_N
#define TIMEOUT_MS 300
/* "Returns instead of hanging": far above every timeout at play. */
#define HANG_MS 10000


/* Before each test: the proxy passes, the nodes are empty, no event. */
static int reset(void **state)
{
    (void)state;
    if (chaos_proxy_set(&test_proxy, CHAOS_PROXY_PASS, 0) != 0)
        return -1;
    for (int i = 0; i < N; i++)
        if (test_flushall(&test_pnodes[i]) != 0)
            return -1;
    test_rec_reset();
    return 0;
}

static dlock_client *client_of(const char *const *urls, size_t n)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.observer = &test_rec_observer;
    o.connect_timeout_ms = TIMEOUT_MS;
    o.io_timeout_ms = TIMEOUT_MS;
    return test_client_new(urls, n, &o);
}

/* The live nodes' URLs, then bad_url (the proxy, a dead port). */
static dlock_client *redlock_with(const char *bad_url)
{
    const char *urls[N];
    for (int i = 0; i < N - 1; i++)
        urls[i] = test_pnodes[i].url;
    urls[N - 1] = bad_url;
    return client_of(urls, N);
}

static uint64_t node_errors(dlock_client *c)
{
    dlock_stats s;
    assert_int_equal(dlock_client_stats(c, &s, sizeof s), DLOCK_OK);
    return s.node_errors;
}

/* Every event since the last reset is `what` of node `addr`, on the
 * caller's thread; at least one; the stats counted each. Returns how many. */
static int all_events_are(dlock_client *c, dlock_node_what what, const char *addr)
{
    test_recorder r = test_rec_seen();
    assert_true(r.n_node >= 1);
    assert_true(r.n_node < TEST_REC_MAX);
    for (int i = 0; i < r.n_node; i++) {
        assert_int_equal(r.node[i].size, sizeof(dlock_node_event));
        assert_int_equal(r.node[i].what, what);
        assert_string_equal(r.node_name[i], addr);
        assert_true(r.node[i].error < 0); /* a node error, not a topology change */
        assert_true(r.node_on_caller[i]);
    }
    assert_int_equal(node_errors(c), (uint64_t)r.n_node);
    return r.n_node;
}

/* A node whose connect completes (the proxy accepts) but whose reply
 * never comes: the acquire fails after its I/O timeout, not later, and
 * that is one timeout of that node, no connect failure. */
static void a_blackholed_command_is_a_timeout_of_that_node(void **state)
{
    (void)state;
    char url[64], addr[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", test_proxy.port);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", test_proxy.port);
    const char *urls[] = {url};
    dlock_client *c = client_of(urls, 1);
    dlock_lock *l = test_lock_new(c, "obsf:bh", 5000, 0, 10, 200);
    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_BLACKHOLE, 0), 0);
    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(l, 0);
    int64_t took = test_now_ms() - t0;
    assert_true(rc == DLOCK_EIO || rc == DLOCK_EUNKNOWN);
    assert_true(took >= TIMEOUT_MS - 50); /* it did wait for the answer */
    assert_true(took < HANG_MS);
    int n = all_events_are(c, DLOCK_NODE_TIMEOUT, addr);
    test_recorder r = test_rec_seen();
    for (int i = 0; i < n; i++)
        assert_true(r.node[i].error == DLOCK_EIO || r.node[i].error == DLOCK_EUNKNOWN);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* With a password the handshake (AUTH) goes first and holds the command
 * back: unanswered, it is the connect timeout ("including AUTH and
 * SELECT") that runs out, not the much longer I/O timeout, and that is a
 * timeout of the node, not a connect failure. */
static void a_blackholed_handshake_is_a_timeout_after_the_connect_timeout(void **state)
{
    (void)state;
    char url[96], addr[64];
    snprintf(url, sizeof url, "redis://:secret@127.0.0.1:%d", test_proxy.port);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", test_proxy.port);
    const char *urls[] = {url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.observer = &test_rec_observer;
    o.connect_timeout_ms = TIMEOUT_MS;
    o.io_timeout_ms = HANG_MS;
    dlock_client *c = test_client_new(urls, 1, &o);
    dlock_lock *l = test_lock_new(c, "obsf:hs", 60000, 0, 10, 200);
    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_BLACKHOLE, 0), 0);
    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(l, 0);
    int64_t took = test_now_ms() - t0;
    assert_true(rc == DLOCK_EIO || rc == DLOCK_EUNKNOWN);
    assert_true(took >= TIMEOUT_MS - 50);
    assert_true(took < HANG_MS / 2); /* the I/O timeout did not run */
    int n = all_events_are(c, DLOCK_NODE_TIMEOUT, addr);
    assert_int_equal(n, 1);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Acquire and release on a Redlock whose third node is bad: both succeed
 * by majority, and the events are `what` for the bad node only. */
static void redlock_with_one_bad_node(const char *bad_url, const char *addr,
                                      dlock_node_what what)
{
    dlock_client *c = redlock_with(bad_url);
    dlock_lock *l = test_lock_new(c, "obsf:redlock", 10000, 0, 10, 200);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_true(test_now_ms() - t0 < HANG_MS);
    int after_acquire = all_events_are(c, what, addr);
    /* The live nodes hold the key with the handle's token. */
    for (int i = 0; i < N - 1; i++)
        test_assert_key_value(&test_pnodes[i], "obsf:redlock", dlock_lock_token(l));
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    int after_release = all_events_are(c, what, addr);
    assert_true(after_release > after_acquire); /* the release met it too */
    for (int i = 0; i < N - 1; i++)
        assert_int_equal(test_key_exists(&test_pnodes[i], "obsf:redlock"), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void a_redlock_with_a_blackholed_node_reports_its_timeouts_only(void **state)
{
    (void)state;
    char url[64], addr[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", test_proxy.port);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", test_proxy.port);
    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_BLACKHOLE, 0), 0);
    redlock_with_one_bad_node(url, addr, DLOCK_NODE_TIMEOUT);
}

/* Port 1 on loopback: nothing listens, every connect is refused. */
static void a_redlock_with_a_refused_node_reports_its_connect_failures_only(void **state)
{
    (void)state;
    redlock_with_one_bad_node("redis://127.0.0.1:1", "127.0.0.1:1",
                              DLOCK_NODE_CONNECT_FAILED);
    test_recorder r = test_rec_seen();
    for (int i = 0; i < r.n_node; i++)
        assert_int_equal(r.node[i].error, DLOCK_EIO);
}

/* The healthy Redlock reports nothing: the events above are the faults'. */
static void a_healthy_redlock_reports_no_node_event(void **state)
{
    (void)state;
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", test_proxy.port);
    dlock_client *c = redlock_with(url);
    dlock_lock *l = test_lock_new(c, "obsf:healthy", 10000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(test_rec_seen().n_node, 0);
    assert_int_equal(node_errors(c), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(a_blackholed_command_is_a_timeout_of_that_node, reset),
        cmocka_unit_test_setup(a_blackholed_handshake_is_a_timeout_after_the_connect_timeout,
                               reset),
        cmocka_unit_test_setup(a_redlock_with_a_blackholed_node_reports_its_timeouts_only,
                               reset),
        cmocka_unit_test_setup(a_redlock_with_a_refused_node_reports_its_connect_failures_only,
                               reset),
        cmocka_unit_test_setup(a_healthy_redlock_reports_no_node_event, reset),
    };
    return cmocka_run_group_tests(tests, test_proxied_setup, test_proxied_teardown);
}
