/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench sections that measure latency: the cost of a Redlock quorum
 * (1, 3, 5 nodes) and the single-node acquire latency histogram. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdlib.h>
#include <string.h>

#include "dlock_bench.h"

/* Histogram buckets: <= 8 us, then powers of two up to 2^HIST_TOP us. */
#define HIST_FIRST 3
#define HIST_TOP 20
#define MAX_ERROR_REPORTS 5

/* ---- latency samples ------------------------------------------------------ */

typedef struct samples {
    int64_t *ns;
    size_t len, cap;
} samples;

static void record(samples *s, int64_t ns)
{
    if (s->len == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 65536;
        int64_t *p = realloc(s->ns, ncap * sizeof *p);
        if (!p)
            bench_die("out of memory for %zu latency samples", ncap);
        s->ns = p;
        s->cap = ncap;
    }
    s->ns[s->len++] = ns;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted samples, in microseconds. */
static double pct_us(const samples *s, double p)
{
    if (s->len == 0)
        return 0;
    size_t k = (size_t)(p / 100.0 * (double)s->len + 0.999999);
    k = k < 1 ? 1 : (k > s->len ? s->len : k);
    return (double)s->ns[k - 1] / 1e3;
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0;
}

/* Cycle acquire(try once) + release on one lock for duration_s after a short
 * warm-up; acquire latencies go to acq, release latencies to rel. Returns
 * the measured seconds; failures are counted in *errors. */
static double cycle(bench *b, dlock_lock *lock, double duration_s, samples *acq,
                    samples *rel, long *errors)
{
    int64_t warm_end = bench_now_ns() + 300000000;
    while (!bench_stop && bench_now_ns() < warm_end)
        if (dlock_lock_acquire(lock, 0) == DLOCK_OK)
            (void)dlock_lock_release(lock);
    int64_t t_begin = bench_now_ns();
    int64_t deadline = t_begin + (int64_t)(duration_s * 1e9);
    while (!bench_stop && bench_now_ns() < deadline) {
        int64_t t0 = bench_now_ns();
        int rc = dlock_lock_acquire(lock, 0);
        int64_t t1 = bench_now_ns();
        if (rc == DLOCK_OK) {
            record(acq, t1 - t0);
            rc = dlock_lock_release(lock);
            if (rc == DLOCK_OK)
                record(rel, bench_now_ns() - t1);
        }
        if (rc != DLOCK_OK && ++*errors <= MAX_ERROR_REPORTS)
            bench_fail(b, "%s: %s: %s", dlock_lock_name(lock), dlock_errname(rc),
                       dlock_lock_errmsg(lock));
    }
    return (double)(bench_now_ns() - t_begin) / 1e9;
}

/* ---- redlock5: the cost of a quorum --------------------------------------- */

void bench_redlock(bench *b)
{
    static const int nodes[] = {1, 3, 5};
    double base_rate = 0, base_p50 = 0, base_p99 = 0;
    FILE *f = bench_tsv_open(b, "redlock.tsv",
                             "nodes\tcycles\tseconds\tcycles_per_s\trate_vs_1\tacq_p50_us\t"
                             "acq_p99_us\tp50_vs_1\tp99_vs_1\trel_p50_us\terrors\tload1");
    printf("\n== redlock5: acquire+release cycles on 1, 3 and 5 nodes "
           "(one thread, try-once acquire, TTL 10 s, %.1f s each; load %.2f)\n",
           b->redlock_s, bench_load1());
    printf("%5s %8s %10s %7s %11s %11s %7s %7s %11s %6s\n", "nodes", "cycles", "cycles/s",
           "x 1node", "acq p50 us", "acq p99 us", "p50 x", "p99 x", "rel p50 us", "errors");
    for (size_t k = 0; k < sizeof nodes / sizeof nodes[0] && !bench_stop; k++) {
        int n = nodes[k];
        dlock_client *client = bench_client(b, n, 4);
        dlock_lock *lock = NULL;
        dlock_lock_options opts = DLOCK_LOCK_OPTIONS_INIT;
        opts.ttl_ms = 10000;
        char name[64];
        snprintf(name, sizeof name, "bench:redlock:%d", n);
        if (!client || dlock_lock_new(&lock, client, name, &opts) != DLOCK_OK) {
            if (client)
                bench_fail(b, "dlock_lock_new(%s) failed", name);
            dlock_client_free(client);
            continue;
        }
        samples acq = {0}, rel = {0};
        long errors = 0;
        double secs = cycle(b, lock, b->redlock_s, &acq, &rel, &errors);
        dlock_lock_free(lock);
        dlock_client_free(client);
        qsort(acq.ns, acq.len, sizeof *acq.ns, cmp_i64);
        qsort(rel.ns, rel.len, sizeof *rel.ns, cmp_i64);
        double rate = (double)acq.len / secs, p50 = pct_us(&acq, 50), p99 = pct_us(&acq, 99);
        if (n == 1) {
            base_rate = rate;
            base_p50 = p50;
            base_p99 = p99;
        }
        printf("%5d %8zu %10.0f %7.2f %11.1f %11.1f %7.2f %7.2f %11.1f %6ld\n", n, acq.len,
               rate, ratio(rate, base_rate), p50, p99, ratio(p50, base_p50),
               ratio(p99, base_p99), pct_us(&rel, 50), errors);
        if (f)
            fprintf(f, "%d\t%zu\t%.3f\t%.1f\t%.3f\t%.1f\t%.1f\t%.3f\t%.3f\t%.1f\t%ld\t%.2f\n", n,
                    acq.len, secs, rate, ratio(rate, base_rate), p50, p99,
                    ratio(p50, base_p50), ratio(p99, base_p99), pct_us(&rel, 50), errors,
                    bench_load1());
        free(acq.ns);
        free(rel.ns);
    }
    bench_tsv_close(b, f, "redlock.tsv");
}

/* ---- hist: single-node acquire latency ------------------------------------ */

void bench_hist(bench *b)
{
    dlock_client *client = bench_client(b, 1, 4);
    dlock_lock *lock = NULL;
    if (!client || dlock_lock_new(&lock, client, "bench:hist", NULL) != DLOCK_OK) {
        if (client)
            bench_fail(b, "dlock_lock_new(bench:hist) failed");
        dlock_client_free(client);
        return;
    }
    samples acq = {0}, rel = {0};
    long errors = 0;
    double load = bench_load1();
    double secs = cycle(b, lock, b->hist_s, &acq, &rel, &errors);
    dlock_lock_free(lock);
    dlock_client_free(client);
    qsort(acq.ns, acq.len, sizeof *acq.ns, cmp_i64);

    /* Bucket i holds (2^(i-1), 2^i] us; the first also everything below. */
    long counts[HIST_TOP + 2] = {0};
    for (size_t i = 0; i < acq.len; i++) {
        int bk = HIST_FIRST;
        while (bk <= HIST_TOP && acq.ns[i] > (INT64_C(1000) << bk))
            bk++;
        counts[bk]++;
    }
    int lo = HIST_FIRST, hi = HIST_TOP + 1;
    while (lo < hi && counts[lo] == 0)
        lo++;
    while (hi > lo && counts[hi] == 0)
        hi--;
    long most = 1;
    for (int i = lo; i <= hi; i++)
        most = counts[i] > most ? counts[i] : most;

    printf("\n== hist: acquire latency, 1 node, uncontended (one thread, try-once acquire "
           "+ release, %.1f s, %zu acquires, %.0f/s; load %.2f)\n",
           secs, acq.len, (double)acq.len / secs, load);
    printf("%17s %9s %7s %7s  %s\n", "latency (us)", "count", "%", "cum %", "");
    FILE *f = bench_tsv_open(b, "hist.tsv", "lo_us\thi_us\tcount\tpct\tcum_pct");
    long cum = 0;
    double n = acq.len ? (double)acq.len : 1;
    for (int i = lo; i <= hi && acq.len; i++) {
        long from = i == HIST_FIRST ? 0 : 1L << (i - 1), to = 1L << i;
        char range[32], bar[41];
        if (i > HIST_TOP)
            snprintf(range, sizeof range, "> %ld", from);
        else
            snprintf(range, sizeof range, "%ld .. %ld", from, to);
        cum += counts[i];
        int w = (int)((double)counts[i] * 40.0 / (double)most + 0.5);
        memset(bar, '#', (size_t)w);
        bar[w] = '\0';
        printf("%17s %9ld %7.3f %7.3f  %s\n", range, counts[i], 100.0 * (double)counts[i] / n,
               100.0 * (double)cum / n, bar);
        if (f)
            fprintf(f, "%ld\t%ld\t%ld\t%.4f\t%.4f\n", from, i > HIST_TOP ? -1 : to, counts[i],
                    100.0 * (double)counts[i] / n, 100.0 * (double)cum / n);
    }
    bench_tsv_close(b, f, "hist.tsv");

    static const double ps[] = {50, 90, 99, 99.9};
    static const char *const pnames[] = {"p50", "p90", "p99", "p99.9"};
    double mean = 0;
    for (size_t i = 0; i < acq.len; i++)
        mean += (double)acq.ns[i] / 1e3;
    mean = acq.len ? mean / (double)acq.len : 0;
    double max = acq.len ? (double)acq.ns[acq.len - 1] / 1e3 : 0;
    f = bench_tsv_open(b, "hist_pct.tsv", "stat\tus");
    printf("\n%8s %10s\n", "stat", "us");
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        printf("%8s %10.1f\n", pnames[i], pct_us(&acq, ps[i]));
        if (f)
            fprintf(f, "%s\t%.1f\n", pnames[i], pct_us(&acq, ps[i]));
    }
    printf("%8s %10.1f\n%8s %10.1f\n%8s %10ld\n", "max", max, "mean", mean, "errors", errors);
    if (f)
        fprintf(f, "max\t%.1f\nmean\t%.1f\nsamples\t%zu\nerrors\t%ld\n", max, mean, acq.len,
                errors);
    bench_tsv_close(b, f, "hist_pct.tsv");
    free(acq.ns);
    free(rel.ns);
}
