/* SPDX-License-Identifier: BSD-3-Clause */
/* Discovery: what a node must learn before a command can be routed to it,
 * as a sub-request on the loop of the request that needs it. A Cluster
 * learns its slot map (CLUSTER SLOTS, cluster_learn.c); a Sentinel node
 * asks its sentinels for the primary (sentinel.c; the new connection's
 * handshake then checks ROLE, conn.c). One discovery of a kind is in
 * flight per client at a time (flight.h): a request that finds one in
 * flight waits for it to land on its own loop, then looks again.
 *
 *   dlock__discover_start --nothing to learn--> 0 (check out now)
 *                         --learning, or observing another's--> 1 ... done()
 *
 * The request's deadline bounds the discovery (and each node asked keeps
 * its connect timeout); a request that is cancelled or ends stops it with
 * dlock__discover_stop, which lands the flight for its observers. */
#ifndef DLOCK_DISCOVER_H
#define DLOCK_DISCOVER_H

#include <stdint.h>

#include "cluster.h"
#include "flight.h"
#include "loop.h"
#include "node.h"
#include "sentinel.h"

typedef struct dlock__discover {
    dlock__node *node;
    unsigned cslot; /* Cluster: the hash slot to route */
    dlock__loop *loop;
    int64_t deadline_ns;
    int phase; /* 0 idle or landed, 1 flying (ours), 2 observing another's */
    dlock__flight_obs obs;
    dlock__cluster_learning *learning;
    dlock__sentinel_asking asking;
    dlock__timer fin; /* done, once the learning has returned */
    int rc; /* when done: DLOCK_OK or why not (err) */
    char err[512];
    void (*done)(struct dlock__discover *d); /* from the loop, once per start */
    void *arg; /* the caller's */
} dlock__discover;

/* Learn what node n needs before slot can be routed, on loop l, within
 * deadline_ns (INT64_MAX: none). 0: nothing to learn (done is not called);
 * 1: started, done will be called from the loop unless stopped first; or
 * a negative code (DLOCK_ENOMEM, DLOCK_EIO: no eventfd to observe with),
 * nothing started. d is zeroed by the caller before its first start and
 * may be started again once done. */
int dlock__discover_start(dlock__discover *d, dlock__node *n, unsigned slot, dlock__loop *l,
                          int64_t deadline_ns, void (*done)(dlock__discover *d));

/* A node of its own around a cluster, for a caller given only the
 * cluster (the map is the cluster's; the node is a handle to start a
 * discovery with). */
void dlock__discover_cluster_node(dlock__node *n, dlock__cluster *c, const dlock__url *tmpl,
                                  dlock__tls_ctx *tls);

/* Stop (done or not) and let go of everything: the flight lands if it was
 * ours. Safe on a zeroed d. */
void dlock__discover_stop(dlock__discover *d);

/* After done: the connection for the slot, found with what was learned
 * (d->rc; a failure gives a BROKEN connection with the reason, NULL only
 * when out of memory). 0 with *out untouched when the address was
 * forgotten again meanwhile (a Sentinel failover): start again. */
int dlock__discover_checkout(dlock__discover *d, dlock__conn **out);

#endif
