/* SPDX-License-Identifier: BSD-3-Clause */
/* The single-node lock against one real redis-server: exclusion, waiting,
 * ownership, expiry, extend, fencing, script-cache loss, wrong types and
 * interop with plain SET NX PX locks. (Argument checks, NULL handles,
 * status, unix sockets and database selection: test_lock_api.c.) */
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
#include "test_handles.h"
#include "test_util.h"

/* Every test gets a client `cl`; handles and clients made through the
 * helpers below are freed after the test, and the test's keys with them. */
static dlock_client *cl;

static dlock_client *client_for(const char *url)
{
    return test_handles_add_client(test_client_new(&url, 1, NULL));
}

static dlock_lock *lock_for(dlock_client *c, const char *name, int64_t ttl_ms)
{
    return test_handles_add(test_lock_new(c, name, ttl_ms, 0, 5, 20));
}

static int setup(void **state)
{
    (void)state;
    cl = client_for(test_srv.url);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_handles_free_all();
    return test_flushall(&test_srv);
}

static void two_clients_exclude_each_other(void **state)
{
    (void)state;
    dlock_client *c2 = client_for(test_srv.url);
    dlock_lock *a = lock_for(cl, "basic:excl", 10000), *b = lock_for(c2, "basic:excl", 10000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_hold_count(a), 1);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    assert_non_null(strstr(dlock_lock_errmsg(b), "basic:excl"));
    assert_true(dlock_lock_holder_ttl_ms(b) > 0 && dlock_lock_holder_ttl_ms(b) <= 10000);
    assert_int_equal(dlock_lock_state_get(b), DLOCK_STATE_UNLOCKED);
    assert_null(dlock_lock_token(b));
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_string_equal(dlock_lock_errmsg(a), "");
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
}

static void waiting_acquire_times_out_while_held(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:timeout", 10000), *b = lock_for(cl, "basic:timeout", 10000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(b, 300), DLOCK_ETIMEDOUT);
    int64_t took = test_now_ms() - t0;
    assert_true(took >= 250 && took < 3000);
    assert_true(dlock_lock_errmsg(b)[0] != '\0');
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
}

static void *release_later(void *arg)
{
    test_sleep_ms(200);
    return (void *)(intptr_t)dlock_lock_release(arg);
}

/* a holds `name`; b waits for it while a releases 200 ms later. */
static void waiter_gets_it_when_the_holder_releases(dlock_lock *a, dlock_lock *b, const char *name)
{
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, a), 0);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(b, 10000), DLOCK_OK);
    int64_t took = test_now_ms() - t0;
    void *rel;
    assert_int_equal(pthread_join(t, &rel), 0);
    assert_int_equal((intptr_t)rel, DLOCK_OK);
    assert_true(took >= 150 && took < 9000); /* well before the 30 s TTL */
    test_assert_key_value(&test_srv, name, dlock_lock_token(b));
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
}

static void waiting_acquire_succeeds_when_holder_releases(void **state)
{
    (void)state;
    waiter_gets_it_when_the_holder_releases(lock_for(cl, "basic:handover", 30000),
                                            lock_for(cl, "basic:handover", 30000),
                                            "basic:handover");
}

static void release_by_non_owner_leaves_lock_intact(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:nonowner", 10000), *b = lock_for(cl, "basic:nonowner", 10000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char token[64];
    snprintf(token, sizeof token, "%s", dlock_lock_token(a));
    assert_int_equal(dlock_lock_adopt(b, "0123456789abcdef0123456789abcdef"), DLOCK_OK);
    assert_int_equal(dlock_lock_validity_ms(b), -1); /* unknown after adopt */
    assert_int_equal(dlock_lock_release(b), DLOCK_ENOTOWNER);
    assert_true(dlock_lock_errmsg(b)[0] != '\0');
    assert_int_equal(dlock_lock_state_get(b), DLOCK_STATE_UNLOCKED);
    test_assert_key_value(&test_srv, "basic:nonowner", token);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
}

static void adopting_the_owner_token_allows_extend_and_release(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:adopt", 5000), *b = lock_for(cl, "basic:adopt", 5000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_adopt(b, dlock_lock_token(a)), DLOCK_OK);
    assert_string_equal(dlock_lock_token(b), dlock_lock_token(a));
    assert_int_equal(dlock_lock_extend(b, 60000), DLOCK_OK);
    assert_true(dlock_lock_validity_ms(b) > 50000); /* known after an extend */
    assert_true(test_key_pttl(&test_srv, "basic:adopt") > 50000);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "basic:adopt"), 0);
    assert_int_equal(dlock_lock_release(a), DLOCK_EEXPIRED);
}

static void freeing_a_holding_handle_releases_the_lock(void **state)
{
    (void)state;
    dlock_client *c2 = client_for(test_srv.url);
    dlock_lock *a = NULL;
    assert_int_equal(dlock_lock_new(&a, c2, "basic:free", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    dlock_lock_free(a);
    assert_int_equal(test_key_exists(&test_srv, "basic:free"), 0);
}

static void extend_by_non_owner_leaves_lock_intact(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:nonowner-ext", 5000), *b = lock_for(cl, "basic:nonowner-ext", 5000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char token[64];
    snprintf(token, sizeof token, "%s", dlock_lock_token(a));
    assert_int_equal(dlock_lock_adopt(b, "not-the-owner"), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(b, 600000), DLOCK_ENOTOWNER);
    assert_int_equal(dlock_lock_state_get(b), DLOCK_STATE_UNLOCKED);
    test_assert_key_value(&test_srv, "basic:nonowner-ext", token);
    long long pttl = test_key_pttl(&test_srv, "basic:nonowner-ext");
    assert_true(pttl > 0 && pttl <= 5000);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
}

static void release_after_expiry_reports_expired(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:expiry", 200), *b = lock_for(cl, "basic:expiry", 10000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    test_sleep_ms(400);
    assert_int_equal(dlock_lock_validity_ms(a), 0);
    assert_int_equal(dlock_lock_release(a), DLOCK_EEXPIRED);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
}

static void release_by_expired_holder_after_takeover_leaves_new_lock_intact(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:takeover", 200), *b = lock_for(cl, "basic:takeover", 10000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    test_sleep_ms(400);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_ENOTOWNER);
    test_assert_key_value(&test_srv, "basic:takeover", dlock_lock_token(b));
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
}

static void extend_after_expiry_reports_expired(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:expiry-ext", 200);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    test_sleep_ms(400);
    /* The lease ended on our clock and the key is gone on the server: the
     * answer is "expired", not a node error. */
    int rc = dlock_lock_extend(a, 10000);
    if (rc != DLOCK_EEXPIRED)
        fail_msg("extend after expiry gave %s: %s", dlock_errname(rc), dlock_lock_errmsg(a));
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_UNLOCKED);
    assert_int_equal(test_key_exists(&test_srv, "basic:expiry-ext"), 0); /* not revived */
}

static void extend_sets_the_new_ttl_on_the_server(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:extend", 5000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(a, 120000), DLOCK_OK);
    long long pttl = test_key_pttl(&test_srv, "basic:extend");
    assert_true(pttl > 110000 && pttl <= 120000);
    int64_t v = dlock_lock_validity_ms(a);
    assert_true(v > 110000 && v <= 120000);
    /* 0 means the handle's own TTL. */
    assert_int_equal(dlock_lock_extend(a, 0), DLOCK_OK);
    pttl = test_key_pttl(&test_srv, "basic:extend");
    assert_true(pttl > 0 && pttl <= 5000);
    assert_true(dlock_lock_validity_ms(a) <= 5000);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
}

static void validity_is_within_ttl_and_decreases(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:validity", 2000);
    assert_int_equal(dlock_lock_validity_ms(a), 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    int64_t v1 = dlock_lock_validity_ms(a);
    assert_true(v1 > 0 && v1 <= 2000);
    test_sleep_ms(50);
    int64_t v2 = dlock_lock_validity_ms(a);
    assert_true(v2 < v1 && v2 > 0);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_validity_ms(a), 0);
}

static void fencing_tokens_strictly_increase_across_grants(void **state)
{
    (void)state;
    dlock_client *c2 = client_for(test_srv.url);
    dlock_lock *l[2] = {lock_for(cl, "basic:fence", 10000), lock_for(c2, "basic:fence", 10000)};
    uint64_t last = 0;
    for (int i = 0; i < 10; i++) {
        dlock_lock *h = l[i % 2];
        assert_int_equal(dlock_lock_acquire(h, 0), DLOCK_OK);
        uint64_t f = dlock_lock_fence(h);
        if (f <= last)
            fail_msg("grant %d got fence %llu after %llu", i, (unsigned long long)f,
                     (unsigned long long)last);
        last = f;
        assert_int_equal(dlock_lock_release(h), DLOCK_OK);
        assert_int_equal(dlock_lock_fence(h), 0);
    }
}

static void release_or_extend_before_acquire_is_not_held(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:notheld", 10000);
    assert_int_equal(dlock_lock_release(a), DLOCK_ENOTHELD);
    assert_non_null(strstr(dlock_lock_errmsg(a), "basic:notheld"));
    assert_int_equal(dlock_lock_extend(a, 1000), DLOCK_ENOTHELD);
    assert_null(dlock_lock_token(a));
    assert_int_equal(dlock_lock_fence(a), 0);
    assert_int_equal(dlock_lock_hold_count(a), 0);
    assert_string_equal(dlock_lock_name(a), "basic:notheld");
    /* After a release the handle holds nothing again. */
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_ENOTHELD);
}

static void second_acquire_on_a_non_reentrant_handle_is_invalid(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:twice", 10000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char token[64];
    snprintf(token, sizeof token, "%s", dlock_lock_token(a));
    uint64_t fence = dlock_lock_fence(a);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_acquire(a, 1000), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_string_equal(dlock_lock_token(a), token);
    assert_int_equal(dlock_lock_fence(a), fence);
    test_assert_key_value(&test_srv, "basic:twice", token);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
}

static void release_after_script_flush_still_succeeds(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:noscript", 10000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    freeReplyObject(test_cmd(&test_srv, "SCRIPT FLUSH"));
    assert_int_equal(dlock_lock_extend(a, 20000), DLOCK_OK);
    freeReplyObject(test_cmd(&test_srv, "SCRIPT FLUSH"));
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "basic:noscript"), 0);
    freeReplyObject(test_cmd(&test_srv, "SCRIPT FLUSH"));
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
}

static void key_of_another_type_gives_wrongtype_and_stays_untouched(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:hash", 10000);
    freeReplyObject(test_cmd(&test_srv, "HSET %s field value", "basic:hash"));
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_EWRONGTYPE);
    assert_true(dlock_lock_errmsg(a)[0] != '\0');
    /* Not worth waiting for: a wait ends at once. */
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(a, 20000), DLOCK_EWRONGTYPE);
    assert_true(test_now_ms() - t0 < 10000);
    redisReply *r = test_cmd(&test_srv, "HGET %s field", "basic:hash");
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "value");
    freeReplyObject(r);
    assert_int_equal(test_cmd_int(&test_srv, "HLEN %s", "basic:hash"), 1);
    assert_int_equal(test_key_pttl(&test_srv, "basic:hash"), -1);
}

static void plain_mode_stores_a_string_token_with_a_ttl(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:plain", 30000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(strlen(dlock_lock_token(a)), DLOCK_TOKEN_HEX_LEN);
    test_assert_key_value(&test_srv, "basic:plain", dlock_lock_token(a));
    long long pttl = test_key_pttl(&test_srv, "basic:plain");
    assert_true(pttl > 0 && pttl <= 30000);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
}

static void key_set_nx_px_by_another_library_excludes_dlock(void **state)
{
    (void)state;
    dlock_lock *a = lock_for(cl, "basic:foreign", 10000);
    test_cmd_status(&test_srv, "SET %s redsync-token NX PX 10000", "basic:foreign");
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_ENOTACQUIRED);
    assert_true(dlock_lock_holder_ttl_ms(a) > 0 && dlock_lock_holder_ttl_ms(a) <= 10000);
    /* Adopting the other library's token lets dlock release it. */
    assert_int_equal(dlock_lock_adopt(a, "redsync-token"), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "basic:foreign"), 0);
}

/* ---- DLOCK_NO_FENCE: the first try is SET NX PX, no script (issue 20) --- */

static dlock_lock *unfenced_for(dlock_client *c, const char *name, int64_t ttl_ms)
{
    return test_handles_add(test_lock_new(c, name, ttl_ms, DLOCK_NO_FENCE, 5, 20));
}

/* The unfenced first try has two forms: SET ... NX PX ttl GET and PTTL,
 * when the handshake's INFO said Redis 7; SET NX PX, GET and PTTL when the
 * version is not known. FORMS[0] gets the first (the default user, once a
 * reply has come: the INFO is read before it), FORMS[1] the second (a user
 * without INFO). */
enum { SET_GET, SET_THEN_GET, FORMS };
static const char *const form_name[FORMS] = {"SET NX GET + PTTL", "SET NX + GET + PTTL"};

static dlock_client *unfenced_client(int form)
{
    char url[sizeof test_srv.url];
    snprintf(url, sizeof url, "%s", test_srv.url);
    if (form == SET_THEN_GET) {
        test_cmd_status(&test_srv, "ACL SETUSER noinfo on >pw ~* &* +@all -info");
        snprintf(url, sizeof url, "redis://noinfo:pw@127.0.0.1:%d", test_srv.port);
    }
    dlock_client *c = client_for(url);
    dlock_lock *w = unfenced_for(c, "basic:nf-warm-up", 1000);
    if (dlock_lock_acquire(w, 0) != DLOCK_OK || dlock_lock_release(w) != DLOCK_OK)
        fail_msg("warm-up: %s", dlock_lock_errmsg(w));
    return c;
}

/* Calls of one command the server has served (INFO commandstats). */
static long long calls_of(const char *cmd)
{
    char *info = test_cmd_str(&test_srv, "INFO commandstats");
    char stem[64];
    snprintf(stem, sizeof stem, "cmdstat_%s:calls=", cmd);
    const char *p = strstr(info, stem);
    long long n = p ? strtoll(p + strlen(stem), NULL, 10) : 0;
    free(info);
    return n;
}

/* The test server's major version (INFO server). */
static long server_major(void)
{
    char *info = test_cmd_str(&test_srv, "INFO server");
    const char *v = strstr(info, "redis_version:");
    long major = v ? strtol(v + 14, NULL, 10) : 0;
    free(info);
    return major;
}

/* Run a test body once per form, each on clean keys. */
static void in_each_form(void (*body)(int form))
{
    for (int form = 0; form < FORMS; form++) {
        print_message("%s\n", form_name[form]);
        body(form);
        test_flushall(&test_srv);
    }
}

static void unfenced_first_try_in(int form)
{
    dlock_lock *a = unfenced_for(unfenced_client(form), "basic:nf", 30000);
    dlock_lock *b = unfenced_for(unfenced_client(form), "basic:nf", 30000);
    long long scripts = test_script_calls(&test_srv), sets = calls_of("set");
    /* GETs per try: none after SET ... GET (Redis 7 and later). */
    long long gets = calls_of("get"), per_try = form == SET_GET && server_major() >= 7 ? 0 : 1;
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(test_script_calls(&test_srv), scripts);
    assert_int_equal(calls_of("set"), sets + 1);
    assert_int_equal(calls_of("get"), gets + per_try);
    assert_int_equal(dlock_lock_fence(a), 0);
    test_assert_key_value(&test_srv, "basic:nf", dlock_lock_token(a));
    long long pttl = test_key_pttl(&test_srv, "basic:nf");
    assert_true(pttl > 0 && pttl <= 30000);
    /* Busy: the holder's TTL comes from the PTTL behind the SET; the key
     * keeps the holder's token. */
    gets = calls_of("get"); /* the test's own GET counts too */
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(test_script_calls(&test_srv), scripts);
    assert_true(dlock_lock_holder_ttl_ms(b) > 0 && dlock_lock_holder_ttl_ms(b) <= 30000);
    assert_non_null(strstr(dlock_lock_errmsg(b), "held by another owner"));
    assert_int_equal(calls_of("get"), gets + per_try);
    test_assert_key_value(&test_srv, "basic:nf", dlock_lock_token(a));
    char fk[64];
    size_t fk_len = test_helper_key(fk, sizeof fk, "basic:nf", "fence");
    redisReply *r = test_cmd_bin(&test_srv, "EXISTS %b", fk, fk_len);
    assert_int_equal(r->integer, 0); /* no fencing counter */
    freeReplyObject(r);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "basic:nf"), 0);
}

static void unfenced_first_try_runs_no_script(void **state)
{
    (void)state;
    in_each_form(unfenced_first_try_in);
}

/* The waiter list of `name` (KEY NUL "wq"): its length. */
static long long listed(const char *name)
{
    char q[128];
    size_t n = test_helper_key(q, sizeof q, name, "wq");
    redisReply *r = test_cmd_bin(&test_srv, "ZCARD %b", q, n);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

typedef struct {
    dlock_lock *holder;
    const char *name;
    int seen_listed; /* the waiter was in the waiter list before the release */
    int rc;
} release_when_listed;

static void *release_once_listed(void *arg)
{
    release_when_listed *w = arg;
    for (int i = 0; i < 300 && !w->seen_listed; i++) {
        w->seen_listed = listed(w->name) > 0;
        test_sleep_ms(10);
    }
    w->rc = dlock_lock_release(w->holder);
    return NULL;
}

/* Only the first try is SET NX PX: a waiting acquire's later tries go
 * through acquire.lua, which puts it in the waiter list. */
static void unfenced_waiter_is_listed_and_gets_the_lock_on_release(void **state)
{
    (void)state;
    dlock_client *c2 = client_for(test_srv.url);
    dlock_lock *a = unfenced_for(cl, "basic:nfwait", 30000);
    dlock_lock *b = unfenced_for(c2, "basic:nfwait", 30000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    release_when_listed w = {a, "basic:nfwait", 0, -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_once_listed, &w), 0);
    assert_int_equal(dlock_lock_acquire(b, 10000), DLOCK_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(w.seen_listed);
    test_assert_key_value(&test_srv, "basic:nfwait", dlock_lock_token(b));
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
}

typedef struct {
    dlock_lock *waiter;
    int64_t wait_ms;
    int rc;
} wait_arg;

static void *wait_for(void *arg)
{
    wait_arg *w = arg;
    w->rc = dlock_lock_acquire(w->waiter, w->wait_ms);
    return NULL;
}

static int is_listed(void *name)
{
    return listed(name) > 0;
}

/* A waiter that gives up, at its deadline or on a cancel (during a sleep
 * or during a try: the cancel comes as soon as the list shows it), leaves
 * the waiter list before its acquire returns (wq_leave.lua, a request on
 * the wait's loop), so no release wakes it in vain. */
static void a_waiter_that_gives_up_leaves_the_waiter_list(void **state)
{
    (void)state;
    const char *name = "basic:leave";
    dlock_lock *a = lock_for(cl, name, 30000), *b = lock_for(cl, name, 30000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    for (int cancel = 0; cancel < 2; cancel++) {
        wait_arg w = {b, cancel ? 10000 : 600, -1};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, wait_for, &w), 0);
        assert_true(test_wait_until(is_listed, (void *)name, 3000, 5));
        if (cancel)
            dlock_lock_cancel(b);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(w.rc, cancel ? DLOCK_ECANCELED : DLOCK_ETIMEDOUT);
        long long left_behind = listed(name);
        if (left_behind)
            print_message("%s: %lld entries left in the waiter list\n",
                          cancel ? "cancelled" : "timed out", left_behind);
        assert_int_equal(left_behind, 0);
    }
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
}

/* Over maxmemory a busy lock is busy (a waiter waits) and a free one is
 * refused, fenced or not: the unfenced SET is refused before NX is looked
 * at, and the GET (or, after SET ... GET, the PTTL) behind it finds the
 * holder, as acquire.lua's GET does. */
static void over_maxmemory_a_busy_lock_is_busy_and_a_free_one_refused(void **state)
{
    (void)state;
    for (int i = 0; i < 1 + FORMS; i++) {
        static const char *const names[1 + FORMS] = {"basic:oom", "basic:oom-nf",
                                                     "basic:oom-nf-get"};
        const char *name = names[i];
        dlock_client *c = i ? unfenced_client(i - 1) : cl;
        unsigned flags = i ? DLOCK_NO_FENCE : 0;
        dlock_lock *a = test_handles_add(test_lock_new(c, name, 30000, flags, 5, 20));
        dlock_lock *b = test_handles_add(test_lock_new(c, name, 30000, flags, 5, 20));
        assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
        test_cmd_status(&test_srv, "CONFIG SET maxmemory 1");
        int busy = dlock_lock_acquire(b, 0), waited = dlock_lock_acquire(b, 300);
        int64_t holder_ttl = dlock_lock_holder_ttl_ms(b);
        int released = dlock_lock_release(a), free_lock = dlock_lock_acquire(b, 0);
        test_cmd_status(&test_srv, "CONFIG SET maxmemory 0");
        print_message("%s: busy %s, waiting %s, free %s\n", name, dlock_errname(busy),
                      dlock_errname(waited), dlock_errname(free_lock));
        assert_int_equal(busy, DLOCK_ENOTACQUIRED);
        assert_int_equal(waited, DLOCK_ETIMEDOUT);
        assert_true(holder_ttl > 0);
        assert_int_equal(released, DLOCK_OK);
        assert_int_equal(free_lock, DLOCK_EREFUSED);
        assert_int_equal(test_key_exists(&test_srv, name), 0);
        assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    }
}

static void unfenced_wrongtype_in(int form)
{
    dlock_lock *a = unfenced_for(unfenced_client(form), "basic:nflist", 10000);
    freeReplyObject(test_cmd(&test_srv, "RPUSH %s x y", "basic:nflist"));
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_EWRONGTYPE);
    assert_non_null(strstr(dlock_lock_errmsg(a), "WRONGTYPE"));
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(a, 20000), DLOCK_EWRONGTYPE);
    assert_true(test_now_ms() - t0 < 10000);
    assert_int_equal(test_cmd_int(&test_srv, "LLEN %s", "basic:nflist"), 2);
    assert_int_equal(test_key_pttl(&test_srv, "basic:nflist"), -1);
}

static void unfenced_foreign_in(int form)
{
    dlock_lock *a = unfenced_for(unfenced_client(form), "basic:nfforeign", 10000);
    test_cmd_status(&test_srv, "SET %s redsync-token NX PX 10000", "basic:nfforeign");
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_ENOTACQUIRED);
    assert_true(dlock_lock_holder_ttl_ms(a) > 0 && dlock_lock_holder_ttl_ms(a) <= 10000);
    test_assert_key_value(&test_srv, "basic:nfforeign", "redsync-token");
    freeReplyObject(test_cmd(&test_srv, "DEL %s", "basic:nfforeign"));
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    redisReply *r = test_cmd(&test_srv, "SET %s other NX PX 10000", "basic:nfforeign");
    assert_int_equal(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
}

static void unfenced_key_of_another_type_gives_wrongtype_and_stays_untouched(void **state)
{
    (void)state;
    in_each_form(unfenced_wrongtype_in);
}

static void unfenced_excludes_and_is_excluded_by_another_library(void **state)
{
    (void)state;
    in_each_form(unfenced_foreign_in);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(two_clients_exclude_each_other),
        T(waiting_acquire_times_out_while_held),
        T(waiting_acquire_succeeds_when_holder_releases),
        T(release_by_non_owner_leaves_lock_intact),
        T(adopting_the_owner_token_allows_extend_and_release),
        T(freeing_a_holding_handle_releases_the_lock),
        T(extend_by_non_owner_leaves_lock_intact),
        T(release_after_expiry_reports_expired),
        T(release_by_expired_holder_after_takeover_leaves_new_lock_intact),
        T(extend_after_expiry_reports_expired),
        T(extend_sets_the_new_ttl_on_the_server),
        T(validity_is_within_ttl_and_decreases),
        T(fencing_tokens_strictly_increase_across_grants),
        T(release_or_extend_before_acquire_is_not_held),
        T(second_acquire_on_a_non_reentrant_handle_is_invalid),
        T(release_after_script_flush_still_succeeds),
        T(key_of_another_type_gives_wrongtype_and_stays_untouched),
        T(plain_mode_stores_a_string_token_with_a_ttl),
        T(key_set_nx_px_by_another_library_excludes_dlock),
        T(unfenced_first_try_runs_no_script),
        T(unfenced_waiter_is_listed_and_gets_the_lock_on_release),
        T(a_waiter_that_gives_up_leaves_the_waiter_list),
        T(over_maxmemory_a_busy_lock_is_busy_and_a_free_one_refused),
        T(unfenced_key_of_another_type_gives_wrongtype_and_stays_untouched),
        T(unfenced_excludes_and_is_excluded_by_another_library),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
