/* SPDX-License-Identifier: BSD-3-Clause */
/* The client's etcd sessions (issue 38, src/etcd/etcd_session.h) against
 * a real member: DLOCK_AUTO_RENEW locks share one lease per TTL, an
 * acquire and a release are two writes (etcd's own counters say so),
 * distinct handles keep distinct keys, a session etcd lost loses every
 * lock on it, and a session a create with an unknown outcome tainted
 * takes no new keys and is revoked by its last user, with the key a late
 * copy of that create made. */
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
#include "etcd_keys.h"
#include "etcd_kv.h"
#include "etcd_server.h"
#include "proc.h"
#include "proxy.h"
#include "test_util.h"

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

static atomic_int lost_calls, lost_not_owner;

static void count_lost(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)l, (void)arg;
    atomic_fetch_add(&lost_calls, 1);
    if (why == DLOCK_LOST_NOT_OWNER)
        atomic_fetch_add(&lost_not_owner, 1);
}

static dlock_lock *lock_on(dlock_client *c, const char *name, int64_t ttl_ms, unsigned flags,
                           unsigned permits)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = flags;
    o.on_lost = count_lost;
    dlock_lock *l = NULL;
    int rc = permits ? dlock_semaphore_new(&l, c, name, permits, &o)
                     : dlock_lock_new(&l, c, name, &o);
    if (rc != DLOCK_OK)
        fail_msg("new handle on %s: %s", name, dlock_errname(rc));
    return l;
}

/* The lease l's key is on: NAME/ and the token in Go's %x (the token
 * names the key), read from etcd; 0 when the key is gone. */
static int64_t key_lease(const char *name, const char *token)
{
    char key[128];
    int n = snprintf(key, sizeof key, "%s/%llx", name, test_etcd_token_id(token));
    dlock__etcd_kv kv;
    assert_int_equal(dlock__etcd_get(raw, key, (size_t)n, &kv, dlock__deadline_after_ms(3000), -1,
                                     NULL),
                     DLOCK_OK);
    int64_t lease = kv.key ? kv.lease : 0;
    dlock__etcd_kv_clear(&kv);
    return lease;
}

static int lease_alive(int64_t lease)
{
    int64_t left_ms = -1;
    assert_int_equal(dlock__etcd_lease_ttl_ms(raw, lease, &left_ms, NULL,
                                              dlock__deadline_after_ms(3000), -1, NULL),
                     DLOCK_OK);
    return left_ms >= 0;
}

/* ---- etcd's own count of the requests it served ---------------------------- */

static long served(const char *method)
{
    long n = test_etcd_served(&srv, 0, method);
    assert_true(n >= 0);
    return n;
}

typedef struct counts {
    long txn, del, grant, revoke;
} counts;

static counts count_now(void)
{
    return (counts){served("Txn"), served("DeleteRange"), served("LeaseGrant"),
                    served("LeaseRevoke")};
}

/* n acquire + release cycles of l; the requests etcd served meanwhile. */
static counts cycles(dlock_lock *l, int n)
{
    counts a = count_now();
    for (int i = 0; i < n; i++) {
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    }
    counts b = count_now();
    return (counts){b.txn - a.txn, b.del - a.del, b.grant - a.grant, b.revoke - a.revoke};
}

/* ---- the tests --------------------------------------------------------------- */

/* An auto-renew lock's cycle is the create transaction and a plain
 * DeleteRange of its key (as Go's Mutex): two writes, no grant, no
 * revoke, where a plain lock's is a grant, the create and a revoke. */
static void an_auto_renew_cycle_is_two_writes(void **state)
{
    (void)state;
    enum { N = 20 };
    dlock_lock *a = lock_on(cl, "sess-cycle", 10000, DLOCK_AUTO_RENEW, 0);
    dlock_lock *p = lock_on(cl, "sess-cycle-plain", 10000, 0, 0);
    (void)cycles(a, 1); /* the session's grant */
    counts s = cycles(a, N), q = cycles(p, N);
    printf("# %d cycles: auto-renew txn %ld delete %ld grant %ld revoke %ld; plain txn %ld "
           "delete %ld grant %ld revoke %ld\n", N, s.txn, s.del, s.grant, s.revoke, q.txn, q.del,
           q.grant, q.revoke);
    assert_int_equal(s.txn, N);
    assert_int_equal(s.del, N);
    assert_int_equal(s.grant, 0);
    assert_int_equal(s.revoke, 0);
    assert_int_equal(q.txn, N);
    assert_int_equal(q.grant, N);
    assert_int_equal(q.revoke, N);
    dlock_lock_free(a);
    dlock_lock_free(p);
}

/* Two handles of one client on one name (a semaphore's permits) hold
 * distinct keys on one lease; the release deletes its key only, and the
 * next acquire reuses the lease. A plain lock's lease is its own. */
static void handles_on_one_session_keep_distinct_keys(void **state)
{
    (void)state;
    dlock_lock *a = lock_on(cl, "sess-keys", 8000, DLOCK_AUTO_RENEW, 2);
    dlock_lock *b = lock_on(cl, "sess-keys", 8000, DLOCK_AUTO_RENEW, 2);
    dlock_lock *p = lock_on(cl, "sess-keys-plain", 8000, 0, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p, 0), DLOCK_OK);
    assert_string_not_equal(dlock_lock_token(a), dlock_lock_token(b));
    int64_t la = key_lease("sess-keys", dlock_lock_token(a));
    assert_true(la != 0);
    assert_int_equal(key_lease("sess-keys", dlock_lock_token(b)), la);
    int64_t lp = key_lease("sess-keys-plain", dlock_lock_token(p));
    assert_true(lp != 0 && lp != la);
    assert_int_equal((unsigned long long)lp, test_etcd_token_id(dlock_lock_token(p)));

    char tb[DLOCK_TOKEN_MAX + 1];
    snprintf(tb, sizeof tb, "%s", dlock_lock_token(b));
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(key_lease("sess-keys", tb), 0); /* b's key went */
    assert_int_equal(key_lease("sess-keys", dlock_lock_token(a)), la); /* a's stays */
    assert_true(lease_alive(la));
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(key_lease("sess-keys", dlock_lock_token(b)), la); /* reused */
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_true(lease_alive(la)); /* idle: it lapses by itself */
    assert_int_equal(dlock_lock_release(p), DLOCK_OK);
    assert_false(lease_alive(lp));
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(p);
}

/* etcd loses the session (revoked here by another client): every lock
 * on it is lost, on_lost once each, and the next acquire, at once, takes
 * a new session (the lost one left the table, though its last keep-alive
 * is recent: a 9 s TTL is renewed every 3 s). */
static void a_lost_session_loses_every_lock_on_it(void **state)
{
    (void)state;
    atomic_store(&lost_calls, 0);
    dlock_lock *a = lock_on(cl, "sess-lost-a", 9000, DLOCK_AUTO_RENEW, 0);
    dlock_lock *b = lock_on(cl, "sess-lost-b", 9000, DLOCK_AUTO_RENEW, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    int64_t lease = key_lease("sess-lost-a", dlock_lock_token(a));
    assert_int_equal(key_lease("sess-lost-b", dlock_lock_token(b)), lease);
    assert_int_equal(dlock__etcd_lease_revoke(raw, lease, dlock__deadline_after_ms(3000), -1,
                                              NULL, NULL),
                     DLOCK_OK);
    assert_true(test_wait_for_state(a, DLOCK_STATE_LOST, 5000));
    assert_true(test_wait_for_state(b, DLOCK_STATE_LOST, 5000));
    assert_int_equal(dlock_lock_release(a), DLOCK_ELOST);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    int64_t fresh = key_lease("sess-lost-a", dlock_lock_token(a));
    assert_true(fresh != 0 && fresh != lease);
    test_sleep_ms(3500); /* another renewal round: no second on_lost */
    assert_int_equal(atomic_load(&lost_calls), 2);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* The release's DeleteRange judges the hold by the key it deleted: a key
 * deleted behind the holder's back (etcdctl del, a break) or made again
 * at another revision (a late copy of a create after the loss) is a lost
 * lock, DLOCK_EEXPIRED, as the delete transaction on the lease said. The
 * 30 s TTL keeps the watchdog's next look 10 s away: the release is the
 * first to find out. */
static void a_release_finds_its_key_lost(void **state)
{
    (void)state;
    dlock_lock *a = lock_on(cl, "sess-gone", 30000, DLOCK_AUTO_RENEW, 0);
    char key[128];
    for (int again = 0; again < 2; again++) {
        assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
        int n = snprintf(key, sizeof key, "sess-gone/%llx",
                         test_etcd_token_id(dlock_lock_token(a)));
        int64_t lease = key_lease("sess-gone", dlock_lock_token(a));
        dlock__etcd_kv kv;
        assert_int_equal(dlock__etcd_get(raw, key, (size_t)n, &kv,
                                         dlock__deadline_after_ms(3000), -1, NULL),
                         DLOCK_OK);
        assert_non_null(kv.key);
        assert_int_equal(dlock__etcd_delete_if_created(raw, key, (size_t)n, kv.create_rev,
                                                       dlock__deadline_after_ms(3000), NULL),
                         DLOCK_OK);
        dlock__etcd_kv_clear(&kv);
        char msg[256];
        if (again) /* the same key on the same lease, a later create revision */
            assert_int_equal(test_etcd_put_key(raw, key, (size_t)n, lease, NULL, msg,
                                               sizeof msg),
                             DLOCK_OK);
        assert_int_equal(dlock_lock_release(a), DLOCK_EEXPIRED);
        assert_int_equal(dlock__etcd_get(raw, key, (size_t)n, &kv,
                                         dlock__deadline_after_ms(3000), -1, NULL),
                         DLOCK_OK);
        assert_null(kv.key); /* a key made again by this hold's late create goes too */
    }
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK); /* and a clean one is clean */
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
}

/* ---- one keep-alive per session per renewal period (etcd_keepalive.h) ------- */

#define SHARED_LOCKS 8
#define SHARED_TTL_MS 3000 /* renewed every second */

static void take_all(dlock_lock **l, const char *prefix)
{
    for (int i = 0; i < SHARED_LOCKS; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s-%d", prefix, i);
        l[i] = lock_on(cl, name, SHARED_TTL_MS, DLOCK_AUTO_RENEW, 0);
        assert_int_equal(dlock_lock_acquire(l[i], 0), DLOCK_OK);
    }
}

/* Eight auto-renewed locks on one session, held over several renewal
 * periods: their renewals join one keep-alive of the session per look of
 * the watchdog (about one a period), where each used to send its own
 * (eight a period); each still reads its own key, and every lock stays
 * held with a lease end in the session's TTL ahead. */
static void locks_on_one_session_share_its_keep_alive(void **state)
{
    (void)state;
    atomic_store(&lost_calls, 0);
    dlock_lock *l[SHARED_LOCKS];
    take_all(l, "sess-share");
    long ka0 = served("LeaseKeepAlive"), range0 = served("Range");
    const int periods = 5;
    test_sleep_ms(periods * SHARED_TTL_MS / 3 + SHARED_TTL_MS / 6);
    long ka = served("LeaseKeepAlive") - ka0, reads = served("Range") - range0;
    printf("# %d locks over %d renewal periods: %ld keep-alives, %ld reads\n", SHARED_LOCKS,
           periods, ka, reads);
    /* one per period, and room for a look that split (a late round) */
    assert_true(ka >= periods / 2);
    assert_true(ka <= 2 * periods);
    assert_true(reads >= (long)SHARED_LOCKS * (periods - 1)); /* each checks its key */
    for (int i = 0; i < SHARED_LOCKS; i++) {
        assert_int_equal(dlock_lock_state_get(l[i]), DLOCK_STATE_HELD);
        int64_t left = dlock_lock_validity_ms(l[i]);
        assert_true(left > 0 && left <= SHARED_TTL_MS);
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        dlock_lock_free(l[i]);
    }
    assert_int_equal(atomic_load(&lost_calls), 0);
}

/* The shared keep-alive finds the session gone (revoked from outside):
 * every lock on it is lost at that renewal, on_lost once each. */
static void a_lost_shared_keep_alive_loses_every_lock(void **state)
{
    (void)state;
    atomic_store(&lost_calls, 0);
    atomic_store(&lost_not_owner, 0);
    dlock_lock *l[SHARED_LOCKS];
    take_all(l, "sess-share-lost");
    int64_t lease = key_lease("sess-share-lost-0", dlock_lock_token(l[0]));
    assert_true(lease != 0);
    test_sleep_ms(SHARED_TTL_MS / 2); /* a shared renewal first */
    assert_int_equal(dlock__etcd_lease_revoke(raw, lease, dlock__deadline_after_ms(3000), -1,
                                              NULL, NULL),
                     DLOCK_OK);
    for (int i = 0; i < SHARED_LOCKS; i++)
        assert_true(test_wait_for_state(l[i], DLOCK_STATE_LOST, 5000));
    assert_int_equal(atomic_load(&lost_calls), SHARED_LOCKS);
    assert_int_equal(atomic_load(&lost_not_owner), SHARED_LOCKS);
    for (int i = 0; i < SHARED_LOCKS; i++) {
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_ELOST);
        dlock_lock_free(l[i]);
    }
}

/* An idle session revoked behind the client's back (no renewal is there
 * to notice): the next acquire's create finds its lease gone, and the
 * acquire goes on at once on a new session. */
static void an_idle_session_revoked_is_replaced(void **state)
{
    (void)state;
    dlock_lock *a = lock_on(cl, "sess-idle", 9000, DLOCK_AUTO_RENEW, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    int64_t lease = key_lease("sess-idle", dlock_lock_token(a));
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock__etcd_lease_revoke(raw, lease, dlock__deadline_after_ms(3000), -1,
                                              NULL, NULL),
                     DLOCK_OK);
    int rc = dlock_lock_acquire(a, 0);
    if (rc != DLOCK_OK)
        fail_msg("try-once on a revoked idle session: %s (%s)", dlock_errname(rc),
                 dlock_lock_errmsg(a));
    int64_t fresh = key_lease("sess-idle", dlock_lock_token(a));
    assert_true(fresh != 0 && fresh != lease);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
}

/* A create whose reply never came (the proxy lets requests through and
 * drops the replies) taints the session: the next acquire goes on a new
 * one, and the last user of the tainted one revokes it, which deletes a
 * key a late copy of that create made (put here by hand on its lease). */
static void an_unknown_create_taints_the_session(void **state)
{
    (void)state;
    chaos_proxy px;
    assert_int_equal(chaos_proxy_start(&px, srv.m[0].client_port), 0);
    char url[80];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d", px.port);
    const char *u = url;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.io_timeout_ms = 300;
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_new(&c, &u, 1, &o, NULL, 0), DLOCK_OK);
    dlock_lock *a = lock_on(c, "sess-taint-a", 8000, DLOCK_AUTO_RENEW, 0);
    dlock_lock *b = lock_on(c, "sess-taint-b", 8000, DLOCK_AUTO_RENEW, 0);
    dlock_lock *d = lock_on(c, "sess-taint-d", 8000, DLOCK_AUTO_RENEW, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    int64_t tainted = key_lease("sess-taint-a", dlock_lock_token(a));

    assert_int_equal(chaos_proxy_set(&px, CHAOS_PROXY_DEAF, 0), 0);
    assert_true(dlock_lock_acquire(d, 0) != DLOCK_OK); /* its create: no reply */
    assert_int_equal(chaos_proxy_set(&px, CHAOS_PROXY_PASS, 0), 0);
    /* the late copy of d's create, after d left the line */
    assert_int_equal(test_etcd_put_key(raw, "sess-taint-d/1a7e", 17, tainted, NULL, NULL, 0),
                     DLOCK_OK);

    dlock_lock *e = lock_on(c, "sess-taint-e", 8000, DLOCK_AUTO_RENEW, 0);
    assert_int_equal(dlock_lock_acquire(e, 0), DLOCK_OK);
    int64_t fresh = key_lease("sess-taint-e", dlock_lock_token(e));
    assert_true(fresh != 0 && fresh != tainted); /* no new key on the tainted one */
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_true(lease_alive(tainted)); /* b still uses it */
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_false(lease_alive(tainted)); /* the last user revoked it */
    assert_int_equal(key_lease("sess-taint-d", "1a7e"), 0);
    assert_true(lease_alive(fresh));
    assert_int_equal(dlock_lock_release(e), DLOCK_OK);
    dlock_lock *locks[] = {a, b, d, e};
    for (size_t i = 0; i < 4; i++)
        dlock_lock_free(locks[i]);
    dlock_client_free(c);
    chaos_proxy_stop(&px);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_auto_renew_cycle_is_two_writes),
        cmocka_unit_test(handles_on_one_session_keep_distinct_keys),
        cmocka_unit_test(a_lost_session_loses_every_lock_on_it),
        cmocka_unit_test(a_release_finds_its_key_lost),
        cmocka_unit_test(an_idle_session_revoked_is_replaced),
        cmocka_unit_test(locks_on_one_session_share_its_keep_alive),
        cmocka_unit_test(a_lost_shared_keep_alive_loses_every_lock),
        cmocka_unit_test(an_unknown_create_taints_the_session),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
