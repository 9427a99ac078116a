/* SPDX-License-Identifier: BSD-3-Clause */
/* Chaos rows on a Redis Cluster (issue 19 items 3 and 4): three masters
 * with a replica each (tests/support/redis_topology.c), the workers reach
 * them through the six seed URLs with the cluster option. Faults go to a
 * master by pid: SIGSTOP for 2 x TTL (shorter than the cluster's node
 * timeout, raised to 20 s for that row, so the cluster sees no failure, as
 * with a production timeout of 15 s), or kill -9 of the master of the
 * contended lock's slot, whose replica takes over. */
#include <stdio.h>
#include <string.h>

#include "chaos.h"
#include "redis_topology.h"

/* Fault kinds in the history (the numbers inject.c uses for the same). */
#define F_KILL_NODE 3
#define F_STOP_NODE 5

static test_cluster cluster; /* one scenario runs at a time */

int chaos_is_cluster(const chaos_scenario *sc)
{
    return strncmp(sc->name, "cluster_", 8) == 0;
}

/* A lock name "chaos:lock-K" whose slot a master other than not_master
 * serves: 0, or -1. */
static int lock_name_not_on(int not_master, char *out, size_t len)
{
    for (int k = 0; k < 2000; k++) {
        snprintf(out, len, "chaos:lock-%d", k);
        int m = test_cluster_master_of(&cluster, test_cluster_keyslot(&cluster, out));
        if (m >= 0 && m != not_master)
            return 0;
    }
    return -1;
}

int chaos_cluster_setup(chaos_run *run)
{
    if (test_cluster_start(&cluster) != 0)
        return -1;
    for (int i = 0; i < TEST_CLUSTER_NODES; i++)
        run->wcfg.urls[i] = cluster.urls[i];
    run->wcfg.n_urls = TEST_CLUSTER_NODES;
    run->wcfg.cluster = 1;
    /* The stall row stops the master of slot 0, the first a client's map
     * names (every relearn once asked it first); the contended lock lives
     * on another master, and each worker also holds an auto-renewed lock
     * on every master (tags bg0..bg2, one per master). */
    run->target = test_cluster_master_of(&cluster, 0);
    if (run->target < 0 ||
        lock_name_not_on(run->sc->inject == chaos_inject_cluster_stall ? run->target : -1,
                         run->lock_name, sizeof run->lock_name) != 0)
        return -1;
    if (run->sc->inject == chaos_inject_cluster_stall) {
        if (test_cluster_set_node_timeout(&cluster, 20000) != 0)
            return -1;
        int masters[3] = {-1, -1, -1}, n = 0;
        for (int k = 0; n < 3 && k < 2000; k++) {
            char tag[32];
            snprintf(tag, sizeof tag, "bg%d", k);
            int m = test_cluster_master_of(&cluster, test_cluster_keyslot(&cluster, tag));
            if (m < 0 || m == masters[0] || m == masters[1])
                continue;
            masters[n] = m;
            if (m == run->target)
                run->stalled_bg = n;
            snprintf(run->bg_tags[n++], sizeof run->bg_tags[0], "%s", tag);
        }
        if (n < 3)
            return -1;
        for (int i = 0; i < 3; i++)
            run->wcfg.bg_tags[i] = run->bg_tags[i];
        run->wcfg.n_bg = 3;
    }
    return 0;
}

void chaos_cluster_teardown(chaos_run *run)
{
    (void)run;
    for (int i = 0; i < TEST_CLUSTER_NODES; i++)
        test_redis_resume(&cluster.node[i]);
    test_cluster_stop(&cluster);
}

int chaos_inject_cluster_stall(chaos_run *run, int round)
{
    (void)round;
    test_redis_pause(&cluster.node[run->target]);
    chaos_fault(run, F_STOP_NODE);
    chaos_sleep_ms(2 * run->sc->ttl_ms);
    test_redis_resume(&cluster.node[run->target]);
    return 1;
}

/* INFO replication's master_repl_offset of node i (-1: no answer). */
static long long repl_offset(int i)
{
    redisReply *r = test_redis_cmd(&cluster.node[i], "INFO replication");
    long long off = -1;
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "master_repl_offset:")
                                                      : NULL;
    if (p)
        sscanf(p, "master_repl_offset:%lld", &off);
    if (r)
        freeReplyObject(r);
    return off;
}

/* Whether node i is a replica of the node listening on port. */
static int replica_of(int i, int port)
{
    char want[40];
    snprintf(want, sizeof want, "master_port:%d\r", port);
    redisReply *r = test_redis_cmd(&cluster.node[i], "INFO replication");
    int yes = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "role:slave") &&
              strstr(r->str, want);
    if (r)
        freeReplyObject(r);
    return yes;
}

int chaos_inject_cluster_failover(chaos_run *run, int round)
{
    (void)round;
    int slot = test_cluster_keyslot(&cluster, run->lock_name);
    int m = test_cluster_master_of(&cluster, slot);
    if (m < 0) {
        run->probe_failed = 1;
        return 0;
    }
    /* A failover that keeps every write the master made: writes paused,
     * the replica caught up, then kill -9. (One that loses the last grant,
     * replication being asynchronous, is the documented limit of a
     * failover: docs/deployment.md; min_replicas narrows it.) Commands held
     * by the pause never run: their connections die with the master. */
    redisReply *r = test_redis_cmd(&cluster.node[m], "CLIENT PAUSE 3000 WRITE");
    if (r)
        freeReplyObject(r);
    long long want = repl_offset(m);
    for (int k = 0; k < 200; k++) {
        int caught = 0;
        for (int i = 0; i < TEST_CLUSTER_NODES; i++)
            if (i != m && cluster.node[i].pid > 0 && replica_of(i, cluster.node[m].port) &&
                repl_offset(i) >= want)
                caught = 1;
        if (caught)
            break;
        chaos_sleep_ms(5);
    }
    test_redis_kill9(&cluster.node[m]);
    chaos_fault(run, F_KILL_NODE);
    if (test_cluster_wait_failover(&cluster, slot, m, 30000) < 0)
        run->probe_failed = 1;
    /* Back as a replica of the new master, for a clean teardown. */
    if (test_redis_restart(&cluster.node[m]) != 0)
        run->probe_failed = 1;
    return 1;
}
