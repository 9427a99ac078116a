/* SPDX-License-Identifier: BSD-3-Clause */
/* One renewal round on the wire (renew_round.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "fanout.h"
#include "quorum.h"
#include "renew_round.h"
#include "replies.h"
#include "scripts.h"

#define RENEW_CHUNK 1000

typedef struct round_ctx {
    item *items;
    size_t n_items;
    size_t n_nodes, quorum;
    size_t undecided; /* items without a majority either way yet */
    const size_t *first; /* call k renews items first[k] .. first[k+1]-1 */
} round_ctx;

/* A gone key that will be put back counts as a yes for ending the round
 * early (restore_gone() then settles it), else as a no. */
static int item_decided(const round_ctx *rc, const item *it)
{
    size_t yes = it->yes + (it->restorable ? it->n_gone : 0);
    size_t no = it->no + (it->restorable ? 0 : it->n_gone);
    return dlock__quorum_decided(rc->n_nodes, rc->quorum, yes, no, it->err);
}

static int round_cb(void *arg, size_t node, uint32_t idx, int err,
                    const redisReply *r, const char *detail, int64_t start_ns)
{
    round_ctx *rc = arg;
    (void)detail;
    (void)start_ns;
    size_t first = rc->first[idx];
    size_t n = rc->first[idx + 1] - first;
    for (size_t i = 0; i < n; i++) {
        item *it = &rc->items[first + i];
        int was = item_decided(rc, it);
        int gone, v = dlock__decode_renew(err, r, n, i, &gone);
        if (v < 0) {
            it->err++;
        } else if (v == 1) {
            it->yes++;
        } else if (gone) {
            it->n_gone++;
            it->gone |= UINT64_C(1) << node;
        } else {
            it->no++;
        }
        if (!was && item_decided(rc, it))
            rc->undecided--;
    }
    /* A round is over once a majority decided every lock: a stalled
     * minority must not keep it waiting while the leases run out. */
    return rc->undecided == 0;
}

/* A round of records that renew themselves (renewal_ops.renew): one
 * vote each, a majority of one. */
static void run_own_round(item *items, size_t n, dlock__round_counts *counts)
{
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *l = items[i].rec;
        int64_t end = l->ops->lease_end_ns(l->owner);
        items[i].lease_end_ns = end;
        int v = l->ops->renew(l->owner, end);
        items[i].yes = v == 1;
        items[i].no = v == 0;
        items[i].err = v < 0;
    }
    counts->rounds++;
    counts->calls += n;
}

/* Whether an item's gone keys may be put back (restore_batch.lua says
 * why): a plain lock over several masters (a cluster keeps one copy).
 * Fixed at the round's start, with the lease still running then; the
 * round's answers may then end it early counting a gone key as a yes. */
static int may_restore(const dlock_client *c, const item *it)
{
    return c->n_nodes > 1 && !dlock__client_cluster(c) && it->rec->mode[0] == 'p' &&
           dlock__now_ns() < it->lease_end_ns;
}

/* After the round's answers: still held somewhere (a key deleted
 * everywhere is lost, as documented), and either renewed by a majority in
 * this round or still within the lease, during which nobody else can hold
 * a majority. */
static int can_restore(const dlock_client *c, const item *it)
{
    return it->restorable && it->n_gone > 0 && it->yes > 0 &&
           (it->yes >= c->quorum || dlock__now_ns() < it->lease_end_ns);
}

typedef struct restore_ctx {
    item *items;
    const size_t *sel; /* the call's items, in KEYS order */
    size_t m;
} restore_ctx;

static int restore_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                      const char *detail, int64_t start_ns)
{
    restore_ctx *rc = arg;
    (void)node, (void)idx, (void)detail, (void)start_ns;
    for (size_t k = 0; k < rc->m; k++) {
        int gone, v = dlock__decode_renew(err, r, rc->m, k, &gone);
        item *it = &rc->items[rc->sel[k]];
        it->n_gone--;
        if (v == 1)
            it->yes++;
        else if (v == 0)
            it->no++;
        else
            it->err++;
    }
    return 0;
}

/* Put the gone keys back, node by node, and settle every gone answer as a
 * yes (put back) or a no. Runs inside the round, so a release (which waits
 * for the round) is never overtaken by it, and a yes counts from the
 * round's start like any other (the key put back lives longer). The usual
 * round, nothing gone, costs nothing. */
static void restore_gone(dlock_client *c, dlock__round_counts *counts, item *items, size_t n,
                         int64_t deadline)
{
    uint64_t nodes = 0;
    for (size_t i = 0; i < n; i++) {
        items[i].restorable = can_restore(c, &items[i]);
        nodes |= items[i].restorable ? items[i].gone : 0;
    }
    size_t cap = n < RENEW_CHUNK ? n : RENEW_CHUNK;
    const char **args = nodes ? dlock__calloc(3 * cap, sizeof *args) : NULL;
    size_t *lens = nodes ? dlock__calloc(3 * cap, sizeof *lens) : NULL;
    size_t *sel = nodes ? dlock__calloc(cap, sizeof *sel) : NULL;
    for (size_t node = 0; args && lens && sel && node < c->n_nodes; node++) {
        if (!(nodes >> node & 1))
            continue;
        /* KEYS first, then the ARGV pairs; past RENEW_CHUNK, the next
         * round takes the rest. */
        size_t m = 0;
        for (size_t i = 0; i < n && m < cap; i++)
            if (items[i].restorable && (items[i].gone >> node & 1))
                sel[m++] = i;
        for (size_t k = 0; k < m; k++) {
            const item *it = &items[sel[k]];
            args[k] = it->rec->key;
            lens[k] = it->rec->key_len;
            args[m + 2 * k] = it->rec->token;
            lens[m + 2 * k] = it->rec->token_len;
            args[m + 2 * k + 1] = it->ttl;
            lens[m + 2 * k + 1] = it->ttl_len;
        }
        uint8_t only[DLOCK__MAX_NODES] = {0};
        only[node] = 1;
        dlock__req req = {.script = dlock__script_get(DLOCK__S_RESTORE), .numkeys = (int)m,
                          .nargs = (int)(3 * m), .args = args, .arglens = lens};
        dlock__fanout_opts fo = {.io_timeout_ms = c->opts.io_timeout_ms, .deadline_ns = deadline,
                                 .only = only};
        restore_ctx rc = {items, sel, m};
        if (dlock__fanout(c, &req, 1, &fo, restore_cb, &rc) != DLOCK_OK)
            for (size_t k = 0; k < m; k++) {
                items[sel[k]].n_gone--;
                items[sel[k]].err++;
            }
        counts->restores += m;
    }
    /* What was not put back is what it said: gone, not ours. */
    for (size_t i = 0; i < n; i++) {
        items[i].no += items[i].n_gone;
        items[i].n_gone = 0;
    }
    dlock__free((void *)args);
    dlock__free(lens);
    dlock__free(sel);
}

void dlock__renew_round(dlock_client *c, item *items, size_t n, dlock__round_counts *counts)
{
    if (n > 0 && items[0].rec->ops->renew) {
        run_own_round(items, n, counts);
        return;
    }
    /* Calls of up to RENEW_CHUNK locks; on a cluster a call holds one hash
     * slot's locks (a script's keys must share a slot), and the calls of a
     * round, all for one master, go out pipelined on one connection. */
    size_t *first = dlock__calloc(n + 1, sizeof *first);
    size_t nchunks = 0;
    for (size_t i = 0; first && i < n; i++)
        if (i == 0 || i - first[nchunks - 1] == RENEW_CHUNK ||
            (dlock__client_cluster(c) && items[i].slot != items[i - 1].slot))
            first[nchunks++] = i;
    if (first)
        first[nchunks] = n;
    dlock__req *reqs = dlock__calloc(nchunks ? nchunks : 1, sizeof *reqs);
    const char **args = dlock__calloc(n * 4, sizeof *args);
    size_t *lens = dlock__calloc(n * 4, sizeof *lens);
    round_ctx ctx = {items, n, c->n_nodes, c->quorum, n, first};
    /* No answer helps after the last lease in the round has ended. */
    int64_t deadline = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        dlock__renewal *l = items[i].rec;
        items[i].lease_end_ns = l->ops->lease_end_ns(l->owner);
        items[i].restorable = may_restore(c, &items[i]);
        deadline = DLOCK__MAX(deadline, items[i].lease_end_ns);
    }
    if (!reqs || !args || !lens || !first) {
        for (size_t i = 0; i < n; i++)
            items[i].err = c->n_nodes;
        goto out;
    }
    for (size_t k = 0; k < nchunks; k++) {
        size_t f = first[k], m = first[k + 1] - f;
        const char **a = args + f * 4;
        size_t *al = lens + f * 4;
        /* KEYS first, then the ARGV triples. */
        for (size_t i = 0; i < m; i++) {
            dlock__renewal *l = items[f + i].rec;
            a[i] = l->key;
            al[i] = l->key_len;
            a[m + 3 * i] = l->token;
            al[m + 3 * i] = l->token_len;
            a[m + 3 * i + 1] = items[f + i].ttl;
            al[m + 3 * i + 1] = items[f + i].ttl_len;
            a[m + 3 * i + 2] = l->mode;
            al[m + 3 * i + 2] = l->mode_len ? l->mode_len : 1;
        }
        reqs[k] = (dlock__req){.script = dlock__script_get(DLOCK__S_RENEW), .numkeys = (int)m,
                               .nargs = (int)(4 * m), .args = a, .arglens = al};
    }
    dlock__fanout_opts fo = {.io_timeout_ms = c->opts.io_timeout_ms, .deadline_ns = deadline,
                             .grace_ms = DLOCK__DECIDED_GRACE_MS};
    if (dlock__fanout(c, reqs, (uint32_t)nchunks, &fo, round_cb, &ctx) != DLOCK_OK)
        for (size_t i = 0; i < n; i++)
            items[i].err = c->n_nodes;
    counts->rounds++;
    counts->calls += nchunks * c->n_nodes;
    restore_gone(c, counts, items, n, deadline);
out:
    dlock__free(first);
    dlock__free(reqs);
    dlock__free((void *)args);
    dlock__free(lens);
}
