/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench: what the shared peers benchmark cannot measure (issue 8).
 * The sections the driver (dlock_bench.c) runs, one file each group:
 * dlock_bench_hold.c (watchdog, memory), dlock_bench_lat.c (redlock5,
 * hist), dlock_bench_ab.c (ab), dlock_bench_tls.c (tls),
 * dlock_bench_kinds.c (kinds). Their helpers
 * are in bench_util.h. */
#ifndef DLOCK_BENCH_H
#define DLOCK_BENCH_H

#include "bench_util.h"

/* Sections. Each prints its table and writes its TSV. */
void bench_watchdog(bench *b);
void bench_memory(bench *b);
void bench_redlock(bench *b);
void bench_hist(bench *b);
void bench_ab(bench *b);
void bench_tls(bench *b);
void bench_cluster(bench *b);
/* dlock_bench_kinds.c: cycles/s of each lock kind beside the plain lock's. */
void bench_kinds(bench *b);
/* dlock_bench_threads.c: T threads on names of their own, beside raw
 * connections and one pipelined connection (issue 36, M2). */
void bench_threads(bench *b);
/* dlock_bench_async.c: C loops on one event loop beside hiredis's async API
 * and the blocking client's threads (issue 37); built with libuv. */
void bench_async(bench *b);

#endif
