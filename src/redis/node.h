/* SPDX-License-Identifier: BSD-3-Clause */
/* One Redis node of a client: its address and a pool of idle connections.
 * Thread-safe: any thread may check connections out and in. */
#ifndef DLOCK_NODE_H
#define DLOCK_NODE_H

#include <pthread.h>
#include <stdatomic.h>

#include "cluster.h"
#include "conn.h"
#include "sentinel.h"
#include "url.h"

/* A pooled connection idle for less than this is handed out without the
 * liveness probe (dlock__conn_probe). */
#define DLOCK__PROBE_IDLE_MS 1

typedef struct dlock__node {
    dlock__url url;
    char name[280]; /* "host:port" or the socket path, for messages */
    pthread_mutex_t mu;
    dlock__conn *idle; /* stack of idle connections */
    size_t n_idle;
    size_t max_idle;
    /* The client's TLS context when this node speaks TLS, else NULL. */
    dlock__tls_ctx *tls_ctx;
    /* Its newest TLS session, resumed by the next connection (TLS only). */
    dlock__tls_cache *tls_cache;
    /* Monotonic time the server last started, from the newest handshake's
     * INFO (0: unknown). Read by the Redlock restart rule. */
    _Atomic int64_t server_start_ns;
    /* The server's run_id from the newest handshake ("" unknown); under mu. */
    char run_id[41];
    /* Whether the server takes SET ... NX GET (conn.h): 1 yes, 0 no or not
     * known, -1 it refused it once (a server that says it is Redis 7 but
     * is not, or an older primary after a failover): then never again, or
     * for Sentinel until the primary moves (dlock__node_stale()). */
    _Atomic int set_get;
    /* Sentinel: bumped each time the primary's address is forgotten
     * (dlock__node_stale()), so a shared connection (pipe.h) made to the
     * old one is not joined again. */
    _Atomic unsigned primary_gen;
    /* Sentinel: the primary is found through these sentinels (url then
     * holds only the primary's credentials); NULL for a plain node. */
    dlock__sentinel *sentinel;
    /* Cluster: the node is a whole Redis Cluster (url: the first seed, for
     * credentials and TLS); NULL otherwise. */
    dlock__cluster *cluster;
    /* The client's observer and statistics (stats.h), for a failover
     * followed; set by the client once, read-only after. */
    struct dlock__obs *obs;
    /* A looped client's shared connection (pipe.h), made at its first
     * request; NULL otherwise. Only the client's loop touches it; the
     * client's close frees it (redis_client.c). */
    struct dlock__pipe *pipe;
} dlock__node;

int dlock__node_init(dlock__node *n, const char *url, size_t max_idle, char *err,
                     size_t err_len);
void dlock__node_destroy(dlock__node *n);

/* The connection for a command on hash slot `slot` (which matters only
 * for a cluster: the slot's master) when nothing must be discovered first:
 * an idle one if a live one is pooled, else a new one that is connecting.
 * Never waits. 1 with *out set (NULL only when out of memory), or 0 when
 * the Cluster's slot map or the Sentinel primary's address must be learned
 * first (src/redis/discover.h). */
int dlock__node_checkout_ready(dlock__node *n, unsigned slot, dlock__conn **out);

/* Sentinel: a new connection to the primary at the address the sentinels
 * last gave, if they gave one (else 0). 1 with *out set (NULL: out of
 * memory). */
int dlock__node_connect_known(dlock__node *n, int load_scripts, int ask_uptime,
                              dlock__conn **out);

/* A new connection to the node (without the pool; the wake-up thread's
 * subscriber uses it). With Sentinel, asks the sentinels for the primary
 * first if its address is not known; with Cluster, learns the map first if
 * needed: on a private loop (src/redis/discover.c), the caller's thread
 * waiting. */
dlock__conn *dlock__node_connect(dlock__node *n, int load_scripts, int ask_uptime);

/* A connection that failed before it started, carrying why (NULL: out of
 * memory). */
dlock__conn *dlock__node_broken_conn(int code, const char *msg);

/* The node's primary may have moved (a failover): forget its address and
 * the pooled connections to it, so the next connection asks the sentinels
 * again. Nothing for a plain node. */
void dlock__node_stale(dlock__node *n);

/* Give a connection back: pooled if healthy and the pool has room,
 * otherwise freed. Records the server's start time it learned. */
void dlock__node_checkin(dlock__node *n, dlock__conn *c);

/* Record the run_id and set_get connection c learned (once per
 * connection). */
void dlock__node_note_run_id(dlock__node *n, dlock__conn *c);

/* Whether the node's server is known to take SET ... NX GET. */
int dlock__node_set_get(dlock__node *n);

/* The server refused SET ... NX GET: never send it there again. */
void dlock__node_no_set_get(dlock__node *n);

/* Copy node n's run_id ("" if not known yet) into out[41]. */
void dlock__node_run_id(dlock__node *n, char *out);

#endif
