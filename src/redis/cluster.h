/* SPDX-License-Identifier: BSD-3-Clause */
/* Redis Cluster (issue 19): a client with the cluster option treats its
 * URLs as seed nodes of one cluster, which acts as one node of dlock's
 * (quorum 1). Each command goes to the master serving its key's hash slot,
 * found in a slot map learned with CLUSTER SLOTS; MOVED and ASK redirect
 * it (src/redis/fanout_reply.c), and the map is learned again after a redirect or a
 * failed connection, so a failover is ridden out by a waiting acquire.
 * Connections are pooled per master.
 *
 * Key layout: every key one script touches must be in one slot. A lock key
 * with a hash tag ({...}) keeps its helper keys in its slot as on a single
 * node (key NUL kind); for any other lock key the helpers are
 * "{T}" NUL NUL key NUL kind, where T is the key itself when it has no '}'
 * (then {key} hashes like key) and otherwise the smallest decimal number
 * whose slot is the key's (docs/deployment.md). */
#ifndef DLOCK_CLUSTER_H
#define DLOCK_CLUSTER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "conn.h"
#include "flight.h"
#include "loop.h"
#include "tls.h"
#include "url.h"

#define DLOCK__CLUSTER_SLOTS 16384
#define DLOCK__CLUSTER_MAX_MASTERS 64
#define DLOCK__CLUSTER_MAX_SEEDS 64
/* How long one node asked for the map answers alone before the next is
 * asked too (src/redis/cluster_learn.c): the answer is small and comes at
 * once from a live node, so a stalled one must not hold up the relearn.
 * Each node asked keeps the whole connect timeout: a slow node (a distant
 * or busy one) still answers. */
#define DLOCK__CLUSTER_ASK_MS 250

typedef struct dlock__cmaster {
    char host[256];
    int port;
    dlock__conn *idle; /* pool */
    size_t n_idle;
    /* Bumped when the entry is reused for another address (the table is
     * full and this master serves no slot any more): connections carry the
     * generation they were made for, and older ones are not pooled. */
    unsigned gen;
    /* When a connection to it last failed or it did not answer CLUSTER
     * SLOTS (0: not since it last answered). A map is learned from the
     * other nodes first: a stalled master must not hold up every
     * relearn. */
    int64_t failed_ns;
} dlock__cmaster;

typedef struct dlock__cluster {
    pthread_mutex_t mu; /* the map, the masters and their pools, the flight */
    dlock__flight flight; /* one CLUSTER SLOTS learn at a time (flight.h) */
    dlock__url seed[DLOCK__CLUSTER_MAX_SEEDS];
    int64_t seed_failed_ns[DLOCK__CLUSTER_MAX_SEEDS]; /* as failed_ns */
    size_t n_seeds;
    unsigned next_ask; /* where the next relearn starts (rotates) */
    dlock__cmaster master[DLOCK__CLUSTER_MAX_MASTERS];
    size_t n_masters;
    uint8_t slot_master[DLOCK__CLUSTER_SLOTS]; /* 1 + master index; 0 unknown */
    int stale;          /* learn the map again before the next route */
    int64_t learned_ns; /* when the map was last learned (0: never) */
    unsigned refreshes; /* maps learned (for tests and messages) */
    int timeout_ms;     /* the connect timeout: how long a node asked for
                           the map gets to answer */
    size_t max_idle;
    /* The client's observer and statistics (stats.h), told of each map
     * learned again; set by the client once, read-only after. */
    struct dlock__obs *obs;
} dlock__cluster;

/* Learning the slot map (src/redis/cluster_learn.c), a sub-request on
 * loop l: the masters known and the seeds are asked, healthy ones first,
 * until one answers or deadline_ns passes (INT64_MAX: none). The caller
 * holds the cluster's flight (flight.h). DLOCK_OK with *out set: done is
 * called from the loop once, with DLOCK_OK or a code and the reason,
 * unless dlock__cluster_learn_stop comes first. Else DLOCK_ENOMEM. */
typedef struct dlock__cluster_learning dlock__cluster_learning;
int dlock__cluster_learn_start(dlock__cluster_learning **out, dlock__cluster *c,
                               const dlock__url *tmpl, dlock__tls_ctx *tls, dlock__loop *l,
                               int64_t deadline_ns,
                               void (*done)(void *arg, int rc, const char *err), void *arg);
/* Stop (finished or not) and free; NULL does nothing. */
void dlock__cluster_learn_stop(dlock__cluster_learning *L);

/* A slot the map names no master for (a master failed with no replica to
 * take over, slots being added) is learned again at most this often: in
 * between, its requests fail at once with DLOCK_EBUSY ("no master serves
 * hash slot N"), which a wait rides out, instead of each request asking
 * the cluster for its map (redis-py waits 250 ms after CLUSTERDOWN). */
#define DLOCK__CLUSTER_UNCOVERED_MS 100

/* Whether the map must be learned before slot is routed: stale, or it
 * names no master for slot and was learned DLOCK__CLUSTER_UNCOVERED_MS ago
 * or more. map_wanted: the same with c->mu held. */
int dlock__cluster_needs_map(dlock__cluster *c, unsigned slot);
int dlock__cluster_map_wanted(const dlock__cluster *c, unsigned slot, int64_t now_ns);

/* For cluster_learn.c: a new connection to host:port, and the map from a
 * CLUSTER SLOTS reply got from `asked` (DLOCK_OK or DLOCK_EPROTO). */
dlock__conn *dlock__cluster_connect_to(const dlock__url *tmpl, dlock__tls_ctx *tls,
                                       const char *host, int port, int load_scripts,
                                       int ask_uptime);
int dlock__cluster_apply_slots(dlock__cluster *c, const redisReply *r, const char *asked);

/* The hash slot of a key (CRC16/XMODEM of the key or its {tag}, mod
 * 16384), as the Cluster specification defines it. */
unsigned dlock__cluster_keyslot(const char *key, size_t len);

/* A helper key of lock key `key` in its slot (layout above); *out_len set.
 * NULL when out of memory. */
char *dlock__cluster_helper_key(const char *key, size_t len, const char *kind, size_t kind_len,
                                size_t *out_len);

/* Seeds: redis:// or rediss:// URLs (parsed by the caller's node too).
 * DLOCK_OK, DLOCK_EINVAL (message in err) or DLOCK_ENOMEM. */
int dlock__cluster_new(dlock__cluster **out, const char *const *urls, size_t n, size_t max_idle,
                       int timeout_ms, char *err, size_t err_len);
void dlock__cluster_free(dlock__cluster *c);
/* In a child of fork(): close and free without touching the mutexes. */
void dlock__cluster_forget(dlock__cluster *c);

/* A connection to the master of `slot`, pooled or new, by the map as it
 * is: never waits. learn_rc and learn_err are what learning the map gave
 * just before (DLOCK_OK, ""). tmpl gives the credentials, db and TLS.
 * Never NULL but out of memory; a failure gives a BROKEN connection with
 * err_code set. (The map is learned first, when needed, by a discovery:
 * src/redis/discover.h.) */
dlock__conn *dlock__cluster_checkout_known(dlock__cluster *c, const dlock__url *tmpl,
                                           dlock__tls_ctx *tls, unsigned slot, int load_scripts,
                                           int ask_uptime, int learn_rc, const char *learn_err);
/* A connection to host:port (an ASK or MOVED target). */
/* "host:port" of master idx (the wake-up thread's subscriber's node, for
 * an observer's node event). */
void dlock__cluster_master_name(dlock__cluster *c, int idx, char *buf, size_t len);

dlock__conn *dlock__cluster_checkout_addr(dlock__cluster *c, const dlock__url *tmpl,
                                          dlock__tls_ctx *tls, const char *host, int port,
                                          int load_scripts, int ask_uptime);
/* A new connection to the master of `slot`, never pooled (the wake-up
 * thread's subscriber): learns the map first if needed, on a private loop
 * (src/redis/discover.c). */
dlock__conn *dlock__cluster_connect(dlock__cluster *c, const dlock__url *tmpl,
                                    dlock__tls_ctx *tls, unsigned slot);

/* A new connection to master idx of the table, never pooled (a sharded
 * subscriber). */
dlock__conn *dlock__cluster_connect_master(dlock__cluster *c, const dlock__url *tmpl,
                                           dlock__tls_ctx *tls, int idx);

/* Give a connection back to its master's pool (or free it); a broken one
 * makes the map stale. */
void dlock__cluster_checkin(dlock__cluster *c, dlock__conn *conn);

/* conn, a connection to a master, failed before anything was sent on it:
 * the map is stale, and that master is asked last when it is learned
 * again (which the caller does next, src/redis/discover.c). */
void dlock__cluster_failed(dlock__cluster *c, const dlock__conn *conn);

/* The map is out of date: learn it again before the next route. */
void dlock__cluster_stale(dlock__cluster *c);

/* If r is a MOVED or ASK error: 1 with *ask, *slot, host and *port set;
 * else 0. */
int dlock__cluster_redirect(const redisReply *r, int *ask, unsigned *slot, char *host,
                            size_t host_len, int *port);

/* MOVED: slot is served by host:port from now on (and the whole map is
 * learned again before the next route). */
void dlock__cluster_moved(dlock__cluster *c, unsigned slot, const char *host, int port);

/* Learn the slot map now if it is stale or says nothing of slot, on a
 * private loop (src/redis/discover.c), blocking: for `list`. DLOCK_OK or
 * the failure's code. */
int dlock__cluster_prepare(dlock__cluster *c, const dlock__url *tmpl, dlock__tls_ctx *tls,
                           unsigned slot);

/* The generation of master entry idx (see dlock__cmaster). */
unsigned dlock__cluster_master_gen(dlock__cluster *c, int idx);

/* The master index the map names for slot now (-1: unknown). */
int dlock__cluster_master_of(dlock__cluster *c, unsigned slot);

/* Each master the map names now, once, with the first slot it serves, in
 * slot order: masters[i] and slots[i] for i below the count returned
 * (arrays of DLOCK__CLUSTER_MAX_MASTERS). One pass over the map, under
 * the mutex once, rather than a master_of() per slot. */
size_t dlock__cluster_masters(dlock__cluster *c, int *masters, unsigned *slots);

/* The slot of the first key of a request (0 without keys). */
unsigned dlock__cluster_req_slot(int numkeys, const char **args, const size_t *arglens);

#endif
