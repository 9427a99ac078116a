/* SPDX-License-Identifier: BSD-3-Clause */
/* Checks of how refusals surface: a full node (maxmemory), a read-only
 * replica, an ACL user without permissions, a majority of nodes down or
 * stalled. Each asserts the error code, that the call returns within a
 * bound, and that nothing is left held in Redis. */
#include <stdio.h>
#include <string.h>

#include "chaos.h"
#include "dlock.h"

static const chaos_scenario check_defs[] = {
    {.name = "oom_maxmemory", .fault = "filled, then CONFIG SET maxmemory 1mb noeviction", .nodes = 1},
    {.name = "readonly_replica", .fault = "node is a replica (replicaof the first)", .nodes = 1},
    {.name = "acl_no_key_access", .fault = "ACL user limited to keys ~other:*", .nodes = 1},
    {.name = "acl_no_commands", .fault = "ACL user with -@all +ping", .nodes = 1},
    {.name = "acl_wrong_password", .fault = "wrong password in the URL", .nodes = 1},
    {.name = "select_bad_db", .fault = "URL names database 99 of 16", .nodes = 1},
    {.name = "noquorum_3of5_killed", .fault = "kill -9 of 3 of 5 nodes", .nodes = 5},
    {.name = "noquorum_3of5_stopped", .fault = "SIGSTOP of 3 of 5 nodes", .nodes = 5},
};

typedef struct expect {
    int code;
    const char *errmsg_has; /* NULL: anything */
    int64_t bound_ms;
} expect;

static int cmd_ok(const test_redis *r, const char *fmt, const char *arg)
{
    redisReply *rep = test_redis_cmd(r, fmt, arg);
    int ok = rep && rep->type != REDIS_REPLY_ERROR;
    if (rep)
        freeReplyObject(rep);
    return ok;
}

/* Is the lock key absent? Notes it in out when not. */
static int no_key_left(const test_redis *r, chaos_result *out)
{
    redisReply *rep = test_redis_cmd(r, "EXISTS %s", "chaos:check");
    long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    if (rep)
        freeReplyObject(rep);
    if (n != 0) {
        size_t o = strlen(out->note);
        snprintf(out->note + o, sizeof out->note - o, " | LOCK KEY LEFT (EXISTS -> %lld)", n);
    }
    return n == 0;
}

/* One acquire against `urls`; fills out and returns pass. */
static int try_acquire(const char *const *urls, size_t n, int64_t wait_ms, const expect *e,
                       chaos_result *out)
{
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    char err[256] = "";
    co.wakeups = 0;
    lo.ttl_ms = 1000;
    if (dlock_client_new(&c, urls, n, &co, err, sizeof err) != DLOCK_OK ||
        dlock_lock_new(&l, c, "chaos:check", &lo) != DLOCK_OK) {
        snprintf(out->note, sizeof out->note, "client: %.200s", err);
        dlock_client_free(c);
        return 0;
    }
    int64_t t0 = chaos_now_ns();
    int rc = dlock_lock_acquire(l, wait_ms);
    int64_t ms = (chaos_now_ns() - t0) / 1000000;
    const char *msg = dlock_lock_errmsg(l);
    int pass = rc == e->code && ms <= e->bound_ms &&
               dlock_lock_state_get(l) == DLOCK_STATE_UNLOCKED &&
               (!e->errmsg_has || strstr(msg, e->errmsg_has));
    snprintf(out->note, sizeof out->note, "acquire(wait %lld) -> %s in %lld ms (bound %lld)%s: %.110s",
             (long long)wait_ms, dlock_errname(rc), (long long)ms, (long long)e->bound_ms,
             dlock_lock_state_get(l) == DLOCK_STATE_UNLOCKED ? "" : " STILL HELD", msg);
    if (rc == DLOCK_OK)
        dlock_lock_release(l);
    dlock_lock_free(l);
    dlock_client_free(c);
    return pass;
}

static int check_oom(chaos_result *out)
{
    test_redis r;
    int pass = 0;
    if (test_redis_start(&r, NULL) != 0)
        return 0;
    const char *urls[1] = {r.url};
    expect e = {DLOCK_EREFUSED, "OOM", 300};
    if (cmd_ok(&r, "DEBUG POPULATE 50000 chaos:fill%s 64", "") &&
        cmd_ok(&r, "CONFIG SET maxmemory-policy %s", "noeviction") &&
        cmd_ok(&r, "CONFIG SET maxmemory %s", "1mb")) {
        /* A refusal ends even a waiting acquire at once. */
        pass = try_acquire(urls, 1, 2000, &e, out) && no_key_left(&r, out);
    }
    test_redis_stop(&r);
    return pass;
}

static int check_replica(chaos_result *out)
{
    test_redis m, rep;
    char conf[64];
    int pass = 0;
    if (test_redis_start(&m, NULL) != 0)
        return 0;
    snprintf(conf, sizeof conf, "replicaof 127.0.0.1 %d", m.port);
    if (test_redis_start(&rep, conf) == 0) {
        const char *urls[1] = {rep.url};
        expect e = {DLOCK_EREFUSED, "READONLY", 300};
        pass = try_acquire(urls, 1, 2000, &e, out) && no_key_left(&rep, out) &&
               no_key_left(&m, out);
        test_redis_stop(&rep);
    }
    test_redis_stop(&m);
    return pass;
}

/* which: 0 no key access, 1 no commands, 2 wrong password, 3 bad db. */
static int check_acl(chaos_result *out, int which)
{
    test_redis r;
    char url[160];
    int pass = 0;
    if (test_redis_start(&r, NULL) != 0)
        return 0;
    static const char *rules[] = {"ACL SETUSER chaos_u on >pw ~other:* +@all",
                                  "ACL SETUSER chaos_u on >pw ~* -@all +ping",
                                  "ACL SETUSER chaos_u on >pw ~* +@all",
                                  "ACL SETUSER chaos_u on >pw ~* +@all"};
    redisContext *a = test_redis_admin(&r);
    redisReply *rep = a ? redisCommand(a, rules[which]) : NULL;
    int ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep)
        freeReplyObject(rep);
    if (a)
        redisFree(a);
    snprintf(url, sizeof url, "redis://chaos_u:%s@127.0.0.1:%d", which == 2 ? "wrong" : "pw", r.port);
    if (which == 3) /* SELECT refused: the command must not run in db 0 */
        snprintf(url, sizeof url, "redis://127.0.0.1:%d/99", r.port);
    const char *urls[1] = {url};
    expect e = {which == 3 ? DLOCK_EREFUSED : DLOCK_EAUTH, NULL, 300};
    if (ok)
        pass = try_acquire(urls, 1, 2000, &e, out) && no_key_left(&r, out);
    test_redis_stop(&r);
    return pass;
}

/* A majority down: DLOCK_ENOQUORUM, fast, no hang. Killed nodes refuse the
 * connection at once; stopped ones accept it (the kernel's backlog) and
 * never answer, so the bound is connect + I/O timeouts of the undo. */
static int check_noquorum(chaos_result *out, int stopped)
{
    test_redis rs[5];
    const char *urls[5];
    int pass = 0;
    if (test_redis_start_many(rs, 5, NULL) != 0)
        return 0;
    for (int i = 0; i < 5; i++)
        urls[i] = rs[i].url;
    for (int i = 0; i < 3; i++) {
        if (stopped)
            test_redis_pause(&rs[i]);
        else
            test_redis_kill9(&rs[i]);
    }
    expect e = {DLOCK_ENOQUORUM, NULL, stopped ? 2500 : 300};
    pass = try_acquire(urls, 5, 0, &e, out);
    for (int i = 3; i < 5; i++)
        pass = pass && no_key_left(&rs[i], out);
    test_redis_stop_many(rs, 5);
    return pass;
}

int chaos_run_checks(chaos_result *out, int max)
{
    int n = (int)(sizeof check_defs / sizeof check_defs[0]);
    if (n > max)
        n = max;
    for (int i = 0; i < n; i++) {
        chaos_result *r = &out[i];
        int64_t t0 = chaos_now_ns();
        memset(r, 0, sizeof *r);
        r->sc = &check_defs[i];
        r->claimed = "yes";
        r->is_check = 1;
        r->faults = 1;
        switch (i) {
        case 0: r->pass = check_oom(r); break;
        case 1: r->pass = check_replica(r); break;
        case 2: case 3: case 4: case 5: r->pass = check_acl(r, i - 2); break;
        default: r->pass = check_noquorum(r, i == 7); break;
        }
        r->seconds = (double)(chaos_now_ns() - t0) / 1e9;
    }
    return n;
}
