/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench section "threads": how the blocking API scales with the
 * threads of one process, each on a name of its own, and what an I/O thread
 * that pipelines every thread's requests could gain over it (issue 36,
 * docs/dev/engine-plan.md §5, measurement M2). For T = 1, 8 and 64
 * threads, each round runs these sides for the same time each, in an
 * order that rotates from round to round:
 *   dlock1   T threads, one client on 1 node (pool_size T, wake-ups off,
 *            DLOCK_NO_FENCE), each acquire(0) + release on its own name:
 *            today's driver (each call runs its own requests);
 *   dlock3   the same on a 3-node Redlock client;
 *   conns    T threads, each with its own hiredis connection, sending by
 *            hand what dlock1 sends (the ab section's `wire` cycle): the
 *            same work with no library;
 *   pipe     one thread, one connection, the T threads' cycles in flight
 *            together: T acquires written at once, their replies read,
 *            then T releases. What one I/O thread that pipelines the
 *            callers' requests to a node could send at best, before its
 *            thread hops are paid;
 * and, once per round, `hop`: a mutex + condition variable round trip
 * between two threads, which such an I/O thread adds to every call (one
 * hop there and one back), in µs.
 * Figures are cycles per second of the whole process; the ratios
 * dlock1/conns (the library's cost under threads) and pipe/conns (the
 * most pipelining could gain) are the ones to read, as medians. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock_bench.h"
#include "scripts.h"

#define TH_ROUNDS 5
#define TH_SIDE_S 0.4
#define TH_MAX 64

enum { DL1, DL3, CONNS, PIPE, SIDES };
static const char *const side_name[SIDES] = {"dlock1", "dlock3", "conns", "pipe"};
static const int th_counts[] = {1, 8, TH_MAX};
#define N_COUNTS ((int)(sizeof th_counts / sizeof th_counts[0]))

typedef struct th_run th_run;

typedef struct th_worker {
    th_run *run;
    int id;
    dlock_lock *l;     /* dlock sides */
    redisContext *c;   /* conns */
    long cycles;
    int failed;
    pthread_t t;
} th_worker;

struct th_run {
    bench *b;
    const char *rel_sha;
    int set_get;
    int side;
    int64_t end_ns;
    pthread_barrier_t start;
    th_worker w[TH_MAX];
};

static int wire_release(redisContext *c, const char *sha, const char *key, const char *tok)
{
    redisReply *y = redisCommand(c, "EVALSHA %s 1 %s %s %s", sha, key, tok, "");
    int ok = y && y->type == REDIS_REPLY_INTEGER && y->integer == 1;
    if (y)
        freeReplyObject(y);
    return ok;
}

static void *worker_main(void *arg)
{
    th_worker *w = arg;
    th_run *r = w->run;
    char key[64], tok[33];
    snprintf(key, sizeof key, "bench:th:conns:%d", w->id);
    pthread_barrier_wait(&r->start);
    while (!bench_stop && bench_now_ns() < r->end_ns) {
        int ok;
        if (r->side == CONNS) {
            bench_token(tok);
            ok = bench_wire_take(w->c, bench_wire_append(w->c, key, tok, r->set_get),
                                 r->set_get) &&
                 wire_release(w->c, r->rel_sha, key, tok);
        } else {
            ok = dlock_lock_acquire(w->l, 0) == DLOCK_OK && dlock_lock_release(w->l) == DLOCK_OK;
        }
        if (!ok) {
            w->failed = 1;
            break;
        }
        w->cycles++;
    }
    return NULL;
}

/* One side with T threads: cycles per second of them all, 0 on a failure. */
static double threaded(th_run *r, int side, int T, dlock_lock **locks, redisContext **conns,
                       double secs)
{
    r->side = side;
    pthread_barrier_init(&r->start, NULL, (unsigned)T + 1);
    for (int i = 0; i < T; i++) {
        r->w[i] = (th_worker){.run = r, .id = i, .l = locks ? locks[i] : NULL,
                              .c = conns ? conns[i] : NULL};
        if (pthread_create(&r->w[i].t, NULL, worker_main, &r->w[i]) != 0)
            bench_die("pthread_create failed");
    }
    int64_t t0 = bench_now_ns();
    r->end_ns = t0 + (int64_t)(secs * 1e9);
    pthread_barrier_wait(&r->start);
    long n = 0;
    int failed = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(r->w[i].t, NULL);
        n += r->w[i].cycles;
        failed |= r->w[i].failed;
    }
    int64_t t1 = bench_now_ns();
    pthread_barrier_destroy(&r->start);
    if (failed) {
        bench_fail(r->b, "threads: a %s cycle failed (T=%d)", side_name[side], T);
        return 0;
    }
    return (double)n / ((double)(t1 - t0) / 1e9);
}

/* pipe: T cycles in flight on one connection, from this thread. */
static double pipelined(th_run *r, redisContext *c, int T, double secs)
{
    char keys[TH_MAX][64], toks[TH_MAX][33];
    int replies[TH_MAX];
    for (int i = 0; i < T; i++)
        snprintf(keys[i], sizeof keys[i], "bench:th:pipe:%d", i);
    long n = 0;
    int64_t t0 = bench_now_ns(), end = t0 + (int64_t)(secs * 1e9), now = t0;
    while (!bench_stop && (now = bench_now_ns()) < end) {
        int ok = 1;
        for (int i = 0; i < T; i++) {
            bench_token(toks[i]);
            replies[i] = bench_wire_append(c, keys[i], toks[i], r->set_get);
        }
        for (int i = 0; i < T; i++)
            ok &= bench_wire_take(c, replies[i], r->set_get);
        for (int i = 0; i < T; i++)
            redisAppendCommand(c, "EVALSHA %s 1 %s %s %s", r->rel_sha, keys[i], toks[i], "");
        for (int i = 0; i < T; i++) {
            redisReply *y = NULL;
            ok &= redisGetReply(c, (void **)&y) == REDIS_OK && y &&
                  y->type == REDIS_REPLY_INTEGER && y->integer == 1;
            if (y)
                freeReplyObject(y);
        }
        if (!ok) {
            bench_fail(r->b, "threads: a pipe cycle failed (T=%d)", T);
            return 0;
        }
        n += T;
    }
    return (double)n / ((double)(now - t0) / 1e9);
}

/* hop: round trips of a turn handed to another thread and back through a
 * mutex and two condition variables, in µs each. */
typedef struct hop {
    pthread_mutex_t mu;
    pthread_cond_t to_server, to_caller;
    int turn; /* 1: the server's, 0: the caller's, -1: stop */
} hop;

static void *hop_server(void *arg)
{
    hop *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (h->turn == 0)
            pthread_cond_wait(&h->to_server, &h->mu);
        if (h->turn < 0)
            break;
        h->turn = 0;
        pthread_cond_signal(&h->to_caller);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static double hop_us(double secs)
{
    hop h = {.mu = PTHREAD_MUTEX_INITIALIZER, .to_server = PTHREAD_COND_INITIALIZER,
             .to_caller = PTHREAD_COND_INITIALIZER, .turn = 0};
    pthread_t t;
    if (pthread_create(&t, NULL, hop_server, &h) != 0)
        bench_die("pthread_create failed");
    long n = 0;
    int64_t t0 = bench_now_ns(), end = t0 + (int64_t)(secs * 1e9), now = t0;
    while ((now = bench_now_ns()) < end) {
        pthread_mutex_lock(&h.mu);
        h.turn = 1;
        pthread_cond_signal(&h.to_server);
        while (h.turn == 1)
            pthread_cond_wait(&h.to_caller, &h.mu);
        pthread_mutex_unlock(&h.mu);
        n++;
    }
    pthread_mutex_lock(&h.mu);
    h.turn = -1;
    pthread_cond_signal(&h.to_server);
    pthread_mutex_unlock(&h.mu);
    pthread_join(t, NULL);
    return n ? (double)(now - t0) / 1e3 / (double)n : 0;
}

static dlock_client *quiet_client(bench *b, int n_nodes)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.pool_size = TH_MAX;
    o.wakeups = 0;
    return bench_client_opts(b, n_nodes, &o);
}

static int make_locks(dlock_client *c, const char *prefix, dlock_lock **out)
{
    for (int i = 0; i < TH_MAX; i++) {
        char name[64];
        snprintf(name, sizeof name, "bench:th:%s:%d", prefix, i);
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 10000;
        o.flags = DLOCK_NO_FENCE;
        if (dlock_lock_new(&out[i], c, name, &o) != DLOCK_OK)
            return -1;
    }
    return 0;
}

static double side(th_run *r, int s, int T, dlock_lock **l1, dlock_lock **l3,
                   redisContext **conns, double secs)
{
    switch (s) {
    case DL1:
        return threaded(r, DL1, T, l1, NULL, secs);
    case DL3: /* 0 without 3 servers (the section starts 5) */
        return l3[0] ? threaded(r, DL3, T, l3, NULL, secs) : 0;
    case CONNS:
        return threaded(r, CONNS, T, NULL, conns, secs);
    default:
        return pipelined(r, conns[0], T, secs);
    }
}

static void report(bench *b, FILE *f, double cps[N_COUNTS][SIDES][TH_ROUNDS], double *hops,
                   int rounds)
{
    printf("median over %d rounds (cycles/s of the process):\n"
           "    T    dlock1    dlock3     conns      pipe  dlock1/conns  pipe/conns  "
           "dlock3/dlock1\n", rounds);
    for (int k = 0; k < N_COUNTS; k++) {
        double m[SIDES], x[3][TH_ROUNDS];
        for (int s = 0; s < SIDES; s++) {
            double v[TH_ROUNDS];
            memcpy(v, cps[k][s], sizeof v);
            m[s] = bench_median(v, rounds);
        }
        for (int i = 0; i < rounds; i++) {
            x[0][i] = cps[k][DL1][i] / cps[k][CONNS][i];
            x[1][i] = cps[k][PIPE][i] / cps[k][CONNS][i];
            x[2][i] = cps[k][DL3][i] / cps[k][DL1][i];
        }
        double r0 = bench_median(x[0], rounds), r1 = bench_median(x[1], rounds),
               r2 = bench_median(x[2], rounds);
        printf("%5d %9.0f %9.0f %9.0f %9.0f %13.3f %11.3f %14.3f\n", th_counts[k], m[DL1], m[DL3],
               m[CONNS], m[PIPE], r0, r1, r2);
        if (f)
            fprintf(f, "median\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.4f\t%.4f\t%.4f\t%.2f\n", th_counts[k],
                    m[DL1], m[DL3], m[CONNS], m[PIPE], r0, r1, r2, bench_median(hops, rounds));
    }
    printf("hop (mutex + condvar round trip between two threads): %.1f us median\n",
           bench_median(hops, rounds));
    (void)b;
}

void bench_threads(bench *b)
{
    static th_run r; /* 64 workers: not on the stack */
    static double cps[N_COUNTS][SIDES][TH_ROUNDS];
    double hops[TH_ROUNDS];
    dlock_lock *l1[TH_MAX] = {0}, *l3[TH_MAX] = {0};
    redisContext *conns[TH_MAX] = {0};
    memset(&r, 0, sizeof r);
    r.b = b;
    r.rel_sha = dlock__script_get(DLOCK__S_RELEASE)->sha;
    r.set_get = bench_info(&b->srv[0], "server", "redis_version") >= 7;
    dlock_client *c1 = quiet_client(b, 1);
    dlock_client *c3 = b->n_srv >= 3 ? quiet_client(b, 3) : NULL;
    FILE *f = NULL;
    int rounds = 0;
    if (!c1 || make_locks(c1, "one", l1) != 0 || (c3 && make_locks(c3, "three", l3) != 0)) {
        bench_fail(b, "threads: setup failed");
        goto out;
    }
    for (int i = 0; i < TH_MAX; i++) {
        conns[i] = test_redis_admin(&b->srv[0]);
        if (!conns[i]) {
            bench_fail(b, "threads: no connection to %s", b->srv[0].url);
            goto out;
        }
    }
    redisReply *x = redisCommand(conns[0], "SCRIPT LOAD %s",
                                 dlock__script_get(DLOCK__S_RELEASE)->body);
    if (!x || x->type != REDIS_REPLY_STRING) {
        bench_fail(b, "threads: SCRIPT LOAD failed");
        if (x)
            freeReplyObject(x);
        goto out;
    }
    freeReplyObject(x);
    f = bench_tsv_open(b, "threads.tsv",
                       "round\tT\tdlock1_cps\tdlock3_cps\tconns_cps\tpipe_cps\tdlock1_x_conns\t"
                       "pipe_x_conns\tdlock3_x_dlock1\thop_us");
    printf("\n== threads (T threads on names of their own; %d interleaved rounds of %.1f s per "
           "side)\n", TH_ROUNDS, TH_SIDE_S);
    for (int k = 0; k < N_COUNTS; k++) /* warm-up: connections, scripts, threads */
        for (int s = 0; s < SIDES; s++)
            side(&r, s, th_counts[k], l1, l3, conns, 0.1);
    for (; rounds < TH_ROUNDS && !bench_stop && !b->failures; rounds++) {
        hops[rounds] = hop_us(0.2);
        for (int k = 0; k < N_COUNTS; k++) {
            for (int j = 0; j < SIDES; j++) {
                int s = (rounds + k + j) % SIDES;
                cps[k][s][rounds] = side(&r, s, th_counts[k], l1, l3, conns, TH_SIDE_S);
            }
            printf("round %d T=%-3d dlock1 %8.0f  dlock3 %8.0f  conns %8.0f  pipe %8.0f  hop %.1f us"
                   "  load %.2f\n", rounds + 1, th_counts[k], cps[k][DL1][rounds],
                   cps[k][DL3][rounds], cps[k][CONNS][rounds], cps[k][PIPE][rounds],
                   hops[rounds], bench_load1());
            if (f)
                fprintf(f, "%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.4f\t%.4f\t%.4f\t%.2f\n", rounds + 1,
                        th_counts[k], cps[k][DL1][rounds], cps[k][DL3][rounds],
                        cps[k][CONNS][rounds], cps[k][PIPE][rounds],
                        cps[k][DL1][rounds] / cps[k][CONNS][rounds],
                        cps[k][PIPE][rounds] / cps[k][CONNS][rounds],
                        cps[k][DL3][rounds] / cps[k][DL1][rounds], hops[rounds]);
        }
    }
    if (rounds > 0 && !b->failures)
        report(b, f, cps, hops, rounds);
out:
    if (f)
        bench_tsv_close(b, f, "threads.tsv");
    for (int i = 0; i < TH_MAX; i++) {
        dlock_lock_free(l1[i]);
        dlock_lock_free(l3[i]);
        if (conns[i])
            redisFree(conns[i]);
    }
    dlock_client_free(c1);
    dlock_client_free(c3);
}
