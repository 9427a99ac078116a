/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench section "ab": what the library costs over the raw round
 * trips, measured as an interleaved A/B in one process, so that a machine
 * whose speed drifts (a shared VM) moves every side alike. Each round runs
 * five sides for the same time each, in an order that rotates from round
 * to round (so no side always runs first):
 *   raw      hiredis, blocking: SET key tok NX PX ttl (tok: 16 bytes from
 *            getrandom, hex) + EVALSHA compare-and-delete, as the peers'
 *            baseline worker does;
 *   wire     hiredis, blocking, sending by hand what `nowake` sends: SET NX
 *            PX GET and PTTL in one write (on Redis 7; SET NX PX, GET and
 *            PTTL before), then EVALSHA release.lua with the lock key, the
 *            token and no channel;
 *   nowake   dlock_lock_acquire(lock, 0) + dlock_lock_release(lock) with
 *            DLOCK_NO_FENCE on a client with wakeups = 0;
 *   nofence  the same on a client with the default wake-ups (the release
 *            looks for listed waiters and publishes);
 *   dlock    the defaults (acquire.lua with the fencing counter).
 * Read from left to right, each step adds one thing: wire / raw is the
 * cost of dlock's commands over the baseline's (PTTL, the larger release
 * script), nowake / wire the library's own cost (the same
 * commands), nofence / nowake the wake-ups', dlock / nofence the fencing
 * counter's. The median over rounds of each ratio is the figure to quote.
 * DLOCK_BENCH_IDENTITY=1 in the environment turns the clients' holder
 * identity on (dlock_client_options.identity): the dlock sides then pay
 * for it (the script instead of SET NX, the hash) while wire does not. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dlock_bench.h"
#include "scripts.h"

#define AB_ROUNDS 25
#define AB_SIDE_S 0.25

enum { RAW, WIRE, NOWAKE, NOFENCE, DLOCK, SIDES };
static const char *const side_name[SIDES] = {"raw", "wire", "nowake", "nofence", "dlock"};

static const char *release_lua =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

typedef struct ab {
    bench *b;
    redisContext *c;     /* raw and wire */
    char cas_sha[48];    /* raw's compare-and-delete */
    const char *rel_sha; /* wire's release.lua */
    int set_get;         /* the server takes SET ... NX GET (Redis 7) */
    dlock_lock *l[SIDES];
} ab;

/* One hiredis cycle: the acquire's replies (the first says OK), then the
 * release script's (1). */
static int hand_cycle(ab *a, int wire)
{
    char tok[33];
    bench_token(tok);
    const char *key = wire ? "bench:ab:wire" : "bench:ab:raw";
    int ok;
    if (wire) {
        ok = bench_wire_take(a->c, bench_wire_append(a->c, key, tok, a->set_get), a->set_get);
    } else {
        redisAppendCommand(a->c, "SET %s %s NX PX 10000", key, tok);
        ok = bench_wire_take(a->c, 1, 0);
    }
    redisReply *y = wire ? redisCommand(a->c, "EVALSHA %s 1 %s %s %s", a->rel_sha, key, tok, "")
                         : redisCommand(a->c, "EVALSHA %s 1 %s %s", a->cas_sha, key, tok);
    ok &= y && y->type == REDIS_REPLY_INTEGER && y->integer == 1;
    if (y)
        freeReplyObject(y);
    return ok;
}

static double hand_side(ab *a, int wire, double secs)
{
    long n = 0;
    int64_t t0 = bench_now_ns(), end = t0 + (int64_t)(secs * 1e9), now = t0;
    while (!bench_stop && (now = bench_now_ns()) < end) {
        if (!hand_cycle(a, wire)) {
            bench_fail(a->b, "ab: %s cycle failed", side_name[wire ? WIRE : RAW]);
            return 0;
        }
        n++;
    }
    return (double)n / ((double)(now - t0) / 1e9);
}

static double side(ab *a, int s, double secs)
{
    if (s == RAW || s == WIRE)
        return hand_side(a, s == WIRE, secs);
    return bench_cycle_rate(a->b, &a->l[s], 1, secs, "ab: dlock cycle");
}

static int load_script(ab *a, const char *body, char *sha, size_t len)
{
    redisReply *x = redisCommand(a->c, "SCRIPT LOAD %s", body);
    int ok = x && x->type == REDIS_REPLY_STRING;
    if (ok && sha)
        snprintf(sha, len, "%s", x->str);
    if (x)
        freeReplyObject(x);
    return ok;
}

static int setup(ab *a, dlock_client *client, dlock_client *quiet)
{
    static const char *const names[SIDES] = {NULL, NULL, "bench:ab:nowake", "bench:ab:nofence",
                                             "bench:ab:dlock"};
    const dlock__script *rel = dlock__script_get(DLOCK__S_RELEASE);
    a->rel_sha = rel->sha;
    a->set_get = bench_info(&a->b->srv[0], "server", "redis_version") >= 7;
    if (!a->c || !client || !quiet || !load_script(a, release_lua, a->cas_sha, sizeof a->cas_sha) ||
        !load_script(a, rel->body, NULL, 0))
        return -1;
    for (int s = NOWAKE; s < SIDES; s++) {
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 10000;
        o.flags = s == DLOCK ? 0 : DLOCK_NO_FENCE;
        if (dlock_lock_new(&a->l[s], s == NOWAKE ? quiet : client, names[s], &o) != DLOCK_OK)
            return -1;
    }
    return 0;
}

void bench_ab(bench *b)
{
    ab a = {.b = b, .c = test_redis_admin(&b->srv[0])};
    const char *env = getenv("DLOCK_BENCH_IDENTITY");
    int identity = env && strcmp(env, "1") == 0;
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.pool_size = 4;
    co.identity = identity;
    dlock_client *client = bench_client_opts(b, 1, &co);
    dlock_client_options qo = co;
    qo.wakeups = 0;
    dlock_client *quiet = bench_client_opts(b, 1, &qo);
    FILE *f = NULL;
    if (setup(&a, client, quiet) != 0) {
        bench_fail(b, "ab: setup failed");
        goto out;
    }
    f = bench_tsv_open(b, "ab.tsv",
                       "round\traw_cps\twire_cps\tnowake_cps\tnofence_cps\tdlock_cps\tdlock_x\t"
                       "nofence_x\tnowake_x\twire_x\tlibrary_x\tload1");
    /* Per round: dlock, nofence, nowake, wire against raw, and nowake
     * against wire (the library's own cost). */
    double x[5][AB_ROUNDS];
    int rounds = 0;
    for (int s = 0; s < SIDES; s++) /* a short warm-up of each side, not recorded */
        side(&a, s, 0.2);
    printf("\n== ab (1 node, interleaved rounds of %.1f s per side)\n", AB_SIDE_S);
    printf("round    raw c/s  wire c/s  nowake c/s  nofence c/s  dlock c/s   dlock x  nofence x"
           "  nowake x  wire x  library x  load\n");
    for (int r = 0; r < AB_ROUNDS && !bench_stop && !b->failures; r++) {
        double cps[SIDES];
        int ok = 1;
        for (int k = 0; k < SIDES && ok; k++) {
            int s = (r + k) % SIDES;
            cps[s] = side(&a, s, AB_SIDE_S);
            ok = cps[s] > 0;
        }
        if (!ok)
            break;
        double v[5] = {cps[DLOCK] / cps[RAW], cps[NOFENCE] / cps[RAW], cps[NOWAKE] / cps[RAW],
                       cps[WIRE] / cps[RAW], cps[NOWAKE] / cps[WIRE]};
        for (int i = 0; i < 5; i++)
            x[i][rounds] = v[i];
        double load = bench_load1();
        printf("%5d %10.0f %9.0f %11.0f %12.0f %10.0f %9.3f %10.3f %9.3f %7.3f %10.3f %5.2f\n",
               r + 1, cps[RAW], cps[WIRE], cps[NOWAKE], cps[NOFENCE], cps[DLOCK], v[0], v[1], v[2],
               v[3], v[4], load);
        if (f)
            fprintf(f, "%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.2f\n",
                    r + 1, cps[RAW], cps[WIRE], cps[NOWAKE], cps[NOFENCE], cps[DLOCK], v[0], v[1],
                    v[2], v[3], v[4], load);
        rounds++;
    }
    if (rounds > 0)
        printf("median   dlock/raw %.3f  nofence/raw %.3f  nowake/raw %.3f  wire/raw %.3f  "
               "nowake/wire (the library) %.3f   (%d rounds)\n",
               bench_median(x[0], rounds), bench_median(x[1], rounds), bench_median(x[2], rounds),
               bench_median(x[3], rounds), bench_median(x[4], rounds), rounds);
out:
    if (f)
        bench_tsv_close(b, f, "ab.tsv");
    for (int s = 0; s < SIDES; s++)
        dlock_lock_free(a.l[s]);
    dlock_client_free(client);
    dlock_client_free(quiet);
    if (a.c)
        redisFree(a.c);
}
