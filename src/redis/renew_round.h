/* SPDX-License-Identifier: BSD-3-Clause */
/* One renewal round on the wire (renew_round.c): the watchdog (watchdog.c)
 * picks the records that are due and schedules rounds; a round sends one
 * pipelined batch of renew_batch.lua calls per node, decides each lock at
 * a majority, and puts back a key a node lost (restore_batch.lua). A round
 * is a request on the watchdog's loop, a chain of fan-outs
 * (fanout_run.h), each step started from the one before's completion, as
 * the acquire attempt is (attempt.h):
 *
 *   renew (every node, pipelined) --> restore (a fan-out per node that
 *   lost a key that may be put back; none: no step) --> done
 *
 * The records of an etcd client renew themselves (renewal_ops.renew_start):
 * such a round starts each record's renewal request on the loop, all at
 * once, and is done when the last one is (the watchdog gives each such
 * record a round of its own). */
#ifndef DLOCK_RENEW_ROUND_H
#define DLOCK_RENEW_ROUND_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "fanout_run.h"
#include "loop.h"
#include "renewal.h"

/* Per-lock input and result of one round. */
typedef struct item {
    /* The record; NULL once the watchdog let it go (its owner released it
     * from the loop thread while the round was in flight, watchdog.c): the
     * round then never touches it again. */
    dlock__renewal *rec;
    int64_t ttl_ms;
    char ttl[24];
    size_t ttl_len;
    /* The round's own copies of the record's key, token and mode (the
     * renewal must be able to be resent, after a MOVED, once rec is let
     * go). */
    const char *key, *token, *mode;
    size_t key_len, token_len, mode_len;
    size_t yes, no, err;
    size_t n_gone;   /* answers "the key is gone" (counted in no unless put back) */
    uint64_t gone;   /* their nodes, a bit each */
    int64_t lease_end_ns;
    int restorable;  /* a gone key may be put back (restore_batch.lua) */
    unsigned slot; /* cluster: the lock key's hash slot */
    int master;    /* cluster: its master in the client's slot map */
    unsigned hold; /* rec->hold when the round took it (watchdog.c) */
    uint8_t lost;  /* the owner's verdict: a dlock_lost_reason, or 0 (watchdog.c) */
    uint8_t settled; /* the owner has its verdict already (watchdog.c) */
    /* A record that renews itself: its request, and the round it is in. */
    dlock__renew_req own;
    struct dlock__renew_round *round;
} item;

/* What a round cost, for the watchdog's statistics. */
typedef struct dlock__round_counts {
    uint64_t rounds, calls, restores;
} dlock__round_counts;

/* A round as a request. The caller makes room with
 * dlock__renew_round_reserve(), fills items[0..n) (each with rec, ttl,
 * ttl_len and hold set; on a cluster all of one master, sorted by slot),
 * and keeps the struct put until done; its buffers are kept for the next
 * round started on the same struct, until dlock__renew_round_free(). */
typedef struct dlock__renew_round {
    /* the caller's */
    struct dlock_client *c;
    item *items;
    size_t n;
    dlock__round_counts counts; /* what it sent, added to */
    void (*done)(struct dlock__renew_round *r); /* once, from the loop */
    /* NULL, or called from the loop when an item is renewed by a majority
     * with no key gone while the round still waits for other answers: the
     * caller may settle it and let it go (item.rec NULL) at once, so that
     * its next round does not wait for this one's slowest node. */
    void (*renewed)(struct dlock__renew_round *r, item *it);
    /* the round's own */
    dlock__loop *loop;
    size_t undecided; /* items without a majority either way yet */
    size_t *first;    /* renew: call k renews items first[k] .. first[k+1]-1;
                       * restore: the call's items, in KEYS order */
    size_t nchunks, m;
    dlock__req *reqs;
    const char **args;
    size_t *lens;
    char *copy; /* the items' keys and tokens */
    size_t cap_items, cap_copy;
    char *stamps; /* restore: the modes with a stamp in front (restore_stamp.h) */
    size_t cap_stamps;
    int64_t deadline_ns;
    uint64_t restore_nodes; /* nodes still to put keys back on */
    size_t node;            /* the restore step's node */
    dlock__fanout_opts fo;
    uint8_t only[DLOCK__MAX_NODES];
    dlock__timer defer; /* a round over inside its start */
    size_t own_pending; /* records renewing themselves still in flight */
    dlock__fan fan;     /* one step's run at a time */
} dlock__renew_round;

/* Room for n items: 1, or 0 out of memory. Not while in flight. */
int dlock__renew_round_reserve(dlock__renew_round *r, size_t n);

/* Start renewing r->items[0..r->n) on loop: fills their yes/no/err and
 * adds what it sent to r->counts; done(r) follows from the loop, exactly
 * once, never inside this call. The round ends by the nodes' I/O timeout
 * at most, never past the last lease's end. */
void dlock__renew_round_start(dlock__renew_round *r, struct dlock_client *c, dlock__loop *loop,
                              void (*done)(dlock__renew_round *r));

/* Free the buffers of a round that is not in flight (not r itself). */
void dlock__renew_round_free(dlock__renew_round *r);

#endif
