/* SPDX-License-Identifier: BSD-3-Clause */
/* The holder identity (issue 40) of the kinds with a hand-over or several
 * holders: a fair lock's holder, including the waiter a release hands the
 * lock to (the identity is then the new holder's, written by the
 * releaser's script from what the waiter left in line), and a fair leave
 * that confirms a hand-over; every reader of a shared lock and every
 * permit of a semaphore, each with its own (dlock_client_holder_identity()
 * per holder, joined by dlock_client_identity() and dlock_client_list()),
 * each gone with its hold: on release, and on a lease that ran out, at the
 * next call that touches the lock; all of it through the least-privilege
 * ACL user of docs/design.md. Against a real redis-server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dlock.h"
#include "redis_server.h"
#include "scripts.h"
#include "test_util.h"
#include "test_waiter.h"

static dlock_client *with_a; /* identity on, identity_text "who=a" */
static dlock_client *with_b; /* identity on, identity_text "who=b" */

static dlock_client *identity_client(const char *text)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.identity = 1;
    o.identity_text = text;
    return test_client_for(&test_srv, &o);
}

/* The least-privilege user of docs/design.md, for key_prefix "lock:". */
static const char conf[] =
    "user locker on >pw resetkeys ~lock:* resetchannels &dlock:wake:lock:* "
    "-@all +evalsha +eval +script|load +subscribe +unsubscribe "
    "+set +get +del +exists +type +pttl +pexpire +incr +publish "
    "+hset +hget +hdel +hexists +hincrby +hkeys +rpush +lpop +lindex +lpos +lrem "
    "+time +zadd +zrem +zrange +zremrangebyscore +zscore +zcount +zrangebyscore "
    "+zrevrangebyscore\n";

static int setup(void **state)
{
    (void)state;
    if (test_redis_start(&test_srv, conf) != 0)
        return -1;
    test_cl = test_client_for(&test_srv, NULL);
    with_a = identity_client("who=a");
    with_b = identity_client("who=b");
    return 0;
}

static int teardown(void **state)
{
    dlock_client_free(with_a);
    dlock_client_free(with_b);
    return test_srv_client_teardown(state);
}

/* What another client (test_cl, identity off) reads of name. */
static const char *seen(const char *name)
{
    static char buf[2 * DLOCK_IDENTITY_READ_MAX + 1];
    memset(buf, 'x', sizeof buf);
    assert_int_equal(dlock_client_identity(test_cl, name, 0, buf, sizeof buf), DLOCK_OK);
    return buf;
}

/* What another client reads of one holder (token) of name. */
static const char *seen_of(const char *name, const char *token)
{
    static char buf[DLOCK_IDENTITY_READ_MAX + 1];
    memset(buf, 'x', sizeof buf);
    assert_int_equal(dlock_client_holder_identity(test_cl, name, 0, token, buf, sizeof buf),
                     DLOCK_OK);
    return buf;
}

static int starts(const char *s, const char *with)
{
    return strncmp(s, with, strlen(with)) == 0;
}

/* A command on the identity hash KEY NUL "id" of name, with an optional
 * field; its integer answer. */
static long long id_cmd(const char *cmd, const char *name, const char *field)
{
    char key[256];
    size_t n = test_helper_key(key, sizeof key, name, "id");
    char fmt[32];
    snprintf(fmt, sizeof fmt, field ? "%s %%b %%s" : "%s %%b", cmd);
    redisReply *r = field ? test_cmd_bin(&test_srv, fmt, key, n, field)
                          : test_cmd_bin(&test_srv, fmt, key, n);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* ---- fair ---------------------------------------------------------------- */

static void a_fair_holders_identity_is_kept_and_gone_with_its_release(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(with_a, "idk:f1", 10000, DLOCK_FAIR, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_true(starts(seen("idk:f1"), "who=a since="));
    assert_true(starts(seen_of("idk:f1", dlock_lock_token(l)), "who=a since="));
    assert_int_equal(dlock_lock_extend(l, 60000), DLOCK_OK);
    assert_true(id_cmd("PTTL", "idk:f1", NULL) > 30000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_string_equal(seen("idk:f1"), "");
    assert_int_equal(id_cmd("EXISTS", "idk:f1", NULL), 0);
    dlock_lock_free(l);
}

/* Keys under name's prefix whose name ends in NUL "id" (the identity hash,
 * and a waiter's text beside its liveness key). */
static size_t id_keys(const char *name)
{
    char pat[128];
    snprintf(pat, sizeof pat, "%s*", name);
    redisReply *r = test_cmd(&test_srv, "KEYS %s", pat);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    size_t n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *k = r->element[i];
        if (k->len >= 3 && memcmp(k->str + k->len - 3, "\0id", 3) == 0)
            n++;
    }
    freeReplyObject(r);
    return n;
}

/* The release hands the lock to the waiter in line (fair_release.lua):
 * the identity shown is then the waiter's, not the releaser's, with the
 * hand-over's "since"; nothing of either is left after the last release. */
static void a_fair_hand_over_shows_the_new_holders_identity(void **state)
{
    (void)state;
    dlock_lock *a = test_lock_new(with_a, "idk:f2", 10000, DLOCK_FAIR, 10, 200);
    dlock_lock *b = test_lock_new(with_b, "idk:f2", 10000, DLOCK_FAIR, 10, 200);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char ta[DLOCK_TOKEN_MAX + 1]; /* a's token: a released handle has none */
    snprintf(ta, sizeof ta, "%s", dlock_lock_token(a));
    test_waiter w;
    assert_int_equal(test_waiter_start(&w, b, 5000, TEST_WAITER_KEEP), 0);
    usleep(300 * 1000); /* in line by now, its text beside its liveness key */
    assert_int_equal(id_keys("idk:f2"), 2);
    assert_true(starts(seen("idk:f2"), "who=a since="));
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(test_waiter_join(&w), DLOCK_OK);
    assert_true(starts(seen("idk:f2"), "who=b since="));
    assert_true(starts(seen_of("idk:f2", dlock_lock_token(b)), "who=b since="));
    assert_string_equal(seen_of("idk:f2", ta), "");
    assert_int_equal(id_keys("idk:f2"), 1); /* the waiter's text went with the hand-over */
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_string_equal(seen("idk:f2"), "");
    assert_int_equal(id_keys("idk:f2"), 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* The fair scripts called by hand, to reach the paths a timed test cannot
 * aim at: a hand-over confirmed by a leave (fair_leave.lua), and one by a
 * releaser that keeps no identity (the waiter's own look writes it). */
#define FK "idk:fs"
#define FQ FK "\0q"
#define FW FK "\0w\0"
#define FID FK "\0id"
#define BIN(s) s, sizeof s - 1

typedef struct sargs {
    const char *v[12];
    size_t len[12];
    int n;
} sargs;

static void put(sargs *a, const char *s, size_t len)
{
    a->v[a->n] = s;
    a->len[a->n++] = len;
}

static redisReply *eval(dlock__script_id id, int nkeys, const sargs *a)
{
    const dlock__script *s = dlock__script_get(id);
    const char *argv[16];
    size_t lens[16];
    char nk[8];
    int n = 0;
    argv[n] = "EVAL", lens[n++] = 4;
    argv[n] = s->body, lens[n++] = s->len;
    snprintf(nk, sizeof nk, "%d", nkeys);
    argv[n] = nk, lens[n++] = strlen(nk);
    for (int i = 0; i < a->n; i++)
        argv[n] = a->v[i], lens[n++] = a->len[i];
    redisContext *c = test_redis_admin(&test_srv);
    assert_non_null(c);
    redisReply *r = redisCommandArgv(c, n, argv, lens);
    redisFree(c);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("%s.lua: %s", s->name, r->str);
    return r;
}

/* fair_acquire.lua (a look, wttl "5000") or fair_leave.lua (wttl NULL) by
 * token tok with identity text idarg (NUL "id:" text) or none: its first
 * reply element. */
static long long fair_look(dlock__script_id id, const char *tok, const char *me, size_t me_len,
                           const char *wttl, const char *idarg, size_t idlen)
{
    sargs a = {.n = 0};
    put(&a, BIN(FK));
    put(&a, BIN(FQ));
    put(&a, me, me_len);
    if (idarg)
        put(&a, BIN(FID));
    put(&a, tok, strlen(tok));
    put(&a, "10000", 5);
    if (wttl) {
        put(&a, wttl, strlen(wttl));
        put(&a, BIN(FW));
    }
    if (idarg)
        put(&a, idarg, idlen);
    redisReply *r = eval(id, idarg ? 4 : 3, &a);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    long long v = r->element[0]->integer;
    freeReplyObject(r);
    return v;
}

static long long fair_rel(const char *tok, int with_id)
{
    sargs a = {.n = 0};
    put(&a, BIN(FK));
    put(&a, BIN(FQ));
    if (with_id)
        put(&a, BIN(FID));
    put(&a, tok, strlen(tok));
    put(&a, "dlock:wake:" FK, sizeof "dlock:wake:" FK - 1);
    put(&a, BIN(FW));
    if (with_id)
        put(&a, BIN("\0id:"));
    redisReply *r = eval(DLOCK__S_FAIR_RELEASE, with_id ? 3 : 2, &a);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static const char *hget(const char *field)
{
    static char buf[DLOCK_IDENTITY_READ_MAX + 1];
    redisReply *r = test_cmd_bin(&test_srv, "HGET %b %s", BIN(FID), field);
    snprintf(buf, sizeof buf, "%s", r->type == REDIS_REPLY_STRING ? r->str : "(nil)");
    freeReplyObject(r);
    return buf;
}

static void a_fair_leave_confirms_a_hand_over_with_the_waiters_identity(void **state)
{
    (void)state;
    static const char wa[] = FW "A", wb[] = FW "B";
    for (int rel_id = 1; rel_id >= 0; rel_id--) {
        redisReply *d = test_cmd_bin(&test_srv, "DEL %b %b %b", BIN(FK), BIN(FQ), BIN(FID));
        freeReplyObject(d);
        /* A keeps an identity exactly when it releases with one. */
        assert_int_equal(fair_look(DLOCK__S_FAIR_ACQUIRE, "A", BIN(wa), "5000",
                                   rel_id ? "\0id:who=a" : NULL, 9), 1);
        assert_true(rel_id ? starts(hget("A"), "who=a since=") : !strcmp(hget("A"), "(nil)"));
        assert_int_equal(fair_look(DLOCK__S_FAIR_ACQUIRE, "B", BIN(wb), "5000",
                                   BIN("\0id:who=b")), 0);
        redisReply *r = test_cmd_bin(&test_srv, "GET %b", BIN(FW "B\0id"));
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_string_equal(r->str, "who=b"); /* B's text, in line beside its liveness key */
        freeReplyObject(r);
        /* A hands over: with its identity, the script writes B's; without,
         * B's own confirmation does (next). */
        assert_int_equal(fair_rel("A", rel_id), 2);
        assert_string_equal(hget("A"), "(nil)");
        assert_true(rel_id ? starts(hget("B"), "who=b since=") : !strcmp(hget("B"), "(nil)"));
        /* B gives up before it took the message: the leave confirms. */
        assert_int_equal(fair_look(DLOCK__S_FAIR_LEAVE, "B", BIN(wb), NULL, BIN("\0id:who=b")),
                         1);
        assert_true(starts(hget("B"), "who=b since="));
        assert_true(id_cmd("PTTL", FK, NULL) > 5000); /* the lock's TTL now */
        r = test_cmd_bin(&test_srv, "EXISTS %b", BIN(FW "B\0id"));
        assert_int_equal(r->integer, 0);
        freeReplyObject(r);
        assert_int_equal(fair_rel("B", 1), 1);
        assert_int_equal(id_cmd("EXISTS", FK, NULL), 0);
    }
}

/* ---- shared and semaphore ------------------------------------------------ */

static int on_entry(void *arg, const dlock_list_entry *e)
{
    char *got = arg;
    assert_true(e->version >= 2);
    if (strcmp(e->name, "idk:s") == 0 || strcmp(e->name, "idk:m") == 0)
        snprintf(got, 2 * DLOCK_IDENTITY_READ_MAX + 1, "%s", e->identity ? e->identity : "");
    return 0;
}

/* Two holders at once (readers or permits) from clients "who=a" and
 * "who=b": each its own identity, by token and in the joined views. */
static void two_holders_show_two_identities(const char *name, dlock_lock *x, dlock_lock *y)
{
    assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(y, 0), DLOCK_OK);
    char tx[DLOCK_TOKEN_MAX + 1]; /* x's token: a released handle has none */
    snprintf(tx, sizeof tx, "%s", dlock_lock_token(x));
    dlock_holders_info info;
    dlock_holder h[4];
    assert_int_equal(dlock_client_holders(test_cl, name, 0, &info, h, 4), DLOCK_OK);
    assert_int_equal(info.count, 2);
    for (size_t i = 0; i < 2; i++)
        assert_true(starts(seen_of(name, h[i].token),
                           strcmp(h[i].token, dlock_lock_token(x)) == 0 ? "who=a since="
                                                                         : "who=b since="));
    const char *all = seen(name); /* both, joined by "; " */
    assert_non_null(strstr(all, "who=a since="));
    assert_non_null(strstr(all, "who=b since="));
    assert_non_null(strstr(all, "; who="));
    char got[2 * DLOCK_IDENTITY_READ_MAX + 1] = "";
    assert_int_equal(dlock_client_list(test_cl, "idk:*", on_entry, got), DLOCK_OK);
    assert_non_null(strstr(got, "who=a since="));
    assert_non_null(strstr(got, "who=b since="));
    /* One release takes one identity away, and leaves the other. */
    assert_int_equal(dlock_lock_release(x), DLOCK_OK);
    assert_string_equal(seen_of(name, tx), "");
    assert_true(starts(seen_of(name, dlock_lock_token(y)), "who=b since="));
    assert_true(starts(seen(name), "who=b since="));
    assert_int_equal(dlock_lock_release(y), DLOCK_OK);
    assert_string_equal(seen(name), "");
    assert_int_equal(id_cmd("EXISTS", name, NULL), 0);
}

static void two_readers_show_two_identities(void **state)
{
    (void)state;
    dlock_lock *x = test_lock_new(with_a, "idk:s", 10000, DLOCK_SHARED, 10, 200);
    dlock_lock *y = test_lock_new(with_b, "idk:s", 10000, DLOCK_SHARED, 10, 200);
    two_holders_show_two_identities("idk:s", x, y);
    dlock_lock_free(x);
    dlock_lock_free(y);
}

static dlock_lock *sem_of(dlock_client *c, const char *name, unsigned permits, int64_t ttl_ms,
                          unsigned flags)
{
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = flags;
    o.retry_min_ms = 10;
    o.retry_max_ms = 200;
    assert_int_equal(dlock_semaphore_new(&l, c, name, permits, &o), DLOCK_OK);
    return l;
}

static dlock_lock *sem(dlock_client *c, const char *name, int64_t ttl_ms, unsigned flags)
{
    return sem_of(c, name, 2, ttl_ms, flags);
}

static void two_permits_show_two_identities(void **state)
{
    (void)state;
    dlock_lock *x = sem(with_a, "idk:m", 10000, 0);
    dlock_lock *y = sem(with_b, "idk:m", 10000, 0);
    two_holders_show_two_identities("idk:m", x, y);
    dlock_lock_free(x);
    dlock_lock_free(y);
}

/* A permit whose lease ran out (its holder went silent) shows no identity
 * at once, and its field goes at the next call that touches the lock (here
 * the other holder's renewal); the hash keeps the renewed lease's TTL and
 * goes with the last hold. A reentrant reader is a shared holder too. */
static void an_ended_lease_takes_its_identity_with_it(void **state)
{
    (void)state;
    dlock_lock *gone = sem(with_a, "idk:e", 300, 0);
    dlock_lock *kept = sem(with_b, "idk:e", 300, DLOCK_AUTO_RENEW);
    assert_int_equal(dlock_lock_acquire(gone, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(kept, 0), DLOCK_OK);
    assert_int_equal(id_cmd("HLEN", "idk:e", NULL), 2);
    usleep(1000 * 1000); /* past three TTLs: renewed by the watchdog */
    assert_int_equal(dlock_lock_state_get(kept), DLOCK_STATE_HELD);
    assert_true(starts(seen("idk:e"), "who=b since="));
    assert_int_equal(id_cmd("HEXISTS", "idk:e", dlock_lock_token(gone)), 0);
    assert_int_equal(id_cmd("HLEN", "idk:e", NULL), 1);
    long long pttl = id_cmd("PTTL", "idk:e", NULL);
    assert_true(pttl > 0 && pttl <= 300);
    assert_int_equal(dlock_lock_release(kept), DLOCK_OK);
    assert_int_equal(id_cmd("EXISTS", "idk:e", NULL), 0);
    dlock_lock_free(gone);
    dlock_lock_free(kept);

    dlock_lock *r = test_lock_new(with_a, "idk:rr", 10000, DLOCK_SHARED | DLOCK_REENTRANT, 10,
                                  200);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_true(starts(seen("idk:rr"), "who=a since="));
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(id_cmd("EXISTS", "idk:rr", NULL), 0);
    dlock_lock_free(r);
}

/* The joined view names the first 8 holders and counts the rest: a list
 * reads every lock this way, so it stays short however many hold it. */
static void many_holders_are_cut_to_eight_and_counted(void **state)
{
    (void)state;
    dlock_lock *l[10];
    for (size_t i = 0; i < 10; i++) {
        l[i] = sem_of(i % 2 ? with_b : with_a, "idk:many", 10, 10000, 0);
        assert_int_equal(dlock_lock_acquire(l[i], 0), DLOCK_OK);
    }
    const char *all = seen("idk:many");
    size_t n = 0;
    for (const char *p = all; (p = strstr(p, " since=")) != NULL; p++)
        n++;
    assert_int_equal(n, 8);
    size_t len = strlen(all);
    assert_true(len > 9 && strcmp(all + len - 9, "; +2 more") == 0);
    for (size_t i = 0; i < 10; i++) {
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        dlock_lock_free(l[i]);
    }
    assert_int_equal(id_cmd("EXISTS", "idk:many", NULL), 0);
}

static void break_removes_every_holders_identity(void **state)
{
    (void)state;
    dlock_lock *x = test_lock_new(with_a, "idk:b", 10000, DLOCK_SHARED, 10, 200);
    dlock_lock *y = test_lock_new(with_b, "idk:b", 10000, DLOCK_SHARED, 10, 200);
    assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(y, 0), DLOCK_OK);
    assert_int_equal(id_cmd("HLEN", "idk:b", NULL), 2);
    assert_int_equal(dlock_client_break(test_cl, "idk:b", 0, NULL), DLOCK_OK);
    assert_int_equal(id_cmd("EXISTS", "idk:b", NULL), 0);
    assert_string_equal(seen("idk:b"), "");
    dlock_lock_free(x);
    dlock_lock_free(y);
}

/* The scripts run the identity's commands under pcall: a user that lacks
 * one would get its locks without identities, silently. The documented
 * user has them all: each kind's identity is written and removed. */
static void the_least_privilege_user_keeps_every_kinds_identity(void **state)
{
    (void)state;
    char url[128];
    snprintf(url, sizeof url, "redis://locker:pw@127.0.0.1:%d", test_srv.port);
    const char *urls[] = {url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.identity = 1;
    o.identity_text = "who=acl";
    o.key_prefix = "lock:";
    dlock_client *c = test_client_new(urls, 1, &o);
    dlock_lock *f = test_lock_new(c, "f", 10000, DLOCK_FAIR, 10, 200);
    dlock_lock *fw = test_lock_new(c, "f", 10000, DLOCK_FAIR, 10, 200);
    dlock_lock *s1 = test_lock_new(c, "s", 10000, DLOCK_SHARED, 10, 200);
    dlock_lock *s2 = test_lock_new(c, "s", 10000, DLOCK_SHARED, 10, 200);
    dlock_lock *m = NULL;
    assert_int_equal(dlock_semaphore_new(&m, c, "m", 2, NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(f, 0), DLOCK_OK);
    test_waiter w;
    assert_int_equal(test_waiter_start(&w, fw, 5000, TEST_WAITER_KEEP), 0);
    usleep(300 * 1000);
    assert_int_equal(id_keys("lock:f"), 2); /* the waiter's text: SET */
    assert_int_equal(dlock_lock_release(f), DLOCK_OK);
    assert_int_equal(test_waiter_join(&w), DLOCK_OK);
    assert_true(starts(seen("lock:f"), "who=acl since=")); /* GET, HSET at the hand-over */
    assert_int_equal(dlock_lock_acquire(s1, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(s2, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(s1, 20000), DLOCK_OK);
    assert_int_equal(id_cmd("HLEN", "lock:s", NULL), 2);
    assert_true(id_cmd("PTTL", "lock:s", NULL) > 10000); /* ZREVRANGEBYSCORE, PEXPIRE */
    assert_int_equal(dlock_lock_acquire(m, 0), DLOCK_OK);
    assert_true(starts(seen("lock:m"), "who=acl since="));
    char buf[DLOCK_IDENTITY_READ_MAX + 1]; /* and HGET for the reader */
    assert_int_equal(dlock_client_holder_identity(c, "m", 0, dlock_lock_token(m), buf,
                                                  sizeof buf), DLOCK_OK);
    assert_true(starts(buf, "who=acl since="));
    assert_int_equal(dlock_lock_release(s1), DLOCK_OK);
    assert_int_equal(id_cmd("HLEN", "lock:s", NULL), 1); /* HDEL */
    assert_int_equal(dlock_lock_release(s2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(fw), DLOCK_OK);
    assert_int_equal(dlock_lock_release(m), DLOCK_OK);
    assert_int_equal(id_keys("lock:"), 0);
    dlock_lock_free(f);
    dlock_lock_free(fw);
    dlock_lock_free(s1);
    dlock_lock_free(s2);
    dlock_lock_free(m);
    dlock_client_free(c);
}

static void holder_identity_checks_its_arguments(void **state)
{
    (void)state;
    char buf[8];
    assert_int_equal(dlock_client_holder_identity(test_cl, "idk:x", 0, NULL, buf, sizeof buf),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_client_holder_identity(test_cl, "idk:x", 0, "", buf, sizeof buf),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_client_holder_identity(test_cl, "idk:x", 0, "t", NULL, 8),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_client_holder_identity(test_cl, "idk:x", 1, "t", buf, sizeof buf),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_client_holder_identity(NULL, "idk:x", 0, "t", buf, sizeof buf),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_client_holder_identity(test_cl, "idk:x", 0, "t", buf, sizeof buf),
                     DLOCK_OK);
    assert_string_equal(buf, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_fair_holders_identity_is_kept_and_gone_with_its_release),
        cmocka_unit_test(a_fair_hand_over_shows_the_new_holders_identity),
        cmocka_unit_test(a_fair_leave_confirms_a_hand_over_with_the_waiters_identity),
        cmocka_unit_test(two_readers_show_two_identities),
        cmocka_unit_test(two_permits_show_two_identities),
        cmocka_unit_test(an_ended_lease_takes_its_identity_with_it),
        cmocka_unit_test(many_holders_are_cut_to_eight_and_counted),
        cmocka_unit_test(break_removes_every_holders_identity),
        cmocka_unit_test(the_least_privilege_user_keeps_every_kinds_identity),
        cmocka_unit_test(holder_identity_checks_its_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
