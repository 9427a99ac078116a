/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_list() against real redis-servers: every kind listed with
 * its mode, holders, TTL, waiters and fence; helper keys reported with
 * their lock, never as names; the pattern and the key_prefix; a Redlock of
 * three merged by name; bad inputs; a Cluster's masters walked one by
 * one; and a measurement (printed, never
 * asserted) of a listing over 100,000 locks with the commands it cost. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "redis_topology.h"
#include "test_util.h"

#define N 3
static test_redis srv[N];

typedef struct seen {
    char name[64];
    dlock_list_entry e;
} seen;

typedef struct seen_list {
    seen v[64];
    size_t n;
    size_t total;
    size_t stop_after; /* 0: never stop */
} seen_list;

static int collect(void *arg, const dlock_list_entry *e)
{
    seen_list *s = arg;
    s->total++;
    if (s->n < 64) {
        snprintf(s->v[s->n].name, sizeof s->v[s->n].name, "%s", e->name);
        s->v[s->n].e = *e;
        s->n++;
    }
    return s->stop_after && s->total >= s->stop_after;
}

static const dlock_list_entry *find(const seen_list *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i].name, name) == 0)
            return &s->v[i].e;
    return NULL;
}

static int setup(void **state)
{
    (void)state;
    return test_redis_start_many(srv, N, NULL);
}

static int teardown(void **state)
{
    (void)state;
    test_redis_stop_many(srv, N);
    return 0;
}

static dlock_client *client_with_prefix(const test_redis *r, const char *prefix)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.key_prefix = prefix;
    return test_client_for(r, &o);
}

static dlock_lock *held(dlock_client *c, const char *name, unsigned flags)
{
    dlock_lock *l = test_lock_new(c, name, 20000, flags, 10, 50);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    return l;
}

static void every_kind_is_listed_with_its_mode(void **state)
{
    (void)state;
    test_flushall(&srv[0]);
    dlock_client *c = client_with_prefix(&srv[0], "lk:");
    dlock_lock *p = held(c, "plain", 0);
    dlock_lock *r = held(c, "reent", DLOCK_REENTRANT);
    dlock_lock *f = held(c, "fair", DLOCK_FAIR);
    dlock_lock *s1 = held(c, "shared", DLOCK_SHARED);
    dlock_lock *s2 = held(c, "shared", DLOCK_SHARED);
    dlock_lock *m1 = NULL, *m2 = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 20000;
    assert_int_equal(dlock_semaphore_new(&m1, c, "sem", 3, &o), DLOCK_OK);
    assert_int_equal(dlock_semaphore_new(&m2, c, "sem", 3, &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(m1, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(m2, 0), DLOCK_OK);
    /* Two in the fair line, one on the plain lock's waiter list: written
     * as the scripts would, so that nobody has to wait for real. */
    char k[64];
    size_t kl = test_helper_key(k, sizeof k, "lk:fair", "q");
    freeReplyObject(test_cmd_bin(&srv[0], "RPUSH %b t1 t2", k, kl));
    kl = test_helper_key(k, sizeof k, "lk:plain", "wq");
    freeReplyObject(test_cmd_bin(&srv[0], "ZADD %b 1 w1", k, kl));
    /* Not locks of this client: another prefix, and a list (not a lock
     * dlock writes). */
    test_cmd_status(&srv[0], "SET other:plain x PX 20000");
    test_cmd_int(&srv[0], "RPUSH lk:alist a");

    seen_list s = {0};
    assert_int_equal(dlock_client_list(c, NULL, collect, &s), DLOCK_OK);
    assert_int_equal(s.n, 5);
    /* In byte order of the name. */
    assert_string_equal(s.v[0].name, "fair");
    assert_string_equal(s.v[4].name, "shared");
    const dlock_list_entry *e = find(&s, "plain");
    assert_non_null(e);
    assert_int_equal(e->version, DLOCK_LIST_ENTRY_VERSION);
    assert_int_equal(e->state, DLOCK_STATUS_HELD);
    assert_int_equal(e->mode, DLOCK_HOLD_EXCLUSIVE);
    assert_int_equal(e->holders, 1);
    assert_int_equal(e->waiters, 1);
    assert_true(e->ttl_ms > 10000 && e->ttl_ms <= 20000);
    assert_int_equal(e->fence, dlock_lock_fence(p));
    assert_int_equal(e->held_on, 1);
    assert_int_equal(e->nodes, 1);
    e = find(&s, "reent");
    assert_non_null(e);
    assert_int_equal(e->mode, DLOCK_HOLD_OTHER);
    assert_int_equal(e->holders, 1);
    e = find(&s, "fair");
    assert_non_null(e);
    assert_int_equal(e->mode, DLOCK_HOLD_EXCLUSIVE);
    assert_int_equal(e->waiters, 2);
    e = find(&s, "shared");
    assert_non_null(e);
    assert_int_equal(e->mode, DLOCK_HOLD_SHARED);
    assert_int_equal(e->holders, 2);
    e = find(&s, "sem");
    assert_non_null(e);
    assert_int_equal(e->mode, DLOCK_HOLD_SEMAPHORE);
    assert_int_equal(e->permits, 3);
    assert_int_equal(e->holders, 2);
    assert_null(find(&s, "alist"));

    /* Read-only: every lock is still ours, and released as usual. */
    dlock_lock *all[] = {p, r, f, s1, s2, m1, m2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        assert_int_equal(dlock_lock_release(all[i]), DLOCK_OK);
        dlock_lock_free(all[i]);
    }
    s = (seen_list){0};
    assert_int_equal(dlock_client_list(c, "*", collect, &s), DLOCK_OK);
    assert_int_equal(s.n, 0); /* fence keys and waiter lines name no lock */
    dlock_client_free(c);
}

static void pattern_and_prefix_select_names(void **state)
{
    (void)state;
    test_flushall(&srv[0]);
    /* Glob characters in the prefix are literal. */
    dlock_client *c = client_with_prefix(&srv[0], "p*[");
    const char *names[] = {"job:1", "job:2", "job:10", "cron:1"};
    dlock_lock *l[4];
    for (int i = 0; i < 4; i++)
        l[i] = held(c, names[i], 0);
    test_cmd_status(&srv[0], "SET pX[job:3 x PX 20000");

    seen_list s = {0};
    assert_int_equal(dlock_client_list(c, "job:*", collect, &s), DLOCK_OK);
    assert_int_equal(s.n, 3);
    s = (seen_list){0};
    assert_int_equal(dlock_client_list(c, "job:?", collect, &s), DLOCK_OK);
    assert_int_equal(s.n, 2);
    s = (seen_list){0};
    assert_int_equal(dlock_client_list(c, "cron:1", collect, &s), DLOCK_OK);
    assert_int_equal(s.n, 1);
    s = (seen_list){0};
    assert_int_equal(dlock_client_list(c, "none*", collect, &s), DLOCK_OK);
    assert_int_equal(s.n, 0);

    /* The callback stops the listing. */
    s = (seen_list){.stop_after = 2};
    assert_int_equal(dlock_client_list(c, NULL, collect, &s), DLOCK_ECANCELED);
    assert_int_equal(s.total, 2);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        dlock_lock_free(l[i]);
    }
    dlock_client_free(c);
}

static void bad_inputs_are_einval(void **state)
{
    (void)state;
    dlock_client *c = test_client_for(&srv[0], NULL);
    seen_list s = {0};
    assert_int_equal(dlock_client_list(NULL, "*", collect, &s), DLOCK_EINVAL);
    assert_int_equal(dlock_client_list(c, "*", NULL, &s), DLOCK_EINVAL);
    assert_int_equal(dlock_client_list(c, "", collect, &s), DLOCK_EINVAL);
    char *lng = malloc(DLOCK_NAME_MAX + 2);
    assert_non_null(lng);
    memset(lng, 'a', DLOCK_NAME_MAX + 1);
    lng[DLOCK_NAME_MAX + 1] = '\0';
    assert_int_equal(dlock_client_list(c, lng, collect, &s), DLOCK_EINVAL);
    free(lng);
    assert_int_equal(s.total, 0);
    dlock_client_free(c);
}

static void redlock_of_three_merges_by_name(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++)
        test_flushall(&srv[i]);
    dlock_client *c = test_client_timeouts(srv, N, 300, 300);
    dlock_lock *l = held(c, "rl:a", 0);
    test_cmd_status(&srv[0], "SET rl:b someone PX 20000"); /* a minority */
    seen_list s = {0};
    assert_int_equal(dlock_client_list(c, "rl:*", collect, &s), DLOCK_OK);
    assert_int_equal(s.n, 2);
    const dlock_list_entry *e = find(&s, "rl:a");
    assert_non_null(e);
    assert_int_equal(e->state, DLOCK_STATUS_HELD);
    assert_int_equal(e->held_on, 3);
    assert_int_equal(e->nodes, 3);
    assert_int_equal(e->quorum, 2);
    e = find(&s, "rl:b");
    assert_non_null(e);
    assert_int_equal(e->state, DLOCK_STATUS_PARTIAL);
    assert_int_equal(e->held_on, 1);

    /* One node silent: the other two still make a majority. */
    test_redis_pause(&srv[2]);
    s = (seen_list){0};
    assert_int_equal(dlock_client_list(c, "rl:*", collect, &s), DLOCK_OK);
    assert_int_equal(find(&s, "rl:a")->held_on, 2);
    /* Two silent: too few to tell, and nothing is reported. */
    test_redis_pause(&srv[1]);
    s = (seen_list){0};
    assert_int_equal(dlock_client_list(c, "rl:*", collect, &s), DLOCK_ENOQUORUM);
    assert_int_equal(s.total, 0);
    test_redis_resume(&srv[1]);
    test_redis_resume(&srv[2]);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static int count_only(void *arg, const dlock_list_entry *e)
{
    (void)e;
    ++*(size_t *)arg;
    return 0;
}

/* One value of INFO commandstats' "cmdstat_NAME:calls=N": 0 if absent. */
static long long calls_of(const char *info, const char *cmd)
{
    char pat[64];
    snprintf(pat, sizeof pat, "cmdstat_%s:calls=", cmd);
    const char *p = strstr(info, pat);
    return p ? atoll(p + strlen(pat)) : 0;
}

#define BIG 100000

/* A measurement, not an assertion (speed belongs to benchmarks): 100,000
 * plain locks, each with its fencing counter (200,000 keys). */
static void hundred_thousand_locks_measured(void **state)
{
    (void)state;
    test_flushall(&srv[0]);
    redisContext *a = test_redis_admin(&srv[0]);
    assert_non_null(a);
    char key[64];
    for (int i = 0; i < BIG; i++) {
        int n = snprintf(key, sizeof key, "big:%06d", i);
        redisAppendCommand(a, "SET %b tok PX 600000", key, (size_t)n);
        key[n] = '\0';
        memcpy(key + n + 1, "fence", 6);
        redisAppendCommand(a, "SET %b 7", key, (size_t)n + 6);
    }
    for (int i = 0; i < 2 * BIG; i++) {
        redisReply *r = NULL;
        assert_int_equal(redisGetReply(a, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
    redisFree(a);
    freeReplyObject(test_cmd(&srv[0], "CONFIG RESETSTAT"));
    dlock_client *c = test_client_for(&srv[0], NULL);
    size_t n = 0;
    int64_t t0 = test_now_us();
    assert_int_equal(dlock_client_list(c, "big:*", count_only, &n), DLOCK_OK);
    int64_t us = test_now_us() - t0;
    assert_int_equal(n, BIG);
    redisReply *info = test_cmd(&srv[0], "INFO commandstats");
    assert_true(info->type == REDIS_REPLY_STRING);
    const char *s = info->str;
    printf("list over %d locks (%d keys): %.3f s; commands: scan %lld, evalsha %lld, "
           "eval %lld, zcard %lld, llen %lld\n",
           BIG, 2 * BIG, (double)us / 1e6, calls_of(s, "scan"), calls_of(s, "evalsha"),
           calls_of(s, "eval"), calls_of(s, "zcard"), calls_of(s, "llen"));
    freeReplyObject(info);
    dlock_client_free(c);
    test_flushall(&srv[0]);
}

/* A Cluster: every master is walked (the names land on different
 * masters by their slots), each with its fence and mode; a hash-tagged
 * name's helper keys stay with it and are never names. */
static void a_cluster_lists_every_master(void **state)
{
    (void)state;
    static test_cluster cluster;
    assert_int_equal(test_cluster_start(&cluster), 0);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = 1;
    o.key_prefix = "cl:";
    dlock_client *c = test_client_new(cluster.urls, TEST_CLUSTER_NODES, &o);
    enum { NAMES = 12 };
    dlock_lock *h[NAMES];
    char name[NAMES][16];
    for (int i = 0; i < NAMES; i++) {
        snprintf(name[i], sizeof name[i], i == 0 ? "{t}n%02d" : "n%02d", i);
        h[i] = held(c, name[i], i % 3 == 1 ? DLOCK_REENTRANT : 0);
    }
    dlock_lock *s1 = held(c, "shr", DLOCK_SHARED), *s2 = held(c, "shr", DLOCK_SHARED);
    seen_list s = {0};
    assert_int_equal(dlock_client_list(c, NULL, collect, &s), DLOCK_OK);
    assert_int_equal(s.n, NAMES + 1);
    for (int i = 0; i < NAMES; i++) {
        const dlock_list_entry *e = find(&s, name[i]);
        if (!e)
            fail_msg("%s not listed", name[i]);
        assert_int_equal(e->state, DLOCK_STATUS_HELD);
        assert_int_equal(e->mode, i % 3 == 1 ? DLOCK_HOLD_OTHER : DLOCK_HOLD_EXCLUSIVE);
        assert_int_equal(e->holders, 1);
        assert_int_equal(e->fence, dlock_lock_fence(h[i]));
        assert_int_equal(e->nodes, 1);
    }
    const dlock_list_entry *e = find(&s, "shr");
    assert_non_null(e);
    assert_int_equal(e->mode, DLOCK_HOLD_SHARED);
    assert_int_equal(e->holders, 2);
    /* Names on more than one master (12 names hash to several of 3). */
    int masters[TEST_CLUSTER_NODES] = {0}, n_masters = 0;
    for (int i = 0; i < NAMES; i++) {
        char key[256];
        snprintf(key, sizeof key, "cl:%s", name[i]);
        int m = test_cluster_master_of(&cluster, test_cluster_keyslot(&cluster, key));
        if (m >= 0 && m < TEST_CLUSTER_NODES && !masters[m]++)
            n_masters++;
    }
    assert_true(n_masters >= 2);
    seen_list p = {0};
    assert_int_equal(dlock_client_list(c, "n0*", collect, &p), DLOCK_OK);
    assert_int_equal(p.n, 9); /* n01..n09 */
    for (int i = 0; i < NAMES; i++)
        dlock_lock_free(h[i]);
    dlock_lock_free(s1);
    dlock_lock_free(s2);
    dlock_client_free(c);
    test_cluster_stop(&cluster);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_kind_is_listed_with_its_mode),
        cmocka_unit_test(pattern_and_prefix_select_names),
        cmocka_unit_test(bad_inputs_are_einval),
        cmocka_unit_test(redlock_of_three_merges_by_name),
        cmocka_unit_test(hundred_thousand_locks_measured),
        cmocka_unit_test(a_cluster_lists_every_master),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
