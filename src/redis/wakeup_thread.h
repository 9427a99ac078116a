/* SPDX-License-Identifier: BSD-3-Clause */
/* The wake-up thread's record (wakeup.c), one per client: its loop
 * thread, the subscriber connections and their deadlines, the channel
 * table. Shared by the thread's lifecycle and the watch API (wakeup.c)
 * and by what a subscriber's frames do to it (wakeup_frames.c). The
 * channel table and everything below mu are under mu; the connections
 * are touched by the thread only. */
#ifndef DLOCK_WAKEUP_THREAD_H
#define DLOCK_WAKEUP_THREAD_H

#include <pthread.h>
#include <stdint.h>

#include "client.h"
#include "conn.h"
#include "discover.h"
#include "loop_thread.h"
#include "wakeup_chan.h"

/* A subscriber connection's io record. */
typedef struct dlock__sub_io {
    dlock__io io;
    struct dlock__wakeup *wk;
    dlock__conn *conn; /* the connection it watches (NULL: not set) */
} dlock__sub_io;

typedef struct dlock__wakeup {
    dlock__loop_thread lt;
    dlock_client *c;
    pthread_mutex_t mu;
    pthread_cond_t confirmed; /* some channel got confirmed */
    /* The thread's own. */
    dlock__post look_post; /* the channel table changed: look at it */
    dlock__timer tick;     /* the next reconnect, linger end or deadline */
    dlock__sub_io io[DLOCK__MAX_NODES];
    dlock__chan *chans;
    dlock__conn *sub[DLOCK__MAX_NODES];
    /* Cluster: a watched channel whose slot the map names no master for
     * (a new client's fair waiter, a failover in flight) has the map
     * learned here, on the loop, one learning at a time (wakeup.c); a
     * Sentinel node's unknown primary is asked for the same way. */
    dlock__discover learn;
    dlock__node learn_node;
    int learning;           /* learn started, its done not yet come */
    int unrouted;           /* reconcile saw such a channel: its slot */
    unsigned unrouted_slot;
    /* Sentinel: 1 + a node whose primary's address reconcile found not
     * known (0: none); look() has it asked of the sentinels, the same way. */
    size_t unknown;
    int64_t learn_after_ns; /* no new learning before (after a failed one) */
    /* By then sub[i] must have connected and confirmed every SUBSCRIBE
     * sent on it (0: nothing awaited); past it the connection is dropped
     * and made again. A connect, TLS handshake or AUTH that hangs, or a
     * connection that went silent, must not leave the node's waiters
     * without wake-ups for good. */
    int64_t due_ns[DLOCK__MAX_NODES];
    int64_t retry_at[DLOCK__MAX_NODES];
    unsigned sub_gen[DLOCK__MAX_NODES]; /* cluster: the master entry's generation */
    unsigned failures[DLOCK__MAX_NODES];
    /* A node refused the SUBSCRIBE of an inbox (an ACL that grants the
     * lock channels by their exact names): from then on the client's
     * waiters have none, and are woken on the lock's channel. */
    int no_inbox;
    /* The refusal that dropped the inboxes, until it is said (on_log):
     * once a lock's channel is confirmed, so that a user with no channel
     * rights at all is told once, by the refusal of that channel. */
    char inbox_why[200];
    /* A node refused SUBSCRIBE (an ACL user without channel rights): from
     * then on waiters of this client poll instead of subscribing. */
    int refused;
} dlock__wakeup;

#endif
