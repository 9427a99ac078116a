/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench sections that hold many locks at once: the watchdog at scale
 * and the client memory per held lock. Both use one node (srv[0]). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mallinfo2, malloc_trim, mkdtemp (harness) */
#endif

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dlock_bench.h"
#include "watchdog.h" /* dlock__watchdog_get_stats(): internal counters */

#define MAX_ERROR_REPORTS 5
#define WD_TTL_MS 3000
#define WD_INTERVAL_MS 1000

/* Work shared by a few threads using one client: acquire (try once) or
 * release locks[0..n), each handle by exactly one thread. */
typedef struct job {
    dlock_lock **locks;
    long n;
    int release;
    int64_t deadline_ns;
    atomic_long next, done, errors;
} job;

static void *job_thread(void *arg)
{
    job *j = arg;
    while (!bench_stop && bench_now_ns() < j->deadline_ns) {
        long i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n)
            break;
        dlock_lock *l = j->locks[i];
        if (j->release && dlock_lock_state_get(l) == DLOCK_STATE_UNLOCKED)
            continue; /* never acquired (acquire phase cut short) */
        int rc = j->release ? dlock_lock_release(l) : dlock_lock_acquire(l, 0);
        if (rc == DLOCK_OK)
            atomic_fetch_add(&j->done, 1);
        else if (atomic_fetch_add(&j->errors, 1) < MAX_ERROR_REPORTS)
            fprintf(stderr, BENCH_PROG ": %s %s: %s: %s\n", j->release ? "release" : "acquire",
                    dlock_lock_name(l), dlock_errname(rc), dlock_lock_errmsg(l));
    }
    return NULL;
}

/* Run the job on `threads` threads; returns the elapsed seconds. */
static double run_job(bench *b, job *j, int threads, double budget_s)
{
    pthread_t tid[64];
    int started = 0;
    int64_t t0 = bench_now_ns();
    j->deadline_ns = t0 + (int64_t)(budget_s * 1e9);
    for (int t = 0; t < threads && t < 64; t++) {
        if (pthread_create(&tid[t], NULL, job_thread, j) != 0) {
            bench_fail(b, "pthread_create failed");
            break;
        }
        started++;
    }
    if (started == 0)
        job_thread(j);
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    return (double)(bench_now_ns() - t0) / 1e9;
}

/* Create n handles "bench:<tag>:<i>"; NULL after bench_fail(). */
static dlock_lock **new_locks(bench *b, dlock_client *c, const char *tag, long n,
                              const dlock_lock_options *opts)
{
    dlock_lock **locks = calloc((size_t)n, sizeof *locks);
    if (!locks) {
        bench_fail(b, "out of memory for %ld handles", n);
        return NULL;
    }
    for (long i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "bench:%s:%ld", tag, i);
        int rc = dlock_lock_new(&locks[i], c, name, opts);
        if (rc != DLOCK_OK) {
            bench_fail(b, "dlock_lock_new(%s): %s", name, dlock_errname(rc));
            while (i-- > 0)
                dlock_lock_free(locks[i]);
            free(locks);
            return NULL;
        }
    }
    return locks;
}

static void free_locks(dlock_lock **locks, long n)
{
    for (long i = 0; locks && i < n; i++)
        dlock_lock_free(locks[i]);
    free(locks);
}

static long count_not_held(dlock_lock **locks, long n)
{
    long bad = 0;
    for (long i = 0; i < n; i++)
        bad += dlock_lock_state_get(locks[i]) != DLOCK_STATE_HELD;
    return bad;
}

static double server_cpu_s(const test_redis *r)
{
    return bench_info(r, "cpu", "used_cpu_user") + bench_info(r, "cpu", "used_cpu_sys");
}

/* Keys with a TTL in db 0 (INFO keyspace "expires="): the lock keys, since
 * fencing counters have none. -1 on error. */
static long keys_with_ttl(const test_redis *r)
{
    long v = -1;
    redisReply *rep = test_redis_cmd(r, "INFO keyspace");
    if (rep && rep->type == REDIS_REPLY_STRING) {
        const char *db0 = strstr(rep->str, "db0:");
        const char *e = db0 ? strstr(db0, "expires=") : NULL;
        v = e ? strtol(e + 8, NULL, 10) : 0; /* no db0 line: no keys */
    }
    if (rep)
        freeReplyObject(rep);
    return v;
}

/* ---- watchdog scale ------------------------------------------------------- */

static void watchdog_run(bench *b, long n, FILE *tsv)
{
    dlock_lock_options opts = DLOCK_LOCK_OPTIONS_INIT;
    opts.ttl_ms = WD_TTL_MS;
    opts.renew_interval_ms = WD_INTERVAL_MS;
    opts.flags = DLOCK_AUTO_RENEW;
    double load = bench_load1();
    int64_t t_start = bench_now_ns();
    /* A pooled connection per acquiring thread, and one for the watchdog. */
    dlock_client *c = bench_client(b, 1, b->threads + 1);
    char tag[32];
    snprintf(tag, sizeof tag, "wd%ld", n);
    dlock_lock **locks = c ? new_locks(b, c, tag, n, &opts) : NULL;
    if (!locks) {
        dlock_client_free(c);
        return;
    }

    job acq = {locks, n, 0, 0, 0, 0, 0};
    double acq_s = run_job(b, &acq, b->threads, b->budget_s);
    long held = atomic_load(&acq.done), acq_err = atomic_load(&acq.errors);
    int complete = held == n;
    if (acq_err)
        bench_fail(b, "watchdog %ld: %ld acquires failed", n, acq_err);

    /* The hold: nothing but the watchdog runs in this process. */
    dlock__watchdog_stats s0, s1, s2;
    dlock__watchdog_get_stats(c, &s0);
    double cpu0 = bench_cpu_s(), scpu0 = server_cpu_s(&b->srv[0]);
    int64_t t0 = bench_now_ns();
    bench_sleep_until(t0 + (int64_t)(b->hold_s * 1e9));
    dlock__watchdog_get_stats(c, &s1);
    double wall = (double)(bench_now_ns() - t0) / 1e9;
    double cpu = (bench_cpu_s() - cpu0) / wall, scpu = (server_cpu_s(&b->srv[0]) - scpu0) / wall;
    /* Two checks besides the watchdog's own count: every handle still says
     * held, and every lock key still exists in Redis (the watchdog notices
     * an expired key only when it next tries to renew it). */
    long not_held = count_not_held(locks, n) - (n - held);
    long keys = keys_with_ttl(&b->srv[0]);
    long missing = keys < 0 ? -1 : held - keys;
    unsigned long rounds = s1.rounds - s0.rounds;
    double calls_rn = rounds ? (double)(s1.calls - s0.calls) / (double)rounds : 0;
    double per_round = rounds ? (double)(s1.renewed - s0.renewed) / (double)rounds : 0;
    double renew_ps = (double)(s1.renewed - s0.renewed) / wall;
    if (s1.lost || not_held || missing)
        bench_fail(b, "watchdog %ld: at the end of the hold %lu locks lost (watchdog count), "
                   "%ld handles not held, %ld of %ld lock keys gone from Redis",
                   n, s1.lost, not_held, missing, held);

    job rel = {locks, n, 1, 0, 0, 0, 0};
    double rel_s = run_job(b, &rel, b->threads, 3 * b->budget_s);
    long rel_err = atomic_load(&rel.errors);
    dlock__watchdog_get_stats(c, &s2);
    if (rel_err)
        bench_fail(b, "watchdog %ld: %ld releases failed (%lu locks lost in all)", n, rel_err,
                   s2.lost);
    int64_t f0 = bench_now_ns();
    free_locks(locks, n);
    dlock_client_free(c);
    double free_s = (double)(bench_now_ns() - f0) / 1e9;
    double total_s = (double)(bench_now_ns() - t_start) / 1e9;

    printf("%7ld %8ld %6.2f %8.0f %6lu %8.2f %8.0f %9.0f %5lu %5ld %6.3f %6.3f %6.2f %6ld "
           "%6.1f %5.1f%s\n",
           n, held, acq_s, (double)held / acq_s, rounds, calls_rn, per_round, renew_ps,
           s1.lost, missing, cpu, scpu, rel_s, rel_err, total_s, load,
           complete ? "" : "  (acquire budget ran out)");
    if (tsv)
        fprintf(tsv,
                "%ld\t%ld\t%d\t%.3f\t%.1f\t%.3f\t%lu\t%.3f\t%.1f\t%.1f\t%lu\t%ld\t%ld\t%.4f"
                "\t%.4f\t%.3f\t%ld\t%lu\t%.3f\t%.3f\t%.2f\n",
                n, held, complete, acq_s, (double)held / acq_s, wall, rounds, calls_rn,
                per_round, renew_ps, s1.lost, not_held, missing, cpu, scpu, rel_s, rel_err,
                s2.lost, free_s, total_s, load);
    (void)bench_flush(b);
}

void bench_watchdog(bench *b)
{
    printf("\n== watchdog: N auto-renewed locks on 1 node (TTL %d ms, renew every %d ms; "
           "%d threads acquire, then %.1f s hold measured)\n",
           WD_TTL_MS, WD_INTERVAL_MS, b->threads, b->hold_s);
    printf("%7s %8s %6s %8s %6s %8s %8s %9s %5s %5s %6s %6s %6s %6s %6s %5s\n", "locks", "held",
           "acq s", "acq/s", "rounds", "calls/rn", "locks/rn", "renew/s", "lost", "gone",
           "cpu/s", "srv/s", "rel s", "relerr", "tot s", "load");
    FILE *f = bench_tsv_open(b, "watchdog.tsv",
                             "locks\theld\tcomplete\tacquire_s\tacquire_per_s\thold_s\trounds\t"
                             "calls_per_round_node\tlocks_per_round\trenewals_per_s\tlost\t"
                             "not_held\tkeys_gone\tclient_cpu_per_s\tserver_cpu_per_s\t"
                             "release_s\trelease_errors\tlost_total\tfree_s\ttotal_s\tload1");
    for (size_t i = 0; i < b->n_wd_counts && !bench_stop; i++)
        watchdog_run(b, b->wd_counts[i], f);
    bench_tsv_close(b, f, "watchdog.tsv");
    printf("(calls/rn: renew_batch.lua calls per round per node; lost: the watchdog's count at "
           "the end of the hold; gone: lock keys missing from Redis then; cpu/s: this "
           "process' user+sys CPU seconds per wall second during the hold; srv/s: the same "
           "for redis-server; relerr: releases that failed; tot s: the whole run)\n");
}

/* ---- memory per held lock ------------------------------------------------- */

static void memory_run(bench *b, const char *mode, const dlock_lock_options *opts, FILE *tsv)
{
    long n = b->mem_locks;
    dlock_client *c = bench_client(b, 1, 4);
    if (!c)
        return;
    /* One cycle first: connections, the script cache and (auto-renew) the
     * watchdog thread exist before the baseline is taken. */
    dlock_lock **one = new_locks(b, c, "memprime", 1, opts);
    if (!one || dlock_lock_acquire(one[0], 0) != DLOCK_OK ||
        dlock_lock_release(one[0]) != DLOCK_OK) {
        bench_fail(b, "memory %s: priming cycle failed", mode);
        free_locks(one, one ? 1 : 0);
        dlock_client_free(c);
        return;
    }
    free_locks(one, 1);
    malloc_trim(0);
    double load = bench_load1();
    long h0 = bench_heap_bytes(), r0 = bench_rss_bytes();
    double s0 = bench_info(&b->srv[0], "memory", "used_memory");

    dlock_lock **locks = new_locks(b, c, mode, n, opts);
    if (!locks) {
        dlock_client_free(c);
        return;
    }
    long h1 = bench_heap_bytes(), r1 = bench_rss_bytes();
    long errors = 0;
    for (long i = 0; i < n && !bench_stop; i++) {
        int rc = dlock_lock_acquire(locks[i], 0);
        if (rc != DLOCK_OK && ++errors <= MAX_ERROR_REPORTS)
            fprintf(stderr, BENCH_PROG ": acquire %s: %s: %s\n", dlock_lock_name(locks[i]),
                    dlock_errname(rc), dlock_lock_errmsg(locks[i]));
    }
    /* Let the watchdog run a full round over every lock (its per-round
     * arrays are part of the cost of an auto-renewed lock). */
    bench_sleep_until(bench_now_ns() + (int64_t)(1.5 * WD_INTERVAL_MS * 1e6));
    long h2 = bench_heap_bytes(), r2 = bench_rss_bytes();
    double s2 = bench_info(&b->srv[0], "memory", "used_memory");
    long not_held = count_not_held(locks, n);
    if (errors || not_held)
        bench_fail(b, "memory %s: %ld acquires failed, %ld handles not held", mode, errors,
                   not_held);
    free_locks(locks, n);
    dlock_client_free(c);
    (void)bench_flush(b);

    double dn = (double)n;
    printf("%-10s %7ld %10.0f %10.0f %10.0f %10.0f %10.0f %5.1f\n", mode, n, (double)(h1 - h0) / dn,
           (double)(h2 - h0) / dn, (double)(r1 - r0) / dn, (double)(r2 - r0) / dn, (s2 - s0) / dn,
           load);
    if (tsv)
        fprintf(tsv, "%s\t%ld\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%ld\t%ld\t%.2f\n", mode, n,
                (double)(h1 - h0) / dn, (double)(h2 - h0) / dn, (double)(r1 - r0) / dn,
                (double)(r2 - r0) / dn, (s2 - s0) / dn, r0, r2, load);
}

void bench_memory(bench *b)
{
    printf("\n== memory: bytes per lock, %ld locks on 1 node (heap: mallinfo2 in-use; "
           "rss: /proc/self/statm; server: INFO used_memory, lock + fence key)\n",
           b->mem_locks);
    printf("%-10s %7s %10s %10s %10s %10s %10s %5s\n", "mode", "locks", "heap new", "heap held",
           "rss new", "rss held", "server", "load");
    FILE *f = bench_tsv_open(b, "memory.tsv",
                             "mode\tlocks\theap_new_b\theap_held_b\trss_new_b\trss_held_b\t"
                             "server_b\trss_before\trss_after\tload1");
    dlock_lock_options plain = DLOCK_LOCK_OPTIONS_INIT, autor = DLOCK_LOCK_OPTIONS_INIT;
    autor.ttl_ms = WD_TTL_MS;
    autor.renew_interval_ms = WD_INTERVAL_MS;
    autor.flags = DLOCK_AUTO_RENEW;
    memory_run(b, "plain", &plain, f);
    if (!bench_stop)
        memory_run(b, "autorenew", &autor, f);
    bench_tsv_close(b, f, "memory.tsv");
}
