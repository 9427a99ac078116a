/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench's shared helpers and options (bench_util.c): used by the
 * driver (dlock_bench.c) and every section, using none of them. */
#ifndef DLOCK_BENCH_UTIL_H
#define DLOCK_BENCH_UTIL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dlock.h"
#include "redis_server.h"

#define BENCH_PROG "dlock-bench"
#define BENCH_MAX_NODES 5
#define BENCH_MAX_COUNTS 8

typedef struct bench {
    /* Options. */
    char outdir[1024];
    long wd_counts[BENCH_MAX_COUNTS]; /* watchdog: locks held per run */
    size_t n_wd_counts;
    double hold_s;       /* watchdog: measured hold */
    double budget_s;     /* watchdog: longest acquire phase per run */
    int threads;         /* watchdog: acquiring threads */
    long mem_locks;      /* memory: locks per mode */
    double redlock_s;    /* redlock: measured cycling per node count */
    double hist_s;       /* hist: measured cycling */
    /* Servers started by this process; srv[0] is the single node. */
    test_redis srv[BENCH_MAX_NODES];
    int n_srv;
    /* Functional failures seen (lost locks, errors): exit status 1. */
    int failures;
} bench;

/* Set by SIGINT/SIGTERM: every loop ends early, servers are still stopped. */
extern volatile sig_atomic_t bench_stop;

/* Report a setup failure and exit with status 2. */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Report a functional failure on stderr and count it. */
void bench_fail(bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int64_t bench_now_ns(void);
/* Sleep until the monotonic deadline (or bench_stop). */
void bench_sleep_until(int64_t deadline_ns);
/* 1-minute load average, -1 if unknown. */
double bench_load1(void);
/* A numeric field of INFO (e.g. "used_memory") from one server; -1 on error. */
double bench_info(const test_redis *r, const char *section, const char *field);
/* FLUSHALL every server; 0 or -1. */
int bench_flush(bench *b);

/* A client on the first n_nodes servers; NULL after bench_fail(). */
dlock_client *bench_client(bench *b, int n_nodes, int pool_size);
/* The same with the caller's options (pool_size included). */
dlock_client *bench_client_opts(bench *b, int n_nodes, const dlock_client_options *copts);

/* Open OUTDIR/name for writing and put the header line in; NULL after
 * bench_fail(). bench_tsv_close() reports write errors. */
FILE *bench_tsv_open(bench *b, const char *name, const char *header);
void bench_tsv_close(bench *b, FILE *f, const char *name);

/* S1: acquire (try once) + release in a loop for secs, taking the n_locks
 * (> 0) handles l[] in turn (one, or several names spread over cluster
 * masters); cycles per second, 0 after bench_fail() ("WHAT: code: detail")
 * on a failed cycle. */
double bench_cycle_rate(bench *b, dlock_lock *const *l, int n_locks, double secs,
                        const char *what);
/* A lock token as the peers' baseline makes it: 16 bytes from getrandom,
 * in hex (exits on a getrandom failure). */
void bench_token(char tok[33]);

/* This process's resident memory (/proc/self/statm), its heap in use
 * (mallinfo2: what RSS keeps of memory freed since is not in it), and its
 * CPU time, user + system, in seconds (getrusage). */
long bench_rss_bytes(void);
long bench_heap_bytes(void);
double bench_cpu_s(void);
/* The acquire that dlock's plain lock sends on one node with DLOCK_NO_FENCE
 * and wake-ups off, by hand: SET key tok NX PX 10000 GET and PTTL
 * (set_get: Redis 7), else SET NX PX, GET and PTTL. Appended, not sent;
 * returns the number of replies to read. bench_wire_take() reads them:
 * 1 if the first says the lock was granted. */
int bench_wire_append(redisContext *c, const char *key, const char *tok, int set_get);
int bench_wire_take(redisContext *c, int replies, int set_get);

/* The median of x[0..n), n > 0 (sorts x). */
double bench_median(double *x, int n);

#endif
