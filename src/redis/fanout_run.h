/* SPDX-License-Identifier: BSD-3-Clause */
/* A fan-out run: a request on a loop (loop.h) that the caller owns, the
 * blocking dlock__fanout*() calls' private loop (loop_poll.h) or a
 * request's: dlock__fan_start() routes the slots, and done() is called
 * once, from the loop, never inside the start, when the run is over (the
 * callback stopped it, the cancel fd turned readable, or no slot waits
 * any more), after every connection went back to its pool or to kept[].
 * One slot per selected node, each a small state machine driven by the
 * loop, never by a wait of its own:
 *
 *   ROUTING --checkout, requests queued--> LIVE --every reply--> ANSWERED
 *   ROUTING --map or primary unknown--> DISCOVERING --learned--> LIVE
 *                                          LIVE --MOVED/ASK--> LIVE (another connection)
 *                                          LIVE --failure--> FAILED
 *                                          LIVE --deadline--> TIMED_OUT
 *   LIVE --Cluster master unreachable, nothing sent--> DISCOVERING (relearn)
 *        --learned--> FAILED (DLOCK_EBUSY if a node answered)
 *
 * DISCOVERING: the node's Cluster slot map or Sentinel primary is being
 * learned (discover.h), as a sub-request on the run's loop: its
 * connections are more io records and timers there, bounded by the run's
 * deadline and the cancel, so the other slots' replies go on being read
 * meanwhile. One learn per client is in flight at a time; a slot that
 * finds another thread's in flight waits for it on the same loop.
 * A LIVE slot's connection is connecting (TCP, then TLS) or open with its
 * requests queued or sent; its io record asks the loop for what the
 * connection waits for (dlock__conn_events) and its timer is the slot's
 * deadline: the connect or I/O timeout, capped by the run's deadline and,
 * once the callback decided, by the grace. The cancel fd is one more io
 * record, set first so that a cancel is seen before any reply of the same
 * turn. One node with one plain socket and nothing to cancel offers its
 * io record to wait alone (loop.h): on a poll loop with nothing else to
 * do it is one blocking recv() (conn_wait.c) instead of poll() + recv(). */
#ifndef DLOCK_FANOUT_RUN_H
#define DLOCK_FANOUT_RUN_H

#include <stdint.h>

#include "client.h"
#include "clock.h"
#include "conn.h"
#include "discover.h"
#include "fanout.h"
#include "loop.h"
#include "loop_poll.h"
#include "pipe.h"

typedef enum {
    SLOT_IDLE = 0, /* not selected (opts.only) */
    SLOT_ROUTING,  /* its connection is being checked out */
    SLOT_DISCOVERING, /* its node's map or primary is being learned first */
    SLOT_LIVE,     /* connecting, or waiting for replies */
    SLOT_ANSWERED, /* every request reported */
    SLOT_FAILED,   /* its unanswered requests reported failed */
    SLOT_TIMED_OUT
} dlock__fan_slot_state;

struct dlock__fan;

typedef struct dlock__fan_slot {
    dlock__conn *conn;
    struct dlock__fan *fan;
    size_t node;
    uint32_t answered;
    dlock__fan_slot_state state;
    int kept; /* timed out with requests sent: handed back (keep_timed_out) */
    int64_t deadline_ns;
    /* Replica acknowledgement: the reply of a request that waits for its
     * WAIT, and WAIT replies to drop (the WAIT behind an EVALSHA that
     * came back NOSCRIPT; the EVAL sent instead has its own). */
    redisReply *held;
    uint32_t drop_acks;
    int redirects; /* Cluster: MOVED/ASK followed in this run */
    unsigned cslot; /* Cluster: the hash slot of the run's keys */
    /* DISCOVERING (allocated at the first need): the sub-request; with
     * relearn set, a failure waits for it (fail_code, fail_to). */
    dlock__discover *disc;
    int relearn, fail_code;
    dlock__fan_slot_state fail_to;
    dlock__io io;       /* the connection's socket */
    dlock__timer timer; /* at deadline_ns */
    /* On the client's own loop (pipe.h): conn is the node's shared
     * connection, whose io record is the pipe's; pu hears the replies. */
    dlock__pipe_conn *pc;
    dlock__pipe_user pu;
} dlock__fan_slot;

typedef struct dlock__fan {
    struct dlock_client *client;
    const dlock__req *reqs;
    uint32_t nreqs;
    const dlock__fanout_opts *o;
    int cancel_fd;
    dlock__conn **kept;
    int keep_timed_out;
    dlock__on_reply cb;
    void *arg;
    void (*done)(struct dlock__fan *f); /* once, from the loop; rc set */
    int rc;     /* DLOCK_OK, or DLOCK_ECANCELED (dlock__fanout_cancellable) */
    size_t n;
    int stop;   /* the callback (or a failure) ended the run */
    int graced; /* the callback decided; the grace runs */
    int cut_live; /* the cancel cut a LIVE slot short (else only discoveries) */
    int ending;   /* over: done() is deferred to the loop's next turn */
    int64_t cap_ns; /* no slot waits past this */
    int64_t connect_ms, io_ms;
    int acks; /* a request waits for replicas (WAIT): not on a shared connection */
    dlock__loop *loop;
    dlock__timer fin; /* the deferred end */
    dlock__fd_flag cancel;
    dlock__fan_slot slots[DLOCK__MAX_NODES]; /* only the first n are used */
} dlock__fan;

/* Set up a run of reqs with opts (both must outlive it) to the client's
 * nodes, replies to cb. Then, before the start, the caller may set
 * cancel_fd (default -1: none), kept (client->n_nodes entries, zeroed)
 * and keep_timed_out, as dlock__fanout_cancellable and
 * dlock__fanout_attempt describe them. */
void dlock__fan_init(dlock__fan *f, struct dlock_client *client, const dlock__req *reqs,
                     uint32_t nreqs, const dlock__fanout_opts *opts, dlock__on_reply cb,
                     void *arg);

/* Start the run on loop l; done(f) follows from the loop, exactly once,
 * with f->rc as the blocking calls return it. f stays the caller's and
 * must stay put until then; it may be freed or started again from done. */
void dlock__fan_start(dlock__fan *f, dlock__loop *l, void (*done)(dlock__fan *f));

static inline int64_t dlock__fan_after_ms(int64_t now, int64_t ms, int64_t cap)
{
    int64_t d = (ms > (INT64_MAX - now) / DLOCK__NS_PER_MS)
                    ? INT64_MAX
                    : now + ms * DLOCK__NS_PER_MS;
    return d < cap ? d : cap;
}

/* Connected, and the handshake's checks (AUTH, SELECT, ROLE) answered:
 * until then a slot's deadline is the connect timeout, as dlock.h says of
 * connect_timeout_ms ("including AUTH and SELECT"), and only then the
 * I/O timeout. */
static inline int dlock__fan_conn_ready(const dlock__conn *c)
{
    return c->state == DLOCK__CS_OPEN && c->checks_pending == 0;
}

/* Whether any byte of the slot's requests was written. */
static inline int dlock__fan_sent(const dlock__fan_slot *s)
{
    return s->pc ? dlock__pipe_sent(s->pc, &s->pu) : s->conn->caller_sent;
}

/* fanout_run.c: report every unanswered request of the slot as failed
 * with err, the slot going to state `to`. Returns the run's new "stop". */
int dlock__fan_fail_node(dlock__fan *f, dlock__fan_slot *s, int err, dlock__fan_slot_state to);

/* fanout_end.c: after every step: a run that is over (stopped, cancelled,
 * or nothing left to wait for) ends at the loop's next turn, and hears
 * nothing more meanwhile (f->ending). */
void dlock__fan_check(dlock__fan *f);

/* fanout_run.c: the callback decided the run; start the grace (if the run
 * has one). Returns the run's new "stop". */
int dlock__fan_begin_grace(dlock__fan *f, int64_t now);

/* fanout_reply.c: hand every reply the slot's connection holds to the
 * callback, rc being what its I/O gave. Returns DLOCK_OK, or the code of a
 * failure of the slot (not yet reported). */
int dlock__fan_drain(dlock__fan *f, dlock__fan_slot *s, int rc, int64_t now);

/* fanout_reply.c: one reply of the slot's (it frees r). DLOCK_OK, or the
 * code of a failure of the slot (not yet reported). */
int dlock__fan_reply(dlock__fan *f, dlock__fan_slot *s, redisReply *r, uint32_t idx, int64_t now);

/* fanout_run.c: after a slot heard from its shared connection (rc: what
 * it gave): a failure ends the slot, a decided run starts its grace, the
 * slot's timer follows its deadline, and a run that is over ends. */
void dlock__fan_after(dlock__fan *f, dlock__fan_slot *s, int rc, int64_t now);

/* fanout_reply.c: what a slot hears from its node's shared connection. */
extern const dlock__pipe_user_ops dlock__fan_pipe_ops;

/* fanout_reply.c: the slot's commands were appended: have them written
 * (now, or by the pipe when the loop finds its socket writable). */
int dlock__fan_push(dlock__fan_slot *s);

#endif
