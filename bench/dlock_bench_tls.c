/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench section "tls": S1 (one client, acquire + release in a loop,
 * pooled connection, default lock options) over plain TCP and over TLS, as
 * an interleaved A/B in one process so that a shared VM's drift moves both
 * sides alike. The plain side runs against srv[0]; the TLS side against a
 * TLS-only redis-server (same configuration otherwise) started here with
 * certificates made by the test harness (openssl command). The ratio of
 * each round is tls / plain; the median over rounds is the figure to quote.
 * The first TLS handshake is outside the measurement: pooled connections
 * make it rare, and the connect cost is its own question. */
#include <stdlib.h>

#include "dlock_bench.h"

#define TLS_ROUNDS 5
#define TLS_SIDE_S 1.0

static dlock_lock *s1_lock(bench *b, dlock_client *c, const char *name)
{
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    if (!c || dlock_lock_new(&l, c, name, &o) != DLOCK_OK) {
        bench_fail(b, "tls: lock setup failed");
        return NULL;
    }
    return l;
}

void bench_tls(bench *b)
{
    test_tls_certs certs;
    test_redis tls_srv;
    dlock_client *plain = NULL, *tls = NULL;
    dlock_lock *lp = NULL, *lt = NULL;
    char err[256] = "";
    if (test_tls_certs_make(&certs) != 0) {
        bench_fail(b, "tls: could not make certificates (openssl)");
        return;
    }
    if (test_redis_start_tls(&tls_srv, &certs, 0, NULL) != 0) {
        bench_fail(b, "tls: could not start a TLS redis-server");
        test_tls_certs_remove(&certs);
        return;
    }
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    const char *plain_url[] = {b->srv[0].url}, *tls_url[] = {tls_srv.url};
    co.tls_ca_file = certs.ca;
    if (dlock_client_new(&plain, plain_url, 1, NULL, err, sizeof err) != DLOCK_OK ||
        dlock_client_new(&tls, tls_url, 1, &co, err, sizeof err) != DLOCK_OK) {
        bench_fail(b, "tls: client: %s", err);
        goto out;
    }
    if (!(lp = s1_lock(b, plain, "bench:tls:s1")) || !(lt = s1_lock(b, tls, "bench:tls:s1")))
        goto out;
    FILE *f = bench_tsv_open(b, "tls.tsv", "round\tplain_cps\ttls_cps\ttls_x\tload1");
    double x[TLS_ROUNDS];
    int rounds = 0;
    /* Warm-up, not recorded: connects, handshakes, loads the scripts. */
    bench_cycle_rate(b, &lp, 1, 0.2, "tls: S1 cycle");
    bench_cycle_rate(b, &lt, 1, 0.2, "tls: S1 cycle");
    printf("\n== tls (S1: 1 node, 1 client, acquire+release; interleaved rounds of %.1f s "
           "per side)\n", TLS_SIDE_S);
    printf("round  plain c/s    tls c/s  tls/plain  load\n");
    for (int r = 0; r < TLS_ROUNDS && !bench_stop && !b->failures; r++) {
        double p = bench_cycle_rate(b, &lp, 1, TLS_SIDE_S, "tls: S1 cycle");
        double t = bench_cycle_rate(b, &lt, 1, TLS_SIDE_S, "tls: S1 cycle");
        if (p <= 0 || t <= 0)
            break;
        x[rounds] = t / p;
        double load = bench_load1();
        printf("%5d %10.0f %10.0f %10.3f %5.2f\n", r + 1, p, t, x[rounds], load);
        if (f)
            fprintf(f, "%d\t%.0f\t%.0f\t%.4f\t%.2f\n", r + 1, p, t, x[rounds], load);
        rounds++;
    }
    if (rounds > 0) {
        printf("median   tls/plain %.3f   (%d rounds)\n", bench_median(x, rounds), rounds);
    }
    if (f)
        bench_tsv_close(b, f, "tls.tsv");
out:
    dlock_lock_free(lp);
    dlock_lock_free(lt);
    dlock_client_free(plain);
    dlock_client_free(tls);
    test_redis_stop(&tls_srv);
    test_tls_certs_remove(&certs);
}
