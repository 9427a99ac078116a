/* SPDX-License-Identifier: BSD-3-Clause */
/* Locks through Redis Sentinel (issue 19): a primary, one replica and three
 * sentinels, all real processes started once for the file. The client names
 * only the sentinels and the master; it must find the primary, follow a
 * switch-over (the old primary answers READONLY) and a failover (the
 * primary killed), and refuse clearly when the sentinels cannot help. The
 * tests run in order: the last one kills the primary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_topology.h"
#include "test_util.h"

static test_sentinel_set S;

static int group_setup(void **state)
{
    (void)state;
    return test_sentinel_start(&S);
}

static int group_teardown(void **state)
{
    (void)state;
    test_sentinel_stop(&S);
    return 0;
}

/* The data node the sentinels call primary now; fails the test if none. */
static test_redis *primary_now(void)
{
    int port = test_sentinel_primary_port(&S);
    test_redis *r = test_sentinel_node(&S, port);
    assert_non_null(r);
    return r;
}

static dlock_client *sentinel_client(const char *url, const dlock_client_options *o)
{
    const char *urls[1] = {url};
    return test_client_new(urls, 1, o);
}

static void lock_lands_on_the_primary(void **state)
{
    (void)state;
    dlock_client *c = sentinel_client(S.url, NULL);
    assert_string_equal(dlock_client_node_name(c, 0), "sentinel master mymaster");
    dlock_lock *l = test_lock_new(c, "sentinel-a", 30000, 0, 10, 100);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_true(dlock_lock_fence(l) >= 1);
    test_redis *p = primary_now();
    assert_int_equal(test_key_exists(p, "sentinel-a"), 1);
    /* A second client through the same sentinels sees it held. */
    dlock_client *c2 = sentinel_client(S.url, NULL);
    dlock_lock *l2 = test_lock_new(c2, "sentinel-a", 30000, 0, 10, 100);
    assert_int_equal(dlock_lock_acquire(l2, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(test_key_exists(p, "sentinel-a"), 0);
    assert_int_equal(dlock_lock_acquire(l2, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l2), DLOCK_OK);
    dlock_lock_free(l2);
    dlock_client_free(c2);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void malformed_sentinel_urls_are_einval(void **state)
{
    (void)state;
    static const char *bad[] = {
        "redis-sentinel://127.0.0.1:1",          /* no master name */
        "redis-sentinel://127.0.0.1:1/",         /* empty master name */
        "redis-sentinel:///mymaster",            /* no sentinel */
        "redis-sentinel://127.0.0.1/mymaster",   /* no port */
        "redis-sentinel://127.0.0.1:1,/mymaster", /* empty entry */
        "redis-sentinel://127.0.0.1:1/a/b",      /* two names */
        "redis-sentinel://127.0.0.1:99999/m",    /* port out of range */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dlock_client *c = NULL;
        char err[256] = "";
        int rc = dlock_client_new(&c, &bad[i], 1, NULL, err, sizeof err);
        if (rc != DLOCK_EINVAL)
            print_message("accepted: %s\n", bad[i]);
        assert_int_equal(rc, DLOCK_EINVAL);
        assert_null(c);
        assert_true(err[0] != '\0');
    }
}

static void unknown_master_name_is_refused(void **state)
{
    (void)state;
    char url[400];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d/nosuchmaster",
             S.sentinel[0].port, S.sentinel[1].port);
    dlock_client *c = sentinel_client(url, NULL);
    dlock_lock *l = test_lock_new(c, "sentinel-b", 30000, 0, 10, 100);
    int rc = dlock_lock_acquire(l, 0);
    assert_int_equal(rc, DLOCK_EREFUSED);
    assert_non_null(strstr(dlock_lock_errmsg(l), "knows no master named \"nosuchmaster\""));
    /* A configuration error ends a wait at once. */
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(l, 5000), DLOCK_EREFUSED);
    assert_true(test_now_ms() - t0 < 3000);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void unreachable_sentinels_are_eio(void **state)
{
    (void)state;
    /* The ports of a stopped server: nothing listens there. */
    test_redis gone;
    assert_int_equal(test_redis_start(&gone, NULL), 0);
    int port = gone.port;
    test_redis_stop(&gone);
    char url[200];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d/mymaster", port);
    dlock_client *c = sentinel_client(url, NULL);
    dlock_lock *l = test_lock_new(c, "sentinel-c", 30000, 0, 10, 100);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_EIO);
    assert_non_null(strstr(dlock_lock_errmsg(l), "sentinel 127.0.0.1:"));
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Until the replica of p is in sync again (after a topology change made by
 * hand), so that the acknowledgement tests start from a healthy pair. */
static void wait_for_replica(test_redis *p)
{
    redisContext *ac = test_redis_admin(p);
    assert_non_null(ac);
    long long acked = 0;
    for (int i = 0; i < 20 && acked < 1; i++) {
        redisReply *w = redisCommand(ac, "WAIT 1 1000");
        assert_non_null(w);
        acked = w->integer;
        freeReplyObject(w);
    }
    redisFree(ac);
    assert_int_equal(acked, 1);
}

/* A primary demoted behind the sentinels' back (REPLICAOF by hand: unlike
 * a Sentinel switch-over it keeps client connections open) answers
 * READONLY on a pooled connection. That is "not sent" (a replica ran
 * none of it) and a reason to ask the sentinels again, whose answer is
 * then checked by ROLE: DLOCK_EIO, retried by a wait; never
 * DLOCK_EREFUSED, which would end a wait at once. */
static void readonly_primary_is_not_a_refusal(void **state)
{
    (void)state;
    dlock_client *c = sentinel_client(S.url, NULL);
    dlock_lock *l = test_lock_new(c, "sentinel-g", 30000, 0, 10, 100);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* pools a connection */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    test_redis *p = primary_now();
    test_redis *r = p == &S.primary ? &S.replica : &S.primary;
    test_cmd_status(r, "REPLICAOF NO ONE");
    test_cmd_status(p, "REPLICAOF 127.0.0.1 %d", r->port);
    int rc = dlock_lock_acquire(l, 0);
    print_message("demoted primary: %s (%s)\n", dlock_errname(rc), dlock_lock_errmsg(l));
    test_cmd_status(p, "REPLICAOF NO ONE");
    test_cmd_status(r, "REPLICAOF 127.0.0.1 %d", p->port);
    wait_for_replica(p);
    assert_int_equal(rc, DLOCK_EIO);
    assert_non_null(strstr(dlock_lock_errmsg(l), "primary"));
    /* Back to normal: the next acquire finds the primary again. */
    assert_int_equal(dlock_lock_acquire(l, 10000), DLOCK_OK);
    assert_int_equal(test_key_exists(p, "sentinel-g"), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- replica acknowledgement (min_replicas) ---------------------------- */

static dlock_client *acked_client(int min_replicas, int timeout_ms)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.min_replicas = min_replicas;
    o.min_replicas_timeout_ms = timeout_ms;
    return sentinel_client(S.url, &o);
}

static test_redis *replica_now(void)
{
    test_redis *p = primary_now();
    return p == &S.primary ? &S.replica : &S.primary;
}

static void acknowledged_acquire_is_on_the_replica_at_once(void **state)
{
    (void)state;
    dlock_client *c = acked_client(1, 2000);
    dlock_lock *l = test_lock_new(c, "acked-a", 30000, 0, 10, 100);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    /* WAIT returned 1: the replica has applied the write already. */
    assert_int_equal(test_key_exists(replica_now(), "acked-a"), 1);
    assert_int_equal(dlock_lock_extend(l, 40000), DLOCK_OK);
    assert_true(test_key_pttl(replica_now(), "acked-a") > 30000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static long long dbsize(test_redis *r)
{
    return test_cmd_int(r, "DBSIZE");
}

/* The replica stopped (SIGSTOP: connected but silent): WAIT gets no
 * acknowledgement, the acquire is undone and fails with its own code, and
 * nothing of it stays on the primary. */
static void acquire_refused_with_the_replica_stopped_leaves_nothing(void **state)
{
    (void)state;
    dlock_client *c = acked_client(1, 300);
    dlock_lock *l = test_lock_new(c, "acked-b", 30000, DLOCK_NO_FENCE, 10, 100);
    dlock_lock *fenced = test_lock_new(c, "acked-c", 30000, 0, 10, 100);
    test_redis *p = primary_now(), *r = replica_now();
    long long before = dbsize(p);
    test_redis_pause(r);
    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(l, 0);
    int64_t took = test_now_ms() - t0;
    print_message("replica stopped: %s after %lld ms (%s)\n", dlock_errname(rc),
                  (long long)took, dlock_lock_errmsg(l));
    assert_int_equal(rc, DLOCK_ENOREPLICAS);
    assert_non_null(strstr(dlock_lock_errmsg(l), "0 of 1 replicas acknowledged"));
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    assert_int_equal(test_key_exists(p, "acked-b"), 0);
    assert_int_equal(dbsize(p), before);
    /* Not retried by a wait: the replica will not come back by itself. */
    t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(l, 5000), DLOCK_ENOREPLICAS);
    assert_true(test_now_ms() - t0 < 3000);
    /* With fencing, the counter is the one key left (tokens never go
     * back); the lock key is gone. */
    assert_int_equal(dlock_lock_acquire(fenced, 0), DLOCK_ENOREPLICAS);
    assert_int_equal(test_key_exists(p, "acked-c"), 0);
    test_redis_resume(r);
    /* With the replica back, the same handle acquires. "Back" is when it
     * acknowledges writes again: after SIGCONT on a loaded machine that
     * can take longer than the 300 ms the acquire's WAIT gives it, and
     * DLOCK_ENOREPLICAS is not retried. */
    assert_true(test_redis_replica_acks(p, "acked-probe", 10000));
    assert_int_equal(dlock_lock_acquire(l, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(fenced);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void extend_refused_with_the_replica_stopped_keeps_the_lease(void **state)
{
    (void)state;
    dlock_client *c = acked_client(1, 300);
    dlock_lock *l = test_lock_new(c, "acked-d", 30000, DLOCK_REENTRANT, 10, 100);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_redis *r = replica_now();
    test_redis_pause(r);
    int rc = dlock_lock_extend(l, 60000);
    test_redis_resume(r);
    assert_int_equal(rc, DLOCK_ENOREPLICAS);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    int64_t v = dlock_lock_validity_ms(l);
    assert_true(v > 0 && v <= 30000); /* the old lease, not the unconfirmed one */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void more_replicas_than_exist_is_refused(void **state)
{
    (void)state;
    dlock_client *c = acked_client(2, 200);
    dlock_lock *l = test_lock_new(c, "acked-e", 30000, 0, 10, 100);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOREPLICAS);
    assert_non_null(strstr(dlock_lock_errmsg(l), "1 of 2 replicas acknowledged"));
    assert_int_equal(test_key_exists(primary_now(), "acked-e"), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* The command line: `dlock --min-replicas 1 run` through the sentinels
 * with the replica stopped exits 69 (unavailable), says why, never runs
 * the program, and leaves nothing on the primary. */
static void cli_min_replicas_refused_with_the_replica_stopped(void **state)
{
    (void)state;
#ifndef DLOCK_CLI_PATH
    skip();
#else
    test_redis *p = primary_now(), *r = replica_now();
    long long before = dbsize(p);
    char out[400], cmd[2600];
    test_tmp_path(out, sizeof out, "dlock-cli-out");
    snprintf(cmd, sizeof cmd,
             "'%s' -r '%s' --min-replicas 1 --min-replicas-timeout 300ms run --no-fence "
             "cli-acked -- touch '%s.ran' 2>'%s'",
             DLOCK_CLI_PATH, S.url, out, out);
    test_redis_pause(r);
    int st = system(cmd);
    test_redis_resume(r);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 69);
    char ran[420], msg[512] = "";
    snprintf(ran, sizeof ran, "%s.ran", out);
    assert_int_not_equal(access(ran, F_OK), 0);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    size_t n = fread(msg, 1, sizeof msg - 1, f);
    msg[n] = '\0';
    fclose(f);
    unlink(out);
    print_message("dlock said: %s", msg);
    assert_non_null(strstr(msg, "DLOCK_ENOREPLICAS"));
    assert_int_equal(test_key_exists(p, "cli-acked"), 0);
    assert_int_equal(dbsize(p), before);
    /* With the replica back, the same command runs the program. */
    snprintf(cmd, sizeof cmd,
             "'%s' -r '%s' --min-replicas 1 run --no-fence cli-acked -- touch '%s'",
             DLOCK_CLI_PATH, S.url, ran);
    st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(access(ran, F_OK), 0);
    unlink(ran);
#endif
}

static void min_replicas_options_are_checked(void **state)
{
    (void)state;
    const char *urls[1] = {S.url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_client *c = NULL;
    o.min_replicas = -1;
    assert_int_equal(dlock_client_new(&c, urls, 1, &o, NULL, 0), DLOCK_EINVAL);
    o.min_replicas = 1;
    o.min_replicas_timeout_ms = 0;
    assert_int_equal(dlock_client_new(&c, urls, 1, &o, NULL, 0), DLOCK_EINVAL);
    o.min_replicas_timeout_ms = 60001;
    assert_int_equal(dlock_client_new(&c, urls, 1, &o, NULL, 0), DLOCK_EINVAL);
    /* A version 2 caller's struct ends before min_replicas: defaults. */
    assert_int_equal(dlock_client_options_init(&o, 2), DLOCK_OK);
    assert_int_equal(o.version, 2u);
    assert_int_equal(dlock_client_new(&c, urls, 1, &o, NULL, 0), DLOCK_OK);
    dlock_client_free(c);
    assert_string_equal(dlock_errname(DLOCK_ENOREPLICAS), "DLOCK_ENOREPLICAS");
}

/* SENTINEL FAILOVER demotes the primary gracefully: a pooled connection to
 * it stays open and now gets READONLY. The client must go back to the
 * sentinels rather than fail with DLOCK_EREFUSED. */
static atomic_int failovers_followed, followed_port;

static void note_failover(void *arg, const dlock_node_event *ev)
{
    (void)arg;
    if (ev->what == DLOCK_NODE_FAILOVER_FOLLOWED && !strncmp(ev->node, "127.0.0.1:", 10)) {
        atomic_store(&followed_port, atoi(ev->node + 10));
        atomic_fetch_add(&failovers_followed, 1);
    }
}

static void switch_over_is_followed(void **state)
{
    (void)state;
    static const dlock_observer obs = {.version = DLOCK_OBSERVER_VERSION,
                                       .node_event = note_failover};
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.observer = &obs;
    dlock_client *c = sentinel_client(S.url, &co);
    dlock_lock *l = test_lock_new(c, "sentinel-d", 30000, 0, 10, 100);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* pools a connection */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    int old_port = test_sentinel_primary_port(&S);
    redisReply *r = test_cmd(&S.sentinel[0], "SENTINEL FAILOVER %s", S.master_name);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    int new_port = test_sentinel_wait_failover(&S, old_port, 30000);
    assert_true(new_port > 0);
    /* Until the sentinels reconfigure it, the old primary still takes
     * writes (Sentinel gives no more: docs/deployment.md); once it is a
     * replica it answers READONLY on the pooled connection. */
    test_redis *old = test_sentinel_node(&S, old_port);
    int64_t until = test_now_ms() + 20000;
    for (;;) {
        redisReply *role = test_cmd(old, "ROLE");
        int demoted = role->type == REDIS_REPLY_ARRAY && !strcmp(role->element[0]->str, "slave");
        freeReplyObject(role);
        if (demoted)
            break;
        assert_true(test_now_ms() < until);
        test_sleep_ms(50);
    }
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(l, 20000), DLOCK_OK);
    print_message("switch-over: acquire through the new primary took %lld ms\n",
                  (long long)(test_now_ms() - t0));
    assert_int_equal(test_key_exists(test_sentinel_node(&S, new_port), "sentinel-d"), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    /* The observer heard of it once, naming the new primary. */
    assert_int_equal(atomic_load(&failovers_followed), 1);
    assert_int_equal(atomic_load(&followed_port), new_port);
    dlock_stats st;
    assert_int_equal(dlock_client_stats(c, &st, sizeof st), DLOCK_OK);
    assert_int_equal(st.topology_changes, 1);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* The primary is killed with a lock held; a waiting acquire of another
 * name rides out the failover, and the held lock's key, replicated before
 * the kill, is still there on the new primary. */
static void primary_killed_lock_usable_after_failover(void **state)
{
    (void)state;
    dlock_client *c = sentinel_client(S.url, NULL);
    dlock_lock *held = test_lock_new(c, "sentinel-e", 60000, 0, 10, 100);
    dlock_lock *next = test_lock_new(c, "sentinel-f", 30000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(held, 0), DLOCK_OK);
    test_redis *p = primary_now();
    int old_port = p->port;
    /* Let the replica have the key before the kill (asynchronous
     * replication could lose it otherwise: docs/deployment.md). */
    wait_for_replica(p);

    test_redis_kill9(p);
    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(next, 30000);
    int64_t took = test_now_ms() - t0;
    print_message("failover: waiting acquire succeeded after %lld ms (%s)\n", (long long)took,
                  dlock_lock_errmsg(next));
    assert_int_equal(rc, DLOCK_OK);
    int new_port = test_sentinel_primary_port(&S);
    assert_int_not_equal(new_port, old_port);
    test_redis *np = test_sentinel_node(&S, new_port);
    assert_int_equal(test_key_exists(np, "sentinel-f"), 1);
    assert_int_equal(test_key_exists(np, "sentinel-e"), 1);
    /* The surviving holder can still release through the new primary. */
    assert_int_equal(dlock_lock_release(held), DLOCK_OK);
    assert_int_equal(dlock_lock_release(next), DLOCK_OK);
    assert_int_equal(test_key_exists(np, "sentinel-e"), 0);
    dlock_lock_free(held);
    dlock_lock_free(next);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lock_lands_on_the_primary),
        cmocka_unit_test(malformed_sentinel_urls_are_einval),
        cmocka_unit_test(unknown_master_name_is_refused),
        cmocka_unit_test(unreachable_sentinels_are_eio),
        cmocka_unit_test(readonly_primary_is_not_a_refusal),
        cmocka_unit_test(acknowledged_acquire_is_on_the_replica_at_once),
        cmocka_unit_test(acquire_refused_with_the_replica_stopped_leaves_nothing),
        cmocka_unit_test(extend_refused_with_the_replica_stopped_keeps_the_lease),
        cmocka_unit_test(more_replicas_than_exist_is_refused),
        cmocka_unit_test(min_replicas_options_are_checked),
        cmocka_unit_test(cli_min_replicas_refused_with_the_replica_stopped),
        cmocka_unit_test(switch_over_is_followed),
        /* Last: it kills the primary. */
        cmocka_unit_test(primary_killed_lock_usable_after_failover),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
