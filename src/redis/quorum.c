/* SPDX-License-Identifier: BSD-3-Clause */
/* Vote counting, drift, node timeout and the restart rule (quorum.h). */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "quorum.h"
#include "replies.h"

int64_t dlock__drift_ns(const dlock_client *c, int64_t ttl_ms)
{
    if (c->n_nodes == 1)
        return 0;
    return (int64_t)((double)ttl_ms * c->opts.drift_factor * 1e6) + 2 * DLOCK__NS_PER_MS;
}

int64_t dlock__node_timeout_ms(const dlock_client *c, int64_t ttl_ms)
{
    int64_t io = c->opts.io_timeout_ms;
    if (c->n_nodes == 1)
        return io;
    /* Redlock: a node that answers after a good part of the TTL is gone is
     * not worth waiting for. */
    return DLOCK__MIN(io, DLOCK__MAX(1, ttl_ms / 10));
}

int dlock__vote_counts(const dlock_client *c, size_t node, int64_t start_ns,
                       dlock__errbuf *err)
{
    int64_t min_up = c->opts.min_node_uptime_ms;
    if (min_up <= 0)
        return 1;
    if (start_ns == 0) {
        dlock__err_append(err, "%s: uptime unknown (INFO refused?); vote not counted",
                          c->nodes[node].name);
        return 0;
    }
    int64_t up_ms = (dlock__now_ns() - start_ns) / DLOCK__NS_PER_MS;
    if (up_ms >= min_up)
        return 1;
    dlock__err_append(err, "%s: restarted %" PRId64 " ms ago (< %" PRId64 " ms); vote not counted",
                      c->nodes[node].name, up_ms, min_up);
    return 0;
}

void dlock__tally_init(dlock__tally *t, dlock_client *c, dlock__errbuf *err)
{
    /* The per-node arrays only for the client's nodes (every call makes
     * one or two tallies, and one node is the common case): no entry past
     * n is read. */
    size_t n = c->n_nodes;
    memset(t, 0, offsetof(dlock__tally, vote));
    memset(t->vote, 0, n * sizeof t->vote[0]);
    memset(t->maybe_ours, 0, n * sizeof t->maybe_ours[0]);
    memset(t->node_err, 0, n * sizeof t->node_err[0]);
    memset(t->holder, 0, n * sizeof t->holder[0]);
    t->client = c;
    t->err = err;
    t->n = n;
    t->quorum = c->quorum;
    t->min_pttl = -1;
    t->min_look = -1;
}

static void count_error(dlock__tally *t, size_t node, int code)
{
    t->errs++;
    t->vote[node] = DLOCK__V_ERR;
    t->node_err[node] = code;
    t->all_err = (t->errs == 1 || t->all_err == code) ? code : DLOCK_ENOQUORUM;
}

void dlock__tally_error(dlock__tally *t, size_t node, int code, const char *detail)
{
    count_error(t, node, code);
    /* Unreachable, busy or silent nodes may come back while we wait;
     * refusals, bad credentials and wrong types will not. (A node's own
     * code is never DLOCK_ENOQUORUM.) */
    if (!dlock_error_is_transient(code))
        t->fatal_err = 1;
    if (t->quiet)
        return;
    /* The node and what it said; the code's own text only when there is
     * nothing more specific (callers print dlock_strerror() themselves). */
    dlock__err_append(t->err, "%s: %.200s", t->client->nodes[node].name,
                      detail && *detail ? detail : dlock_strerror(code));
}

void dlock__tally_busy(dlock__tally *t, size_t node)
{
    count_error(t, node, DLOCK_EBUSY);
}

int dlock__tally_decided(const dlock__tally *t)
{
    return dlock__quorum_decided(t->n, t->quorum, t->yes, t->no, t->errs);
}

uint64_t dlock__holder_hash(const char *s, size_t len)
{
    /* Tells "the same owner on a majority" from a split vote without
     * keeping the tokens. */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ? h : 1;
}

/* The nodes that named the holder node i named (0: i named none). */
static size_t same_holder(const dlock__tally *t, size_t i)
{
    size_t k = 0;
    for (size_t j = 0; t->holder[i] && j < t->n; j++)
        k += t->holder[j] == t->holder[i];
    return k;
}

size_t dlock__tally_max_same_holder(const dlock__tally *t)
{
    size_t best = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t k = same_holder(t, i);
        if (k > best)
            best = k;
    }
    return best;
}

uint64_t dlock__tally_majority_holder(const dlock__tally *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (same_holder(t, i) >= t->quorum)
            return t->holder[i];
    return 0;
}

int dlock__tally_failure_code(const dlock__tally *t)
{
    if (t->n == 1)
        return t->errs ? t->all_err : DLOCK_EPROTO;
    return DLOCK_ENOQUORUM;
}

int dlock__tally_owner_code(const dlock__tally *t)
{
    if (t->yes >= t->quorum)
        return DLOCK_OK;
    /* "Not ours" only when a majority says so. A node that never had the
     * key (the grant was decided without it) answers "gone"; with one
     * confirmation and one failed node beside it, the lease may still hold
     * on a majority, and calling it expired would make extend drop a lock
     * it holds: that is a majority not reached. */
    if (t->no > t->n - t->quorum)
        return t->other_owner > 0 ? DLOCK_ENOTOWNER : DLOCK_EEXPIRED;
    return dlock__tally_failure_code(t);
}

/* Count one node's typed answer to an acquire (err: how the node failed,
 * if it did); returns whether the round is decided. */
int dlock__tally_answer(dlock__tally *t, size_t node, int err, const dlock__acquire_reply *a,
                        int64_t start_ns)
{
    if (a->err != DLOCK_OK) {
        /* Sent but unanswered: the key may be ours there. Too few
         * replica acknowledgements: it is (or may be), undo it. */
        if (err < 0)
            t->maybe_ours[node] = err == DLOCK_EUNKNOWN || err == DLOCK_ENOREPLICAS;
        dlock__tally_error(t, node, a->err, a->detail);
    } else if (a->verdict == DLOCK__ACQ_GRANTED) {
        t->maybe_ours[node] = 1;
        char msg[8];
        if (t->n > 1 && dlock__client_check_distinct(t->client, msg, sizeof msg)) {
            /* Its vote may be a second one from one server. */
            t->same_server = 1;
            return 1;
        }
        if (dlock__vote_counts(t->client, node, start_ns, t->err)) {
            t->yes++;
            t->vote[node] = DLOCK__V_YES;
            if (a->fence > t->max_fence) {
                t->max_fence = a->fence;
                t->at_max = 0;
            }
            if (a->fence == t->max_fence)
                t->at_max++;
            if (a->has_count)
                t->count = a->count;
            t->held_before += a->has_count && a->count > 1;
        } else {
            dlock__tally_busy(t, node);
        }
    } else {
        t->no++;
        t->vote[node] = DLOCK__V_NO;
        if (a->pttl >= 0 && (t->min_pttl < 0 || a->pttl < t->min_pttl))
            t->min_pttl = a->pttl;
        if (a->look_ms >= 0 && (t->min_look < 0 || a->look_ms < t->min_look))
            t->min_look = a->look_ms;
        if (a->holder)
            t->holder[node] = dlock__holder_hash(a->holder, a->holder_len);
        t->joined |= a->joined;
        t->delayed += (size_t)a->delayed;
    }
    return dlock__tally_decided(t);
}
