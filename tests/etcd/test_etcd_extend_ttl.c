/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_lock_extend() to a new TTL on etcd, against a real etcd member
 * (issue 38). An etcd lease keeps the TTL it was granted, so the extend
 * moves the lock's key to a new lease of the new TTL (a put keeps the
 * key's create revision) and revokes the old one: the fence, the token
 * and the place in line stay, etcd's lease says the new TTL, the watchdog
 * keeps the new lease alive, and a waiter stays out throughout. */
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
#include "etcd_keys.h"
#include "etcd_kv.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_util.h"
#include "test_waiter.h"

static test_etcd srv;
static dlock_client *cl;
static dlock__etcd *raw; /* a second client of the member, to look */

static int setup(void **state)
{
    (void)state;
    return test_etcd_setup_raw(&srv, NULL, &cl, &raw);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_teardown_raw(&srv, cl, raw);
    return 0;
}

static dlock_lock *lock_of(const char *name, int64_t ttl_ms, unsigned flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = flags;
    dlock_lock *l = NULL;
    if (dlock_lock_new(&l, cl, name, &o) != DLOCK_OK)
        fail_msg("dlock_lock_new(%s)", name);
    return l;
}

/* The lock's key as etcd has it: NAME/ and the token's lease in Go's %x
 * (the token names the key); kv cleared by the caller. */
static void read_key(const char *name, const dlock_lock *l, dlock__etcd_kv *kv)
{
    char key[128];
    unsigned long long id = test_etcd_token_id(dlock_lock_token(l));
    int n = snprintf(key, sizeof key, "%s/%llx", name, id);
    assert_int_equal(dlock__etcd_get(raw, key, (size_t)n, kv, dlock__deadline_after_ms(3000), -1,
                                     NULL),
                     DLOCK_OK);
    assert_non_null(kv->key);
}

/* A lease's granted TTL in s, 0 when it is gone. */
static int64_t lease_granted_s(int64_t lease)
{
    int64_t left_ms = 0, granted_s = 0;
    assert_int_equal(dlock__etcd_lease_ttl_ms(raw, lease, &left_ms, &granted_s,
                                              dlock__deadline_after_ms(3000), -1, NULL),
                     DLOCK_OK);
    return left_ms < 0 ? 0 : granted_s;
}

static void extend_to_a_new_ttl_moves_the_key_to_a_new_lease(void **state)
{
    (void)state;
    dlock_lock *a = lock_of("ttl-move", 3000, 0);
    dlock_lock *b = lock_of("ttl-move", 3000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(a);
    char token[DLOCK_TOKEN_MAX + 1];
    snprintf(token, sizeof token, "%s", dlock_lock_token(a));
    dlock__etcd_kv before, after;
    read_key("ttl-move", a, &before);
    assert_int_equal(lease_granted_s(before.lease), 3);

    int rc = dlock_lock_extend(a, 20000);
    if (rc != DLOCK_OK)
        fail_msg("extend(20000): %s (%s)", dlock_errname(rc), dlock_lock_errmsg(a));
    assert_true(dlock_lock_validity_ms(a) > 15000);
    assert_int_equal(dlock_lock_fence(a), fence);
    assert_string_equal(dlock_lock_token(a), token);
    read_key("ttl-move", a, &after);
    assert_int_equal(after.create_rev, before.create_rev); /* the place in line and the fence */
    assert_int_equal((uint64_t)after.create_rev, fence);
    assert_true(after.lease != before.lease);
    assert_int_equal(lease_granted_s(after.lease), 20); /* etcd's word on the TTL */
    assert_int_equal(lease_granted_s(before.lease), 0); /* the old lease was revoked */
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);

    /* past the old TTL: the key lives on the new lease alone */
    test_sleep_ms(3500);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    /* back to a short TTL, and the handle's own (0): two more moves */
    assert_int_equal(dlock_lock_extend(a, 5000), DLOCK_OK);
    assert_true(dlock_lock_validity_ms(a) <= 5000);
    assert_int_equal(dlock_lock_extend(a, 0), DLOCK_OK); /* renews the 5 s lease */
    assert_int_equal(dlock_lock_fence(a), fence);
    dlock__etcd_kv last;
    read_key("ttl-move", a, &last);
    assert_int_equal(last.create_rev, before.create_rev);
    assert_int_equal(lease_granted_s(last.lease), 5);
    assert_int_equal(lease_granted_s(after.lease), 0);

    /* the release revokes the lease the key is on now */
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(lease_granted_s(last.lease), 0);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_true(dlock_lock_fence(b) > fence);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock__etcd_kv_clear(&before);
    dlock__etcd_kv_clear(&after);
    dlock__etcd_kv_clear(&last);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* How many leases etcd has (every test here leaves none behind). */
static size_t leases_live(void)
{
    json_t *rep = NULL;
    json_t *body = json_object();
    assert_int_equal(dlock__etcd_post(raw, "/v3/lease/leases", body, &rep,
                                      dlock__deadline_after_ms(3000), -1, NULL, NULL, NULL),
                     DLOCK_OK);
    json_decref(body);
    size_t n = json_array_size(json_object_get(rep, "leases"));
    json_decref(rep);
    return n;
}

/* A move that finds the key gone (broken meanwhile) is DLOCK_ENOTOWNER:
 * the handle lets go, and the lease granted for the move is revoked, not
 * left to its TTL. */
static void a_move_that_finds_the_key_gone_revokes_its_new_lease(void **state)
{
    (void)state;
    size_t before = leases_live();
    dlock_lock *a = lock_of("ttl-gone", 3000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(leases_live(), before + 1);
    dlock_break_result res;
    assert_int_equal(dlock_client_break(cl, "ttl-gone", 0, &res), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(a, 30000), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_UNLOCKED);
    /* a's own lease lives on, keyless, to its TTL; the move's is gone */
    assert_int_equal(leases_live(), before + 1);
    test_sleep_ms(3500);
    assert_int_equal(leases_live(), before);
    dlock_lock_free(a);
}

/* The watchdog renews the lease the key is on after the move, at the new
 * TTL: renewing the old one (revoked) would find it gone and lose the
 * lock. */
static void auto_renew_keeps_the_new_lease_alive(void **state)
{
    (void)state;
    dlock_lock *a = lock_of("ttl-renew", 2000, DLOCK_AUTO_RENEW);
    dlock_lock *b = lock_of("ttl-renew", 2000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(a, 3000), DLOCK_OK);
    test_sleep_ms(7000); /* two new TTLs, three old ones */
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_true(dlock_lock_validity_ms(a) > 0);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    dlock__etcd_kv kv;
    read_key("ttl-renew", a, &kv);
    assert_int_equal(lease_granted_s(kv.lease), 3);
    dlock__etcd_kv_clear(&kv);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* A waiter watches the key before its own for deletion: the move is a put
 * on that key, no deletion, so the waiter stays out until the release. */
static void a_waiter_stays_out_while_the_holder_moves_leases(void **state)
{
    (void)state;
    dlock_lock *a = lock_of("ttl-wait", 2000, 0);
    dlock_lock *b = lock_of("ttl-wait", 2000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    test_waiter w;
    assert_int_equal(test_waiter_start(&w, b, 30000, TEST_WAITER_KEEP), 0);
    test_sleep_ms(300); /* in line behind a */
    for (int i = 0; i < 6; i++) {
        int rc = dlock_lock_extend(a, i % 2 ? 2000 : 4000);
        if (rc != DLOCK_OK)
            fail_msg("extend %d: %s (%s)", i, dlock_errname(rc), dlock_lock_errmsg(a));
        test_sleep_ms(700); /* past every old lease's TTL by the end */
        assert_int_equal(atomic_load(&w.done), 0);
    }
    int64_t released_ms = test_now_ms();
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(test_waiter_join(&w), DLOCK_OK);
    assert_true(atomic_load(&w.done_ms) >= released_ms);
    assert_true(dlock_lock_fence(b) > dlock_lock_fence(a));
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* A lease the owner's other handles share is theirs too: a move is
 * refused and sends nothing; one handle's own counted holds may move. */
static void a_lease_shared_by_other_handles_keeps_its_ttl(void **state)
{
    (void)state;
    dlock_lock *a = lock_of("ttl-shared", 3000, DLOCK_REENTRANT);
    dlock_lock *a2 = lock_of("ttl-shared", 3000, DLOCK_REENTRANT);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK); /* two holds, one handle */
    assert_int_equal(dlock_lock_extend(a, 6000), DLOCK_OK);
    assert_true(dlock_lock_validity_ms(a) > 5000);
    assert_int_equal(dlock_lock_acquire(a2, 0), DLOCK_OK); /* the same lease */
    assert_int_equal(dlock_lock_extend(a2, 9000), DLOCK_ENOTSUP);
    assert_non_null(strstr(dlock_lock_errmsg(a2), "share"));
    assert_int_equal(dlock_lock_extend(a2, 6000), DLOCK_OK); /* its own TTL: a renewal */
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_release(a2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(a2);
}

/* An adopted token (its TTL unknown) moves too: the extend reads the
 * key's lease and its TTL, then moves the key. The token still names the
 * hold afterwards, as `dlock acquire`, `dlock extend -t` and `dlock
 * release` pass it from process to process: a later adopter's extend,
 * renewal and release act on the lease the key is on now. */
static void an_adopted_token_names_the_hold_across_a_move(void **state)
{
    (void)state;
    dlock_lock *a = lock_of("ttl-adopt", 3000, 0);
    dlock_lock *b = lock_of("ttl-adopt", 3000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char token[DLOCK_TOKEN_MAX + 1];
    snprintf(token, sizeof token, "%s", dlock_lock_token(a));
    dlock_lock_forget(a); /* as a process that printed it and left */
    dlock_lock *c = lock_of("ttl-adopt", 3000, 0);
    assert_int_equal(dlock_lock_adopt(c, token), DLOCK_OK);
    int rc = dlock_lock_extend(c, 12000);
    if (rc != DLOCK_OK)
        fail_msg("extend(12000): %s (%s)", dlock_errname(rc), dlock_lock_errmsg(c));
    dlock__etcd_kv kv;
    read_key("ttl-adopt", c, &kv);
    assert_int_equal(lease_granted_s(kv.lease), 12);
    dlock_lock_forget(c);

    /* another adopter: auto-renewed past the old TTL, then moved again */
    dlock_lock *d = lock_of("ttl-adopt", 3000, DLOCK_AUTO_RENEW);
    assert_int_equal(dlock_lock_adopt(d, token), DLOCK_OK);
    test_sleep_ms(4500);
    assert_int_equal(dlock_lock_state_get(d), DLOCK_STATE_HELD);
    rc = dlock_lock_extend(d, 8000); /* the 12 s lease's TTL learned, then a move */
    if (rc != DLOCK_OK)
        fail_msg("extend(8000): %s (%s)", dlock_errname(rc), dlock_lock_errmsg(d));
    assert_true(dlock_lock_validity_ms(d) <= 8000);
    assert_int_equal(lease_granted_s(kv.lease), 0);
    dlock__etcd_kv_clear(&kv);
    read_key("ttl-adopt", d, &kv);
    assert_int_equal(lease_granted_s(kv.lease), 8);
    dlock_lock_forget(d);

    /* and one that only releases: the key's lease goes, and the key */
    dlock_lock *e = lock_of("ttl-adopt", 3000, 0);
    assert_int_equal(dlock_lock_adopt(e, token), DLOCK_OK);
    assert_int_equal(dlock_lock_release(e), DLOCK_OK);
    assert_int_equal(lease_granted_s(kv.lease), 0);
    dlock__etcd_kv_clear(&kv);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock *locks[] = {a, b, c, d, e};
    for (size_t i = 0; i < 5; i++)
        dlock_lock_free(locks[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(extend_to_a_new_ttl_moves_the_key_to_a_new_lease),
        cmocka_unit_test(a_move_that_finds_the_key_gone_revokes_its_new_lease),
        cmocka_unit_test(auto_renew_keeps_the_new_lease_alive),
        cmocka_unit_test(a_waiter_stays_out_while_the_holder_moves_leases),
        cmocka_unit_test(a_lease_shared_by_other_handles_keeps_its_ttl),
        cmocka_unit_test(an_adopted_token_names_the_hold_across_a_move),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
