/* SPDX-License-Identifier: BSD-3-Clause */
/* A renewal record: what a lock's owner registers with the watchdog
 * (watchdog.h) to keep its lease alive, and what a round (renew_round.h)
 * renews. The record names the key and token to renew and how, and hands
 * each round's votes back to its owner through dlock__renewal_ops; only
 * the owner (the lock module) changes a lock's state. */
#ifndef DLOCK_RENEWAL_H
#define DLOCK_RENEWAL_H

#include <stddef.h>
#include <stdint.h>

struct dlock__loop;

/* One lock's renewal as a request (renewal_ops.renew_start), for a store
 * without nodes to batch for: done(q, vote) runs once, from the loop,
 * never inside the start; vote 1 renewed, 0 gone or not ours, -1 no
 * answer before the deadline. */
typedef struct dlock__renew_req {
    void (*done)(struct dlock__renew_req *q, int vote); /* the starter's */
} dlock__renew_req;

/* One round's votes for one record. */
typedef struct dlock__renew_votes {
    size_t n, quorum;
    size_t yes, no, err;
    int64_t t0_ns;  /* when the round was sent */
    int64_t ttl_ms; /* the TTL it renewed to */
} dlock__renew_votes;

typedef struct dlock__renewal_ops {
    /* The owner's lease end (INT64_MAX: unknown): no answer helps after it. */
    int64_t (*lease_end_ns)(void *owner);
    /* A round's verdict, first pass over the round: update the lease from
     * the votes; return a dlock_lost_reason if the lock is lost, else 0.
     * Must not call back into the application. */
    int (*settle)(void *owner, const dlock__renew_votes *v);
    /* Second pass, for each lock settle() found lost: mark it lost and tell
     * the application (on_lost). The record stays in the round until this
     * returns, so a concurrent release or free waits for it. */
    void (*lost)(void *owner, int reason);
    /* A store without nodes to batch for (the etcd backend): start
     * renewing this one lock on loop, every answer by deadline_ns; 1: q's
     * done follows, from the loop; 0: not started, *vote is the vote now
     * (-1: out of memory, or the deadline passed) and done never runs. The
     * request copies what it needs: the record may be let go while it is
     * in flight (watchdog.c). Several may be in flight at once. NULL for
     * Redis, whose locks the watchdog renews in batches of renew_batch.lua
     * per node. A client's records are all of one kind (a client is on
     * one backend). */
    int (*renew_start)(void *owner, int64_t deadline_ns, struct dlock__loop *loop,
                       dlock__renew_req *q, int *vote);
} dlock__renewal_ops;

typedef struct dlock__renewal {
    /* The owner's, set while the record is not registered; the thread
     * reads them while it is. */
    const dlock__renewal_ops *ops;
    void *owner;
    const char *key;
    size_t key_len;
    const char *token;        /* stable while the lock is held */
    size_t token_len;
    const char *mode;         /* renew_batch.lua's mode: "p" or "r" */
    size_t mode_len;          /* its length when it holds a key (ident.lua); 0: one byte */
    int64_t ttl_ms;           /* the TTL to renew to */
    int64_t interval_ms;      /* explicit interval; 0: a third of ttl_ms */
    int once;                 /* one renewal, then unregistered (a fair
                               * hand-over's confirmation, fair.c) */
    /* NULL, or what a key put back carries besides the key (an
     * election's value, restore_stamp.h); set before the first
     * registration, its bytes changed under its own mutex. */
    struct dlock__restore_stamp *stamp;

    /* The watchdog's, under its mutex. */
    int registered;
    int in_round;
    /* While in_round: 1 until the round has settled it (its renewal is
     * on the wire or its verdict not applied yet), and its item in that
     * round (dlock__watchdog_remove() on the watchdog's thread lets the
     * record go from there instead of waiting). */
    int unsettled;
    struct item *round_item;
    unsigned hold; /* bumped by each registration: a round of an earlier
                      hold leaves a later one alone */
    int64_t next_ns;
    struct dlock__renewal *prev, *next;
} dlock__renewal;

/* The watchdog's counters for tests and dlock-bench (internal; kept by
 * watchdog_round.c, read with dlock__watchdog_get_stats(), watchdog.h). */
typedef struct dlock__watchdog_stats {
    unsigned long rounds;    /* renewal rounds run */
    unsigned long calls;     /* script calls sent, summed over nodes */
    unsigned long renewed;   /* lock renewals confirmed */
    unsigned long lost;      /* locks found lost */
    unsigned long restores;  /* keys put back on a node that lost them */
} dlock__watchdog_stats;

#endif
