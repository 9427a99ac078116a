/* SPDX-License-Identifier: BSD-3-Clause */
/* One acquire attempt, and its undo (attempt.h).
 *
 * One code path serves one node and N nodes: the attempt is a fan-out
 * (fanout.c) of the kind's acquire script to all nodes, and the outcome is
 * decided by majority (a majority of one is that node). */
#include <string.h>

#include "attempt.h"
#include "client.h"
#include "clock.h"
#include "fanout.h"
#include "first_try.h"
#include "handle.h"
#include "kind_steps.h"
#include "kinds.h"
#include "quorum.h"
#include "release.h"
#include "replies.h"

/* Redlock fencing: raise the counter to `fence` on a majority before the
 * grant is reported, so every later majority sees at least this value
 * (docs/fencing.md). */
static int sync_fence(dlock_lock *l, uint64_t fence, int64_t deadline_ns)
{
    dlock__step_args a;
    dlock__req req;
    (void)dlock__step_req(l, DLOCK__STEP_FENCE_SYNC, &(dlock__step_in){.fence = fence}, &a, &req);
    dlock__fanout_opts fo = {.io_timeout_ms = dlock__node_timeout_ms(l->client, l->opts.ttl_ms),
                             .deadline_ns = deadline_ns};
    dlock__tally t;
    dlock__tally_init(&t, l->client, &l->err);
    t.max_fence = fence;
    if (dlock__fanout(l->client, &req, 1, &fo, dlock__fence_cb, &t) != DLOCK_OK)
        return DLOCK_ENOMEM;
    return t.yes >= t.quorum ? DLOCK_OK : DLOCK_ENOQUORUM;
}

/* The undo request of counted attempt `seq_no` (kind_steps.c). */
static dlock__req undo_req(dlock_lock *l, uint64_t seq_no, dlock__step_args *a)
{
    dlock__req req;
    dlock__step_in in = {.op_no = seq_no, .wake = l->client->opts.wakeups};
    (void)dlock__step_req(l, DLOCK__STEP_UNDO, &in, a, &req); /* allocates nothing */
    return req;
}

int dlock__send_undo(dlock_lock *l, int64_t timeout_ms, int cancel_fd)
{
    dlock__step_args a;
    dlock__req req = undo_req(l, l->undo_seq, &a);
    uint8_t mask[DLOCK__MAX_NODES];
    memcpy(mask, l->undo_nodes, sizeof mask);
    dlock__fanout_opts fo = {.io_timeout_ms = timeout_ms, .deadline_ns = INT64_MAX, .only = mask};
    (void)dlock__fanout_cancellable(l->client, &req, 1, &fo, cancel_fd, NULL,
                                    dlock__undo_cb, l->undo_nodes);
    l->undo_pending = 0;
    for (size_t i = 0; i < l->client->n_nodes; i++)
        l->undo_pending |= l->undo_nodes[i];
    return l->undo_pending;
}

/* A cancel stopped an acquire attempt in flight, or (canceled == 0) a
 * node let it time out: queue its undo behind it on the very connections
 * that carry it, so the node runs the undo right after the attempt
 * whenever it gets to them, and return without waiting for either (issue
 * 22 item 8; a try-once to a stalled node takes one I/O timeout, not two,
 * issue 20). */
static void cancel_behind(dlock_lock *l, dlock__conn **kept, uint64_t seq_no, dlock__tally *t,
                          int canceled)
{
    dlock__step_args a;
    dlock__req req = undo_req(l, seq_no, &a);
    if (canceled)
        dlock__lock_take_cancel(l);
    if (l->kind->counted) {
        l->in_doubt = 1;
        /* The queued undo's answer is never read: the next attempt sends
         * it again (a no-op if it ran) before anything else. */
        l->undo_seq = seq_no;
        for (size_t i = 0; i < t->n; i++)
            l->undo_nodes[i] = canceled ? t->maybe_ours[i] || t->vote[i] == DLOCK__V_NONE ||
                                              t->node_err[i] != 0
                                        : (l->undo_pending && l->undo_nodes[i]) || kept[i];
        l->undo_pending = 1;
    }
    dlock__fanout_send_behind(l->client, kept, &req, 1);
    if (canceled)
        dlock__err_set(&l->err, "cancelled while an attempt on \"%s\" was in flight (its undo is "
                   "queued behind it)", l->name);
}

/* A cancel that came while a waiting acquire settled: used up, and the
 * wait ends. A try (no cancel pipe) leaves it for the next wait. */
static int settle_canceled(dlock_lock *l, int cancel_fd)
{
    if (cancel_fd < 0 || !dlock__lock_use_cancel(l))
        return DLOCK_OK;
    dlock__err_set(&l->err, "cancelled while an earlier operation on \"%s\" was settled",
                   l->name);
    return DLOCK_ECANCELED;
}

/* Before a new attempt: what the handle's earlier operations left with an
 * unknown outcome is settled first. Returns DLOCK_OK to go on. */
static int settle_pending(dlock_lock *l, int *retry)
{
    int64_t timeout_ms = dlock__node_timeout_ms(l->client, l->opts.ttl_ms);
    /* A waiting acquire's cancel ends the wait here too, at once (issue
     * 34): what was resent runs unheard and stays pending. */
    int cancel_fd = l->cancel_fd[0];
    if (!l->kind->counted) {
        if (l->rel_pending) {
            /* The last release's outcome was unknown: send it again with
             * its token (compare-and-delete: harmless if it ran) before
             * the token changes; if the node still does not answer, the
             * key ends with its TTL, as before. */
            dlock__flush_release(l, timeout_ms, cancel_fd);
            /* Cut short by a cancel: still pending, for the next acquire
             * or free (before the token changes). */
            if (settle_canceled(l, cancel_fd) != DLOCK_OK)
                return DLOCK_ECANCELED;
            l->rel_pending = 0;
        }
        return DLOCK_OK;
    }
    if (l->rel_pending && dlock__flush_release(l, timeout_ms, cancel_fd)) {
        if (settle_canceled(l, cancel_fd) != DLOCK_OK)
            return DLOCK_ECANCELED;
        /* A newer operation would make the old release's resend look
         * stale: none before the node answered it. */
        dlock__err_set(&l->err, "an earlier release of \"%s\" has an unknown outcome and "
                       "is not answered yet", l->name);
        *retry = 1;
        return DLOCK_EUNKNOWN;
    }
    if (l->undo_pending && dlock__send_undo(l, timeout_ms, cancel_fd)) {
        if (settle_canceled(l, cancel_fd) != DLOCK_OK)
            return DLOCK_ECANCELED;
        /* A newer attempt could run before the old one's undo and leave
         * the undo nothing it may take back: no new attempt until the
         * nodes answered the undo. */
        dlock__err_set(&l->err, "an earlier attempt on \"%s\" has an unknown outcome and "
                       "its undo is not answered yet", l->name);
        *retry = 1;
        return DLOCK_EUNKNOWN;
    }
    return DLOCK_OK;
}

/* Undo what this attempt may have taken: nodes that granted, answered too
 * late to count, or whose answer was lost. Nodes that were never heard
 * from (the fan-out stopped at a decision) may hold it too. */
static void undo_attempt(dlock_lock *l, dlock__tally *t, uint64_t seq_no, int fresh,
                         dlock__conn **kept)
{
    uint8_t mask[DLOCK__MAX_NODES] = {0};
    int any = 0, behind = 0;
    for (size_t i = 0; i < t->n; i++) {
        behind |= kept[i] != NULL; /* timed out: its undo goes behind, below */
        mask[i] = (t->maybe_ours[i] || t->vote[i] == DLOCK__V_NONE) && !kept[i];
        any |= mask[i];
    }
    if (any && l->kind->counted) {
        /* Re-entries too: an unknown re-entry may have raised the count.
         * The undo names this attempt, so it takes back this attempt's
         * hold at most, never the one another handle of the same owner
         * (same owner id) holds. */
        l->undo_seq = seq_no;
        memcpy(l->undo_nodes, mask, sizeof l->undo_nodes);
        l->in_doubt = 1;
        dlock__send_undo(l, dlock__node_timeout_ms(l->client, l->opts.ttl_ms), -1);
    } else if (any && fresh) {
        dlock__tally rt;
        dlock__send_release(l, mask, dlock__node_timeout_ms(l->client, l->opts.ttl_ms), 1, &rt);
    }
    if (behind)
        cancel_behind(l, kept, seq_no, t, 0);
}

/* The token (or, counted, the owner id) this attempt asks with. */
static int prepare_token(dlock_lock *l, int counted, int fresh)
{
    if (counted) {
        /* A re-entry through this handle keeps the owner id it holds with. */
        if (fresh)
            dlock__lock_owner_id(l);
        return DLOCK_OK;
    }
    int rc = l->kind->reenter ? dlock__lock_owner_token(l) : dlock__lock_new_token(l);
    if (rc != DLOCK_OK)
        dlock__err_set(&l->err, "getrandom failed");
    return rc;
}

/* A majority granted before the lease's end: make the hold the handle's
 * (DLOCK_OK), unless the fence's write-back or the clock says otherwise. */
static int take_grant(dlock_lock *l, const dlock__tally *t, int fresh, int64_t lease_end,
                      dlock__conn **kept, int *retry)
{
    int counted = l->kind->counted;
    int rc = DLOCK_OK;
    uint64_t fence = t->max_fence;
    /* A re-entry that found the key gone made a new hold (count 1): the
     * earlier holds ended with the lease, and this is a new grant with a
     * new fencing token. */
    if (counted && !fresh && t->count == 1) {
        fresh = 1;
        l->holds = 0;
    }
    if (counted && t->count == 1 && !l->undo_pending && !l->rel_pending)
        l->in_doubt = 0; /* a new key: none of our old operations is in it */
    /* The write-back only has to leave a majority with a counter >=
     * fence; when a majority returned fence itself (counters in step, the
     * usual case) that is already so, and the round trip is skipped
     * (docs/fencing.md). */
    if (l->client->n_nodes > 1 && l->fence_key && fresh && t->at_max < t->quorum)
        rc = sync_fence(l, fence, lease_end);
    if (rc == DLOCK_OK && dlock__now_ns() < lease_end) {
        if (fresh)
            l->fence = fence;
        l->holds = counted ? l->holds + 1 : 1;
        dlock__fanout_send_behind(l->client, kept, NULL, 0); /* timed out: closed */
        dlock__lock_granted(l, lease_end);
        dlock__err_clear(&l->err);
        return DLOCK_OK;
    }
    dlock__err_append(&l->err, "fencing token not confirmed by a majority in time");
    *retry = 1;
    return DLOCK_ENOQUORUM;
}

/* What the votes say when they are not a grant in time. */
static int refusal(dlock_lock *l, const dlock__tally *t, int *retry)
{
    if (t->yes >= t->quorum) {
        dlock__err_append(&l->err, "the lease ran out before a majority answered");
        *retry = 1;
        return l->client->n_nodes > 1 ? DLOCK_ENOQUORUM : DLOCK_EUNKNOWN;
    }
    if (t->no > 0 && t->errs <= t->n - t->quorum) {
        /* Some node said "held by another" and the failed or silent nodes
         * are a minority: a majority is there, the lock is busy or being
         * fought over. A missing vote is not a verdict; DLOCK_ENOQUORUM is
         * for when no majority can be reached at all (issue 15). */
        *retry = 1;
        return DLOCK_ENOTACQUIRED;
    }
    *retry = !t->fatal_err;
    return dlock__tally_failure_code(t);
}

/* Two URLs reach one server (its run_id, learned on connecting): its
 * votes counted twice. 1 with the handle's message set, else 0. */
static int same_server(dlock_lock *l, const dlock__tally *t)
{
    char same[300];
    if (!t->same_server && (l->client->n_nodes <= 1 ||
                            dlock__client_check_distinct(l->client, same, sizeof same) == DLOCK_OK))
        return 0;
    dlock__client_check_distinct(l->client, same, sizeof same);
    dlock__err_set(&l->err, "%s", same);
    return 1;
}

int dlock__attempt(dlock_lock *l, int *retry)
{
    int counted = l->kind->counted;
    int fresh = !counted || l->holds == 0;
    int64_t ttl = l->opts.ttl_ms;
    dlock__tally t;

    *retry = 0;
    int rc = settle_pending(l, retry);
    if (rc != DLOCK_OK || (rc = prepare_token(l, counted, fresh)) != DLOCK_OK)
        return rc;
    uint64_t seq_no = 0;
    if (counted) {
        seq_no = dlock__lock_next_op_no();
        l->touched = 1;
    }
    dlock__step_args a;
    dlock__req req;
    (void)dlock__step_req(l, DLOCK__STEP_ACQUIRE, &(dlock__step_in){.op_no = seq_no}, &a, &req);
    dlock__tally_init(&t, l->client, &l->err);
    dlock__err_clear(&l->err);

    /* Validity is counted from before the first byte is sent. */
    int64_t t0 = dlock__now_ns();
    int64_t lease_end = t0 + ttl * DLOCK__NS_PER_MS - dlock__drift_ns(l->client, ttl);
    /* Decided at a majority, the attempt still listens a short grace for
     * the other nodes: a node whose first answer is NOSCRIPT (restarted,
     * SCRIPT FLUSH) then gets the body, instead of the lock running on a
     * bare majority from the start. */
    dlock__fanout_opts fo = {.io_timeout_ms = dlock__node_timeout_ms(l->client, ttl),
                             .deadline_ns = lease_end, .grace_ms = DLOCK__DECIDED_GRACE_MS};
    dlock__conn *kept[DLOCK__MAX_NODES] = {0};
    int frc;
    if (dlock__first_try_is_raw(l)) {
        frc = dlock__first_try_send(l, &t, &fo, kept);
    } else {
        frc = dlock__fanout_attempt(l->client, &req, 1, &fo, l->cancel_fd[0], kept,
                                    dlock__kind_step(l->kind, DLOCK__STEP_ACQUIRE)->decode, &t);
    }
    if (frc == DLOCK_ECANCELED) {
        cancel_behind(l, kept, seq_no, &t, 1);
        return DLOCK_ECANCELED;
    }
    if (frc != DLOCK_OK) {
        dlock__err_set(&l->err, "out of memory");
        return DLOCK_ENOMEM;
    }
    l->holder_ttl_ms = t.min_pttl;
    l->look_ms = t.min_look;
    /* A split vote: this attempt won some nodes and no other owner was
     * seen on a majority, so nobody may hold the lock and nobody will
     * publish a release; the waiter retries after a short random backoff
     * rather than the holder's TTL. */
    l->split_vote = t.yes > 0 && dlock__tally_max_same_holder(&t) < t.quorum;

    if (same_server(l, &t)) {
        /* Nothing here is a grant; undo all. */
        rc = DLOCK_EINVAL;
        for (size_t i = 0; i < t.n; i++)
            t.maybe_ours[i] = 1;
    } else if (t.yes >= t.quorum && dlock__now_ns() < lease_end) {
        rc = take_grant(l, &t, fresh, lease_end, kept, retry);
        if (rc == DLOCK_OK)
            return DLOCK_OK;
        fresh = fresh || (counted && t.count == 1);
    } else {
        rc = refusal(l, &t, retry);
    }

    undo_attempt(l, &t, seq_no, fresh, kept);
    if (rc == DLOCK_ENOTACQUIRED) {
        if (t.min_pttl >= 0)
            dlock__err_set(&l->err, "\"%s\" is held by another owner (ttl %.1fs)", l->name,
                           (double)t.min_pttl / 1000.0);
        else
            dlock__err_set(&l->err, "\"%s\" is held by another owner", l->name);
    }
    return rc;
}
