/* SPDX-License-Identifier: BSD-3-Clause */
/* Looped clients on every Redis deployment: Redlock over three nodes, a
 * Redis Cluster, a Sentinel-managed primary and a TLS-only server. On each,
 * handles of one libuv loop contend on two names with wake-ups on (one
 * holder at a time, fences rising, every cycle through, nothing left
 * pending), and the loop is empty once the client is freed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "client.h"
#include "dlock.h"
#include "node.h"
#include "redis_server.h"
#include "redis_topology.h"
#include "uv_contend.h"
#include "uv_support.h"

static uv_loop_t loop;

static dlock_lock *make(void *arg, int i, int name, int *reader, int *name2)
{
    dlock_client *c = arg;
    (void)i;
    (void)reader;
    (void)name2;
    static const char *names[] = {"uvt:a", "uvt:b"};
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 5000;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, c, names[name], &o), DLOCK_OK);
    return l;
}

/* Six handles, two names, three cycles each, on a client of urls. */
static void contend_on(const char *const *urls, size_t n, dlock_client_options *o)
{
    dlock_client *c = NULL;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(test_uv_client_with(&c, &loop, urls, n, o), 0);
    test_uv_board b = {.fenced = 1};
    test_uv_contend(&loop, &b, 6, 2, 3, 60000, make, c);
    assert_int_equal(b.done, 6);
    assert_int_equal(b.violations, 0);
    assert_int_equal(b.failed, 0);
    assert_int_equal(b.starts_refused, 0);
    assert_int_equal(b.still_pending, 0);
    assert_true(b.longest_gap_ms < 250); /* nothing blocked the loop */
    assert_int_equal(test_uv_close(&loop, &c, 10000), 0);
}

static void redlock(void **state)
{
    (void)state;
    test_redis rs[3];
    assert_int_equal(test_redis_start_many(rs, 3, NULL), 0);
    const char *urls[] = {rs[0].url, rs[1].url, rs[2].url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    contend_on(urls, 3, &o);
    test_redis_stop_many(rs, 3);
}

static void cluster(void **state)
{
    (void)state;
    static test_cluster c;
    assert_int_equal(test_cluster_start(&c), 0);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = 1;
    contend_on(c.urls, 3, &o);
    test_cluster_stop(&c);
}

static void sentinel(void **state)
{
    (void)state;
    static test_sentinel_set s;
    assert_int_equal(test_sentinel_start(&s), 0);
    const char *urls[] = {s.url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    contend_on(urls, 1, &o);
    test_sentinel_stop(&s);
}

/* Sentinel on a loop, where the requests share one pipelined connection
 * to the primary (pipe.h): the primary killed with a lock held; a waiting
 * acquire of another name started at once rides out the failover (the
 * broken pipe forgets the primary, the sentinels name the new one, a new
 * pipe goes there), the held lock's key (replicated before the kill) is
 * released through the new primary, and nothing blocked the loop. */
static void sentinel_failover(void **state)
{
    (void)state;
    static test_sentinel_set s;
    assert_int_equal(test_sentinel_start(&s), 0);
    const char *urls[] = {s.url};
    dlock_client *c = NULL;
    assert_int_equal(uv_loop_init(&loop), 0);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    assert_int_equal(test_uv_client_with(&c, &loop, urls, 1, &o), 0);
    dlock_lock *held = test_uv_lock(c, "uvt:fo:held", 60000, 0);
    dlock_lock *next = test_uv_lock(c, "uvt:fo:next", 30000, 0);
    test_uv_result rh = {0}, rn = {0};
    assert_int_equal(dlock_lock_acquire_start(held, 0, test_uv_done, &rh), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rh, 5000), DLOCK_OK);
    int old_port = test_sentinel_primary_port(&s);
    test_redis *p = test_sentinel_node(&s, old_port);
    assert_non_null(p);
    assert_int_equal(test_redis_replica_acks(p, "uvt:fo:probe", 20000), 1);
    test_uv_ticker k;
    test_uv_ticker_start(&loop, &k, 10);
    test_redis_kill9(p);
    assert_int_equal(dlock_lock_acquire_start(next, 30000, test_uv_done, &rn), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rn, 40000), DLOCK_OK);
    int new_port = test_sentinel_primary_port(&s);
    assert_int_not_equal(new_port, old_port);
    memset(&rh, 0, sizeof rh);
    memset(&rn, 0, sizeof rn);
    assert_int_equal(dlock_lock_release_start(held, test_uv_done, &rh), DLOCK_OK);
    assert_int_equal(dlock_lock_release_start(next, test_uv_done, &rn), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rh, 5000), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &rn, 5000), DLOCK_OK);
    test_uv_ticker_stop(&k);
    print_message("sentinel failover on a loop: longest gap between 10 ms ticks %lld ms\n",
                  (long long)k.longest_gap_ms);
    assert_true(k.longest_gap_ms < 250);
    dlock_lock_free(held);
    dlock_lock_free(next);
    assert_int_equal(test_uv_close(&loop, &c, 10000), 0);
    test_sentinel_stop(&s);
}

/* A waiter's subscriber connection cut while every sentinel is stopped and
 * the primary's address forgotten (as after a failed connection): the
 * subscriber's reconnect asks the sentinels on the loop, and a ticker
 * beside it is never held up (the wake-up's reconnect used to ask them
 * with a blocking call: a gap of the connect and I/O timeouts). */
/* free_early: everything freed while the sentinels are still stopped,
 * the wake-up's discovery in flight: the loop is empty all the same. */
static void with_sentinels_stopped(int free_early)
{
    static test_sentinel_set s;
    assert_int_equal(test_sentinel_start(&s), 0);
    const char *urls[] = {s.url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = 1000;
    o.io_timeout_ms = 1000;
    dlock_client *c = NULL;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(test_uv_client_with(&c, &loop, urls, 1, &o), 0);
    dlock_lock *a = NULL, *b = NULL;
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = 10000;
    assert_int_equal(dlock_lock_new(&a, c, "uvt:sentinel", &lo), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&b, c, "uvt:sentinel", &lo), DLOCK_OK);
    test_uv_result ra = {0}, rb = {0};
    assert_int_equal(dlock_lock_acquire_start(a, 0, test_uv_done, &ra), DLOCK_OK);
    assert_int_equal(test_uv_wait(&loop, &ra, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire_start(b, 4000, test_uv_done, &rb), DLOCK_OK);
    test_uv_turn(&loop, 300); /* b waits, subscribed */
    for (int i = 0; i < TEST_SENTINELS; i++)
        test_redis_pause(&s.sentinel[i]);
    dlock__node_stale(&c->nodes[0]);
    test_uv_ticker k;
    test_uv_ticker_start(&loop, &k, 10);
    redisReply *y = test_redis_cmd(&s.primary, "CLIENT KILL TYPE pubsub");
    assert_non_null(y);
    assert_true(y->type == REDIS_REPLY_INTEGER && y->integer >= 1);
    freeReplyObject(y);
    if (free_early) {
        test_uv_turn(&loop, 200); /* the subscriber's reconnect asks the sentinels */
        test_uv_ticker_stop(&k);
        dlock_lock_free(b);
        dlock_lock_free(a);
        assert_int_equal(rb.calls, 1);
        assert_int_equal(test_uv_close(&loop, &c, 10000), 0);
        for (int i = 0; i < TEST_SENTINELS; i++)
            test_redis_resume(&s.sentinel[i]);
        test_sentinel_stop(&s);
        return;
    }
    test_uv_turn(&loop, 2500);
    test_uv_ticker_stop(&k);
    print_message("longest gap between 10 ms ticks with the sentinels stopped: %lld ms\n",
                  (long long)k.longest_gap_ms);
    assert_true(k.longest_gap_ms < 250);
    for (int i = 0; i < TEST_SENTINELS; i++)
        test_redis_resume(&s.sentinel[i]);
    test_uv_wait(&loop, &rb, 8000);
    assert_int_equal(rb.calls, 1);
    dlock_lock_free(b);
    dlock_lock_free(a);
    assert_int_equal(test_uv_close(&loop, &c, 10000), 0);
    test_sentinel_stop(&s);
}

static void stopped_sentinels_never_block_the_loop(void **state)
{
    (void)state;
    with_sentinels_stopped(0);
}

static void a_client_freed_while_its_wakeup_asks_stopped_sentinels(void **state)
{
    (void)state;
    with_sentinels_stopped(1);
}

static void tls(void **state)
{
    (void)state;
    static test_tls_certs certs;
    static test_redis r;
    assert_int_equal(test_tls_certs_make(&certs), 0);
    assert_int_equal(test_redis_start_tls(&r, &certs, 0, NULL), 0);
    const char *urls[] = {r.url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.tls_ca_file = certs.ca;
    contend_on(urls, 1, &o);
    test_redis_stop(&r);
    test_tls_certs_remove(&certs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(redlock),
        cmocka_unit_test(cluster),
        cmocka_unit_test(sentinel),
        cmocka_unit_test(sentinel_failover),
        cmocka_unit_test(stopped_sentinels_never_block_the_loop),
        cmocka_unit_test(a_client_freed_while_its_wakeup_asks_stopped_sentinels),
        cmocka_unit_test(tls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
