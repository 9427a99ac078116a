/* SPDX-License-Identifier: BSD-3-Clause */
/* Redlock arithmetic in one place: vote counting by majority, the drift
 * allowance, the per-node timeout, and the restart rule. The lock path's
 * fan-out callbacks and the watchdog's renewal rounds both count here. */
#ifndef DLOCK_QUORUM_H
#define DLOCK_QUORUM_H

#include <stdint.h>

#include "common.h"
#include "error.h"

/* How a node voted in one fan-out. */
enum { DLOCK__V_NONE, DLOCK__V_YES, DLOCK__V_NO, DLOCK__V_ERR };

/* A round is decided when a majority said yes, or "no", or failed. A mix of
 * "no" and failures is not: the nodes still to answer tell a busy lock
 * (DLOCK_ENOTACQUIRED, wait for the release) from a majority out of reach
 * (DLOCK_ENOQUORUM), so they are waited for (up to the per-node timeout).
 * Stopping there made one dead node of three plus a held lock read as "no
 * quorum" (issue 15). */
static inline int dlock__quorum_decided(size_t n, size_t quorum, size_t yes, size_t no,
                                        size_t err)
{
    size_t minority = n - quorum;
    return yes >= quorum || no > minority || err > minority;
}

/* The drift allowance of the Redlock algorithm: clocks of the nodes and of
 * this client may run at slightly different rates during one TTL, so the
 * validity is shortened by ttl * drift_factor plus 2 ms (for the
 * granularity of Redis' expiry). With one node there is one clock (the
 * server's) and the expiry is checked against it directly: no allowance. */
int64_t dlock__drift_ns(const dlock_client *c, int64_t ttl_ms);

/* How long one node is waited for in a lock-path round. */
int64_t dlock__node_timeout_ms(const dlock_client *c, int64_t ttl_ms);

/* Restart rule: a node that restarted less than min_node_uptime_ms ago may
 * have forgotten locks it granted before (no persistence), so its vote does
 * not count. `start_ns` is the server start the connection learned (0:
 * unknown). Returns 1 if the vote counts; otherwise says why in *err. */
int dlock__vote_counts(const dlock_client *c, size_t node, int64_t start_ns,
                       dlock__errbuf *err);

/* The votes of one lock-path fan-out, from typed replies (replies.h). */
typedef struct dlock__tally {
    dlock_client *client;
    dlock__errbuf *err; /* the handle's detail message */
    size_t n, quorum;
    size_t yes, no, errs;
    int64_t min_pttl;   /* among "taken" answers */
    int64_t min_look;   /* among "taken" answers that gave a look hint */
    size_t delayed;     /* "taken" answers that were a lock-delay (delay.lua) */
    uint64_t max_fence; /* among grants */
    size_t at_max;      /* grants whose counter returned max_fence */
    long long count;    /* reentrant hold count from a grant */
    size_t held_before; /* grants whose count says earlier holds were there */
    int all_err;        /* the error code if every failure had the same */
    int fatal_err;      /* some node failed in a way waiting cannot mend */
    int other_owner;    /* release/extend: some node had another token */
    int quiet;          /* add nothing to the handle's detail message */
    int gone;           /* release/extend: some node had no key */
    int same_server;    /* two nodes turned out to be one server */
    int joined;         /* a "taken" answer put us in the (fair) line */
    /* Per node, last: dlock__tally_init() clears the first n entries only. */
    uint8_t vote[DLOCK__MAX_NODES];
    uint8_t maybe_ours[DLOCK__MAX_NODES]; /* may hold our token now */
    int node_err[DLOCK__MAX_NODES];
    uint64_t holder[DLOCK__MAX_NODES]; /* hash of the holder a "taken" answer
                                          named (0: not named) */
} dlock__tally;

void dlock__tally_init(dlock__tally *t, dlock_client *c, dlock__errbuf *err);
/* Count a failed node (code < 0; detail: what it said). */
void dlock__tally_error(dlock__tally *t, size_t node, int code, const char *detail);
/* A node whose vote does not count (restart rule): a busy node. */
void dlock__tally_busy(dlock__tally *t, size_t node);
int dlock__tally_decided(const dlock__tally *t);
/* Count one node's typed answer to an acquire (err: how the node failed,
 * if it did): a grant counts only from a server whose vote counts (the
 * restart rule, start_ns) and not twice from one server; returns whether
 * the round is decided. */
struct dlock__acquire_reply;
int dlock__tally_answer(dlock__tally *t, size_t node, int err,
                        const struct dlock__acquire_reply *a, int64_t start_ns);
/* Most "taken" answers that named one and the same holder. */
size_t dlock__tally_max_same_holder(const dlock__tally *t);
/* The holder (its hash) that a majority of the nodes named, or 0. */
uint64_t dlock__tally_majority_holder(const dlock__tally *t);
/* FNV-1a of a holder's token; never 0 (0 = not named). */
uint64_t dlock__holder_hash(const char *s, size_t len);
/* The code for a fan-out that did not reach a majority of successes. */
int dlock__tally_failure_code(const dlock__tally *t);
/* Map a release/extend tally to a code. */
int dlock__tally_owner_code(const dlock__tally *t);

#endif
