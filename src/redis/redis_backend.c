/* SPDX-License-Identifier: BSD-3-Clause */
/* The Redis backend's operations table (backend.h), and what a handle
 * leaves to settle in Redis before its token changes or it is freed. One
 * table for one node, Redlock, Cluster and Sentinel, over TCP or TLS: the
 * topology is the client's (node.c, cluster.c, sentinel.c), the fan-out
 * and the majorities are fanout.c's and quorum.c's. */
#include <string.h>

#include "attempt.h"
#include "backend.h"
#include "client.h"
#include "clock.h"
#include "engine.h"
#include "fair.h"
#include "handle.h"
#include "kinds.h"
#include "quorum.h"
#include "redis_backend.h"
#include "release.h"
#include "wait.h"

/* The release still owed under a token an adopt replaced (handle.h,
 * owed_token): sent again by that token, the handle's own pending release
 * set aside meanwhile, to the nodes that still owe it. Best effort, as
 * every resend; forgotten once none owes it. */
static void resend_owed(dlock_lock *l, int64_t timeout_ms)
{
    if (!l->owed_token)
        return;
    char *token = l->token;
    size_t len = l->token_len;
    int pending = l->rel_pending;
    uint8_t nodes[DLOCK__MAX_NODES];
    memcpy(nodes, l->rel_nodes, sizeof nodes);
    l->token = l->owed_token;
    l->token_len = l->owed_len;
    memcpy(l->rel_nodes, l->owed_nodes, sizeof nodes);
    l->rel_pending = 1;
    int owed = dlock__flush_release(l, timeout_ms, -1);
    memcpy(l->owed_nodes, l->rel_nodes, sizeof nodes);
    l->token = token;
    l->token_len = len;
    l->rel_pending = pending;
    memcpy(l->rel_nodes, nodes, sizeof nodes);
    if (!owed) {
        dlock__free(l->owed_token);
        l->owed_token = NULL;
    }
}

static void settle(dlock_lock *l)
{
    int64_t io = l->client->opts.io_timeout_ms;
    resend_owed(l, io);
    if (!l->rel_pending || dlock__lock_get_state(l) != DLOCK_STATE_UNLOCKED)
        return;
    /* Before the token changes. A counted kind's token is its owner's,
     * which adopt does not change (no such kind adopts): what a node
     * still owes stays pending, for the next acquire or the free. */
    if (!dlock__flush_release(l, io, -1) || l->kind->counted)
        return;
    /* Still owed by a node that did not answer: kept with the old token
     * for the next adopt and the free, rather than left to the TTL. One
     * such release at a time (and none without memory): another one is
     * left to its TTL, as an acquire's resend leaves it. */
    if (!l->owed_token && (l->owed_token = dlock__malloc(l->token_len + 1))) {
        memcpy(l->owed_token, l->token, l->token_len);
        l->owed_token[l->token_len] = '\0';
        l->owed_len = l->token_len;
        memcpy(l->owed_nodes, l->rel_nodes, sizeof l->owed_nodes);
    }
    l->rel_pending = 0;
}

/* How long a lost handle's release by token listens for each node. A
 * handle is mostly lost because a node stalled, and then its release
 * would wait the whole I/O timeout, on the watchdog thread too when an
 * on_lost callback releases, holding up the next lock's loss report. The
 * release is written at once and a node that answers again runs it (a
 * timed-out connection is closed, which still delivers what was written);
 * before or after a late renewal it ends the same: our token gone. */
#define RELEASE_LOST_MS 50

/* By token, as every release: a key that holds another owner's token is
 * left alone. A fair line is left too (fair_leave.lua, then
 * fair_release.lua, which hands the lock on). Not the counted kind: its
 * token is the owner's (client x thread), which other handles of that
 * owner may hold with every right. */
static void release_lost(dlock_lock *l)
{
    if (l->kind->wait == DLOCK__WAIT_QUEUE) {
        dlock__fair_cleanup(l);
        return;
    }
    if (l->kind->counted || !l->token_len)
        return;
    dlock__tally t;
    dlock__send_release(l, NULL, DLOCK__MIN(RELEASE_LOST_MS, l->client->opts.io_timeout_ms), 0,
                        &t);
}

static void cleanup(dlock_lock *l)
{
    int64_t io = l->client->opts.io_timeout_ms;
    resend_owed(l, io);
    if (l->undo_pending) /* best effort, as the releases below */
        dlock__send_undo(l, io, -1);
    if (l->rel_pending)
        dlock__flush_release(l, io, -1);
    if (l->touched && !l->undo_pending && !l->rel_pending && !l->in_doubt &&
        dlock__lock_get_state(l) != DLOCK_STATE_HELD)
        /* The key may outlive this handle (other handles of the owner
         * hold it): take this handle's bookkeeping out of it. */
        dlock__forget_hold(l);
    if (l->fair_cleanup_pending)
        dlock__fair_cleanup(l);
    else if (dlock__lock_get_state(l) == DLOCK_STATE_LOST)
        release_lost(l);
    if (dlock__lock_get_state(l) == DLOCK_STATE_HELD) {
        /* Let go of every hold this handle has, in one release: a counted
         * kind's drops them all (reentrant_release.lua, ARGV[5]), and
         * carries what a node still owes; a counted lock's other handles
         * keep theirs. */
        dlock__tally t;
        if (l->kind->counted)
            dlock__release_op(l, l->holds);
        dlock__send_release(l, NULL, io, 0, &t);
        if (l->kind->counted)
            dlock__note_release_pending(l, &t, NULL);
        /* Decided and answered everywhere: not in doubt, so this handle's
         * bookkeeping can go too (other handles of the owner may keep the
         * key alive). Not while a node owes it: a copy that reached it
         * late would find no bookkeeping and leave the holds there. */
        if (l->kind->counted && t.yes >= t.quorum && !l->rel_pending)
            dlock__forget_hold(l);
    }
}

/* Every kind waits in the engine (src/engine/acquire.c): the kinds that
 * wait by retrying through the attempt (wait.c), the queued ones through
 * their looks in line (fair.c). */
static int try(dlock_lock *l, dlock__op *op)
{
    return l->kind->wait == DLOCK__WAIT_QUEUE ? dlock__fair_try(l, op) : dlock__wait_try(l, op);
}

static int leave(dlock_lock *l, int64_t timeout_ms, dlock__op *op)
{
    return l->kind->wait == DLOCK__WAIT_QUEUE ? dlock__fair_leave(l, timeout_ms, op)
                                              : dlock__wait_leave(l, timeout_ms, op);
}

static int64_t lease_ttl_ms(dlock_lock *l)
{
    return l->opts.ttl_ms;
}

static int64_t drift_ns(dlock_lock *l, int64_t ttl_ms)
{
    return dlock__drift_ns(l->client, ttl_ms);
}

static int adopt_check(dlock_lock *l, const char *token, size_t len)
{
    (void)len;
    if (strncmp(token, "turn:", 5) == 0) {
        /* A waiter's turn (docs/waiting.md, "Runs and turns"), not a
         * holder's token: extending it would keep everyone out. */
        dlock__err_set(&l->err, "\"%.40s\" is a waiting acquire's turn, not a holder's token",
                       token);
        return DLOCK_EINVAL;
    }
    return DLOCK_OK;
}

/* The token is the whole record (the engine keeps it). */
static int adopt(dlock_lock *l, const char *token, size_t len)
{
    (void)l, (void)token, (void)len;
    return DLOCK_OK;
}

static void no_record(dlock_lock *l)
{
    (void)l; /* the handle's fields are the whole record */
}

static const dlock__kind *kind_for(const dlock_client *c, const dlock__kind *k)
{
    (void)c;
    return k; /* every kind; several masters are checked by the caller */
}

/* Renewals are the watchdog's batched rounds (renew_round.c). */
static const dlock__renewal_ops renewal_ops = {dlock__lock_renew_lease_end,
                                               dlock__engine_renew_settle,
                                               dlock__engine_renew_lost, NULL};

/* Whatever no other backend claims (backends.c asks it last). */
static int wants_the_rest(const char *const *urls, size_t n_urls)
{
    (void)urls, (void)n_urls;
    return 1;
}

const dlock__backend dlock__redis_backend = {
    .name = "redis",
    .wants = wants_the_rest,
    .open = dlock__redis_open,
    .close = dlock__redis_close,
    .node_count = dlock__redis_node_count,
    .node_name = dlock__redis_node_name,
    .status = dlock__redis_status,
    .holders = dlock__redis_holders,
    .list = dlock__redis_list,
    .identity = dlock__redis_identity,
    .holder_identity = dlock__redis_holder_identity,
    .break_holds = dlock__redis_break,
    .late_answer_counts = 0,
    .sets = 1,
    .renewal = &renewal_ops,
    .kind_for = kind_for,
    .lock_init = dlock__redis_lock_init,
    .lock_clear = dlock__redis_lock_clear,
    .begin = dlock__fair_begin,
    .try = try,
    .watch = dlock__wait_watch_release,
    .watch_ready = dlock__wait_watch_ready,
    .unwatch = dlock__wait_unwatch,
    .leave = leave,
    .handed = dlock__fair_handed,
    .release_start = dlock__release_start,
    .extend_start = dlock__extend_start,
    .lease_ttl_ms = lease_ttl_ms,
    .drift_ns = drift_ns,
    .adopt_check = adopt_check,
    .adopt = adopt,
    .settle = settle,
    .release_lost = release_lost,
    .drop = no_record,
    .cleanup = cleanup,
};
