/* SPDX-License-Identifier: BSD-3-Clause */
/* The watchdog: one background thread per client renews every registered
 * renewal record, batching many locks into one script call per node per
 * round.
 *
 * The thread knows renewal records, not lock handles: a record names the
 * key and token to renew and how, and hands each round's votes back to its
 * owner through dlock__renewal_ops; only the owner (the lock module)
 * changes a lock's state. */
#ifndef DLOCK_WATCHDOG_H
#define DLOCK_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

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
    /* A store without nodes to batch for (the etcd backend): renew this one
     * lock now and vote, 1 renewed, 0 gone or not ours, -1 no answer before
     * deadline_ns. NULL for Redis, whose locks the watchdog renews in
     * batches of renew_batch.lua per node. A client's records are all of
     * one kind (a client is on one backend). */
    int (*renew)(void *owner, int64_t deadline_ns);
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
    int64_t ttl_ms;           /* the TTL to renew to */
    int64_t interval_ms;      /* explicit interval; 0: a third of ttl_ms */
    int once;                 /* one renewal, then unregistered (a fair
                               * hand-over's confirmation, fair.c) */

    /* The watchdog's, under its mutex. */
    int registered;
    int in_round;
    int64_t next_ns;
    struct dlock__renewal *prev, *next;
} dlock__renewal;

/* Make sure the thread runs (started on first use). Called before an
 * auto-renew acquire, so that registering the lock after the grant cannot
 * fail: a grant the client could not keep alive would have to be undone,
 * and under memory pressure the undo may fail too. DLOCK_OK or
 * DLOCK_ENOMEM. */
int dlock__watchdog_start(dlock_client *c);

/* Start renewing `r` (its owner holds the lock) to r->ttl_ms, the first
 * round first_ms from now: 0 at once (a failed extend: the lease has had
 * no renewal for a while), DLOCK__RENEW_INTERVAL one interval from now.
 * The thread must have been started with dlock__watchdog_start().
 * Allocates nothing. */
#define DLOCK__RENEW_INTERVAL (-1)
void dlock__watchdog_add(dlock_client *c, dlock__renewal *r, int64_t first_ms);

/* Stop renewing `r`. When this returns, no renewal of it is in flight and
 * none will be sent. No-op for a record that is not registered. Returns 1
 * if it was registered. */
int dlock__watchdog_remove(dlock_client *c, dlock__renewal *r);

/* Stop and join the thread (dlock_client_free). */
void dlock__watchdog_stop(dlock_client *c);

/* In a child of fork(), where the thread does not exist and its mutex may
 * be held: free the memory without locking, joining or destroying. */
void dlock__watchdog_forget(dlock_client *c);

/* Counters for tests and dlock-bench (internal). */
typedef struct dlock__watchdog_stats {
    unsigned long rounds;    /* renewal rounds run */
    unsigned long calls;     /* script calls sent, summed over nodes */
    unsigned long renewed;   /* lock renewals confirmed */
    unsigned long lost;      /* locks found lost */
    unsigned long restores;  /* keys put back on a node that lost them */
} dlock__watchdog_stats;

void dlock__watchdog_get_stats(dlock_client *c, dlock__watchdog_stats *out);

#endif
