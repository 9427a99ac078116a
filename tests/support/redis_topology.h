/* SPDX-License-Identifier: BSD-3-Clause */
/* Test harness for the multi-process Redis deployments (issue 19): a Redis
 * Cluster of 3 masters and 3 replicas, and a primary with one replica
 * watched by three Sentinels. Every process is a real redis-server (or
 * redis-sentinel) on a free loopback port in its own temp dir, started from
 * the calling thread and stopped by pid, like tests/support/redis_server.h.
 * Starting either takes a few seconds: share one per test file. */
#ifndef DLOCK_TEST_REDIS_TOPOLOGY_H
#define DLOCK_TEST_REDIS_TOPOLOGY_H

#include "redis_server.h"

#define TEST_CLUSTER_NODES 6

typedef struct test_cluster {
    test_redis node[TEST_CLUSTER_NODES];
    /* "redis://127.0.0.1:P" of every node, as seed URLs. */
    const char *urls[TEST_CLUSTER_NODES];
} test_cluster;

/* Start six cluster-enabled servers, join them with `redis-cli --cluster
 * create --cluster-replicas 1` and wait until every node reports
 * cluster_state:ok and agrees on the slot map. 0 or -1 (message on
 * stderr; everything started is stopped). */
int test_cluster_start(test_cluster *c);
void test_cluster_stop(test_cluster *c);

/* Index of the node that is the master of hash slot `slot` now (asking the
 * node at index `via`, or any live one when via < 0), or -1. */
int test_cluster_master_of(test_cluster *c, int slot);

/* Wait until a live node other than `dead` serves `slot` as master and
 * every live node says cluster_state:ok; up to timeout_ms. Returns the new
 * master's index or -1. */
int test_cluster_wait_failover(test_cluster *c, int slot, int dead, int timeout_ms);

/* Wait until every live node says cluster_state:ok, agrees on a full slot
 * map and every replica is in sync; up to timeout_ms. 0 or -1. */
int test_cluster_wait_ok(test_cluster *c, int timeout_ms);

/* CONFIG SET cluster-node-timeout ms on every live node (a stall shorter
 * than it is then no failure to the cluster, as in production, where it
 * is 15 s). 0 or -1. */
int test_cluster_set_node_timeout(test_cluster *c, int ms);

#define TEST_SENTINELS 3

typedef struct test_sentinel_set {
    test_redis primary, replica;
    /* Sentinels: pid, port and dir only (they are not data nodes). */
    test_redis sentinel[TEST_SENTINELS];
    char master_name[32];
    char password[64]; /* "" without auth */
    /* redis-sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster */
    char url[400];
} test_sentinel_set;

/* Start a primary, a replica of it, and three sentinels monitoring it
 * (quorum 2, down-after 1000 ms); wait until the replica is in sync and
 * every sentinel knows the replica and the other sentinels. 0 or -1. */
int test_sentinel_start(test_sentinel_set *s);

/* The same with `requirepass password` (and masterauth) on the primary and
 * replica, and the sentinels told the password (auth-pass). The URL then
 * carries no password: the tests add it. */
int test_sentinel_start_auth(test_sentinel_set *s, const char *password);
void test_sentinel_stop(test_sentinel_set *s);

/* The port of the primary the sentinels name now (asking the first
 * sentinel that answers), or -1. */
int test_sentinel_primary_port(test_sentinel_set *s);

/* Wait until the sentinels name a primary other than old_port and that
 * server says role master; up to timeout_ms. Returns its port or -1. */
int test_sentinel_wait_failover(test_sentinel_set *s, int old_port, int timeout_ms);

/* The data node (primary or replica) listening on port, or NULL. */
test_redis *test_sentinel_node(test_sentinel_set *s, int port);

/* Hash slot of a key, as the server computes it (CLUSTER KEYSLOT on any
 * live node), or -1. */
int test_cluster_keyslot(test_cluster *c, const char *key);

#endif
