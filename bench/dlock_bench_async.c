/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench section "async": locks on one event loop (issue 37). For C =
 * 1, 16 and 256 concurrent acquire + release loops, each on a name of its
 * own, in one thread, each round runs these sides for the same time each,
 * in an order that rotates from round to round:
 *   loop     a looped client (libuv, <dlock/libuv.h>; pool_size C,
 *            wake-ups off, DLOCK_NO_FENCE): C handles, each cycle
 *            dlock_lock_acquire_start(0), then dlock_lock_release_start();
 *   hasync   hiredis's async API on the same libuv loop, one connection,
 *            sending what the loop side sends (SET NX PX GET and PTTL
 *            pipelined, then the release script), C cycles in flight on
 *            it: the pipelined limit the issue compares against;
 *   blocking T = 1, 16, 64 threads of the blocking client (pool_size T),
 *            acquire(0) + release each on its own name.
 * Figures are cycles per second of the process; loop/hasync and
 * loop(256)/blocking(64) are the ratios to read, as medians of the
 * per-round ratios. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>

#include "dlock.h"
#include "dlock/libuv.h"
#include "dlock_bench.h"
#include "scripts.h"
#include "uv_support.h"

#define AS_ROUNDS 3
#define AS_SIDE_S 0.5
#define AS_MAX 256
#define AS_THREADS_MAX 64

enum { LOOP, HASYNC, BLOCKING, SIDES };
static const char *const side_name[SIDES] = {"loop", "hasync", "blocking"};
static const int as_counts[] = {1, 16, AS_MAX};
static const int th_counts[] = {1, 16, AS_THREADS_MAX}; /* the blocking side's T */
#define N_COUNTS 3

typedef struct as_run as_run;

typedef struct as_worker {
    as_run *r;
    dlock_lock *l;
    char key[64], tok[33];
    long cycles;
    pthread_t t;
} as_worker;

struct as_run {
    bench *b;
    uv_loop_t loop;
    redisAsyncContext *ac;
    const char *rel_sha;
    int64_t end_ns;
    int active, failed;
    as_worker w[AS_MAX];
};

/* ---- loop: the looped client ------------------------------------------------------ */

static void lp_go(as_worker *w);

static void lp_released(dlock_lock *l, int rc, void *arg)
{
    as_worker *w = arg;
    (void)l;
    if (rc != DLOCK_OK)
        w->r->failed = 1;
    w->cycles++;
    lp_go(w);
}

static void lp_acquired(dlock_lock *l, int rc, void *arg)
{
    as_worker *w = arg;
    if (rc != DLOCK_OK || dlock_lock_release_start(l, lp_released, w) != DLOCK_OK) {
        w->r->failed = 1;
        w->r->active--;
    }
}

static void lp_go(as_worker *w)
{
    as_run *r = w->r;
    if (r->failed || bench_stop || bench_now_ns() >= r->end_ns ||
        dlock_lock_acquire_start(w->l, 0, lp_acquired, w) != DLOCK_OK)
        r->active--;
}

/* ---- hasync: hiredis's async API, the same commands ----------------------------- */

static void h_go(as_worker *w);

static void h_released(redisAsyncContext *ac, void *reply, void *arg)
{
    as_worker *w = arg;
    redisReply *y = reply;
    (void)ac;
    if (!y || y->type != REDIS_REPLY_INTEGER || y->integer != 1)
        w->r->failed = 1;
    w->cycles++;
    h_go(w);
}

static void h_ttl(redisAsyncContext *ac, void *reply, void *arg)
{
    as_worker *w = arg;
    (void)reply;
    redisAsyncCommand(ac, h_released, w, "EVALSHA %s 1 %s %s %s", w->r->rel_sha, w->key, w->tok,
                      "");
}

static void h_set(redisAsyncContext *ac, void *reply, void *arg)
{
    as_worker *w = arg;
    redisReply *y = reply;
    (void)ac;
    if (!y || y->type != REDIS_REPLY_NIL) /* a grant: no earlier value */
        w->r->failed = 1;
}

static void h_go(as_worker *w)
{
    as_run *r = w->r;
    if (r->failed || bench_stop || bench_now_ns() >= r->end_ns) {
        r->active--;
        return;
    }
    bench_token(w->tok);
    redisAsyncCommand(r->ac, h_set, w, "SET %s %s NX PX 10000 GET", w->key, w->tok);
    redisAsyncCommand(r->ac, h_ttl, w, "PTTL %s", w->key);
}

/* C loops of a side on the loop for secs: cycles per second, 0 on a failure. */
static double on_loop(as_run *r, int side, int C, dlock_lock **locks, double secs)
{
    r->failed = 0;
    r->active = C;
    for (int i = 0; i < C; i++) {
        as_worker *w = &r->w[i];
        w->r = r;
        w->l = locks ? locks[i] : NULL;
        w->cycles = 0;
        snprintf(w->key, sizeof w->key, "bench:as:h:%d", i);
    }
    int64_t t0 = bench_now_ns();
    r->end_ns = t0 + (int64_t)(secs * 1e9);
    for (int i = 0; i < C; i++)
        (side == LOOP ? lp_go : h_go)(&r->w[i]);
    while (r->active > 0)
        uv_run(&r->loop, UV_RUN_ONCE);
    int64_t t1 = bench_now_ns();
    long n = 0;
    for (int i = 0; i < C; i++)
        n += r->w[i].cycles;
    if (r->failed) {
        bench_fail(r->b, "async: a %s cycle failed (C=%d)", side_name[side], C);
        return 0;
    }
    return (double)n / ((double)(t1 - t0) / 1e9);
}

/* ---- blocking: T threads of the blocking client ---------------------------------- */

static void *blocking_main(void *arg)
{
    as_worker *w = arg;
    while (!bench_stop && bench_now_ns() < w->r->end_ns) {
        if (dlock_lock_acquire(w->l, 0) != DLOCK_OK || dlock_lock_release(w->l) != DLOCK_OK) {
            w->r->failed = 1;
            break;
        }
        w->cycles++;
    }
    return NULL;
}

static double threaded(as_run *r, int T, dlock_lock **locks, double secs)
{
    r->failed = 0;
    int64_t t0 = bench_now_ns();
    r->end_ns = t0 + (int64_t)(secs * 1e9);
    for (int i = 0; i < T; i++) {
        r->w[i] = (as_worker){.r = r, .l = locks[i]};
        if (pthread_create(&r->w[i].t, NULL, blocking_main, &r->w[i]) != 0)
            bench_die("pthread_create failed");
    }
    long n = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(r->w[i].t, NULL);
        n += r->w[i].cycles;
    }
    int64_t t1 = bench_now_ns();
    if (r->failed) {
        bench_fail(r->b, "async: a blocking cycle failed (T=%d)", T);
        return 0;
    }
    return (double)n / ((double)(t1 - t0) / 1e9);
}

/* ---- waiters: many waiting on one name, one loop or one thread each ----------------- */

/* AS_WAITERS handles wait on one name that a holder has; then the holder
 * lets go and each waiter takes the lock once and gives it back (S3's
 * shape, every process's waiters in one). Measured per side: the memory a
 * waiting lock costs (RSS while all wait, over the RSS before their
 * handles were made, per waiter), and per critical section the commands
 * the server ran (INFO total_commands_processed) and the process's CPU. */
#define AS_WAITERS 1000

typedef struct wt_run {
    bench *b;
    uv_loop_t *loop;
    dlock_lock *l[AS_WAITERS];
    pthread_t t[AS_WAITERS];
    int done, failed;
} wt_run;

static void wt_released(dlock_lock *l, int rc, void *arg)
{
    wt_run *w = arg;
    (void)l;
    w->failed |= rc != DLOCK_OK;
    w->done++;
}

static void wt_granted(dlock_lock *l, int rc, void *arg)
{
    wt_run *w = arg;
    if (rc != DLOCK_OK || dlock_lock_release_start(l, wt_released, w) != DLOCK_OK) {
        w->failed = 1;
        w->done++;
    }
}

static void *wt_thread(void *arg)
{
    dlock_lock *l = arg;
    int ok = dlock_lock_acquire(l, 60000) == DLOCK_OK && dlock_lock_release(l) == DLOCK_OK;
    return ok ? NULL : arg;
}

/* One side: c a looped client (w->loop set) or a blocking one. Prints and
 * writes its line. */
static void waiters_side(bench *b, wt_run *w, dlock_client *c, const char *side, FILE *f)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 30000;
    dlock_lock *holder = NULL;
    char name[64];
    snprintf(name, sizeof name, "bench:as:waiters:%s", side);
    long rss0 = bench_rss_bytes(), heap0 = bench_heap_bytes();
    int ok = dlock_lock_new(&holder, c, name, &o) == DLOCK_OK;
    for (int i = 0; ok && i < AS_WAITERS; i++)
        ok = dlock_lock_new(&w->l[i], c, name, &o) == DLOCK_OK;
    if (!ok) {
        bench_fail(b, "async: waiters: setup failed (%s)", side);
        return;
    }
    w->done = w->failed = 0;
    if (w->loop) {
        test_uv_result r = {0};
        ok = dlock_lock_acquire_start(holder, 0, test_uv_done, &r) == DLOCK_OK;
        while (ok && !r.calls)
            uv_run(w->loop, UV_RUN_ONCE);
        ok = ok && r.rc == DLOCK_OK;
        for (int i = 0; ok && i < AS_WAITERS; i++)
            ok = dlock_lock_acquire_start(w->l[i], 60000, wt_granted, w) == DLOCK_OK;
        int64_t settle = bench_now_ns() + 3000000000;
        while (ok && bench_now_ns() < settle)
            uv_run(w->loop, UV_RUN_NOWAIT), bench_sleep_until(bench_now_ns() + 1000000);
    } else {
        ok = dlock_lock_acquire(holder, 0) == DLOCK_OK;
        for (int i = 0; ok && i < AS_WAITERS; i++)
            ok = pthread_create(&w->t[i], NULL, wt_thread, w->l[i]) == 0;
        bench_sleep_until(bench_now_ns() + 3000000000);
    }
    if (!ok)
        bench_die("async: waiters: the %s side could not start", side);
    long rss1 = bench_rss_bytes(), heap1 = bench_heap_bytes();
    double clients = bench_info(&b->srv[0], "clients", "connected_clients");
    double calls0 = bench_info(&b->srv[0], "stats", "total_commands_processed"), cpu0 = bench_cpu_s();
    int64_t t0 = bench_now_ns();
    if (w->loop) {
        test_uv_result r = {0};
        (void)dlock_lock_release_start(holder, test_uv_done, &r);
        while (w->done < AS_WAITERS)
            uv_run(w->loop, UV_RUN_ONCE);
    } else {
        (void)dlock_lock_release(holder);
        for (int i = 0; i < AS_WAITERS; i++)
            w->failed |= pthread_join(w->t[i], NULL) != 0;
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    double calls = bench_info(&b->srv[0], "stats", "total_commands_processed") - calls0 - 1;
    double cpu = bench_cpu_s() - cpu0;
    if (w->failed)
        bench_fail(b, "async: waiters: a %s section failed", side);
    double heap_kib = (double)(heap1 - heap0) / AS_WAITERS / 1024;
    double rss_kib = (double)(rss1 - rss0) / AS_WAITERS / 1024;
    printf("%-8s %d waiters: %5.0f sections/s, %4.1f commands and %5.1f us CPU per section; "
           "per waiting lock %5.1f KiB heap, %5.1f KiB RSS; %.0f connections while waiting\n",
           side, AS_WAITERS, AS_WAITERS / secs, calls / AS_WAITERS, cpu / AS_WAITERS * 1e6,
           heap_kib, rss_kib, clients);
    if (f)
        fprintf(f, "waiters\t%s\t%d\t%.0f\t%.2f\t%.1f\t%.2f\t%.2f\n", side, AS_WAITERS,
                AS_WAITERS / secs, calls / AS_WAITERS, cpu / AS_WAITERS * 1e6, heap_kib, rss_kib);
    for (int i = 0; i < AS_WAITERS; i++)
        dlock_lock_free(w->l[i]);
    dlock_lock_free(holder);
}

static void bench_waiters(bench *b, uv_loop_t *loop, FILE *f)
{
    static wt_run w;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    dlock_loop hooks = dlock_libuv_loop(loop);
    o.loop = &hooks;
    dlock_client *cl = bench_client_opts(b, 1, &o);
    o.loop = NULL;
    dlock_client *cb = bench_client_opts(b, 1, &o);
    if (!cl || !cb) {
        bench_fail(b, "async: waiters: no client");
    } else {
        printf("\n== async waiters (one name held, %d waiting, then one section each)\n",
               AS_WAITERS);
        memset(&w, 0, sizeof w);
        w.loop = loop;
        waiters_side(b, &w, cl, "loop", f);
        w.loop = NULL;
        waiters_side(b, &w, cb, "threads", f);
    }
    dlock_client_free(cl);
    dlock_client_free(cb);
}

/* ---- the section ------------------------------------------------------------------- */

static int make_locks(dlock_client *c, const char *prefix, int n, dlock_lock **out)
{
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "bench:as:%s:%d", prefix, i);
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 10000;
        o.flags = DLOCK_NO_FENCE;
        if (dlock_lock_new(&out[i], c, name, &o) != DLOCK_OK)
            return -1;
    }
    return 0;
}

static double side(as_run *r, int s, int k, dlock_lock **looped, dlock_lock **blocking,
                   double secs)
{
    if (s == BLOCKING)
        return threaded(r, th_counts[k], blocking, secs);
    return on_loop(r, s, as_counts[k], s == LOOP ? looped : NULL, secs);
}

static void report(FILE *f, double cps[N_COUNTS][SIDES][AS_ROUNDS], int rounds)
{
    printf("median over %d rounds (cycles/s of the process):\n"
           "    C      loop    hasync   T  blocking  loop/hasync  loop/blocking\n", rounds);
    for (int k = 0; k < N_COUNTS; k++) {
        double m[SIDES], x[2][AS_ROUNDS];
        for (int s = 0; s < SIDES; s++) {
            double v[AS_ROUNDS];
            memcpy(v, cps[k][s], sizeof v);
            m[s] = bench_median(v, rounds);
        }
        for (int i = 0; i < rounds; i++) {
            x[0][i] = cps[k][LOOP][i] / cps[k][HASYNC][i];
            x[1][i] = cps[k][LOOP][i] / cps[k][BLOCKING][i];
        }
        double r0 = bench_median(x[0], rounds), r1 = bench_median(x[1], rounds);
        printf("%5d %9.0f %9.0f %3d %9.0f %12.3f %14.3f\n", as_counts[k], m[LOOP], m[HASYNC],
               th_counts[k], m[BLOCKING], r0, r1);
        if (f)
            fprintf(f, "median\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.4f\t%.4f\n", as_counts[k], th_counts[k],
                    m[LOOP], m[HASYNC], m[BLOCKING], r0, r1);
    }
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    (void)ac;
    if (status != REDIS_OK)
        bench_die("async: hiredis async connect failed");
}

void bench_async(bench *b)
{
    static as_run r; /* 256 workers: not on the stack */
    static double cps[N_COUNTS][SIDES][AS_ROUNDS];
    static dlock_lock *looped[AS_MAX], *blocking[AS_THREADS_MAX];
    memset(&r, 0, sizeof r);
    r.b = b;
    r.rel_sha = dlock__script_get(DLOCK__S_RELEASE)->sha;
    uv_loop_init(&r.loop);
    dlock_loop hooks = dlock_libuv_loop(&r.loop);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.pool_size = AS_MAX;
    o.wakeups = 0;
    o.loop = &hooks;
    dlock_client *cl = bench_client_opts(b, 1, &o);
    o.loop = NULL;
    o.pool_size = AS_THREADS_MAX;
    dlock_client *cb = bench_client_opts(b, 1, &o);
    FILE *f = NULL;
    int rounds = 0;
    if (!cl || !cb || make_locks(cl, "loop", AS_MAX, looped) != 0 ||
        make_locks(cb, "blocking", AS_THREADS_MAX, blocking) != 0) {
        bench_fail(b, "async: setup failed");
        goto out;
    }
    redisContext *admin = test_redis_admin(&b->srv[0]);
    redisReply *x = admin ? redisCommand(admin, "SCRIPT LOAD %s",
                                         dlock__script_get(DLOCK__S_RELEASE)->body)
                          : NULL;
    if (x)
        freeReplyObject(x);
    if (admin)
        redisFree(admin);
    r.ac = redisAsyncConnect("127.0.0.1", b->srv[0].port);
    if (!r.ac || r.ac->err || redisLibuvAttach(r.ac, &r.loop) != REDIS_OK) {
        bench_fail(b, "async: hiredis async context failed");
        goto out;
    }
    redisAsyncSetConnectCallback(r.ac, on_connect);
    f = bench_tsv_open(b, "async.tsv",
                       "round\tC\tT\tloop_cps\thasync_cps\tblocking_cps\tloop_x_hasync\t"
                       "loop_x_blocking");
    printf("\n== async (C loops on one event loop, names of their own; %d interleaved rounds of "
           "%.1f s per side)\n", AS_ROUNDS, AS_SIDE_S);
    for (int k = 0; k < N_COUNTS; k++) /* warm-up: connections, scripts, threads */
        for (int s = 0; s < SIDES; s++)
            side(&r, s, k, looped, blocking, 0.1);
    for (; rounds < AS_ROUNDS && !bench_stop && !b->failures; rounds++) {
        for (int k = 0; k < N_COUNTS; k++) {
            for (int j = 0; j < SIDES; j++) {
                int s = (j + rounds) % SIDES;
                cps[k][s][rounds] = side(&r, s, k, looped, blocking, AS_SIDE_S);
            }
            printf("round %d C=%-3d loop %8.0f  hasync %8.0f  T=%-2d blocking %8.0f\n", rounds + 1,
                   as_counts[k], cps[k][LOOP][rounds], cps[k][HASYNC][rounds], th_counts[k],
                   cps[k][BLOCKING][rounds]);
            if (f)
                fprintf(f, "%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.4f\t%.4f\n", rounds + 1, as_counts[k],
                        th_counts[k], cps[k][LOOP][rounds], cps[k][HASYNC][rounds],
                        cps[k][BLOCKING][rounds], cps[k][LOOP][rounds] / cps[k][HASYNC][rounds],
                        cps[k][LOOP][rounds] / cps[k][BLOCKING][rounds]);
        }
    }
    if (rounds > 0)
        report(f, cps, rounds);
    if (!bench_stop && !b->failures)
        bench_waiters(b, &r.loop, f);
out:
    bench_tsv_close(b, f, "async.tsv");
    if (r.ac)
        redisAsyncDisconnect(r.ac);
    for (int i = 0; i < AS_MAX; i++)
        dlock_lock_free(looped[i]);
    for (int i = 0; i < AS_THREADS_MAX; i++)
        dlock_lock_free(blocking[i]);
    dlock_client_free(cl);
    dlock_client_free(cb);
    uv_run(&r.loop, UV_RUN_DEFAULT); /* the looped client's end, the async context's */
    uv_loop_close(&r.loop);
}
