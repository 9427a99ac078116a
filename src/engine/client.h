/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef DLOCK_CLIENT_H
#define DLOCK_CLIENT_H

#include "common.h"
#include "fork.h"
#include "loop_app.h"
#include "node.h"
#include "stats.h"

struct dlock__watchdog;
struct dlock__wakeup;

/* How the client ends a background thread it does not know: the thread's
 * module (watchdog.c, wakeup.c) sets these when it starts the thread, so
 * the client depends on neither. */
typedef struct dlock__bg_ops {
    /* Stop, join, free: 1 done; 0 on a looped client whose work on the
     * loop ends later, which then calls dlock__client_closed(). */
    int (*stop)(struct dlock_client *c);
    void (*forget)(struct dlock_client *c); /* in a child of fork(): free only */
} dlock__bg_ops;

struct dlock_client {
    dlock_client_options opts;
    size_t n_nodes;
    size_t quorum; /* n/2 + 1 */
    dlock__node *nodes;
    char *key_prefix; /* our copy of opts.key_prefix (opts points here) */
    /* The holder identity kept beside each lock (identity.h); NULL when
     * opts.identity is 0. */
    char *identity;
    /* Shared by the nodes that speak TLS; NULL when none does. */
    dlock__tls_ctx *tls_ctx;
    /* Random id naming this client in reentrant hold counts. */
    char id[DLOCK_TOKEN_HEX_LEN + 1];
    /* Started on first use; protected by bg_mu. */
    pthread_mutex_t bg_mu;
    struct dlock__watchdog *watchdog;
    struct dlock__wakeup *wakeup;
    const dlock__bg_ops *watchdog_ops; /* set with watchdog */
    const dlock__bg_ops *wakeup_ops;   /* set with wakeup */
    /* The store every lock of the client lives in (backend.h), chosen
     * here once by the URLs' scheme. */
    const struct dlock__backend *backend;
    /* The backend's own part of the client, which only it reads (etcd's
     * transport; NULL for Redis, whose nodes are above). */
    void *store;
    /* dlock__fork_generation() of the process that made the client. */
    unsigned long fork_gen;
    /* Lock handles made on this client and not freed yet (any thread):
     * dlock_client_free() with some left is misuse, a documented abort. */
    _Atomic size_t live_handles;
    /* The observer's hooks and the statistics (stats.h). */
    dlock__obs obs;
    /* A looped client's (dlock.h, dlock_client_options.loop): the
     * application's loop, on which it does everything (async.c), or NULL
     * (the blocking verbs, with threads of its own). */
    dlock__loop *loop;
    dlock__loop_app app;
    /* Looped: what is still ending on the loop after its dlock_lock_free()
     * or dlock_client_free() (a handle's release, a renewal round): the
     * client's memory goes with the last (dlock__client_closed()). */
    size_t closing;
    size_t closing_handles; /* handle records among live_handles that are closing */
    int freeing;            /* dlock_client_free() was called */
};

/* True in a child of fork(): it inherited the client's sockets, shared
 * with the parent (each would read the other's replies), but none of its
 * threads, and mutexes those threads held stay locked. There the client
 * and its handles are inert: calls refuse without touching a socket or a
 * mutex, and free only closes this process's copy of the descriptors. */
static inline int dlock__client_forked(const dlock_client *c)
{
    return c->fork_gen != dlock__fork_generation();
}

/* The Redis Cluster the client is opened on (its one node), or NULL (a
 * single node, Redlock, Sentinel, or etcd with no nodes at all). */
static inline struct dlock__cluster *dlock__client_cluster(const dlock_client *c)
{
    return c->n_nodes > 0 ? c->nodes[0].cluster : NULL;
}

/* Redlock: if two nodes turned out to be the same server (same run_id
 * once connected), write a message naming both into msg and return
 * DLOCK_EINVAL; DLOCK_OK otherwise. */
int dlock__client_check_distinct(dlock_client *c, char *msg, size_t len);

/* A looped client's work that ended on the loop after a free (see
 * closing): the last one frees the client, if dlock_client_free() came.
 * From the loop, with nothing of the client's on the stack. */
void dlock__client_closed(dlock_client *c);

/* Pass a message to the client's on_log callback, if any. */
void dlock__client_log(dlock_client *c, dlock_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
