/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench's shared helpers (bench_util.h): messages, clocks, server
 * info, clients, TSV files, the S1 cycle loop and medians. The sections
 * and the driver use them; they use neither. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

volatile sig_atomic_t bench_stop;

void bench_die(const char *fmt, ...)
{
    va_list ap;
    fputs(BENCH_PROG ": ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

void bench_fail(bench *b, const char *fmt, ...)
{
    va_list ap;
    b->failures++;
    fputs(BENCH_PROG ": FAIL: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

void bench_sleep_until(int64_t deadline_ns)
{
    int64_t left;
    while (!bench_stop && (left = deadline_ns - bench_now_ns()) > 0) {
        /* Short steps, so that a signal ends the sleep soon. */
        int64_t step = left < 100000000 ? left : 100000000;
        struct timespec ts = {0, (long)step};
        nanosleep(&ts, NULL);
    }
}

double bench_load1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

double bench_info(const test_redis *r, const char *section, const char *field)
{
    redisReply *rep = test_redis_cmd(r, "INFO %s", section);
    double v = -1;
    if (rep && rep->type == REDIS_REPLY_STRING) {
        size_t fl = strlen(field);
        for (const char *p = rep->str; p && *p; p = strchr(p, '\n')) {
            p += *p == '\n';
            if (!strncmp(p, field, fl) && p[fl] == ':') {
                v = strtod(p + fl + 1, NULL);
                break;
            }
        }
    }
    if (rep)
        freeReplyObject(rep);
    return v;
}

int bench_flush(bench *b)
{
    for (int i = 0; i < b->n_srv; i++) {
        redisReply *rep = test_redis_cmd(&b->srv[i], "FLUSHALL");
        int ok = rep && rep->type == REDIS_REPLY_STATUS;
        if (rep)
            freeReplyObject(rep);
        if (!ok) {
            bench_fail(b, "FLUSHALL on %s failed", b->srv[i].url);
            return -1;
        }
    }
    return 0;
}

dlock_client *bench_client(bench *b, int n_nodes, int pool_size)
{
    dlock_client_options copts = DLOCK_CLIENT_OPTIONS_INIT;
    copts.pool_size = pool_size;
    return bench_client_opts(b, n_nodes, &copts);
}

dlock_client *bench_client_opts(bench *b, int n_nodes, const dlock_client_options *copts)
{
    const char *urls[BENCH_MAX_NODES];
    for (int i = 0; i < n_nodes; i++)
        urls[i] = b->srv[i].url;
    dlock_client *client = NULL;
    char err[256] = "";
    int rc = dlock_client_new(&client, urls, (size_t)n_nodes, copts, err, sizeof err);
    if (rc != DLOCK_OK)
        bench_fail(b, "dlock_client_new: %s: %s", dlock_errname(rc),
                   err[0] ? err : dlock_strerror(rc));
    return client;
}

FILE *bench_tsv_open(bench *b, const char *name, const char *header)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", b->outdir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        bench_fail(b, "open %s: %s", path, strerror(errno));
        return NULL;
    }
    fprintf(f, "%s\n", header);
    return f;
}

void bench_tsv_close(bench *b, FILE *f, const char *name)
{
    if (f && (ferror(f) | fclose(f)))
        bench_fail(b, "writing %s/%s failed", b->outdir, name);
}

double bench_cycle_rate(bench *b, dlock_lock *const *l, int n_locks, double secs,
                        const char *what)
{
    long n = 0;
    int64_t t0 = bench_now_ns(), end = t0 + (int64_t)(secs * 1e9), now = t0;
    while (!bench_stop && (now = bench_now_ns()) < end) {
        dlock_lock *x = l[n % n_locks];
        int rc = dlock_lock_acquire(x, 0);
        if (rc == DLOCK_OK)
            rc = dlock_lock_release(x);
        if (rc != DLOCK_OK) {
            bench_fail(b, "%s: %s: %s", what, dlock_errname(rc), dlock_lock_errmsg(x));
            return 0;
        }
        n++;
    }
    return (double)n / ((double)(now - t0) / 1e9);
}

void bench_token(char tok[33])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        bench_die("getrandom failed");
    for (int i = 0; i < 16; i++) {
        tok[2 * i] = hex[r[i] >> 4];
        tok[2 * i + 1] = hex[r[i] & 15];
    }
    tok[32] = '\0';
}

int bench_wire_append(redisContext *c, const char *key, const char *tok, int set_get)
{
    if (set_get) {
        redisAppendCommand(c, "SET %s %s NX PX 10000 GET", key, tok);
        redisAppendCommand(c, "PTTL %s", key);
        return 2;
    }
    redisAppendCommand(c, "SET %s %s NX PX 10000", key, tok);
    redisAppendCommand(c, "GET %s", key);
    redisAppendCommand(c, "PTTL %s", key);
    return 3;
}

int bench_wire_take(redisContext *c, int replies, int set_get)
{
    int ok = 1;
    for (int i = 0; i < replies; i++) {
        redisReply *x = NULL;
        if (redisGetReply(c, (void **)&x) != REDIS_OK)
            return 0;
        /* A grant: OK, or nil from SET ... GET (no earlier value). */
        ok &= i > 0 || x->type == (set_get ? REDIS_REPLY_NIL : REDIS_REPLY_STATUS);
        freeReplyObject(x);
    }
    return ok;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return x[n / 2];
}

long bench_rss_bytes(void)
{
    long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * sysconf(_SC_PAGESIZE);
}

long bench_heap_bytes(void)
{
    struct mallinfo2 m = mallinfo2();
    return (long)(m.uordblks + m.hblkhd);
}

double bench_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
