/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench section "cluster": S1 (one client, acquire + release in a
 * loop, pooled connections, default lock options) on a single node and on
 * a 3-master/3-replica Redis Cluster started here (tests/support), in
 * interleaved rounds in one process so that a shared VM's drift moves both
 * sides alike. Each round's ratio is cluster / single; the median over
 * rounds is the figure to quote. The cluster side spreads its cycles over
 * three names on three masters, so every master serves a third. */
#include "dlock_bench.h"
#include "redis_topology.h"

#define CLUSTER_ROUNDS 5
#define CLUSTER_SIDE_S 1.0

void bench_cluster(bench *b)
{
    test_cluster cl;
    dlock_client *single = NULL, *clustered = NULL;
    dlock_lock *ls[1] = {NULL}, *lc[3] = {NULL, NULL, NULL};
    char err[256] = "";
    if (test_cluster_start(&cl) != 0) {
        bench_fail(b, "cluster: could not start a 3+3 cluster");
        return;
    }
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.cluster = 1;
    const char *single_url[] = {b->srv[0].url};
    if (dlock_client_new(&single, single_url, 1, NULL, err, sizeof err) != DLOCK_OK ||
        dlock_client_new(&clustered, cl.urls, TEST_CLUSTER_NODES, &co, err, sizeof err) !=
            DLOCK_OK) {
        bench_fail(b, "cluster: client: %s", err);
        goto out;
    }
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    /* Names whose slots fall on three different masters. */
    int masters[3] = {-1, -1, -1}, found = 0;
    for (int k = 0; found < 3 && k < 1000; k++) {
        char name[32];
        snprintf(name, sizeof name, "bench:cluster:s1:%d", k);
        int m = test_cluster_master_of(&cl, test_cluster_keyslot(&cl, name));
        if (m < 0 || m == masters[0] || m == masters[1])
            continue;
        masters[found] = m;
        if (dlock_lock_new(&lc[found++], clustered, name, &o) != DLOCK_OK)
            break;
    }
    if (found < 3 || !lc[2] || dlock_lock_new(&ls[0], single, "bench:cluster:s1", &o) != DLOCK_OK) {
        bench_fail(b, "cluster: lock setup failed");
        goto out;
    }
    FILE *f = bench_tsv_open(b, "cluster.tsv", "round\tsingle_cps\tcluster_cps\tcluster_x\tload1");
    double x[CLUSTER_ROUNDS];
    int rounds = 0;
    /* Warm-up, not recorded: connects, learns the slot map, loads scripts. */
    bench_cycle_rate(b, ls, 1, 0.2, "cluster: S1 cycle");
    bench_cycle_rate(b, lc, 3, 0.2, "cluster: S1 cycle");
    printf("\n== cluster (S1: 1 client, acquire+release; single node vs 3+3 cluster; "
           "interleaved rounds of %.1f s per side)\n", CLUSTER_SIDE_S);
    printf("round single c/s cluster c/s cluster/single  load\n");
    for (int r = 0; r < CLUSTER_ROUNDS && !bench_stop && !b->failures; r++) {
        double s = bench_cycle_rate(b, ls, 1, CLUSTER_SIDE_S, "cluster: S1 cycle");
        double c = bench_cycle_rate(b, lc, 3, CLUSTER_SIDE_S, "cluster: S1 cycle");
        if (s <= 0 || c <= 0)
            break;
        x[rounds] = c / s;
        double load = bench_load1();
        printf("%5d %11.0f %11.0f %14.3f %5.2f\n", r + 1, s, c, x[rounds], load);
        if (f)
            fprintf(f, "%d\t%.0f\t%.0f\t%.4f\t%.2f\n", r + 1, s, c, x[rounds], load);
        rounds++;
    }
    if (rounds > 0) {
        printf("median   cluster/single %.3f   (%d rounds)\n", bench_median(x, rounds), rounds);
    }
    if (f)
        bench_tsv_close(b, f, "cluster.tsv");
out:
    dlock_lock_free(ls[0]);
    for (int i = 0; i < 3; i++)
        dlock_lock_free(lc[i]);
    dlock_client_free(single);
    dlock_client_free(clustered);
    test_cluster_stop(&cl);
}
