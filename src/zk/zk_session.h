/* SPDX-License-Identifier: BSD-3-Clause */
/* A client's ZooKeeper session (docs/backends.md, "ZooKeeper"): one
 * session per client, whose timeout is the lease of every hold the client
 * takes. The single-threaded C client (libzookeeper_st) is driven without
 * blocking by its zookeeper_interest()/zookeeper_process() pair on the io
 * record and timer of a loop thread of the client's (loop_thread.h): the
 * session thread. It alone touches the zhandle; it keeps the session alive
 * (the C client pings every third of the timeout) whatever the engine is
 * doing, as ZooKeeper expects of a session, and reconnects to another
 * member by itself.
 *
 * A call (dlock__zk_call) is one asynchronous ZooKeeper request started
 * from any loop: the call is posted to the session thread, which sends it
 * (zoo_acreate2, zoo_aget_children, ...); its answer, on the session
 * thread, is handed back through an eventfd that the caller's loop
 * watches, so that done() runs on the caller's loop, from the loop, as a
 * request must (op.h). A call's eventfd lives from its start to its done.
 *
 * A session that expires (the server heard nothing for its timeout: a
 * paused process, a partition) has lost every ephemeral node of the
 * client: the session thread then opens a new session at once, and each
 * hold finds its node gone (another session's, or none) at its next
 * extend or renewal: lost. */
#ifndef DLOCK_ZK_SESSION_H
#define DLOCK_ZK_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <zookeeper/zookeeper.h>

#include "common.h"
#include "loop.h"
#include "loop_thread.h"
#include "zk_url.h"

/* A znode path dlock makes at most, NUL included (the lock's path and a
 * Curator-style node name below it). */
#define DLOCK__ZK_PATH_MAX 512

typedef struct dlock__zk dlock__zk;
typedef struct dlock__zk_watch dlock__zk_watch;

enum {
    DLOCK__ZK_CREATE,    /* an ephemeral sequential node at path (a prefix) */
    DLOCK__ZK_PARENTS,   /* every missing ancestor of path, as a container node */
    DLOCK__ZK_CHILDREN,  /* the names below path */
    DLOCK__ZK_EXISTS,    /* the node's stat */
    DLOCK__ZK_WATCH,     /* the node's stat, and a watch on it (watch) */
    DLOCK__ZK_WATCH_CHILDREN, /* the names below path, and a watch on them (watch) */
    DLOCK__ZK_DELETE,    /* the node, any version */
    DLOCK__ZK_GET_DATA,  /* the node's data and stat */
    DLOCK__ZK_WATCH_DATA, /* the node's data and stat, and a watch on it (watch) */
    DLOCK__ZK_SET_DATA   /* data into the node, any version; its stat after */
};

typedef struct dlock__zk_call {
    /* The caller's, before dlock__zk_call_start(). */
    int what;
    char path[DLOCK__ZK_PATH_MAX];
    dlock__zk_watch *watch; /* DLOCK__ZK_WATCH(_CHILDREN, _DATA): from dlock__zk_watch_new() */
    /* CREATE: the new node's data (NULL: none, as before elections);
     * SET_DATA: what is written. The caller's, until done() runs. */
    const char *data;
    size_t data_len;
    void (*done)(struct dlock__zk_call *c); /* on the caller's loop */
    /* The answer, when done() runs. */
    int zrc;                         /* ZOK or ZooKeeper's error (ZNONODE, ...) */
    struct Stat stat;                /* CREATE, EXISTS, WATCH */
    char created[DLOCK__ZK_PATH_MAX]; /* CREATE: the node's path */
    char **children;                 /* (WATCH_)CHILDREN: owned by the call until _clear */
    size_t n_children;
    char *value;                     /* (WATCH_)GET_DATA: owned by the call until _clear */
    size_t value_len;
    int64_t sent_ns;                 /* when it was handed over (the monotonic clock) */
    /* The session thread's and the loop's. */
    dlock__zk *z;
    dlock__loop *loop;
    dlock__io io;
    dlock__post post;
    int efd;
    size_t parent_at; /* DLOCK__ZK_PARENTS: the next '/' to create up to */
} dlock__zk_call;

/* Open the session of u and wait for it, connect_timeout_ms at most (so
 * that the negotiated timeout is known before the first hold); digest
 * authentication when u has a user. DLOCK_OK, or DLOCK_EIO / DLOCK_EAUTH /
 * DLOCK_ENOMEM with a reason in err (nothing left to free). On DLOCK_OK
 * the session took u over (u is zeroed); else u is still the caller's. */
int dlock__zk_open(dlock__zk **out, dlock__zk_url *u, int64_t connect_timeout_ms,
                   char *err, size_t err_len);
/* Close the session (its ephemeral nodes go at once) and stop the thread;
 * forked: in a child of fork(), the descriptors only, sending nothing. */
void dlock__zk_close(dlock__zk *z, int forked);
/* "host:port,.../chroot": the client's one node's name. */
const char *dlock__zk_name(const dlock__zk *z);
/* The session timeout the server granted (ms): every hold's lease. */
int64_t dlock__zk_session_ms(dlock__zk *z);

/* Every call into libzookeeper_st in the process goes between these (it
 * logs into static buffers): the session threads' do; so must a test's own
 * handle. */
void dlock__zk_lib_lock(void);
void dlock__zk_lib_unlock(void);

/* The session's id and password (tests end it from another handle, as
 * ZooKeeper's own tests expire a session). */
void dlock__zk_session_id(dlock__zk *z, clientid_t *out);

/* Start c on loop: DLOCK_OK and c->done later, exactly once, from loop;
 * or DLOCK_EIO (no eventfd) / the loop's error, and done never comes. */
int dlock__zk_call_start(dlock__zk *z, dlock__zk_call *c, dlock__loop *loop);
/* Free what an answer holds (the children, the data). */
void dlock__zk_call_clear(dlock__zk_call *c);
/* Start c and wait for its answer on a private loop of the caller's (a
 * blocking look: status, an election's calls); c->done is the wait's.
 * DLOCK_OK (the answer in c->zrc), or why it could not start. */
int dlock__zk_call_wait(dlock__zk *z, dlock__zk_call *c);
/* out = a + b (b may be NULL), a path of DLOCK__ZK_PATH_MAX bytes at
 * most: 1, or 0 (out "") if it is longer. */
int dlock__zk_path_set(char *out, const char *a, const char *b);
/* ZooKeeper's code as dlock's. */
int dlock__zk_error(int zrc);

/* A watch on a node for a waiter: fired(arg) runs on loop (the waiter's,
 * whose thread calls this) when the node goes or changes, or the
 * session's state changes (the waiter then looks again), until
 * dlock__zk_watch_drop(). The C client tells the session thread, which
 * hands the event over through an eventfd on loop, as a call's answer
 * comes: a waiter on an application's event loop may only be woken from
 * that loop's thread. NULL: no memory, no eventfd, or the loop's error. */
dlock__zk_watch *dlock__zk_watch_new(dlock__zk *z, dlock__loop *loop, void (*fired)(void *arg),
                                     void *arg);
/* The caller (on the watch's loop) is done with w: fired never runs again
 * once this returns, and w is off the loop. NULL does nothing. */
void dlock__zk_watch_drop(dlock__zk *z, dlock__zk_watch *w);

#endif
