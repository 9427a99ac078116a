/* SPDX-License-Identifier: BSD-3-Clause */
/* A node's shared connection on a looped client (dlock_client_options.loop):
 * the requests of every lock on the loop go out on one connection and come
 * back in order, as Redis serves a pipeline fastest, instead of one pooled
 * connection per request in flight (issue 37, stage D).
 *
 * The connection's io record is the pipe's, not a request's (an adapter
 * watches an fd once: libuv has one uv_poll_t per fd). Each command is
 * appended under its caller's tag (conn.h), so each reply goes back to the
 * request that sent it; a reply whose caller stopped listening is dropped.
 * A request keeps its own deadline timer (fanout_run.c): a slow reply for
 * one request is that request's timeout, not everyone's.
 *
 *   current --broken--> failed users (each: DLOCK_EUNKNOWN if any byte of
 *                        its commands was written, else DLOCK_EIO or the
 *                        handshake's code), freed when the last leaves
 *   current --a reply timed out--> retired: no new users (a path that lost
 *                        one reply may lose the next), its users go on
 *                        until their own deadlines, freed when the last
 *                        leaves and no undo is owed on it (refs)
 *   current --idle, the server closed it--> dropped by the next checkout,
 *                        whose probe finds it closed (as the pool's);
 *                        idle, it is off the loop (an idle client keeps
 *                        nothing on it)
 *
 * A request that stops listening (a Redlock majority decided without this
 * node) leaves its commands queued: they go out in order with whatever the
 * client sends next on this connection (its undo, its release), as a
 * pooled connection's abandoned commands are never reused out of order. A
 * retired connection's late commands may land after a newer request sent
 * on the next connection, as bytes already written to a stalled server
 * always could: at worst a key of the caller's own lives out its TTL on
 * that node.
 *
 * Only the client's own loop uses pipes: a blocking call's private loop
 * checks a connection out of the pool as before, and a Cluster's nodes
 * (whose connection follows a slot map) stay on the pool. A Sentinel
 * node's pipe goes to the primary the sentinels last named; a failure on
 * it forgets that primary (dlock__node_stale()), and the first request
 * after learns the new one before a new pipe is made. Single-threaded: everything runs on the client's loop. */
#ifndef DLOCK_PIPE_H
#define DLOCK_PIPE_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "conn.h"
#include "loop.h"

/* A shared connection that owes replies and has read nothing for this
 * long is passed over for new requests, which get a new one (the old one
 * retires): a request must not queue behind a node path that went silent
 * (a stalled server, a blackholed connection) when a new connection may
 * pass. Replies of a busy node come far more often than this; a WAIT for
 * replicas (min_replicas) may hold one back longer, and only costs a new
 * connection then. */
#define DLOCK__PIPE_STALL_MS 100

struct dlock__node;
struct dlock__pipe;

struct dlock__pipe_user;

/* What a user hears (its owner's functions). */
typedef struct dlock__pipe_user_ops {
    /* A reply of the user's (it frees r), read at now_ns. */
    void (*reply)(struct dlock__pipe_user *u, redisReply *r, uint32_t idx, int64_t now_ns);
    /* The connection broke under it: code as above. */
    void (*failed)(struct dlock__pipe_user *u, int code);
    /* The connection is open and its handshake's checks passed: the I/O
     * timeout starts now (until then the connect timeout runs). */
    void (*ready)(struct dlock__pipe_user *u);
} dlock__pipe_user_ops;

/* A request waiting for replies on a shared connection. Small: a fan-out
 * has one per node (64), so what it hears is the pipe's (ops). The users still waiting are found by their
 * replies still expected (conn.h's ring): a request waits for a reply,
 * or it does not wait; `failed` and `ready` may come more than once. Its
 * leave costs nothing when it owes none (tag.owed), the usual case. */
typedef struct dlock__pipe_user {
    dlock__conn_tag tag; /* first: the connection's tag is the user */
    uint64_t mark; /* the connection's fmt_bytes before its first command */
} dlock__pipe_user;

typedef struct dlock__pipe_conn {
    dlock__conn *c;
    struct dlock__pipe *pipe;
    dlock__io io;
    int io_on;         /* io is set on the loop */
    size_t n_users;    /* joined and not left */
    int refs;          /* undos owed behind a cancelled attempt (fanout.h) */
    int retired;
    int noted;         /* its server start time went to the node */
    unsigned primary_gen; /* Sentinel: the node's primary_gen when made */
    int64_t heard_ns;  /* made, last read a reply, or began to owe one */
    struct dlock__pipe_conn *next; /* the pipe's list of them all */
} dlock__pipe_conn;

typedef struct dlock__pipe {
    struct dlock__node *node;
    dlock__loop *loop;
    const dlock__pipe_user_ops *ops; /* what its users hear */
    dlock__pipe_conn *cur; /* new users join it */
    dlock__pipe_conn *all;
} dlock__pipe;

/* The node's shared connection for a request on loop l, whose users hear
 * through ops (the same every time): a new one, still connecting, if it
 * has none usable (broken, stalled: DLOCK__PIPE_STALL_MS, or, Sentinel,
 * made to a primary since forgotten). 1 with *out set (NULL when out of
 * memory), or 0 when the Sentinel primary's address must be learned
 * first (the request then goes as a blocking client's does: discover.h
 * and a pooled connection). The pipe is made at the first call. */
int dlock__pipe_checkout(struct dlock__node *n, dlock__loop *l, const dlock__pipe_user_ops *ops,
                         dlock__pipe_conn **out);

/* u's commands are appended now, under its tag (conn.h). Call before the
 * first append; the commands go out when the loop finds the socket
 * writable (dlock__pipe_arm), with whatever else was queued meanwhile. */
void dlock__pipe_join(dlock__pipe_conn *pc, dlock__pipe_user *u);

/* Something was appended: ask the loop for what the connection waits for
 * now. DLOCK_OK, or DLOCK_ENOMEM when the adapter cannot watch the fd. */
int dlock__pipe_arm(dlock__pipe_conn *pc);

/* Whether u's commands may run: queued on a connection that is not
 * broken, they go out whenever it gets there (the handshake's checks, a
 * connect, a full socket), so they count as sent as the pool's held
 * commands do (conn.c, flush_out); on a broken one, whose buffers are
 * dropped, only if a byte of them was written. */
static inline int dlock__pipe_sent(const dlock__pipe_conn *pc, const dlock__pipe_user *u)
{
    return pc->c->state != DLOCK__CS_BROKEN || pc->c->sent_bytes > u->mark;
}

/* A reply of u's timed out: no new user joins this connection. */
void dlock__pipe_retire(dlock__pipe_conn *pc);

/* u stops listening: its replies still to come are dropped. The
 * connection is freed if it is no longer the current one and nothing else
 * needs it. */
void dlock__pipe_leave(dlock__pipe_conn *pc, dlock__pipe_user *u);

/* An undo is owed behind what was sent on it (fanout.h, kept[]): it stays
 * until dlock__pipe_unref(). */
void dlock__pipe_ref(dlock__pipe_conn *pc);
void dlock__pipe_unref(dlock__pipe_conn *pc);

/* The node goes (the client's last free, from its loop; forked: in a
 * child of fork(), only close this process's copies of the sockets). */
void dlock__pipe_free(struct dlock__pipe *p, int forked);

#endif
