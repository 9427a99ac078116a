/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock-bench: the measurements the shared peers benchmark cannot make
 * (issue 8). It starts its own redis-server processes on free loopback
 * ports (tests/support/redis_server.c), stops them by pid, and runs:
 *
 *   watchdog  hold 1k/10k/100k auto-renewed locks: rounds, script calls per
 *             round per node, renewals/s, lost locks, client CPU per second
 *   memory    client heap and RSS per held lock (plain and auto-renew)
 *   redlock5  acquire+release cycles/s and acquire p50/p99 on 1, 3, 5 nodes
 *   hist      single-node acquire latency as a log2 histogram + percentiles
 *   tls       S1 (acquire+release, one client) over TLS beside plain TCP,
 *             interleaved; the median tls/plain ratio (dlock_bench_tls.c)
 *   cluster   S1 on a 3-master/3-replica Redis Cluster beside a single node,
 *             interleaved; the median cluster/single ratio
 *             (dlock_bench_cluster.c)
 *   kinds     acquire+release cycles/s of each lock kind (exclusive, shared,
 *             semaphore, multi-name) beside the plain lock's, interleaved
 *             (dlock_bench_kinds.c)
 *
 *   threads   T = 1, 8, 64 threads of one process on names of their own:
 *             dlock on 1 and 3 nodes beside raw hiredis connections and one
 *             pipelined connection, interleaved (dlock_bench_threads.c)
 *
 *   dlock-bench [--only watchdog,memory,redlock5,hist,ab,tls,cluster,kinds,threads,async]
 *               [--out DIR] [--locks 1000,10000,100000] [--hold S] [--budget S]
 *               [--threads N] [--mem-locks N] [--redlock-time S] [--hist-time S]
 *
 * Files: this one (driver: options and dispatch), bench_util.c (shared
 * helpers), dlock_bench_hold.c (watchdog, memory), dlock_bench_lat.c
 * (redlock5, hist), dlock_bench_ab.c (ab), dlock_bench_tls.c (tls).
 *
 * Each section prints a table and writes OUTDIR/<section>.tsv (OUTDIR
 * defaults to "out" beside the executable). Speed figures are measurements
 * only; the exit status is 1 only for functional failures (a lost lock, an
 * error from the library), 2 for setup failures (bad arguments, no
 * redis-server), else 0. Every interval uses the monotonic clock.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mallinfo2, malloc_trim, mkdtemp (harness) */
#endif

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dlock_bench.h"

/* ---- driver --------------------------------------------------------------- */

enum { S_WATCHDOG = 1, S_MEMORY = 2, S_REDLOCK = 4, S_HIST = 8, S_AB = 16, S_TLS = 32, S_CLUSTER = 64,
       S_KINDS = 128, S_THREADS = 256, S_ASYNC = 512 };

static void usage(FILE *out)
{
    fputs("usage: " BENCH_PROG " [--only watchdog,memory,redlock5,hist,ab,tls,cluster,kinds,threads,async]\n"
          "       [--out DIR]\n"
          "       [--locks 1000,10000,100000] [--hold S] [--budget S] [--threads N]\n"
          "       [--mem-locks N] [--redlock-time S] [--hist-time S]\n",
          out);
}

static double num_arg(const char *name, const char *v, double min, double max)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= min && d <= max))
        bench_die("%s %s: expected a number in %g..%g", name, v, min, max);
    return d;
}

static unsigned parse_only(const char *list)
{
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (!strcmp(p, "watchdog"))
            mask |= S_WATCHDOG;
        else if (!strcmp(p, "memory"))
            mask |= S_MEMORY;
        else if (!strcmp(p, "redlock5") || !strcmp(p, "redlock"))
            mask |= S_REDLOCK;
        else if (!strcmp(p, "hist"))
            mask |= S_HIST;
        else if (!strcmp(p, "ab"))
            mask |= S_AB;
        else if (!strcmp(p, "tls"))
            mask |= S_TLS;
        else if (!strcmp(p, "cluster"))
            mask |= S_CLUSTER;
        else if (!strcmp(p, "kinds"))
            mask |= S_KINDS;
        else if (!strcmp(p, "threads"))
            mask |= S_THREADS;
        else if (!strcmp(p, "async"))
            mask |= S_ASYNC;
        else
            bench_die("--only: unknown section \"%s\" (watchdog, memory, redlock5, hist, ab, tls, "
                      "cluster, kinds, threads, async)", p);
    }
    if (!mask)
        bench_die("--only: no section given");
    return mask;
}

static void parse_counts(bench *b, const char *list)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    b->n_wd_counts = 0;
    for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (b->n_wd_counts == BENCH_MAX_COUNTS)
            bench_die("--locks: at most %d counts", BENCH_MAX_COUNTS);
        b->wd_counts[b->n_wd_counts++] = (long)num_arg("--locks", p, 1, 1e7);
    }
    if (!b->n_wd_counts)
        bench_die("--locks: no count given");
}

static unsigned parse_args(bench *b, int argc, char **argv)
{
    unsigned only = S_WATCHDOG | S_MEMORY | S_REDLOCK | S_HIST | S_AB | S_TLS | S_CLUSTER | S_KINDS |
                    S_THREADS | S_ASYNC;
    b->wd_counts[0] = 1000, b->wd_counts[1] = 10000, b->wd_counts[2] = 100000;
    b->n_wd_counts = 3;
    b->hold_s = 5, b->budget_s = 40, b->threads = 4, b->mem_locks = 10000;
    b->redlock_s = 3, b->hist_s = 5;
    /* Default OUTDIR: "out" beside the executable (BUILD_DIR/bench/out). */
    char exe[900];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(b->outdir, sizeof b->outdir, "%s/out", slash ? exe : ".");

    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc) {
            usage(stderr);
            bench_die("%s: missing value or unknown option", o);
        }
        const char *v = argv[++i];
        if (!strcmp(o, "--only"))
            only = parse_only(v);
        else if (!strcmp(o, "--out"))
            snprintf(b->outdir, sizeof b->outdir, "%s", v);
        else if (!strcmp(o, "--locks"))
            parse_counts(b, v);
        else if (!strcmp(o, "--hold"))
            b->hold_s = num_arg(o, v, 0.1, 3600);
        else if (!strcmp(o, "--budget"))
            b->budget_s = num_arg(o, v, 1, 3600);
        else if (!strcmp(o, "--threads"))
            b->threads = (int)num_arg(o, v, 1, 64);
        else if (!strcmp(o, "--mem-locks"))
            b->mem_locks = (long)num_arg(o, v, 1, 1e7);
        else if (!strcmp(o, "--redlock-time"))
            b->redlock_s = num_arg(o, v, 0.1, 3600);
        else if (!strcmp(o, "--hist-time"))
            b->hist_s = num_arg(o, v, 0.1, 3600);
        else {
            usage(stderr);
            bench_die("unknown option %s", o);
        }
    }
    if (mkdir(b->outdir, 0755) != 0 && errno != EEXIST)
        bench_die("mkdir %s: %s", b->outdir, strerror(errno));
    return only;
}

static void on_signal(int sig)
{
    (void)sig;
    bench_stop = 1;
}

int main(int argc, char **argv)
{
    static bench b; /* large (the harness' paths): not on the stack */
    unsigned only = parse_args(&b, argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    /* Servers are started from the main thread: the harness ties each to
     * the life of the thread that forked it (PR_SET_PDEATHSIG). */
    b.n_srv = (only & (S_REDLOCK | S_THREADS)) ? BENCH_MAX_NODES : 1;
    if (test_redis_start_many(b.srv, b.n_srv, NULL) != 0)
        bench_die("could not start %d redis-server process(es)", b.n_srv);
    char host[256] = "?";
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    printf("# %s: dlock %s, %s, %ld CPUs, load %.2f at start; servers:", BENCH_PROG,
           dlock_version(), host, sysconf(_SC_NPROCESSORS_ONLN), bench_load1());
    for (int i = 0; i < b.n_srv; i++)
        printf(" %s (pid %ld)", b.srv[i].url, (long)b.srv[i].pid);
    printf("\n# TSV files in %s\n", b.outdir);

    if ((only & S_WATCHDOG) && !bench_stop && bench_flush(&b) == 0)
        bench_watchdog(&b);
    if ((only & S_MEMORY) && !bench_stop && bench_flush(&b) == 0)
        bench_memory(&b);
    if ((only & S_REDLOCK) && !bench_stop && bench_flush(&b) == 0)
        bench_redlock(&b);
    if ((only & S_HIST) && !bench_stop && bench_flush(&b) == 0)
        bench_hist(&b);
    if ((only & S_AB) && !bench_stop && bench_flush(&b) == 0)
        bench_ab(&b);
    if ((only & S_TLS) && !bench_stop && bench_flush(&b) == 0)
        bench_tls(&b);
    if ((only & S_CLUSTER) && !bench_stop && bench_flush(&b) == 0)
        bench_cluster(&b);
    if ((only & S_KINDS) && !bench_stop && bench_flush(&b) == 0)
        bench_kinds(&b);
    if ((only & S_THREADS) && !bench_stop && bench_flush(&b) == 0)
        bench_threads(&b);
#if DLOCK_BENCH_ASYNC
    if ((only & S_ASYNC) && !bench_stop && bench_flush(&b) == 0)
        bench_async(&b);
#else
    if (only & S_ASYNC)
        printf("\n== async: not built (needs libuv: DLOCK_WITH_LIBUV)\n");
#endif

    test_redis_stop_many(b.srv, b.n_srv);
    printf("\n# load %.2f at end; %s\n", bench_load1(),
           bench_stop ? "interrupted" : b.failures ? "FAILURES (see stderr)" : "no failures");
    if (bench_stop)
        return 130;
    return b.failures ? 1 : 0;
}
