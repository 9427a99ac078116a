/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench section "kinds": acquire (try once) + release cycles per
 * second of every lock kind beside the plain lock's, one client, one
 * thread, one node (srv[0]), in the same run. The kinds are interleaved in
 * rounds (each round runs each kind for a slice) so that a change of load
 * on the machine hits all of them alike; the figure is the median of the
 * rounds' rates. */
#include <stdlib.h>
#include <string.h>

#include "dlock_bench.h"

#define ROUNDS 5

typedef struct kind_row {
    const char *name;
    const char *what;
    unsigned flags;   /* lock flags */
    unsigned permits; /* > 0: a semaphore */
    int names;        /* > 1: a multi-name lock of that many names */
} kind_row;

static const kind_row rows[] = {
    {"plain", "dlock_lock_new(), no mode flag", 0, 0, 1},
    {"exclusive", "DLOCK_EXCLUSIVE (writer of a read-write lock)", DLOCK_EXCLUSIVE, 0, 1},
    {"shared", "DLOCK_SHARED (reader; no other holder)", DLOCK_SHARED, 0, 1},
    {"semaphore4", "dlock_semaphore_new(), 4 permits", 0, 4, 1},
    {"multi3", "dlock_lock_new_multi(), 3 names", 0, 0, 3},
};
#define N_ROWS (sizeof rows / sizeof rows[0])

static dlock_lock *open_kind(bench *b, dlock_client *c, const kind_row *k)
{
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = k->flags | DLOCK_NO_FENCE; /* the plain lock's usual setting in the bench */
    int rc;
    char n0[64], n1[64], n2[64];
    const char *names[3] = {n0, n1, n2};
    snprintf(n0, sizeof n0, "bench:kinds:%s:a", k->name);
    snprintf(n1, sizeof n1, "bench:kinds:%s:b", k->name);
    snprintf(n2, sizeof n2, "bench:kinds:%s:c", k->name);
    if (k->permits)
        rc = dlock_semaphore_new(&l, c, n0, k->permits, &o);
    else if (k->names > 1)
        rc = dlock_lock_new_multi(&l, c, names, (size_t)k->names, &o);
    else
        rc = dlock_lock_new(&l, c, n0, &o);
    if (rc != DLOCK_OK)
        bench_fail(b, "kinds %s: %s", k->name, dlock_errname(rc));
    return rc == DLOCK_OK ? l : NULL;
}

/* Cycles for slice_s; returns cycles per second, -1 after a failure. */
static double cycle(bench *b, dlock_lock *l, const char *name, double slice_s)
{
    long n = 0;
    int64_t t0 = bench_now_ns(), end = t0 + (int64_t)(slice_s * 1e9);
    while (!bench_stop && bench_now_ns() < end) {
        int rc = dlock_lock_acquire(l, 0);
        if (rc == DLOCK_OK)
            rc = dlock_lock_release(l);
        if (rc != DLOCK_OK) {
            bench_fail(b, "kinds %s: %s: %s", name, dlock_errname(rc), dlock_lock_errmsg(l));
            return -1;
        }
        n++;
    }
    return (double)n / ((double)(bench_now_ns() - t0) / 1e9);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, c = *(const double *)y;
    return a < c ? -1 : a > c;
}

void bench_kinds(bench *b)
{
    double slice_s = b->hist_s / (double)(ROUNDS * N_ROWS);
    if (slice_s < 0.2)
        slice_s = 0.2;
    printf("\n== kinds: acquire (try once) + release cycles/s per lock kind, 1 node, 1 client, "
           "1 thread; %d interleaved rounds of %.2f s each, median\n", ROUNDS, slice_s);
    dlock_client *c = bench_client(b, 1, 4);
    if (!c)
        return;
    dlock_lock *l[N_ROWS] = {NULL};
    double rate[N_ROWS][ROUNDS];
    int ok = 1;
    for (size_t k = 0; k < N_ROWS && ok; k++)
        ok = (l[k] = open_kind(b, c, &rows[k])) != NULL && cycle(b, l[k], rows[k].name, 0.05) >= 0;
    for (int r = 0; r < ROUNDS && ok && !bench_stop; r++)
        for (size_t k = 0; k < N_ROWS && ok; k++)
            ok = (rate[k][r] = cycle(b, l[k], rows[k].name, slice_s)) >= 0;
    FILE *f = bench_tsv_open(b, "kinds.tsv", "kind\tcycles_per_s_median\tmin\tmax\tvs_plain\tload1");
    double load = bench_load1(), plain = 0;
    printf("%-11s %10s %10s %10s %8s  %s\n", "kind", "cycles/s", "min", "max", "vs plain", "what");
    for (size_t k = 0; k < N_ROWS && ok && !bench_stop; k++) {
        qsort(rate[k], ROUNDS, sizeof rate[k][0], cmp_double);
        double med = rate[k][ROUNDS / 2];
        if (k == 0)
            plain = med;
        printf("%-11s %10.0f %10.0f %10.0f %8.2f  %s\n", rows[k].name, med, rate[k][0],
               rate[k][ROUNDS - 1], plain > 0 ? med / plain : 0, rows[k].what);
        if (f)
            fprintf(f, "%s\t%.1f\t%.1f\t%.1f\t%.3f\t%.2f\n", rows[k].name, med, rate[k][0],
                    rate[k][ROUNDS - 1], plain > 0 ? med / plain : 0, load);
    }
    bench_tsv_close(b, f, "kinds.tsv");
    for (size_t k = 0; k < N_ROWS; k++)
        dlock_lock_free(l[k]);
    dlock_client_free(c);
}
