/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench section "ab": what the library costs over the raw round
 * trips, measured as an interleaved A/B in one process, so that a machine
 * whose speed drifts (a shared VM) moves both sides alike. Each round runs,
 * for the same time each:
 *   raw      hiredis, blocking: SET key tok NX PX ttl (tok: 16 bytes from
 *            getrandom, hex) + EVALSHA compare-and-delete, as the peers'
 *            baseline worker does;
 *   dlock    dlock_lock_acquire(lock, 0) + dlock_lock_release(lock) with the
 *            defaults (acquire script with fencing counter and holder TTL);
 *   nofence  the same with DLOCK_NO_FENCE.
 * The ratio of each round is dlock / raw; the median over rounds is the
 * figure to quote. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "dlock_bench.h"

#define AB_ROUNDS 5
#define AB_SIDE_S 1.0

static const char *release_lua =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

static double raw_side(bench *b, redisContext *c, const char *sha, double secs)
{
    static const char hex[] = "0123456789abcdef";
    long n = 0;
    int64_t t0 = bench_now_ns(), end = t0 + (int64_t)(secs * 1e9), now = t0;
    while (!bench_stop && (now = bench_now_ns()) < end) {
        unsigned char r[16];
        char tok[33];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
            bench_die("getrandom failed");
        for (int i = 0; i < 16; i++) {
            tok[2 * i] = hex[r[i] >> 4];
            tok[2 * i + 1] = hex[r[i] & 15];
        }
        tok[32] = '\0';
        redisReply *x = redisCommand(c, "SET bench:ab:raw %s NX PX 10000", tok);
        redisReply *y = x ? redisCommand(c, "EVALSHA %s 1 bench:ab:raw %s", sha, tok) : NULL;
        int ok = x && x->type == REDIS_REPLY_STATUS && y && y->type == REDIS_REPLY_INTEGER &&
                 y->integer == 1;
        if (x)
            freeReplyObject(x);
        if (y)
            freeReplyObject(y);
        if (!ok) {
            bench_fail(b, "ab: raw cycle failed");
            return 0;
        }
        n++;
    }
    return (double)n / ((double)(now - t0) / 1e9);
}

void bench_ab(bench *b)
{
    redisContext *c = test_redis_admin(&b->srv[0]);
    dlock_client *client = bench_client(b, 1, 4);
    dlock_lock *l = NULL, *lnf = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    redisReply *x = c ? redisCommand(c, "SCRIPT LOAD %s", release_lua) : NULL;
    if (!c || !client || !x || x->type != REDIS_REPLY_STRING ||
        dlock_lock_new(&l, client, "bench:ab:dlock", &o) != DLOCK_OK) {
        bench_fail(b, "ab: setup failed");
        goto out;
    }
    char sha[48];
    snprintf(sha, sizeof sha, "%s", x->str);
    o.flags = DLOCK_NO_FENCE;
    if (dlock_lock_new(&lnf, client, "bench:ab:nofence", &o) != DLOCK_OK) {
        bench_fail(b, "ab: setup failed");
        goto out;
    }
    FILE *f = bench_tsv_open(b, "ab.tsv", "round\traw_cps\tdlock_cps\tnofence_cps\tdlock_x\tnofence_x\tload1");
    double rx[AB_ROUNDS], nx[AB_ROUNDS];
    int rounds = 0;
    /* One short warm-up of each side, not recorded. */
    raw_side(b, c, sha, 0.2);
    bench_cycle_rate(b, &l, 1, 0.2, "ab: dlock cycle");
    bench_cycle_rate(b, &lnf, 1, 0.2, "ab: dlock cycle");
    printf("\n== ab (1 node, interleaved rounds of %.1f s per side; dlock / raw hiredis)\n", AB_SIDE_S);
    printf("round    raw c/s  dlock c/s  nofence c/s  dlock x  nofence x  load\n");
    for (int r = 0; r < AB_ROUNDS && !bench_stop && !b->failures; r++) {
        double raw = raw_side(b, c, sha, AB_SIDE_S);
        double dl = bench_cycle_rate(b, &l, 1, AB_SIDE_S, "ab: dlock cycle");
        double nf = bench_cycle_rate(b, &lnf, 1, AB_SIDE_S, "ab: dlock cycle");
        if (raw <= 0 || dl <= 0 || nf <= 0)
            break;
        rx[rounds] = dl / raw;
        nx[rounds] = nf / raw;
        double load = bench_load1();
        printf("%5d %10.0f %10.0f %12.0f %8.3f %10.3f %5.2f\n", r + 1, raw, dl, nf, rx[rounds],
               nx[rounds], load);
        if (f)
            fprintf(f, "%d\t%.0f\t%.0f\t%.0f\t%.4f\t%.4f\t%.2f\n", r + 1, raw, dl, nf, rx[rounds],
                    nx[rounds], load);
        rounds++;
    }
    if (rounds > 0) {
        double mr = bench_median(rx, rounds), mn = bench_median(nx, rounds);
        printf("median   dlock/raw %.3f   nofence/raw %.3f   (%d rounds)\n", mr, mn, rounds);
    }
    if (f)
        bench_tsv_close(b, f, "ab.tsv");
out:
    if (x)
        freeReplyObject(x);
    dlock_lock_free(l);
    dlock_lock_free(lnf);
    dlock_client_free(client);
    if (c)
        redisFree(c);
}
