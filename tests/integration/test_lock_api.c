/* SPDX-License-Identifier: BSD-3-Clause */
/* The lock API's edges against one real redis-server: argument checks of
 * every lock function, NULL handles, dlock_client_status(), unix-socket URLs
 * and database selection. (The lock's behaviour is in test_lock_basic.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "redis_server.h"
#include "test_util.h"

/* dlock_lock_new() with default options changed by the caller. */
static int new_with(dlock_lock_options o)
{
    dlock_lock *l = (dlock_lock *)(uintptr_t)1;
    int rc = dlock_lock_new(&l, test_cl, "api:opts", &o);
    if (rc == DLOCK_OK)
        dlock_lock_free(l);
    else
        assert_null(l);
    return rc;
}

static void lock_new_rejects_bad_arguments(void **state)
{
    (void)state;
    dlock_lock *l = (dlock_lock *)(uintptr_t)1;
    assert_int_equal(dlock_lock_new(NULL, test_cl, "x", NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new(&l, NULL, "x", NULL), DLOCK_EINVAL);
    assert_null(l);
    assert_int_equal(dlock_lock_new(&l, test_cl, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new(&l, test_cl, "", NULL), DLOCK_EINVAL);
    char *name = malloc(DLOCK_NAME_MAX + 2);
    assert_non_null(name);
    memset(name, 'n', DLOCK_NAME_MAX + 1);
    name[DLOCK_NAME_MAX + 1] = '\0'; /* 65537 bytes */
    assert_int_equal(dlock_lock_new(&l, test_cl, name, NULL), DLOCK_EINVAL);
    assert_null(l);
    name[DLOCK_NAME_MAX] = '\0'; /* 65536 bytes: the longest allowed */
    assert_int_equal(dlock_lock_new(&l, test_cl, name, NULL), DLOCK_OK);
    assert_int_equal(strlen(dlock_lock_name(l)), DLOCK_NAME_MAX);
    dlock_lock_free(l);
    free(name);
}

static void lock_new_rejects_bad_options(void **state)
{
    (void)state;
    const dlock_lock_options d = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock_options o;
    o = d, o.ttl_ms = 0;
    assert_int_equal(new_with(o), DLOCK_EINVAL);
    o = d, o.ttl_ms = -1;
    assert_int_equal(new_with(o), DLOCK_EINVAL);
    o = d, o.ttl_ms = DLOCK_TTL_MAX_MS + 1;
    assert_int_equal(new_with(o), DLOCK_EINVAL);
    o = d, o.flags = 1u << 10;
    assert_int_equal(new_with(o), DLOCK_EINVAL);
    o = d, o.version = DLOCK_LOCK_OPTIONS_VERSION + 1;
    assert_int_equal(new_with(o), DLOCK_EINVAL);
    o = d, o.version = 0;
    assert_int_equal(new_with(o), DLOCK_EINVAL);
    o = d, o.retry_min_ms = 0;
    assert_int_equal(new_with(o), DLOCK_EINVAL);
    o = d, o.retry_max_ms = o.retry_min_ms - 1;
    assert_int_equal(new_with(o), DLOCK_EINVAL);
    o = d, o.retry_max_ms = 60001;
    assert_int_equal(new_with(o), DLOCK_EINVAL);
    o = d, o.renew_interval_ms = -1;
    assert_int_equal(new_with(o), DLOCK_EINVAL);
    o = d, o.renew_interval_ms = o.ttl_ms;
    assert_int_equal(new_with(o), DLOCK_EINVAL);
    /* The edges that are allowed. */
    o = d, o.ttl_ms = 1;
    assert_int_equal(new_with(o), DLOCK_OK);
    o = d, o.ttl_ms = DLOCK_TTL_MAX_MS;
    assert_int_equal(new_with(o), DLOCK_OK);
    o = d, o.retry_min_ms = 1, o.retry_max_ms = 1;
    assert_int_equal(new_with(o), DLOCK_OK);
    o = d, o.flags = DLOCK_REENTRANT | DLOCK_NO_FENCE;
    assert_int_equal(new_with(o), DLOCK_OK);
}

static void acquire_rejects_negative_waits_other_than_forever(void **state)
{
    (void)state;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, test_cl, "api:wait", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, -5), DLOCK_EINVAL);
    assert_true(dlock_lock_errmsg(l)[0] != '\0');
    assert_int_equal(dlock_lock_acquire(l, INT64_MIN), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    /* DLOCK_WAIT_FOREVER on a free lock just takes it. */
    assert_int_equal(dlock_lock_acquire(l, DLOCK_WAIT_FOREVER), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

static void extend_rejects_out_of_range_ttls_and_keeps_the_lock(void **state)
{
    (void)state;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, test_cl, "api:extend", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(l, -1), DLOCK_EINVAL);
    assert_true(dlock_lock_errmsg(l)[0] != '\0');
    assert_int_equal(dlock_lock_extend(l, DLOCK_TTL_MAX_MS + 1), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

static void adopt_rejects_bad_tokens_and_unsuitable_handles(void **state)
{
    (void)state;
    dlock_lock *l = NULL, *r = NULL;
    dlock_lock_options ro = DLOCK_LOCK_OPTIONS_INIT;
    ro.flags = DLOCK_REENTRANT;
    assert_int_equal(dlock_lock_new(&l, test_cl, "api:adopt", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&r, test_cl, "api:adopt-r", &ro), DLOCK_OK);
    char tok[DLOCK_TOKEN_MAX + 2];
    memset(tok, 't', sizeof tok - 1);
    tok[sizeof tok - 1] = '\0'; /* DLOCK_TOKEN_MAX + 1 bytes */
    assert_int_equal(dlock_lock_adopt(NULL, "abc"), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_adopt(l, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_adopt(l, ""), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_adopt(l, tok), DLOCK_EINVAL);
    /* A waiting acquire's turn (docs/waiting.md), no holder's token. */
    assert_int_equal(dlock_lock_adopt(l, "turn:0123456789abcdef"), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_adopt(r, "abc"), DLOCK_EINVAL); /* no owner id in it */
    tok[DLOCK_TOKEN_MAX] = '\0'; /* the longest allowed */
    assert_int_equal(dlock_lock_adopt(l, tok), DLOCK_OK);
    assert_string_equal(dlock_lock_token(l), tok);
    assert_int_equal(dlock_lock_adopt(l, "abc"), DLOCK_EINVAL); /* holds one already */
    /* Nobody holds the key: releasing the adopted token finds it gone. */
    assert_int_equal(dlock_lock_release(l), DLOCK_EEXPIRED);
    dlock_lock_free(l);
    dlock_lock_free(r);
}

static void every_function_accepts_null_handles(void **state)
{
    (void)state;
    dlock_lock_free(NULL);
    dlock_lock_cancel(NULL);
    dlock_client_free(NULL);
    assert_int_equal(dlock_lock_state_get(NULL), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_validity_ms(NULL), 0);
    assert_null(dlock_lock_token(NULL));
    assert_null(dlock_lock_name(NULL));
    assert_int_equal(dlock_lock_fence(NULL), 0);
    assert_int_equal(dlock_lock_hold_count(NULL), 0);
    assert_int_equal(dlock_lock_holder_ttl_ms(NULL), -1);
    assert_non_null(dlock_lock_errmsg(NULL));
    assert_int_equal(dlock_lock_acquire(NULL, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_release(NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_extend(NULL, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_client_node_count(NULL), 0);
    assert_null(dlock_client_node_name(NULL, 0));
    dlock_node_status st;
    assert_int_equal(dlock_client_status(NULL, "x", 1, &st, NULL), DLOCK_EINVAL);
}

static void status_reports_held_and_free_locks(void **state)
{
    (void)state;
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 20000;
    assert_int_equal(dlock_lock_new(&l, test_cl, "api:status", &o), DLOCK_OK);
    dlock_node_status st;
    /* Never taken: free, no TTL, no fence yet. */
    assert_int_equal(dlock_client_status(test_cl, "api:status", 1, &st, NULL), DLOCK_OK);
    assert_int_equal(st.error, DLOCK_OK);
    assert_int_equal(st.held, 0);
    assert_int_equal(st.ttl_ms, -1);
    assert_int_equal(st.fence, 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_client_status(test_cl, "api:status", 1, &st, NULL), DLOCK_OK);
    assert_int_equal(st.error, DLOCK_OK);
    assert_int_equal(st.held, 1);
    assert_true(st.ttl_ms > 0 && st.ttl_ms <= 20000);
    assert_int_equal(st.fence, dlock_lock_fence(l));
    assert_true(st.fence > 0);
    uint64_t fence = st.fence;
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_client_status(test_cl, "api:status", 1, &st, NULL), DLOCK_OK);
    assert_int_equal(st.held, 0);
    assert_int_equal(st.ttl_ms, -1);
    assert_int_equal(st.fence, fence); /* the counter stays */
    dlock_lock_free(l);
}

static void no_fence_flag_gives_no_fencing_token_and_no_counter(void **state)
{
    (void)state;
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = DLOCK_NO_FENCE;
    assert_int_equal(dlock_lock_new(&l, test_cl, "api:nofence", &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(l), 0);
    /* Nothing but the lock key: no counter under any name. */
    assert_int_equal(test_cmd_int(&test_srv, "DBSIZE"), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

static void status_rejects_bad_arguments(void **state)
{
    (void)state;
    dlock_node_status st[2];
    assert_int_equal(dlock_client_status(test_cl, NULL, 1, st, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_client_status(test_cl, "x", 1, NULL, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_client_status(test_cl, "x", 0, st, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_client_status(test_cl, "", 1, st, NULL), DLOCK_EINVAL);
    char *name = malloc(DLOCK_NAME_MAX + 2);
    assert_non_null(name);
    memset(name, 'n', DLOCK_NAME_MAX + 1);
    name[DLOCK_NAME_MAX + 1] = '\0';
    assert_int_equal(dlock_client_status(test_cl, name, 2, st, NULL), DLOCK_EINVAL);
    free(name);
}

static void unix_socket_url_locks_the_same_keys(void **state)
{
    (void)state;
    const char *urls[] = {test_srv.unix_url};
    dlock_client *uc = NULL;
    char err[256] = "";
    assert_int_equal(dlock_client_new(&uc, urls, 1, NULL, err, sizeof err), DLOCK_OK);
    assert_string_equal(dlock_client_node_name(uc, 0), test_srv.sock);
    dlock_lock *u = NULL, *t = NULL;
    assert_int_equal(dlock_lock_new(&u, uc, "api:unix", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&t, test_cl, "api:unix", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(u, 0), DLOCK_OK);
    test_assert_key_value(&test_srv, "api:unix", dlock_lock_token(u));
    assert_int_equal(dlock_lock_acquire(t, 0), DLOCK_ENOTACQUIRED); /* over TCP */
    assert_int_equal(dlock_lock_release(u), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(t, 0), DLOCK_OK);
    dlock_lock_free(u);
    dlock_lock_free(t);
    dlock_client_free(uc);
}

/* EXISTS key in database db, through one admin connection. */
static long long exists_in_db_len(int db, const char *key, size_t len);

static long long exists_in_db(int db, const char *key)
{
    return exists_in_db_len(db, key, strlen(key));
}

static long long exists_in_db_len(int db, const char *key, size_t len)
{
    redisContext *ac = test_redis_admin(&test_srv);
    assert_non_null(ac);
    redisReply *r = redisCommand(ac, "SELECT %d", db);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    r = redisCommand(ac, "EXISTS %b", key, len);
    assert_non_null(r);
    long long v = r->integer;
    freeReplyObject(r);
    redisFree(ac);
    return v;
}

static void db_in_url_selects_the_database(void **state)
{
    (void)state;
    char url[400];
    snprintf(url, sizeof url, "%s/3", test_srv.url);
    const char *urls[] = {url};
    dlock_client *dc = NULL;
    assert_int_equal(dlock_client_new(&dc, urls, 1, NULL, NULL, 0), DLOCK_OK);
    dlock_lock *l = NULL, *l0 = NULL;
    assert_int_equal(dlock_lock_new(&l, dc, "api:db", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(exists_in_db(3, "api:db"), 1);
    char fkey[64];
    size_t flen = test_helper_key(fkey, sizeof fkey, "api:db", "fence");
    assert_int_equal(exists_in_db_len(3, fkey, flen), 1);
    assert_int_equal(exists_in_db(0, "api:db"), 0);
    /* Database 0 is another namespace: the same name is free there. */
    assert_int_equal(dlock_lock_new(&l0, test_cl, "api:db", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l0, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(exists_in_db(3, "api:db"), 0);
    dlock_lock_free(l);
    dlock_lock_free(l0);
    dlock_client_free(dc);
}

/* A fair lock's holder token adopted: the release is the holder's (the
 * lock is free for the next), the old handle finds it gone. */
static void adopt_takes_over_a_fair_hold(void **state)
{
    (void)state;
    dlock_lock_options fo = DLOCK_LOCK_OPTIONS_INIT;
    fo.flags = DLOCK_FAIR;
    dlock_lock *f = NULL, *g = NULL;
    char token[DLOCK_TOKEN_MAX + 1];
    assert_int_equal(dlock_lock_new(&f, test_cl, "api:adopt-fair", &fo), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&g, test_cl, "api:adopt-fair", &fo), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(f, 0), DLOCK_OK);
    snprintf(token, sizeof token, "%s", dlock_lock_token(f));
    assert_int_equal(dlock_lock_adopt(g, token), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(g, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(g), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "api:adopt-fair"), 0);
    assert_int_equal(dlock_lock_release(f), DLOCK_EEXPIRED);
    assert_int_equal(dlock_lock_acquire(g, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(g), DLOCK_OK);
    dlock_lock_free(f);
    dlock_lock_free(g);
}

static void forget_keeps_the_lock_in_redis_for_another_process(void **state)
{
    (void)state;
    dlock_lock *l = NULL, *other = NULL;
    char token[DLOCK_TOKEN_MAX + 1];
    assert_int_equal(dlock_lock_forget(NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new(&l, test_cl, "api:forget", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_forget(l), DLOCK_ENOTHELD);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    snprintf(token, sizeof token, "%s", dlock_lock_token(l));
    assert_int_equal(dlock_lock_forget(l), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTHELD);
    dlock_lock_free(l); /* must not release what was forgotten */
    test_assert_key_value(&test_srv, "api:forget", token);
    /* The token still releases it, from another handle. */
    assert_int_equal(dlock_lock_new(&other, test_cl, "api:forget", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_adopt(other, token), DLOCK_OK);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    dlock_lock_free(other);
}

/* Freeing a client whose lock handles still exist is misuse the library
 * detects: one clear line on stderr, then abort() (dlock.h), instead of a
 * use of freed memory failing later somewhere else. */
static void freeing_the_client_before_its_locks_aborts_with_a_clear_message(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = test_fork_child();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        const char *url = test_srv.url;
        dlock_client *c = NULL;
        dlock_lock *l = NULL;
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.flags = DLOCK_AUTO_RENEW;
        if (dlock_client_new(&c, &url, 1, NULL, NULL, 0) != DLOCK_OK ||
            dlock_lock_new(&l, c, "api:misuse", &o) != DLOCK_OK ||
            dlock_lock_acquire(l, 0) != DLOCK_OK)
            _exit(2);
        dlock_client_free(c); /* misuse: l is still alive */
        dlock_lock_free(l);
        _exit(0);
    }
    close(fds[1]);
    char buf[512] = "";
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    close(fds[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
    assert_non_null(strstr(buf, "dlock: dlock_client_free() called while 1 lock handle of this "
                                "client is not freed"));
}

#define T(f) cmocka_unit_test_teardown(f, test_srv_flush)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(lock_new_rejects_bad_arguments),
        T(lock_new_rejects_bad_options),
        T(acquire_rejects_negative_waits_other_than_forever),
        T(extend_rejects_out_of_range_ttls_and_keeps_the_lock),
        T(adopt_rejects_bad_tokens_and_unsuitable_handles),
        T(adopt_takes_over_a_fair_hold),
        T(every_function_accepts_null_handles),
        T(status_reports_held_and_free_locks),
        T(no_fence_flag_gives_no_fencing_token_and_no_counter),
        T(status_rejects_bad_arguments),
        T(unix_socket_url_locks_the_same_keys),
        T(db_in_url_selects_the_database),
        T(forget_keeps_the_lock_in_redis_for_another_process),
        T(freeing_the_client_before_its_locks_aborts_with_a_clear_message),
    };
    return cmocka_run_group_tests(tests, test_srv_client_setup, test_srv_client_teardown);
}
