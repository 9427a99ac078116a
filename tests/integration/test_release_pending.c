/* SPDX-License-Identifier: BSD-3-Clause */
/* Releases owed by a Redlock node that hears nothing (the chaos suite's
 * fault proxy in BLACKHOLE mode in front of the third node: it reads and
 * discards). A counted (reentrant) lock's releases each succeed by
 * majority and stay pending on that node (release.h); the scripts apply a
 * handle's operations in number order and take an older number for a
 * copy already run (reentrant_release.lua). A second release sent while
 * the first is still owed must therefore carry it: one that replaced the
 * first's bookkeeping with its own left the first hold in the node's count
 * when it answered again, and the key there until its TTL. A plain lock's
 * release still owed when an adopt changes the token is kept by the old
 * token (redis_backend.c, settle). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "dlock.h"
#include "proc.h"
#include "proxied_redlock.h"
#include "redis_server.h"
#include "test_util.h"

#define N TEST_PROXIED_N


static dlock_client *redlock(void)
{
    char u[N][64];
    const char *urls[N];
    for (int i = 0; i < N; i++) {
        snprintf(u[i], sizeof u[i], "redis://127.0.0.1:%d",
                 i < N - 1 ? test_pnodes[i].port : test_proxy.port);
        urls[i] = u[i];
    }
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = o.io_timeout_ms = 300;
    return test_client_new(urls, N, &o);
}

/* The owner's count on the node behind the proxy (-1: no key). */
static long long count_on_last(const char *name, const char *owner)
{
    if (test_key_exists(&test_pnodes[N - 1], name) != 1)
        return -1;
    char *v = test_cmd_str_or_nil(&test_pnodes[N - 1], "HGET %s %s", name, owner);
    long long n = v ? atoll(v) : -1;
    free(v);
    return n;
}

/* Holds 3; the node hears neither of the first two releases; then it
 * answers again and hears the last one (with what it owes). */
static void releases_owed_by_a_silent_node_all_reach_it_when_it_answers(void **state)
{
    (void)state;
    const char *name = "relp:three";
    dlock_client *c = redlock();
    dlock_lock *l = test_lock_new(c, name, 60000, DLOCK_REENTRANT, 10, 200);
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    char owner[128];
    snprintf(owner, sizeof owner, "%s", dlock_lock_token(l));
    assert_int_equal(count_on_last(name, owner), 3);

    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_BLACKHOLE, 0), 0);
    int r1 = dlock_lock_release(l), r2 = dlock_lock_release(l);
    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_PASS, 0), 0);
    long long between = count_on_last(name, owner);
    int r3 = dlock_lock_release(l);
    long long left = count_on_last(name, owner);
    print_message("releases %s %s %s; count on the silent node: %lld while silent, "
                  "%lld after the last release (-1: key gone)\n",
                  dlock_errname(r1), dlock_errname(r2), dlock_errname(r3), between, left);
    assert_int_equal(r1, DLOCK_OK);
    assert_int_equal(r2, DLOCK_OK);
    assert_int_equal(r3, DLOCK_OK);
    assert_int_equal(between, 3); /* it heard nothing */
    for (int i = 0; i < N - 1; i++)
        assert_int_equal(test_key_exists(&test_pnodes[i], name), 0);
    assert_int_equal(left, -1); /* every hold out: the key went there too */
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Holds 2; the first release is owed by the silent node; the second,
 * the last, is sent while the node still hears nothing, then the node
 * answers again: the handle's free resends what it owes, both holds. */
static void the_last_release_sent_while_one_is_owed_carries_it(void **state)
{
    (void)state;
    const char *name = "relp:two";
    dlock_client *c = redlock();
    dlock_lock *l = test_lock_new(c, name, 60000, DLOCK_REENTRANT, 10, 200);
    for (int i = 0; i < 2; i++)
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    char owner[128];
    snprintf(owner, sizeof owner, "%s", dlock_lock_token(l));
    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_BLACKHOLE, 0), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_PASS, 0), 0);
    assert_int_equal(count_on_last(name, owner), 2);
    dlock_lock_free(l); /* resends what the node owes */
    long long left = count_on_last(name, owner);
    print_message("count on the node after the free: %lld (-1: key gone)\n", left);
    assert_int_equal(left, -1);
    dlock_client_free(c);
}

/* A plain lock's release the silent node did not hear, then an adopt
 * (of another holder's token) while the node still hears nothing: the
 * adopt's resend goes unanswered too, and the release stays owed by the
 * old token (the adopt changes the handle's). Once the node answers
 * again, the handle's free sends it there: the key goes, instead of
 * staying until its TTL. */
static void a_release_still_owed_at_an_adopt_reaches_the_node_later(void **state)
{
    (void)state;
    const char *name = "relp:adopt";
    dlock_client *c = redlock();
    dlock_lock *l = test_lock_new(c, name, 60000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_pnodes[N - 1], name), 1);
    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_BLACKHOLE, 0), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_adopt(l, "another-holders-token"), DLOCK_OK);
    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_PASS, 0), 0);
    assert_int_equal(test_key_exists(&test_pnodes[N - 1], name), 1); /* it heard nothing */
    dlock_lock_free(l); /* resends the owed release, by the old token */
    int left = test_key_exists(&test_pnodes[N - 1], name);
    print_message("key on the node after the free: %d (0: gone)\n", left);
    assert_int_equal(left, 0);
    for (int i = 0; i < N - 1; i++)
        assert_int_equal(test_key_exists(&test_pnodes[i], name), 0);
    dlock_client_free(c);
}

/* An adopt refused (the handle holds a lock) sends nothing and changes
 * nothing. Before it checked, it first resent the release still owed
 * under an old token and waited the silent node's whole I/O timeout
 * (300 ms) for it, each time; the hold it was refused for is unharmed
 * either way (a renewal reads its record's token, not the handle's). */
static void a_refused_adopt_sends_nothing(void **state)
{
    (void)state;
    dlock_client *c = redlock();
    /* Renewed every 200 ms while held. */
    dlock_lock *l = test_lock_new(c, "relp:adopt-held", 600, DLOCK_AUTO_RENEW, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_BLACKHOLE, 0), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK); /* owed by the last node */
    assert_int_equal(dlock_lock_adopt(l, "another-holders-token"), DLOCK_OK); /* kept, owed */
    assert_int_equal(dlock_lock_forget(l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* a majority, renewed */
    int64_t t0 = test_now_ms();
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_lock_adopt(l, "another-holders-token"), DLOCK_EINVAL);
    int64_t took_ms = test_now_ms() - t0;
    print_message("three refused adopts took %lld ms\n", (long long)took_ms);
    assert_true(took_ms < 300); /* none waited for the silent node */
    test_sleep_ms(700);
    if (dlock_lock_state_get(l) != DLOCK_STATE_HELD)
        print_message("lost: %s\n", dlock_lock_errmsg(l));
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_PASS, 0), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* A short auto-renewed lease rides out a silent node: a round decided by
 * the two that answer gives the third a tenth of the TTL, not 100 ms,
 * so the next round (every 50 ms here) comes before the lease ends. With
 * the 100 ms grace a 150 ms lease was lost (no quorum) 143 ms after the
 * node went silent, and a 200 ms one 256 ms after. */
static void a_short_renewed_lease_rides_out_a_silent_node(void **state)
{
    (void)state;
    dlock_client *c = redlock();
    for (int64_t ttl = 150; ttl <= 200; ttl += 50) {
        dlock_lock *l = test_lock_new(c, "relp:short", ttl, DLOCK_AUTO_RENEW, 10, 200);
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_BLACKHOLE, 0), 0);
        int64_t t0 = test_now_ms();
        while (test_now_ms() - t0 < 1500 && dlock_lock_state_get(l) == DLOCK_STATE_HELD)
            test_sleep_ms(5);
        print_message("TTL %lld ms: held %lld ms of 1500 with a silent node\n", (long long)ttl,
                      (long long)(test_now_ms() - t0));
        assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_PASS, 0), 0);
        dlock_lock_free(l);
    }
    dlock_client_free(c);
}

/* An adopt out of memory while the silent node still owes a release: the
 * release must not be dropped. Either the adopt goes through and the
 * release is kept under the old token (owed_token), or it fails with
 * DLOCK_ENOMEM, adopts nothing and keeps what it owes under its token. Either
 * way the free, with memory back and the node heard again, sends it
 * there. Every allocation fails from the adopt's first on: the resend to
 * the silent node gets no connection, and the copy of the old token none
 * either (tidy.c, settle_flushed). */
static void an_adopt_without_memory_keeps_the_owed_release(void **state)
{
    (void)state;
    const char *name = "relp:adopt-oom";
    dlock_client *c = redlock();
    dlock_lock *l = test_lock_new(c, name, 60000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_BLACKHOLE, 0), 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK); /* owed by the last node */
    dlock__alloc_fail_after(0);
    int rc = dlock_lock_adopt(l, "another-holders-token");
    dlock__alloc_fail_after(-1);
    assert_int_equal(chaos_proxy_set(&test_proxy, CHAOS_PROXY_PASS, 0), 0);
    print_message("adopt out of memory: %s (%s)\n", dlock_errname(rc), dlock_lock_errmsg(l));
    assert_true(rc == DLOCK_OK || rc == DLOCK_ENOMEM);
    if (rc == DLOCK_ENOMEM) { /* nothing adopted */
        assert_null(dlock_lock_token(l));
        assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    }
    assert_int_equal(test_key_exists(&test_pnodes[N - 1], name), 1); /* it heard nothing */
    dlock_lock_free(l); /* resends what is owed, by the old token */
    int left = test_key_exists(&test_pnodes[N - 1], name);
    print_message("key on the node after the free: %d (0: gone)\n", left);
    assert_int_equal(left, 0);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(releases_owed_by_a_silent_node_all_reach_it_when_it_answers),
        cmocka_unit_test(the_last_release_sent_while_one_is_owed_carries_it),
        cmocka_unit_test(a_release_still_owed_at_an_adopt_reaches_the_node_later),
        cmocka_unit_test(a_refused_adopt_sends_nothing),
        cmocka_unit_test(a_short_renewed_lease_rides_out_a_silent_node),
        cmocka_unit_test(an_adopt_without_memory_keeps_the_owed_release),
    };
    return cmocka_run_group_tests(tests, test_proxied_setup, test_proxied_teardown);
}
