/* SPDX-License-Identifier: BSD-3-Clause */
/* One renewal round on the wire (renew_round.c): the watchdog (watchdog.c)
 * picks the records that are due and schedules rounds; a round sends one
 * pipelined batch of renew_batch.lua calls per node, decides each lock at
 * a majority, and puts back a key a node lost (restore_batch.lua). */
#ifndef DLOCK_RENEW_ROUND_H
#define DLOCK_RENEW_ROUND_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "renewal.h"

/* Per-lock input and result of one round. */
typedef struct item {
    dlock__renewal *rec;
    int64_t ttl_ms;
    char ttl[24];
    size_t ttl_len;
    size_t yes, no, err;
    size_t n_gone;   /* answers "the key is gone" (counted in no unless put back) */
    uint64_t gone;   /* their nodes, a bit each */
    int64_t lease_end_ns;
    int restorable;  /* a gone key may be put back (restore_batch.lua) */
    unsigned slot; /* cluster: the lock key's hash slot */
    int master;    /* cluster: its master in the client's slot map */
    unsigned hold; /* rec->hold when the round took it (watchdog.c) */
} item;

/* What a round cost, for the watchdog's statistics. */
typedef struct dlock__round_counts {
    uint64_t rounds, calls, restores;
} dlock__round_counts;

/* Renew items[0..n) (each with rec, ttl and ttl_len set; on a cluster all
 * of one master, sorted by slot): fills yes/no/err/n_gone/gone and adds
 * what it sent to *counts. Blocks for the round (the nodes' I/O timeout at
 * most, never past the last lease's end). */
void dlock__renew_round(dlock_client *c, item *items, size_t n, dlock__round_counts *counts);

#endif
