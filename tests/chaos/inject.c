/* SPDX-License-Identifier: BSD-3-Clause */
/* Fault rounds. Every fault goes to a process this driver started, by its
 * pid (workers, redis-servers, proxies), or is a command sent to a node. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "chaos.h"
#include "dlock.h"

enum fault_kind {
    F_KILL_HOLDER = 1,
    F_STOP_HOLDER,
    F_KILL_NODE,
    F_RESTART_NODE,
    F_STOP_NODE,
    F_DEBUG_SLEEP,
    F_CLIENT_PAUSE,
    F_PROXY,
    F_SCRIPT_FLUSH,
    F_KILL_WAITER,
    F_CLIENT_KILL,
    F_STOP_WAITER
};

static void note(chaos_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(chaos_run *run, const char *fmt, ...)
{
    size_t o = strlen(run->note);
    if (o + 1 >= sizeof run->note)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(run->note + o, sizeof run->note - o, fmt, ap);
    va_end(ap);
}

/* `k` distinct node indexes out of n, at random. */
static void pick_nodes(chaos_run *run, int k, int *out)
{
    int n = run->sc->nodes, idx[CHAOS_MAX_NODES];
    for (int i = 0; i < n; i++)
        idx[i] = i;
    for (int i = 0; i < k && i < n; i++) {
        int j = i + (int)chaos_rand(run, (unsigned)(n - i));
        int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
        out[i] = idx[i];
    }
}

int chaos_inject_none(chaos_run *run, int round)
{
    (void)run;
    (void)round;
    return 0;
}

int chaos_inject_kill_holder(chaos_run *run, int round)
{
    (void)round;
    int slot = chaos_find_holder(run, 2000, 0);
    if (slot < 0)
        return 0;
    chaos_kill_worker(run, slot);
    chaos_fault(run, F_KILL_HOLDER);
    return 1;
}

static int stop_holder(chaos_run *run, int64_t pause_ms)
{
    int slot = chaos_find_holder(run, 2000, 0);
    if (slot < 0)
        return 0;
    pid_t pid = run->pids[slot];
    kill(pid, SIGSTOP);
    chaos_fault(run, F_STOP_HOLDER);
    chaos_sleep_ms(pause_ms);
    kill(pid, SIGCONT);
    return 1;
}

int chaos_inject_stop_holder_short(chaos_run *run, int round)
{
    (void)round;
    return stop_holder(run, run->sc->ttl_ms * 3 / 10);
}

int chaos_inject_stop_holder_long(chaos_run *run, int round)
{
    (void)round;
    return stop_holder(run, run->sc->ttl_ms * 2);
}

int chaos_inject_kill2_restart(chaos_run *run, int round)
{
    int pick[2];
    (void)round;
    pick_nodes(run, 2, pick);
    for (int i = 0; i < 2; i++) {
        test_redis_kill9(&run->nodes[pick[i]]);
        chaos_fault(run, F_KILL_NODE);
    }
    chaos_sleep_ms(run->sc->ttl_ms * 3 / 2); /* restart after more than the TTL */
    for (int i = 0; i < 2; i++)
        if (test_redis_restart(&run->nodes[pick[i]]) != 0)
            run->probe_failed = 1;
    return 2;
}

/* With a majority down, an acquire must fail fast with DLOCK_ENOQUORUM. */
static void probe_noquorum(chaos_run *run)
{
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    co.wakeups = 0; /* no helper thread in the driver: it forks workers */
    lo.ttl_ms = run->sc->ttl_ms;
    if (dlock_client_new(&c, run->wcfg.urls, run->wcfg.n_urls, &co, NULL, 0) != DLOCK_OK ||
        dlock_lock_new(&l, c, run->wcfg.lock_name, &lo) != DLOCK_OK) {
        run->probe_failed = 1;
        dlock_client_free(c);
        return;
    }
    const int64_t waits[2] = {0, 300};
    for (int i = 0; i < 2; i++) {
        int64_t t0 = chaos_now_ns();
        int rc = dlock_lock_acquire(l, waits[i]);
        int64_t ms = (chaos_now_ns() - t0) / 1000000;
        /* Refused connections fail at once; a waiting acquire stops at
         * its deadline; allow scheduling slack on a loaded host. */
        int64_t bound = waits[i] + 500;
        if (rc != DLOCK_ENOQUORUM || ms > bound) {
            run->probe_failed = 1;
            note(run, "PROBE FAILED: acquire(wait %lld) -> %s in %lld ms; ", (long long)waits[i],
                 dlock_errname(rc), (long long)ms);
        } else if (run->faults <= 3) {
            note(run, "acquire(wait %lld) -> ENOQUORUM in %lld ms (bound %lld); ",
                 (long long)waits[i], (long long)ms, (long long)bound);
        }
        if (rc == DLOCK_OK)
            dlock_lock_release(l);
    }
    dlock_lock_free(l);
    dlock_client_free(c);
}

int chaos_inject_kill3_noquorum(chaos_run *run, int round)
{
    int pick[3];
    (void)round;
    pick_nodes(run, 3, pick);
    for (int i = 0; i < 3; i++) {
        test_redis_kill9(&run->nodes[pick[i]]);
        chaos_fault(run, F_KILL_NODE);
    }
    probe_noquorum(run);
    chaos_sleep_ms(run->sc->ttl_ms * 3 / 2);
    for (int i = 0; i < 3; i++)
        if (test_redis_restart(&run->nodes[pick[i]]) != 0)
            run->probe_failed = 1;
    return 3;
}

/* A majority restarts without persistence while the lock is held: the
 * holder's keys are gone there. */
int chaos_inject_majority_restart(chaos_run *run, int round)
{
    int pick[3];
    (void)round;
    if (chaos_find_holder(run, 3000, run->sc->hold_ms / 4) < 0)
        return 0;
    pick_nodes(run, 3, pick);
    for (int i = 0; i < 3; i++) {
        if (test_redis_restart(&run->nodes[pick[i]]) != 0)
            run->probe_failed = 1;
        chaos_fault(run, F_RESTART_NODE);
    }
    return 3;
}

/* Send a command and do not wait for its reply (DEBUG SLEEP blocks). */
static redisContext *send_nowait(const test_redis *r, const char *a0, const char *a1,
                                 const char *a2, const char *a3)
{
    redisContext *c = test_redis_admin(r);
    const char *argv[4] = {a0, a1, a2, a3};
    int done = 0;
    if (!c)
        return NULL;
    redisAppendCommandArgv(c, a3 ? 4 : 3, argv, NULL);
    while (!done && redisBufferWrite(c, &done) == REDIS_OK)
        ;
    return c;
}

/* A stalled node, three ways: SIGSTOP, DEBUG SLEEP, CLIENT PAUSE. With
 * several nodes, every fourth round stalls two at once. */
int chaos_inject_node_stall(chaos_run *run, int round)
{
    int n = run->sc->nodes > 1 && round % 4 == 3 ? 2 : 1, pick[2];
    int64_t ms = run->sc->ttl_ms * 3 / 2;
    redisContext *pending[2] = {NULL, NULL};
    char arg[32];
    pick_nodes(run, n, pick);
    for (int i = 0; i < n; i++) {
        test_redis *node = &run->nodes[pick[i]];
        switch (round % 3) {
        case 0:
            test_redis_pause(node);
            chaos_fault(run, F_STOP_NODE);
            break;
        case 1:
            snprintf(arg, sizeof arg, "%.3f", (double)ms / 1000.0);
            pending[i] = send_nowait(node, "DEBUG", "SLEEP", arg, NULL);
            chaos_fault(run, F_DEBUG_SLEEP);
            break;
        default:
            snprintf(arg, sizeof arg, "%lld", (long long)ms);
            pending[i] = send_nowait(node, "CLIENT", "PAUSE", arg, "ALL");
            chaos_fault(run, F_CLIENT_PAUSE);
            break;
        }
    }
    chaos_sleep_ms(ms);
    for (int i = 0; i < n; i++) {
        test_redis_resume(&run->nodes[pick[i]]);
        if (pending[i])
            redisFree(pending[i]);
    }
    return n;
}

/* One or two proxies misbehave for a while, then pass again. */
int chaos_inject_proxy(chaos_run *run, int round)
{
    int n = run->sc->nodes > 1 && round % 3 == 2 ? 2 : 1, pick[2];
    pick_nodes(run, n, pick);
    for (int i = 0; i < n; i++) {
        chaos_proxy_mode m = (chaos_proxy_mode)(1 + chaos_rand(run, CHAOS_PROXY_MODES - 1));
        int delay = 20 + (int)chaos_rand(run, 300);
        if (chaos_proxy_set(&run->proxies[pick[i]], m, delay) != 0)
            run->probe_failed = 1;
        chaos_fault(run, F_PROXY);
    }
    chaos_sleep_ms(100 + chaos_rand(run, (unsigned)run->sc->ttl_ms));
    for (int i = 0; i < n; i++)
        if (chaos_proxy_set(&run->proxies[pick[i]], CHAOS_PROXY_PASS, 0) != 0)
            run->probe_failed = 1;
    return n;
}

/* Connection faults for the ownership rows (issue 22), on one node:
 * every client connection killed (attempts in flight end with unknown
 * outcomes and are undone); writes paused while the connections are
 * killed (attempts cut off before they ran, whose undos run after the
 * pause: the case where an undo once took another handle's hold); or a
 * DEBUG SLEEP past the I/O timeout (replies lost, commands run later). */
int chaos_inject_conn_faults(chaos_run *run, int round)
{
    test_redis *node = &run->nodes[chaos_rand(run, (unsigned)run->sc->nodes)];
    redisReply *r;
    switch (round % 3) {
    case 0:
        r = test_redis_cmd(node, "CLIENT KILL TYPE normal");
        freeReplyObject(r);
        chaos_fault(run, F_CLIENT_KILL);
        return 1;
    case 1:
        r = test_redis_cmd(node, "CLIENT PAUSE 400 WRITE");
        freeReplyObject(r);
        chaos_fault(run, F_CLIENT_PAUSE);
        chaos_sleep_ms(100 + chaos_rand(run, 100));
        r = test_redis_cmd(node, "CLIENT KILL TYPE normal");
        freeReplyObject(r);
        chaos_fault(run, F_CLIENT_KILL);
        chaos_sleep_ms(300);
        return 2;
    default: {
        redisContext *c = send_nowait(node, "DEBUG", "SLEEP", "1.2", NULL);
        chaos_fault(run, F_DEBUG_SLEEP);
        chaos_sleep_ms(1200);
        redisFree(c);
        return 1;
    }
    }
}

int chaos_inject_script_flush(chaos_run *run, int round)
{
    (void)round;
    for (int i = 0; i < run->sc->nodes; i++) {
        redisReply *r = test_redis_cmd(&run->nodes[i], "SCRIPT FLUSH");
        if (r)
            freeReplyObject(r);
        chaos_fault(run, F_SCRIPT_FLUSH);
    }
    return run->sc->nodes;
}

/* A minority of one node, in turn: kill -9 and restart after 1.5 x TTL;
 * SIGSTOP for 1.5 x TTL; restart at once (no persistence: it forgets). */
int chaos_inject_minority_cycle(chaos_run *run, int round)
{
    int pick;
    int64_t ms = run->sc->ttl_ms * 3 / 2;
    pick_nodes(run, 1, &pick);
    test_redis *node = &run->nodes[pick];
    switch (round % 3) {
    case 0:
        test_redis_kill9(node);
        chaos_fault(run, F_KILL_NODE);
        chaos_sleep_ms(ms);
        if (test_redis_restart(node) != 0)
            run->probe_failed = 1;
        break;
    case 1:
        test_redis_pause(node);
        chaos_fault(run, F_STOP_NODE);
        chaos_sleep_ms(ms);
        test_redis_resume(node);
        break;
    default:
        if (test_redis_restart(node) != 0)
            run->probe_failed = 1;
        chaos_fault(run, F_RESTART_NODE);
        chaos_sleep_ms(ms); /* no second restart within a TTL */
        break;
    }
    return 1;
}

/* One node of the minority SIGSTOPped for 2 x TTL: renewals must go on at
 * the majority. */
int chaos_inject_node_stop_minority(chaos_run *run, int round)
{
    int pick;
    (void)round;
    pick_nodes(run, 1, &pick);
    test_redis_pause(&run->nodes[pick]);
    chaos_fault(run, F_STOP_NODE);
    chaos_sleep_ms(run->sc->ttl_ms * 2);
    test_redis_resume(&run->nodes[pick]);
    return 1;
}

/* kill -9 of a worker that waits for the lock (not the holder). */
int chaos_inject_kill_waiter(chaos_run *run, int round)
{
    (void)round;
    int n = run->sc->workers, start = (int)chaos_rand(run, (unsigned)n);
    for (int k = 0; k < n; k++) {
        int slot = (start + k) % n;
        if (run->pids[slot] > 0 && !atomic_load(&run->sh->slot[slot].in_cs)) {
            chaos_kill_worker(run, slot);
            chaos_fault(run, F_KILL_WAITER);
            return 1;
        }
    }
    return 0;
}

/* Fair mode takes a hand-over on its message when the claim it implies
 * has time left (src/redis/fair.c, dlock__fair_handed). Stop a worker outside its
 * section (a waiter in line, or one between sections) for 0.5 to 1.5 x
 * TTL, so a hand-over's message may be read after its claim lapsed; every
 * other round, stop the holder for 0.3 x TTL, inside the claim lease it
 * may hold. */
int chaos_inject_stop_fair(chaos_run *run, int round)
{
    if (round % 2)
        return stop_holder(run, run->sc->ttl_ms * 3 / 10);
    int n = run->sc->workers, start = (int)chaos_rand(run, (unsigned)n);
    for (int k = 0; k < n; k++) {
        int slot = (start + k) % n;
        pid_t pid = run->pids[slot];
        if (pid > 0 && !atomic_load(&run->sh->slot[slot].in_cs)) {
            kill(pid, SIGSTOP);
            chaos_fault(run, F_STOP_WAITER);
            chaos_sleep_ms(run->sc->ttl_ms / 2 + (int64_t)chaos_rand(run, (unsigned)run->sc->ttl_ms));
            kill(pid, SIGCONT);
            return 1;
        }
    }
    return 0;
}
