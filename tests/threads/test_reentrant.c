/* SPDX-License-Identifier: BSD-3-Clause */
/* Counted reentrancy (DLOCK_REENTRANT) against real redis-servers: the
 * owner is client x thread, the hold count lives in the lock's hash and
 * every acquire needs its release; other threads and clients are other
 * owners; plain and reentrant locks refuse each other's keys; the watchdog
 * renews a counted lock until its last release; three nodes (Redlock) keep
 * the same count on every node.
 *
 * Worker threads never call cmocka asserts (they longjmp); they record
 * results that the main thread checks after pthread_join. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

static dlock_lock *new_lock(dlock_client *c, const char *name, unsigned flags, int64_t ttl_ms)
{
    return test_lock_new(c, name, ttl_ms, flags, 5, 20);
}

/* ---- server-side helpers ------------------------------------------------ */

/* The hold count stored for `owner` in the lock's hash; -1 if absent. */
static long long holds_on(const test_redis *r, const char *key, const char *owner)
{
    char *v = test_cmd_str_or_nil(r, "HGET %s %s", key, owner);
    long long n = v ? strtoll(v, NULL, 10) : -1;
    free(v);
    return n;
}

/* Owners in the lock's hash: its fields but the owners' attempt
 * bookkeeping (OWNER#s, OWNER#u, see reentrant_acquire.lua). */
static long long owners_in(const test_redis *r, const char *key)
{
    redisReply *rep = test_cmd(r, "HKEYS %s", key);
    long long n = 0;
    for (size_t i = 0; i < rep->elements; i++)
        n += strchr(rep->element[i]->str, '#') == NULL;
    freeReplyObject(rep);
    return n;
}

/* ---- tests -------------------------------------------------------------- */

static void two_handles_in_one_thread_share_one_counted_hold(void **state)
{
    (void)state;
    const char *name = "re:two-handles";
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *a = new_lock(c, name, DLOCK_REENTRANT, 10000);
    dlock_lock *b = new_lock(c, name, DLOCK_REENTRANT, 10000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    /* Same client, same thread: one owner, counted twice. */
    char owner[DLOCK_TOKEN_MAX + 1];
    snprintf(owner, sizeof owner, "%s", dlock_lock_token(a));
    assert_string_equal(dlock_lock_token(b), owner);
    assert_int_equal(owners_in(&test_srv, name), 1);
    assert_int_equal(holds_on(&test_srv, name, owner), 2);
    assert_int_equal(dlock_lock_fence(a), dlock_lock_fence(b)); /* one hold */
    assert_true(test_key_pttl(&test_srv, name) > 0);

    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_UNLOCKED);
    assert_int_equal(test_key_exists(&test_srv, name), 1);
    assert_int_equal(holds_on(&test_srv, name, owner), 1);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_free(c);
}

static void same_handle_acquired_three_times_needs_three_releases(void **state)
{
    (void)state;
    const char *name = "re:three";
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *l = new_lock(c, name, DLOCK_REENTRANT, 10000);
    assert_int_equal(dlock_lock_hold_count(l), 0);
    uint64_t fence = 0;
    for (unsigned i = 1; i <= 3; i++) {
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_hold_count(l), i);
        assert_int_equal(holds_on(&test_srv, name, dlock_lock_token(l)), i);
        if (i == 1)
            fence = dlock_lock_fence(l);
        assert_int_equal(dlock_lock_fence(l), fence); /* re-entry: same hold */
    }
    assert_true(fence > 0);
    for (unsigned left = 2;; left--) {
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        assert_int_equal(dlock_lock_hold_count(l), left);
        if (left == 0)
            break;
        assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
        assert_int_equal(holds_on(&test_srv, name, dlock_lock_token(l)), left);
    }
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTHELD);
    dlock_lock_free(l);
    dlock_client_free(c);
}

typedef struct other_thread {
    dlock_client *client;
    const char *name;
    int try_rc, wait_rc; /* acquire(0) and acquire(200) while held */
    int64_t wait_took_ms;
    int token_differs; /* its owner id is not the main thread's */
    const char *main_owner;
} other_thread;

static void *acquire_from_other_thread(void *arg)
{
    other_thread *o = arg;
    dlock_lock_options opts = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *l = NULL;
    opts.flags = DLOCK_REENTRANT;
    opts.retry_min_ms = 5;
    opts.retry_max_ms = 20;
    if (dlock_lock_new(&l, o->client, o->name, &opts) != DLOCK_OK)
        return NULL;
    o->try_rc = dlock_lock_acquire(l, 0);
    int64_t t0 = test_now_ms();
    o->wait_rc = dlock_lock_acquire(l, 200);
    o->wait_took_ms = test_now_ms() - t0;
    dlock_lock_free(l);
    return NULL;
}

static void *acquire_after_release_from_other_thread(void *arg)
{
    other_thread *o = arg;
    dlock_lock_options opts = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *l = NULL;
    opts.flags = DLOCK_REENTRANT;
    if (dlock_lock_new(&l, o->client, o->name, &opts) != DLOCK_OK)
        return NULL;
    o->try_rc = dlock_lock_acquire(l, 0);
    if (o->try_rc == DLOCK_OK) {
        o->token_differs = strcmp(dlock_lock_token(l), o->main_owner) != 0;
        o->wait_rc = dlock_lock_release(l);
    }
    dlock_lock_free(l);
    return NULL;
}

static void another_thread_is_another_owner_and_is_refused_while_held(void **state)
{
    (void)state;
    const char *name = "re:other-thread";
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *l = new_lock(c, name, DLOCK_REENTRANT, 10000);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);

    other_thread o = {c, name, 99, 99, 0, 0, NULL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, acquire_from_other_thread, &o), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(o.try_rc, DLOCK_ENOTACQUIRED);
    assert_int_equal(o.wait_rc, DLOCK_ETIMEDOUT);
    assert_true(o.wait_took_ms >= 150);
    /* Another client in this thread is another owner too. */
    dlock_client *c2 = test_client_for(&test_srv, NULL);
    dlock_lock *other = new_lock(c2, name, DLOCK_REENTRANT, 10000);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(owners_in(&test_srv, name), 1);
    assert_int_equal(holds_on(&test_srv, name, dlock_lock_token(l)), 2);

    char owner[DLOCK_TOKEN_MAX + 1];
    snprintf(owner, sizeof owner, "%s", dlock_lock_token(l));
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);

    other_thread o2 = {c, name, 99, 99, 0, 0, owner};
    assert_int_equal(pthread_create(&t, NULL, acquire_after_release_from_other_thread, &o2), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(o2.try_rc, DLOCK_OK);
    assert_int_equal(o2.wait_rc, DLOCK_OK);
    assert_true(o2.token_differs);
    dlock_lock_free(other);
    dlock_lock_free(l);
    dlock_client_free(c2);
    dlock_client_free(c);
}

static void plain_and_reentrant_locks_refuse_each_others_keys_as_wrongtype(void **state)
{
    (void)state;
    dlock_client *c = test_client_for(&test_srv, NULL);
    /* A plain lock on a key holding a reentrant hash. */
    dlock_lock *re = new_lock(c, "re:types-a", DLOCK_REENTRANT, 10000);
    dlock_lock *plain = new_lock(c, "re:types-a", 0, 10000);
    assert_int_equal(dlock_lock_acquire(re, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(plain, 0), DLOCK_EWRONGTYPE);
    /* A wrong type is not worth waiting for. */
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(plain, 5000), DLOCK_EWRONGTYPE);
    assert_true(test_now_ms() - t0 < 2500);
    assert_int_equal(dlock_lock_state_get(plain), DLOCK_STATE_UNLOCKED);
    assert_int_equal(holds_on(&test_srv, "re:types-a", dlock_lock_token(re)), 1);
    assert_int_equal(dlock_lock_release(re), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "re:types-a"), 0);

    /* And a reentrant lock on a key holding a plain token. */
    dlock_lock *plain2 = new_lock(c, "re:types-b", 0, 10000);
    dlock_lock *re2 = new_lock(c, "re:types-b", DLOCK_REENTRANT, 10000);
    assert_int_equal(dlock_lock_acquire(plain2, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(re2, 0), DLOCK_EWRONGTYPE);
    t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(re2, 5000), DLOCK_EWRONGTYPE);
    assert_true(test_now_ms() - t0 < 2500);
    assert_int_equal(dlock_lock_hold_count(re2), 0);
    test_assert_key_value(&test_srv, "re:types-b", dlock_lock_token(plain2));
    assert_int_equal(dlock_lock_release(plain2), DLOCK_OK);

    dlock_lock_free(re);
    dlock_lock_free(plain);
    dlock_lock_free(plain2);
    dlock_lock_free(re2);
    dlock_client_free(c);
}

static void reentrant_auto_renewed_lock_is_renewed_until_its_last_release(void **state)
{
    (void)state;
    const char *name = "re:renewed";
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *l = new_lock(c, name, DLOCK_REENTRANT | DLOCK_AUTO_RENEW, 1000);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    char owner[DLOCK_TOKEN_MAX + 1];
    snprintf(owner, sizeof owner, "%s", dlock_lock_token(l));
    test_sleep_ms(2500); /* 2.5 TTLs */
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_true(test_key_pttl(&test_srv, name) > 0);
    assert_true(dlock_lock_validity_ms(l) > 0);
    assert_int_equal(holds_on(&test_srv, name, owner), 2);

    /* One hold left: still renewed. */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    test_sleep_ms(1500);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_true(test_key_pttl(&test_srv, name) > 0);
    assert_int_equal(holds_on(&test_srv, name, owner), 1);
    assert_int_equal(dlock_lock_extend(l, 0), DLOCK_OK);

    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void reentrant_lock_over_three_nodes_keeps_the_count_on_every_node(void **state)
{
    (void)state;
    const char *name = "re:redlock";
    test_redis rs[3];
    assert_int_equal(test_redis_start_many(rs, 3, NULL), 0);
    const char *urls[3] = {rs[0].url, rs[1].url, rs[2].url};
    dlock_client *c = test_client_new(urls, 3, NULL);
    dlock_client *c2 = test_client_new(urls, 3, NULL);
    dlock_lock *l = new_lock(c, name, DLOCK_REENTRANT | DLOCK_AUTO_RENEW, 1000);
    dlock_lock *other = new_lock(c2, name, DLOCK_REENTRANT, 1000);

    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(l);
    assert_true(fence > 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_hold_count(l), 2);
    assert_int_equal(dlock_lock_fence(l), fence);
    const char *owner = dlock_lock_token(l);
    for (int i = 0; i < 3; i++)
        assert_int_equal(holds_on(&rs[i], name, owner), 2);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_ENOTACQUIRED);

    /* Renewed past its TTL on every node. */
    test_sleep_ms(1600);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    for (int i = 0; i < 3; i++)
        assert_true(test_key_pttl(&rs[i], name) > 0);

    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    owner = dlock_lock_token(l);
    for (int i = 0; i < 3; i++)
        assert_int_equal(holds_on(&rs[i], name, owner), 1);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(test_key_exists(&rs[i], name), 0);

    /* Now the other owner gets it, with a higher fencing token. */
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    assert_true(dlock_lock_fence(other) > fence);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);

    dlock_lock_free(l);
    dlock_lock_free(other);
    dlock_client_free(c);
    dlock_client_free(c2);
    test_redis_stop_many(rs, 3);
}

static void reentrant_lock_still_counts_when_one_of_three_nodes_is_down(void **state)
{
    (void)state;
    const char *name = "re:redlock-minority";
    test_redis rs[3];
    assert_int_equal(test_redis_start_many(rs, 3, NULL), 0);
    const char *urls[3] = {rs[0].url, rs[1].url, rs[2].url};
    dlock_client *c = test_client_new(urls, 3, NULL);
    dlock_lock *l = new_lock(c, name, DLOCK_REENTRANT, 5000);
    test_redis_kill9(&rs[2]);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    const char *owner = dlock_lock_token(l);
    for (int i = 0; i < 2; i++)
        assert_int_equal(holds_on(&rs[i], name, owner), 2);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    for (int i = 0; i < 2; i++)
        assert_int_equal(test_key_exists(&rs[i], name), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
    test_redis_stop_many(rs, 3);
}

/* The fencing counter of a name, as the server has it. */
static unsigned long long server_fence(const char *name)
{
    char k[256];
    size_t n_k = test_helper_key(k, sizeof k, name, "fence");
    redisReply *r = test_cmd_bin(&test_srv, "GET %b", k, n_k);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    unsigned long long f = strtoull(r->str, NULL, 10);
    freeReplyObject(r);
    return f;
}

static void reentry_after_the_lease_expired_starts_a_new_hold(void **state)
{
    (void)state;
    const char *name = "re:expired-reentry";
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *l = new_lock(c, name, DLOCK_REENTRANT, 300);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    uint64_t first_fence = dlock_lock_fence(l);
    test_sleep_ms(500); /* the lease ends: the key and its count are gone */
    assert_int_equal(test_key_exists(&test_srv, name), 0);

    /* The "re-entry" creates a new hash with a count of one and a new
     * fencing token: the handle must count what the server counts, or its
     * next release deletes the key while the handle still reports a hold.
     * (Everything is gathered and freed first, so a failure leaks nothing.) */
    int rc = dlock_lock_acquire(l, 0);
    long long server_holds = holds_on(&test_srv, name, dlock_lock_token(l));
    unsigned handle_holds = dlock_lock_hold_count(l);
    unsigned long long handle_fence = dlock_lock_fence(l), fence_now = server_fence(name);
    int release_rc = dlock_lock_release(l);
    long long exists_after = test_key_exists(&test_srv, name);
    dlock_lock_state state_after = dlock_lock_state_get(l);
    dlock_lock_free(l);
    dlock_client_free(c);
    printf("# re-entry after expiry: handle holds %u (fence %llu), server holds %lld "
           "(fence %llu); after one release: key exists %lld, handle state %d\n",
           handle_holds, handle_fence, server_holds, fence_now, exists_after, (int)state_after);
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(server_holds, 1);
    assert_int_equal(handle_holds, (unsigned)server_holds);
    assert_true(handle_fence > first_fence);
    assert_int_equal(handle_fence, fence_now);
    assert_int_equal(release_rc, DLOCK_OK);
    assert_int_equal(exists_after, 0);
    assert_int_equal(state_after, DLOCK_STATE_UNLOCKED);
}

static void lost_reentrant_lock_reports_elost_once_and_holds_nothing(void **state)
{
    (void)state;
    const char *name = "re:lost";
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *l = new_lock(c, name, DLOCK_REENTRANT | DLOCK_AUTO_RENEW, 600);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    (void)test_cmd_int(&test_srv, "DEL %s", name);
    (void)test_wait_for_state(l, DLOCK_STATE_LOST, 3000);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_LOST);
    assert_int_equal(dlock_lock_extend(l, 0), DLOCK_ELOST);
    assert_int_equal(dlock_lock_release(l), DLOCK_ELOST);
    assert_int_equal(dlock_lock_hold_count(l), 0);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTHELD);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    /* Taken again from scratch. */
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_hold_count(l), 1);
    assert_int_equal(holds_on(&test_srv, name, dlock_lock_token(l)), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Bookkeeping fields (OWNER#HANDLE:s/:u, see reentrant_acquire.lua) of the
 * owner's handles in the lock's hash. */
static long long bookkeeping_in(const test_redis *r, const char *key)
{
    redisReply *rep = test_cmd(r, "HKEYS %s", key);
    long long n = 0;
    for (size_t i = 0; i < rep->elements; i++)
        n += strchr(rep->element[i]->str, '#') != NULL;
    freeReplyObject(rep);
    return n;
}

/* A long-held key must not collect two fields per handle that ever used
 * it: freeing a handle, released or still holding, takes its own fields
 * out while another handle of the owner keeps the key. */
static void freed_handles_leave_no_bookkeeping_in_a_key_another_handle_holds(void **state)
{
    (void)state;
    const char *name = "re:forget";
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *keeper = new_lock(c, name, DLOCK_REENTRANT, 10000);
    assert_int_equal(dlock_lock_acquire(keeper, 0), DLOCK_OK);
    long long own = bookkeeping_in(&test_srv, name);
    assert_true(own > 0);

    dlock_lock *released = new_lock(c, name, DLOCK_REENTRANT, 10000);
    assert_int_equal(dlock_lock_acquire(released, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(released), DLOCK_OK);
    assert_true(bookkeeping_in(&test_srv, name) > own);
    dlock_lock_free(released);
    assert_int_equal(bookkeeping_in(&test_srv, name), own);

    dlock_lock *held = new_lock(c, name, DLOCK_REENTRANT, 10000);
    assert_int_equal(dlock_lock_acquire(held, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(held, 0), DLOCK_OK);
    dlock_lock_free(held); /* lets go of both holds, then of its fields */
    assert_int_equal(bookkeeping_in(&test_srv, name), own);
    assert_int_equal(holds_on(&test_srv, name, dlock_lock_token(keeper)), 1);

    assert_int_equal(dlock_lock_release(keeper), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(keeper);
    dlock_client_free(c);
}

/* A handle freed while it holds three times lets go of all three in one
 * release (reentrant_release.lua drops n holds), then takes its
 * bookkeeping out: two script calls, not one release per hold. */
static void a_freed_handle_drops_all_its_holds_in_one_release(void **state)
{
    (void)state;
    const char *name = "re:free-all";
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *l = new_lock(c, name, DLOCK_REENTRANT, 10000);
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    long long before = test_script_calls(&test_srv);
    dlock_lock_free(l);
    long long calls = test_script_calls(&test_srv) - before;
    print_message("script calls by the free of a handle holding 3: %lld\n", calls);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    assert_int_equal(calls, 2);
    dlock_client_free(c);
}

/* A handle used by one thread, then by another (joined in between): the
 * second thread's release ends the hold the first took. Operation numbers
 * come from one sequence per process; when each thread had its own, the
 * release's number was below the grant's and the script took it for a
 * copy of an operation already applied: DLOCK_OK, and the hold stayed
 * until its TTL. */
typedef struct handoff {
    dlock_lock *l, *warm;
    int rc;
} handoff;

static void *acquire_after_some_ops(void *arg)
{
    handoff *h = arg;
    h->rc = DLOCK_OK;
    for (int i = 0; i < 3 && h->rc == DLOCK_OK; i++) /* this thread's numbers move on */
        if ((h->rc = dlock_lock_acquire(h->warm, 0)) == DLOCK_OK)
            h->rc = dlock_lock_release(h->warm);
    if (h->rc == DLOCK_OK)
        h->rc = dlock_lock_acquire(h->l, 0);
    return NULL;
}

static void *release_it(void *arg)
{
    handoff *h = arg;
    h->rc = dlock_lock_release(h->l);
    return NULL;
}

static void a_hold_taken_on_one_thread_is_released_from_another(void **state)
{
    (void)state;
    dlock_client *c = test_client_for(&test_srv, NULL);
    handoff h = {new_lock(c, "re:handoff", DLOCK_REENTRANT, 30000),
                 new_lock(c, "re:handoff-warm", DLOCK_REENTRANT, 30000), -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, acquire_after_some_ops, &h), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(h.rc, DLOCK_OK);
    assert_int_equal(owners_in(&test_srv, "re:handoff"), 1);
    assert_int_equal(pthread_create(&t, NULL, release_it, &h), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(h.rc, DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "re:handoff"), 0);
    dlock_lock *other = new_lock(c, "re:handoff", DLOCK_REENTRANT, 30000);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    dlock_lock_free(other);
    dlock_lock_free(h.warm);
    dlock_lock_free(h.l);
    dlock_client_free(c);
}

#define T(f) cmocka_unit_test(f)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(two_handles_in_one_thread_share_one_counted_hold),
        T(same_handle_acquired_three_times_needs_three_releases),
        T(another_thread_is_another_owner_and_is_refused_while_held),
        T(plain_and_reentrant_locks_refuse_each_others_keys_as_wrongtype),
        T(reentrant_auto_renewed_lock_is_renewed_until_its_last_release),
        T(reentrant_lock_over_three_nodes_keeps_the_count_on_every_node),
        T(reentrant_lock_still_counts_when_one_of_three_nodes_is_down),
        T(lost_reentrant_lock_reports_elost_once_and_holds_nothing),
        T(reentry_after_the_lease_expired_starts_a_new_hold),
        T(freed_handles_leave_no_bookkeeping_in_a_key_another_handle_holds),
        T(a_freed_handle_drops_all_its_holds_in_one_release),
        T(a_hold_taken_on_one_thread_is_released_from_another),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
