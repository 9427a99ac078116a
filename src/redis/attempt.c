/* SPDX-License-Identifier: BSD-3-Clause */
/* One acquire attempt, and its undo (attempt.h): the chain's steps after
 * the settling (attempt_settle.c).
 *
 * One code path serves one node and N nodes: the attempt is a fan-out
 * (fanout_run.c) of the kind's acquire script to all nodes, and the
 * outcome is decided by majority (a majority of one is that node). */
#include <string.h>

#include "attempt.h"
#include "client.h"
#include "clock.h"
#include "fanout.h"
#include "first_try.h"
#include "handle.h"
#include "loop_poll.h"
#include "kind_steps.h"
#include "kinds.h"
#include "quorum.h"
#include "release.h"
#include "replies.h"

typedef dlock__attempt_req att;
#define ATT_OF(f) DLOCK__OWNER(f, att, fan)

static int64_t node_timeout_ms(const dlock_lock *l)
{
    return dlock__node_timeout_ms(l->client, l->opts.ttl_ms);
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
    dlock__req req = dlock__attempt_undo_req(l, seq_no, &a);
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

static void ended_later(dlock__timer *t)
{
    att *r = DLOCK__OWNER(t, att, defer);
    r->done(r);
}

void dlock__attempt_end(att *r, int rc)
{
    r->rc = rc;
    if (r->starting) { /* never inside the start */
        r->defer.fire = ended_later;
        dlock__defer(r->loop, &r->defer);
        return;
    }
    r->done(r);
}

/* The undo is over (or there was none): a node that timed out or was
 * cut short by the cancel gets its undo queued behind the attempt. */
static void undone(att *r)
{
    dlock_lock *l = r->l;
    const dlock__tally *t = &r->t;
    if (r->behind)
        cancel_behind(l, r->kept, r->seq_no, &r->t, 0);
    if (r->rc == DLOCK_ENOTACQUIRED && l->delayed) {
        dlock__err_set(&l->err, "\"%s\" is free but under a lock-delay (%.1fs left)", l->name,
                       (double)t->min_pttl / 1000.0);
    } else if (r->rc == DLOCK_ENOTACQUIRED) {
        if (t->min_pttl >= 0)
            dlock__err_set(&l->err, "\"%s\" is held by another owner (ttl %.1fs)", l->name,
                           (double)t->min_pttl / 1000.0);
        else
            dlock__err_set(&l->err, "\"%s\" is held by another owner", l->name);
    }
    dlock__attempt_end(r, r->rc);
}

static void release_undone(dlock__fan *f)
{
    undone(ATT_OF(f));
}

/* Undo what this attempt may have taken: nodes that granted, answered too
 * late to count, or whose answer was lost. Nodes that were never heard
 * from (the fan-out stopped at a decision) may hold it too. rc: the
 * attempt's verdict, once undone. */
static void undo_attempt(att *r, int rc)
{
    dlock_lock *l = r->l;
    const dlock__tally *t = &r->t;
    int any = 0;
    r->rc = rc;
    r->behind = 0;
    memset(r->mask, 0, sizeof r->mask);
    for (size_t i = 0; i < t->n; i++) {
        r->behind |= r->kept[i] != NULL; /* timed out: its undo goes behind, in undone() */
        r->mask[i] = (t->maybe_ours[i] || t->vote[i] == DLOCK__V_NONE) && !r->kept[i];
        any |= r->mask[i];
    }
    if (any && r->counted) {
        /* Re-entries too: an unknown re-entry may have raised the count.
         * The undo names this attempt, so it takes back this attempt's
         * hold at most, never the one another handle of the same owner
         * (same owner id) holds. */
        l->undo_seq = r->seq_no;
        memcpy(l->undo_nodes, r->mask, sizeof l->undo_nodes);
        l->in_doubt = 1;
        dlock__attempt_send_undo(r, node_timeout_ms(l), -1, undone);
    } else if (any && r->fresh) {
        dlock__release_prepare(l, r->mask, node_timeout_ms(l), 1, &r->rel, &r->t2);
        dlock__release_send(l, &r->rel, &r->t2, &r->fan, r->loop, release_undone);
    } else {
        undone(r);
    }
}

/* The grant is confirmed (rc DLOCK_OK) or not: the hold is the handle's
 * if the lease has not ended meanwhile. */
static void granted(att *r, int rc)
{
    dlock_lock *l = r->l;
    if (rc == DLOCK_OK && dlock__now_ns() < r->lease_end) {
        if (r->fresh) /* a reader's counter is a guard, not its fence */
            l->fence = l->kind->fenced ? r->t.max_fence : 0;
        l->holds = r->counted ? l->holds + 1 : 1;
        dlock__fanout_send_behind(l->client, r->kept, NULL, 0); /* timed out: closed */
        dlock__lock_granted(l, r->lease_end);
        dlock__err_clear(&l->err);
        dlock__attempt_end(r, DLOCK_OK);
        return;
    }
    dlock__err_append(&l->err, "fencing token not confirmed by a majority in time");
    r->retry = 1;
    undo_attempt(r, DLOCK_ENOQUORUM);
}

static void fence_synced(dlock__fan *f)
{
    att *r = ATT_OF(f);
    granted(r, r->t2.yes >= r->t2.quorum ? DLOCK_OK : DLOCK_ENOQUORUM);
}

/* A majority granted before the lease's end: make the hold the handle's,
 * unless the fence's write-back or the clock says otherwise. */
static void grant(att *r)
{
    dlock_lock *l = r->l;
    const dlock__tally *t = &r->t;
    /* A re-entry that found the key gone made a new hold (count 1): the
     * earlier holds ended with the lease, and this is a new grant with a
     * new fencing token. Unless a majority still had them: a minority
     * node that lost the key grants count 1 too, and whichever node
     * answers last must not decide (the holds would be dropped while the
     * others keep them). */
    if (r->counted && !r->fresh && t->count > 0 && t->held_before < t->quorum) {
        r->fresh = 1;
        l->holds = 0;
    }
    if (r->counted && t->count == 1 && !t->held_before && !l->undo_pending && !l->rel_pending)
        l->in_doubt = 0; /* a new key: none of our old operations is in it */
    /* The write-back only has to leave a majority with a counter >=
     * fence; when a majority returned fence itself (counters in step, the
     * usual case) that is already so, and the round trip is skipped
     * (docs/fencing.md). Redlock fencing: the counter is raised to fence
     * on a majority before the grant is reported, so every later
     * majority sees at least this value. A reader's grant raises the
     * counter too (kinds.h, guards), and syncs it alike: the guard status
     * shows for readers must be below every later writer's fence. */
    if (!(l->client->n_nodes > 1 && l->fence_key && r->fresh && t->at_max < t->quorum)) {
        granted(r, DLOCK_OK);
        return;
    }
    (void)dlock__step_req(l, DLOCK__STEP_FENCE_SYNC, &(dlock__step_in){.fence = t->max_fence},
                          &r->a, &r->req);
    r->fo = (dlock__fanout_opts){.io_timeout_ms = node_timeout_ms(l), .deadline_ns = r->lease_end};
    dlock__tally_init(&r->t2, l->client, &l->err);
    r->t2.max_fence = t->max_fence;
    dlock__fan_init(&r->fan, l->client, &r->req, 1, &r->fo, dlock__fence_cb, &r->t2);
    dlock__fan_start(&r->fan, r->loop, fence_synced);
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

/* The attempt's run is over: its votes decide. */
static void tried(dlock__fan *f)
{
    att *r = ATT_OF(f);
    dlock_lock *l = r->l;
    dlock__tally *t = &r->t;
    if (f->rc == DLOCK_ECANCELED) {
        cancel_behind(l, r->kept, r->seq_no, t, 1);
        dlock__attempt_end(r, DLOCK_ECANCELED);
        return;
    }
    l->holder_ttl_ms = t->min_pttl;
    l->look_ms = t->min_look;
    l->delayed = t->no > 0 && t->delayed == t->no;
    /* A split vote: this attempt won some nodes and no other owner was
     * seen on a majority, so nobody may hold the lock and nobody will
     * publish a release; the waiter retries after a short random backoff
     * rather than the holder's TTL. */
    l->split_vote = t->yes > 0 && dlock__tally_max_same_holder(t) < t->quorum;
    if (same_server(l, t)) {
        /* Nothing here is a grant; undo all. */
        for (size_t i = 0; i < t->n; i++)
            t->maybe_ours[i] = 1;
        undo_attempt(r, DLOCK_EINVAL);
    } else if (t->yes >= t->quorum && dlock__now_ns() < r->lease_end) {
        grant(r);
    } else {
        undo_attempt(r, refusal(l, t, &r->retry));
    }
}

void dlock__attempt_try(att *r)
{
    dlock_lock *l = r->l;
    int64_t ttl = l->opts.ttl_ms;
    int rc = prepare_token(l, r->counted, r->fresh);
    if (rc != DLOCK_OK) {
        dlock__attempt_end(r, rc);
        return;
    }
    if (r->counted) {
        r->seq_no = dlock__lock_next_op_no();
        l->touched = 1;
    }
    (void)dlock__step_req(l, DLOCK__STEP_ACQUIRE, &(dlock__step_in){.op_no = r->seq_no}, &r->a,
                          &r->req);
    dlock__tally_init(&r->t, l->client, &l->err);
    dlock__err_clear(&l->err);
    /* Validity is counted from before the first byte is sent. */
    int64_t t0 = dlock__now_ns();
    r->lease_end = t0 + ttl * DLOCK__NS_PER_MS - dlock__drift_ns(l->client, ttl);
    /* Decided at a majority, the attempt still listens a short grace for
     * the other nodes: a node whose first answer is NOSCRIPT (restarted,
     * SCRIPT FLUSH) then gets the body, instead of the lock running on a
     * bare majority from the start. */
    r->fo = (dlock__fanout_opts){.io_timeout_ms = dlock__node_timeout_ms(l->client, ttl),
                                 .deadline_ns = r->lease_end,
                                 .grace_ms = DLOCK__DECIDED_GRACE_MS};
    memset(r->kept, 0, sizeof r->kept);
    if (dlock__first_try_is_raw(l)) {
        dlock__first_try_prepare(l, &r->t, &r->raw);
        dlock__fan_init(&r->fan, l->client, r->raw.raw, r->raw.n, &r->fo, dlock__first_try_reply,
                        &r->raw.rt);
    } else {
        dlock__fan_init(&r->fan, l->client, &r->req, 1, &r->fo,
                        dlock__kind_step(l->kind, DLOCK__STEP_ACQUIRE)->decode, &r->t);
    }
    /* An attempt: a node that timed out is kept for its undo behind. */
    r->fan.cancel_fd = l->cancel_fd[0];
    r->fan.kept = r->kept;
    r->fan.keep_timed_out = 1;
    dlock__fan_start(&r->fan, r->loop, tried);
}

void dlock__attempt_start(att *r, dlock_lock *l, dlock__loop *loop, void (*done)(att *r))
{
    memset(r, 0, offsetof(att, t)); /* each step sets up its own records (attempt.h) */
    r->l = l;
    r->loop = loop;
    r->done = done;
    r->counted = l->kind->counted;
    r->fresh = !r->counted || l->holds == 0;
    r->starting = 1;
    dlock__attempt_settle(r);
    r->starting = 0;
}

typedef struct blocking_attempt {
    att r;
    int over;
} blocking_attempt;

static void blocking_done(att *r)
{
    DLOCK__OWNER(r, blocking_attempt, r)->over = 1;
}

static int blocking_over(void *arg)
{
    return ((blocking_attempt *)arg)->over;
}

int dlock__attempt(dlock_lock *l, int *retry)
{
    blocking_attempt b;
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    b.over = 0;
    dlock__attempt_start(&b.r, l, &lp.loop, blocking_done);
    dlock__loop_poll_run(&lp, blocking_over, &b, INT64_MAX);
    dlock__loop_poll_close(&lp);
    *retry = b.r.retry;
    return b.r.rc;
}
