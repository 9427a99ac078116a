/* SPDX-License-Identifier: BSD-3-Clause */
/* The key layout (docs/design.md, "Key layout") against a real redis-server:
 * a lock's helper keys (fencing counter, fair queue, waiters' liveness keys)
 * never meet another lock's keys, in every mode, even for names built to
 * look like helper keys; a client's key_prefix applies to the lock key, its
 * helpers and its wake-up channel; locks without fencing leave no key
 * behind; and an ACL user limited to the prefix (keys and channels) can use
 * every mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

/* The least-privilege user of docs/design.md, for key_prefix "lock:". */
static const char conf[] =
    "user locker on >pw resetkeys ~lock:* resetchannels &dlock:wake:lock:* "
    "-@all +evalsha +eval +script|load +subscribe +unsubscribe "
    "+set +get +del +exists +type +pttl +pexpire +incr +publish "
    "+hset +hget +hdel +hexists +hincrby +hkeys +rpush +lpop +lindex +lpos +lrem "
    "+time +zadd +zrem +zrange +zremrangebyscore +zscore +zcount +zrangebyscore "
    "+zrevrangebyscore\n"
    /* The same user as before the waiter list: its commands are refused
     * inside the scripts, which must still grant and release. */
    "user oldlocker on >pw resetkeys ~lock:* resetchannels &dlock:wake:lock:* "
    "-@all +evalsha +eval +script|load +subscribe +unsubscribe "
    "+set +get +del +exists +type +pttl +pexpire +incr +publish "
    "+hset +hget +hdel +hexists +hincrby +hkeys +rpush +lpop +lindex +lpos +lrem\n"
    /* The documented user without one command a share's grant runs after
     * its reads: the script must be refused before it writes. */
    "user nozrev on >pw resetkeys ~lock:* resetchannels &dlock:wake:lock:* "
    "-@all +evalsha +eval +script|load +subscribe +unsubscribe "
    "+set +get +del +exists +type +pttl +pexpire +incr +publish "
    "+time +zadd +zrem +zrange +zremrangebyscore +zscore +zcount +zrangebyscore\n"
    /* And without PEXPIRE, which a reentrant grant runs after its HSET. */
    "user nopexpire on >pw resetkeys ~lock:* resetchannels &dlock:wake:lock:* "
    "-@all +evalsha +eval +script|load +subscribe +unsubscribe "
    "+set +get +del +exists +type +pttl +incr +publish "
    "+hset +hget +hdel +hexists +hincrby +hkeys\n";

#define DLOCK__TEST_LEN(a) (sizeof(a) / sizeof((a)[0]))

static int group_setup(void **state)
{
    (void)state;
    if (test_redis_start(&test_srv, conf) != 0)
        return -1;
    test_cl = test_client_for(&test_srv, NULL);
    return 0;
}

static dlock_client *client_with_prefix(const char *url, const char *prefix)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.key_prefix = prefix;
    return test_client_new(&url, 1, &o);
}

/* ---- names never share helper keys (issue 15 item 12) ------------------- */

/* Names that the old layout ("{NAME}:fence", "{NAME}:q", "{NAME}:w:TOKEN")
 * mapped onto the helper keys of lock "x". */
static const char *const lookalikes[] = {"{x}:fence", "{x}:q", "x:fence", "x\001fence"};

static void plain_names_never_share_helper_keys(void **state)
{
    (void)state;
    dlock_lock *x = test_lock_new(test_cl, "x", 30000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(x), 1);
    for (size_t i = 0; i < DLOCK__TEST_LEN(lookalikes); i++) {
        dlock_lock *o = test_lock_new(test_cl, lookalikes[i], 30000, 0, 10, 200);
        if (dlock_lock_acquire(o, 0) != DLOCK_OK)
            fail_msg("lock \"%s\" is not independent of lock x: %s", lookalikes[i],
                     dlock_lock_errmsg(o));
        assert_int_equal(dlock_lock_fence(o), 1); /* a counter of its own */
        assert_int_equal(dlock_lock_release(o), DLOCK_OK);
        dlock_lock_free(o);
    }
    assert_int_equal(dlock_lock_release(x), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(x), 2); /* nobody else moved x's counter */
    assert_int_equal(dlock_lock_release(x), DLOCK_OK);
    dlock_lock_free(x);
}

static void reentrant_names_never_share_helper_keys(void **state)
{
    (void)state;
    dlock_lock *x = test_lock_new(test_cl, "x", 30000, DLOCK_REENTRANT, 10, 200);
    assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_OK);
    dlock_lock *o[DLOCK__TEST_LEN(lookalikes)];
    for (size_t i = 0; i < DLOCK__TEST_LEN(lookalikes); i++) {
        o[i] = test_lock_new(test_cl, lookalikes[i], 30000, DLOCK_REENTRANT, 10, 200);
        if (dlock_lock_acquire(o[i], 0) != DLOCK_OK)
            fail_msg("lock \"%s\" is not independent of lock x: %s", lookalikes[i],
                     dlock_lock_errmsg(o[i]));
    }
    /* x again (reentrant) while every look-alike is held: its counter
     * is its own. */
    assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_hold_count(x), 2);
    for (size_t i = 0; i < DLOCK__TEST_LEN(lookalikes); i++) {
        assert_int_equal(dlock_lock_release(o[i]), DLOCK_OK);
        dlock_lock_free(o[i]);
    }
    assert_int_equal(dlock_lock_release(x), DLOCK_OK);
    assert_int_equal(dlock_lock_release(x), DLOCK_OK);
    dlock_lock_free(x);
}

typedef struct waiter {
    dlock_client *c;
    const char *name;
    int rc;
    unsigned flags; /* 0 (plain), DLOCK_FAIR or DLOCK_REENTRANT */
} waiter;

/* Another owner (thread) waits up to 10 s for the name, then releases. */
static void *waiter_main(void *arg)
{
    waiter *w = arg;
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = w->flags;
    w->rc = dlock_lock_new(&l, w->c, w->name, &o);
    if (w->rc == DLOCK_OK) {
        w->rc = dlock_lock_acquire(l, 10000);
        if (w->rc == DLOCK_OK)
            w->rc = dlock_lock_release(l);
    }
    dlock_lock_free(l);
    return NULL;
}

/* An integer answer of cmd (ZCARD, LLEN) about one of a lock's helper keys. */
static long long helper_count(const char *cmd, const char *key, const char *kind)
{
    char q[256], fmt[32];
    size_t n = test_helper_key(q, sizeof q, key, kind);
    snprintf(fmt, sizeof fmt, "%s %%b", cmd);
    redisReply *r = test_cmd_bin(&test_srv, fmt, q, n);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* The length of a lock's waiter list (KEY NUL "wq") and of its fair line
 * (KEY NUL "q"). */
static long long listed(const char *key)
{
    return helper_count("ZCARD", key, "wq");
}

static long long queue_len(const char *key)
{
    return helper_count("LLEN", key, "q");
}

static void fair_names_never_share_helper_keys(void **state)
{
    (void)state;
    dlock_lock *x = test_lock_new(test_cl, "x", 30000, DLOCK_FAIR, 10, 200);
    assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_OK);
    /* A waiter in x's line: x's queue and a liveness key exist now. */
    waiter w = {test_cl, "x", -100, DLOCK_FAIR};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    for (int i = 0; i < 200 && queue_len("x") < 1; i++)
        usleep(10000);
    assert_int_equal(queue_len("x"), 1);
    const char *more[] = {"{x}:w:", "{x}:q:fence"};
    for (size_t i = 0; i < DLOCK__TEST_LEN(lookalikes) + DLOCK__TEST_LEN(more); i++) {
        const char *name = i < DLOCK__TEST_LEN(lookalikes) ? lookalikes[i]
                                                          : more[i - DLOCK__TEST_LEN(lookalikes)];
        for (unsigned fair = 0; fair < 2; fair++) {
            dlock_lock *o = test_lock_new(test_cl, name, 30000, fair ? DLOCK_FAIR : 0, 10, 200);
            if (dlock_lock_acquire(o, 0) != DLOCK_OK)
                fail_msg("lock \"%s\" (fair %u) is not independent of lock x: %s", name, fair,
                         dlock_lock_errmsg(o));
            assert_int_equal(dlock_lock_release(o), DLOCK_OK);
            dlock_lock_free(o);
        }
    }
    assert_int_equal(queue_len("x"), 1); /* x's line untouched */
    assert_int_equal(dlock_lock_release(x), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rc, DLOCK_OK);
    dlock_lock_free(x);
}

/* The default mode's waiter list (docs/waiting.md, "Who is woken") is the
 * lock's own too: look-alike names keep theirs apart. */
static void plain_waiter_lists_are_never_shared(void **state)
{
    (void)state;
    dlock_lock *x = test_lock_new(test_cl, "x", 30000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_OK);
    waiter w = {test_cl, "x", -100, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    for (int i = 0; i < 500 && listed("x") < 1; i++)
        usleep(10000);
    assert_int_equal(listed("x"), 1);
    const char *more[] = {"{x}:wq", "x:wq", "x\001wq"};
    for (size_t i = 0; i < DLOCK__TEST_LEN(more); i++) {
        dlock_lock *o = test_lock_new(test_cl, more[i], 30000, 0, 10, 200);
        if (dlock_lock_acquire(o, 0) != DLOCK_OK)
            fail_msg("lock \"%s\" is not independent of lock x: %s", more[i],
                     dlock_lock_errmsg(o));
        assert_int_equal(dlock_lock_release(o), DLOCK_OK);
        dlock_lock_free(o);
    }
    assert_int_equal(listed("x"), 1); /* x's waiter still listed, not woken away */
    assert_int_equal(dlock_lock_release(x), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rc, DLOCK_OK);
    dlock_lock_free(x);
}

/* ---- key_prefix ---------------------------------------------------------- */

static void key_prefix_applies_to_the_lock_key_and_its_helpers(void **state)
{
    (void)state;
    dlock_client *c = client_with_prefix(test_srv.url, "app1:");
    dlock_lock *l = test_lock_new(c, "x", 30000, 0, 10, 200);
    assert_string_equal(dlock_lock_name(l), "x");
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "app1:x"), 1);
    assert_int_equal(test_key_exists(&test_srv, "x"), 0);
    char f[64];
    size_t n = test_helper_key(f, sizeof f, "app1:x", "fence");
    redisReply *r = test_cmd_bin(&test_srv, "GET %b", f, n);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "1");
    freeReplyObject(r);
    /* status sees it through the prefix; a client without one does not. */
    dlock_node_status st;
    assert_int_equal(dlock_client_status(c, "x", 1, &st, NULL), DLOCK_OK);
    assert_int_equal(st.held, 1);
    assert_int_equal(st.fence, 1);
    assert_int_equal(dlock_client_status(test_cl, "x", 1, &st, NULL), DLOCK_OK);
    assert_int_equal(st.held, 0);
    /* Another namespace's "x" is another lock. */
    dlock_lock *other = test_lock_new(test_cl, "x", 30000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    dlock_lock_free(other);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void key_prefix_longer_than_the_maximum_is_refused(void **state)
{
    (void)state;
    static char big[DLOCK_KEY_PREFIX_MAX + 2];
    memset(big, 'p', sizeof big - 1);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.key_prefix = big;
    const char *url = test_srv.url;
    dlock_client *c = NULL;
    char err[256];
    assert_int_equal(dlock_client_new(&c, &url, 1, &o, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "key_prefix"));
}

/* ---- bounded keys ------------------------------------------------------- */

static long long dbsize(void)
{
    return test_cmd_int(&test_srv, "DBSIZE");
}

/* The CLI's default (no fencing): 10,000 distinct names, each taken and
 * released, leave the keyspace as it was. */
static void ten_thousand_names_without_fencing_leave_no_key(void **state)
{
    (void)state;
    long long before = dbsize();
    int64_t t0 = test_now_ms();
    for (int i = 0; i < 10000; i++) {
        char name[32];
        snprintf(name, sizeof name, "order:%d", i);
        dlock_lock *l = test_lock_new(test_cl, name, 30000, DLOCK_NO_FENCE, 10, 200);
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        dlock_lock_free(l);
    }
    long long after = dbsize();
    printf("# 10000 names without fencing: DBSIZE %lld before, %lld after (%" PRId64 " ms)\n",
           before, after, test_now_ms() - t0);
    assert_int_equal(after, before);
}

/* With fencing each name keeps one counter; report what it costs. */
static void fenced_names_keep_one_counter_each(void **state)
{
    (void)state;
    long long before = dbsize();
    for (int i = 0; i < 1000; i++) {
        char name[32];
        snprintf(name, sizeof name, "order:%d", i);
        dlock_lock *l = test_lock_new(test_cl, name, 30000, 0, 10, 200);
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        dlock_lock_free(l);
    }
    assert_int_equal(dbsize(), before + 1000);
    char f[64];
    size_t n = test_helper_key(f, sizeof f, "order:999", "fence");
    redisReply *r = test_cmd_bin(&test_srv, "MEMORY USAGE %b", f, n);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    printf("# MEMORY USAGE of the fencing counter of \"order:999\": %lld bytes\n", r->integer);
    freeReplyObject(r);
}

/* ---- least-privilege ACL user (docs/design.md) ------------------------- */

static void acl_user_limited_to_the_prefix_uses_every_mode(void **state)
{
    (void)state;
    char url[128];
    snprintf(url, sizeof url, "redis://locker:pw@127.0.0.1:%d", test_srv.port);
    dlock_client *c = client_with_prefix(url, "lock:");
    /* plain, fenced, with a waiter woken by the release (SUBSCRIBE and the
     * release's PUBLISH on dlock:wake:lock:x) */
    dlock_lock *a = test_lock_new(c, "x", 30000, DLOCK_AUTO_RENEW, 10, 200);
    int arc = dlock_lock_acquire(a, 0);
    if (arc != DLOCK_OK)
        fail_msg("acquire through the ACL user: %s", dlock_lock_errmsg(a));
    assert_true(dlock_lock_fence(a) >= 1);
    assert_int_equal(dlock_lock_extend(a, 0), DLOCK_OK);
    dlock_node_status st;
    assert_int_equal(dlock_client_status(c, "x", 1, &st, NULL), DLOCK_OK);
    assert_int_equal(st.error, DLOCK_OK);
    assert_int_equal(st.held, 1);
    waiter w = {c, "x", -100, DLOCK_FAIR};
    /* the waiter is fair: it exercises the queue and liveness keys too,
     * and the plain holder's release still frees the key for it */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    usleep(300000);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    if (w.rc != DLOCK_OK)
        fail_msg("fair waiter through the ACL user: %s", dlock_strerror(w.rc));
    /* reentrant */
    dlock_lock *r = test_lock_new(c, "y", 30000, DLOCK_REENTRANT, 10, 200);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    /* a plain waiter woken by pub/sub */
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    dlock_lock *b = test_lock_new(c, "x", 30000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 2000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    /* a waiter listed in the waiter list (lock:x NUL wq, under the
     * prefix's key pattern) */
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    waiter pw = {c, "x", -100, 0};
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &pw), 0);
    for (int i = 0; i < 500 && listed("lock:x") < 1; i++)
        usleep(10000);
    assert_int_equal(listed("lock:x"), 1);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(pw.rc, DLOCK_OK);
    /* unfenced: a first try of plain SET NX PX, GET and PTTL */
    dlock_lock *u = test_lock_new(c, "z", 30000, DLOCK_NO_FENCE, 10, 200);
    dlock_lock *u2 = test_lock_new(c, "z", 30000, DLOCK_NO_FENCE, 10, 200);
    assert_int_equal(dlock_lock_acquire(u, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(u2, 0), DLOCK_ENOTACQUIRED);
    assert_true(dlock_lock_holder_ttl_ms(u2) > 0);
    assert_int_equal(dlock_lock_release(u), DLOCK_OK);
    dlock_lock_free(u);
    dlock_lock_free(u2);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(r);
    dlock_client_free(c);

    /* The rules are tight: without the prefix the same user is refused,
     * by a script or by the unfenced first try's SET. */
    dlock_client *bare = client_with_prefix(url, NULL);
    dlock_lock *o = test_lock_new(bare, "x", 30000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(o, 0), DLOCK_EAUTH);
    dlock_lock_free(o);
    o = test_lock_new(bare, "x", 30000, DLOCK_NO_FENCE, 10, 200);
    assert_int_equal(dlock_lock_acquire(o, 0), DLOCK_EAUTH);
    assert_int_equal(dlock_lock_acquire(o, 300), DLOCK_EAUTH);
    dlock_lock_free(o);
    dlock_client_free(bare);
}

/* Shared locks, writers and semaphores through the same user: their
 * scripts also read the sorted set by score (ZSCORE ZCOUNT ZRANGEBYSCORE
 * ZREVRANGEBYSCORE), which the user was once documented without. */
static void must(dlock_lock *l, int rc, int want, const char *what)
{
    if (rc != want)
        fail_msg("%s through the ACL user: %s (wanted %s): %s", what, dlock_errname(rc),
                 dlock_errname(want), dlock_lock_errmsg(l));
}

static void acl_user_limited_to_the_prefix_takes_shares_and_permits(void **state)
{
    (void)state;
    char url[128];
    snprintf(url, sizeof url, "redis://locker:pw@127.0.0.1:%d", test_srv.port);
    dlock_client *c = client_with_prefix(url, "lock:");
    dlock_lock *r1 = test_lock_new(c, "rw", 30000, DLOCK_SHARED | DLOCK_AUTO_RENEW, 10, 200);
    dlock_lock *r2 = test_lock_new(c, "rw", 30000, DLOCK_SHARED, 10, 200);
    dlock_lock *w = test_lock_new(c, "rw", 30000, DLOCK_EXCLUSIVE, 10, 200);
    must(r1, dlock_lock_acquire(r1, 0), DLOCK_OK, "a share");
    must(r2, dlock_lock_acquire(r2, 0), DLOCK_OK, "a second share");
    must(r1, dlock_lock_extend(r1, 0), DLOCK_OK, "a share's extend");
    must(w, dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED, "a writer behind readers");
    must(r1, dlock_lock_release(r1), DLOCK_OK, "a share's release");
    must(r2, dlock_lock_release(r2), DLOCK_OK, "a share's release");
    must(w, dlock_lock_acquire(w, 0), DLOCK_OK, "a writer");
    must(w, dlock_lock_release(w), DLOCK_OK, "a writer's release");

    dlock_lock *p[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_semaphore_new(&p[i], c, "sem", 2, NULL), DLOCK_OK);
    must(p[0], dlock_lock_acquire(p[0], 0), DLOCK_OK, "a permit");
    must(p[1], dlock_lock_acquire(p[1], 0), DLOCK_OK, "a second permit");
    must(p[2], dlock_lock_acquire(p[2], 0), DLOCK_ENOTACQUIRED, "a third of two permits");
    must(p[0], dlock_lock_extend(p[0], 0), DLOCK_OK, "a permit's extend");
    dlock_holders_info info;
    dlock_holder h[4];
    assert_int_equal(dlock_client_holders(c, "sem", 0, &info, h, 4), DLOCK_OK);
    assert_int_equal(info.permits, 2);
    assert_int_equal(info.count, 2);
    for (int i = 0; i < 2; i++)
        must(p[i], dlock_lock_release(p[i]), DLOCK_OK, "a permit's release");
    must(p[2], dlock_lock_acquire(p[2], 0), DLOCK_OK, "a freed permit");
    must(p[2], dlock_lock_release(p[2]), DLOCK_OK, "a permit's release");
    for (int i = 0; i < 3; i++)
        dlock_lock_free(p[i]);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_client_free(c);
}

/* A share refused by the ACL part-way leaves nothing behind: before, the
 * grant's ZADD ran before the refused ZREVRANGEBYSCORE, and the sorted set
 * was left without a TTL, keeping every writer out for good. The same for
 * a reentrant grant's HSET before a refused PEXPIRE. */
/* user's acquire of name (a semaphore of 2 when permits) is refused by the
 * ACL, and the key is not there after it. */
static void refused_and_nothing_written(const char *user, const char *name, unsigned flags,
                                        unsigned permits, const char *what)
{
    char url[128], key[64];
    snprintf(url, sizeof url, "redis://%s:pw@127.0.0.1:%d", user, test_srv.port);
    snprintf(key, sizeof key, "lock:%s", name);
    dlock_client *c = client_with_prefix(url, "lock:");
    dlock_lock *l = NULL;
    if (permits)
        assert_int_equal(dlock_semaphore_new(&l, c, name, permits, NULL), DLOCK_OK);
    else
        l = test_lock_new(c, name, 30000, flags, 10, 200);
    must(l, dlock_lock_acquire(l, 0), DLOCK_EAUTH, what);
    assert_int_equal(test_cmd_int(&test_srv, "EXISTS %s", key), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void a_share_refused_by_the_acl_writes_nothing(void **state)
{
    (void)state;
    refused_and_nothing_written("nozrev", "sh", DLOCK_SHARED, 0, "a share without ZREVRANGEBYSCORE");
    refused_and_nothing_written("nozrev", "sem", 0, 2, "a permit without ZREVRANGEBYSCORE");
    refused_and_nothing_written("nopexpire", "re", DLOCK_REENTRANT, 0,
                                "a reentrant lock without PEXPIRE");
}

/* A user without the waiter list's commands (the least-privilege user
 * before issue 20's wake-one): the scripts' list calls are refused under
 * pcall, so plain and reentrant locks still grant, wait and release; the
 * release wakes every waiter, as before. */
static void acl_user_without_the_waiter_list_commands_still_waits(void **state)
{
    (void)state;
    char url[128];
    snprintf(url, sizeof url, "redis://oldlocker:pw@127.0.0.1:%d", test_srv.port);
    dlock_client *c = client_with_prefix(url, "lock:");
    for (unsigned reentrant = 0; reentrant < 2; reentrant++) {
        unsigned fl = reentrant ? DLOCK_REENTRANT : 0;
        dlock_lock *a = test_lock_new(c, "old", 30000, fl, 10, 200);
        int rc = dlock_lock_acquire(a, 0);
        if (rc != DLOCK_OK)
            fail_msg("acquire through the old ACL user: %s", dlock_lock_errmsg(a));
        /* b waits (subscribed, its attempts try to list it) in a thread:
         * another owner than a's (a reentrant lock of one owner would
         * re-enter) */
        waiter w = {c, "old", -100, fl};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
        usleep(300000);
        assert_int_equal(listed("lock:old"), 0); /* refused: nobody listed */
        assert_int_equal(dlock_lock_release(a), DLOCK_OK);
        assert_int_equal(pthread_join(t, NULL), 0);
        if (w.rc != DLOCK_OK)
            fail_msg("waiter through the old ACL user (reentrant %u): %s", reentrant,
                     dlock_strerror(w.rc));
        dlock_lock_free(a);
    }
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(plain_names_never_share_helper_keys, test_srv_flush),
        cmocka_unit_test_teardown(reentrant_names_never_share_helper_keys, test_srv_flush),
        cmocka_unit_test_teardown(fair_names_never_share_helper_keys, test_srv_flush),
        cmocka_unit_test_teardown(plain_waiter_lists_are_never_shared, test_srv_flush),
        cmocka_unit_test_teardown(key_prefix_applies_to_the_lock_key_and_its_helpers,
                                  test_srv_flush),
        cmocka_unit_test(key_prefix_longer_than_the_maximum_is_refused),
        cmocka_unit_test_teardown(ten_thousand_names_without_fencing_leave_no_key,
                                  test_srv_flush),
        cmocka_unit_test_teardown(fenced_names_keep_one_counter_each, test_srv_flush),
        cmocka_unit_test_teardown(acl_user_limited_to_the_prefix_uses_every_mode, test_srv_flush),
        cmocka_unit_test_teardown(acl_user_limited_to_the_prefix_takes_shares_and_permits,
                                  test_srv_flush),
        cmocka_unit_test_teardown(a_share_refused_by_the_acl_writes_nothing, test_srv_flush),
        cmocka_unit_test_teardown(acl_user_without_the_waiter_list_commands_still_waits,
                                  test_srv_flush),
    };
    return cmocka_run_group_tests(tests, group_setup, test_srv_client_teardown);
}
