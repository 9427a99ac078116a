/* SPDX-License-Identifier: BSD-3-Clause */
/* An election's leader on Redis (backend.h, elect_read): elect_read.lua
 * on every node, and one answer from the nodes' answers.
 *
 * One node (or a Cluster's slot master, a Sentinel's primary): its answer
 * is the answer. A Redlock: the leader is the token that holds the lock
 * key on a majority of the nodes (a holder of a minority leads nothing:
 * the term's lock took a majority), its value from a node whose hash is
 * stamped with that token (the newest write of the term where the nodes
 * differ: one may have missed a proclaim), its fence that stamp's, which
 * is the term's (elect_read.lua says why a stamp with the holder's token
 * is its term's). Until the leader wrote on a node that answered, it is
 * shown as nobody, as on one node. Nodes that did not answer may decide
 * who leads: with fewer than a majority answering, or when a token's
 * holds plus the silent nodes could make a majority that its holds alone
 * do not, the answer is DLOCK_ENOQUORUM (no leader shown, none denied). */
#include <string.h>

#include "client.h"
#include "election.h"
#include "fanout.h"
#include "keys.h"
#include "quorum.h"
#include "redis_backend.h"
#include "replies.h"
#include "scripts.h"

/* One node's answer. */
typedef struct node_look {
    int state; /* elect_read.lua's: 0, 1 or 2 */
    int64_t ttl_ms;
    uint64_t fence;
    long long seq;
    char *value; /* state 2: a copy */
    size_t value_len;
} node_look;

typedef struct read_ctx {
    dlock__tally t; /* failed nodes, and each node's holder (its token's hash) */
    node_look look[DLOCK__MAX_NODES];
    int oom;
} read_ctx;

static int read_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                   const char *detail, int64_t start_ns)
{
    read_ctx *x = arg;
    dlock__leader_reply rep;
    (void)idx;
    (void)start_ns;
    dlock__decode_leader(err, r, detail, &rep);
    if (rep.err != DLOCK_OK) {
        dlock__tally_error(&x->t, node, rep.err, rep.detail);
        return 0;
    }
    node_look *k = &x->look[node];
    *k = (node_look){rep.state, rep.ttl_ms, rep.fence, rep.seq, NULL, 0};
    if (rep.state > 0)
        x->t.holder[node] = dlock__holder_hash(rep.token, rep.token_len);
    if (rep.state == 2) {
        k->value = dlock__malloc(rep.value_len + 1);
        if (!k->value) {
            x->oom = 1;
            return 0;
        }
        memcpy(k->value, rep.value, rep.value_len);
        k->value[rep.value_len] = '\0';
        k->value_len = rep.value_len;
    }
    /* A Redlock's leader is known once a majority names one holder: the
     * rest are heard for the fan-out's grace only, so that a stalled node
     * does not hold every read (and an observe's deadline) for the I/O
     * timeout. */
    return x->t.n > 1 && dlock__tally_majority_holder(&x->t) != 0;
}

/* When the holder h's lease ends on all but a minority (the quorum-th
 * longest of its leases; a holder of no majority: the first lease of any
 * holder to end), in ms; -1 when no lease is known. An observer looks
 * again then: a leader that dies publishes nothing. */
static int64_t lease_left_ms(const read_ctx *x, uint64_t h, size_t quorum)
{
    int64_t ttl[DLOCK__MAX_NODES];
    size_t n = 0;
    for (size_t i = 0; i < x->t.n; i++) {
        if (!x->t.holder[i] || (h && x->t.holder[i] != h) || x->look[i].ttl_ms < 0)
            continue;
        size_t j = n++; /* insertion, longest first */
        for (; j > 0 && ttl[j - 1] < x->look[i].ttl_ms; j--)
            ttl[j] = ttl[j - 1];
        ttl[j] = x->look[i].ttl_ms;
    }
    if (n == 0)
        return -1;
    return h ? ttl[(quorum <= n ? quorum : n) - 1] : ttl[n - 1];
}

/* The leader from the nodes' answers (out as election.h says). */
static int combine(read_ctx *x, dlock__leader *out)
{
    const dlock__tally *t = &x->t;
    if (x->oom)
        return DLOCK_ENOMEM;
    if (t->n - t->errs < t->quorum)
        return dlock__tally_failure_code(t); /* one node: its own code */
    uint64_t lead = dlock__tally_majority_holder(t);
    if (!lead && dlock__tally_max_same_holder(t) + t->errs >= t->quorum)
        return DLOCK_ENOQUORUM; /* the silent nodes would decide it */
    out->ttl_ms = lease_left_ms(x, lead, t->quorum);
    node_look *best = NULL;
    for (size_t i = 0; lead && i < t->n; i++)
        if (t->holder[i] == lead && x->look[i].state == 2 &&
            (!best || x->look[i].seq > best->seq))
            best = &x->look[i];
    if (best) {
        out->fence = best->fence;
        out->value = best->value; /* taken over */
        out->value_len = best->value_len;
        best->value = NULL;
    }
    return DLOCK_OK;
}

int dlock__redis_elect_read(dlock_client *c, const char *key, size_t klen, dlock__leader *out)
{
    size_t flen = 0, vlen = 0;
    char *fkey = dlock__helper_key(c, key, klen, "fence", 5, &flen);
    char *vkey = dlock__helper_key(c, key, klen, "value", 5, &vlen);
    read_ctx *x = dlock__calloc(1, sizeof *x);
    int rc = fkey && vkey && x ? DLOCK_OK : DLOCK_ENOMEM;
    if (rc == DLOCK_OK) {
        const char *multi = c->n_nodes > 1 ? "1" : "0";
        const char *args[4] = {key, fkey, vkey, multi};
        size_t lens[4] = {klen, flen, vlen, 1};
        dlock__req req = {.script = dlock__script_get(DLOCK__S_ELECT_READ), .numkeys = 3,
                          .nargs = 4, .args = args, .arglens = lens};
        dlock__fanout_opts fo = {.io_timeout_ms = c->opts.io_timeout_ms,
                                 .deadline_ns = INT64_MAX, .grace_ms = DLOCK__DECIDED_GRACE_MS};
        dlock__tally_init(&x->t, c, NULL);
        x->t.quiet = 1; /* no handle to tell: the code says it */
        rc = dlock__fanout(c, &req, 1, &fo, read_cb, x);
        if (rc == DLOCK_OK)
            rc = combine(x, out);
    }
    for (size_t i = 0; x && i < c->n_nodes; i++)
        dlock__free(x->look[i].value);
    dlock__free(x);
    dlock__free(fkey);
    dlock__free(vkey);
    return rc;
}
