/* SPDX-License-Identifier: BSD-3-Clause */
/* Fair mode (fair.h): Redis's part of the engine's wait for a queued kind
 * (src/engine/acquire.c). A wait begins by settling what the handle's
 * last one left and taking one token for its whole length, its place in
 * line; each try is one fair_acquire.lua call, a look; between looks the
 * engine sleeps until the release script hands the lock to our token
 * (the message may be enough: dlock__fair_handed), a release message, the
 * holder's expiry, our liveness refresh, or the deadline; a waiter that
 * gives up leaves the line, and that leave may find the lock handed to
 * it. Every exchange is a chain of fan-outs on the request's loop, each
 * step started from the one before's completion (the attempt's pattern,
 * attempt.h): nothing here blocks. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "client.h"
#include "clock.h"
#include "fair.h"
#include "fanout.h"
#include "fanout_run.h"
#include "handle.h"
#include "kind_steps.h"
#include "kinds.h"
#include "quorum.h"
#include "release.h"
#include "watchdog.h"

/* One fair request in flight (the engine's begin, try or leave, or a
 * handle's cleanup): one fan-out at a time on loop. Allocated per
 * request and freed when it answers: it holds a fan-out's slots. */
typedef struct fair_req {
    dlock_lock *l;
    dlock__loop *loop;
    dlock__op *op; /* the engine's request it answers; NULL: a chain's cleanup */
    int rc;        /* the last step's code */
    int starting;  /* inside the start: an answer waits for the loop's next turn */
    /* a fair script's call (fair_call) */
    int release_behind;
    int64_t pttl, t_sent;
    uint64_t fence;
    int joined;
    int delayed; /* refused by a lock-delay only (lib/delay.lua) */
    dlock__step_args a;
    dlock__req req;
    dlock__fanout_opts fo;
    dlock__tally t;
    dlock__release_run rel;
    dlock__conn *kept[DLOCK__MAX_NODES];
    dlock__errbuf keep; /* a cleanup keeps the caller's message */
    void (*then)(struct fair_req *q);  /* after a call */
    void (*after)(struct fair_req *q); /* after a cleanup */
    void (*cleaned)(void *arg);        /* dlock__fair_cleanup_start's */
    void *cleaned_arg;
    dlock__timer defer;                /* an answer reached inside the start */
    dlock__fan fan;
} fair_req;

#define REQ_OF(f) DLOCK__OWNER(f, fair_req, fan)

static fair_req *req_new(dlock_lock *l, dlock__op *op)
{
    fair_req *q = dlock__malloc(sizeof *q);
    if (!q) {
        dlock__err_set(&l->err, "out of memory");
        return NULL;
    }
    memset(q, 0, offsetof(fair_req, fan)); /* the fan's run sets itself up */
    q->l = l;
    q->op = op;
    q->loop = op ? op->loop : NULL;
    return q;
}

static void answer_now(fair_req *q)
{
    dlock__op *op = q->op;
    dlock__free(q);
    dlock__op_complete(op);
}

static void answer_later(dlock__timer *t)
{
    answer_now(DLOCK__OWNER(t, fair_req, defer));
}

/* The engine's request is answered with op->v filled: now, or from the
 * loop's next turn when the answer came inside the start (which then
 * still sees q). */
static void answer(fair_req *q)
{
    if (!q->starting) {
        answer_now(q);
        return;
    }
    q->defer.fire = answer_later;
    dlock__defer(q->loop, &q->defer);
}

/* What a fair call the caller gave up on may have done (joined the line,
 * been handed the lock, confirmed a hand-over) is undone behind it, on the
 * same connections: leave the line (with_leave) and release by our token,
 * which hands the lock on if it is ours. Written at once, never waited
 * for: the node runs it right after the call (issue 22 item 8). */
static void undo_behind(dlock_lock *l, dlock__conn **kept, int with_leave)
{
    dlock__step_args la, ra;
    dlock__req undo[2];
    dlock__step_in in = {0};
    (void)dlock__step_req(l, DLOCK__STEP_RELEASE, &in, &ra, &undo[1]); /* allocates nothing */
    /* Out of memory for the leave: the release alone (it hands the lock
     * on if it was ours; the line drops a waiter whose liveness lapses). */
    if (with_leave && dlock__step_req(l, DLOCK__STEP_LEAVE, &in, &la, &undo[0]) != DLOCK_OK)
        with_leave = 0;
    dlock__fanout_send_behind(l->client, kept, with_leave ? undo : undo + 1, with_leave ? 2 : 1);
    if (with_leave)
        dlock__step_args_free(&la);
}

/* A fair script's call is over: q->rc says how. "Held": q->fence;
 * refused: q->pttl, and q->joined whether the call put us in the line. */
static void called(dlock__fan *f)
{
    fair_req *q = REQ_OF(f);
    dlock_lock *l = q->l;
    dlock__tally *t = &q->t;
    dlock__step_args_free(&q->a);
    if (f->rc != DLOCK_ECANCELED && q->release_behind)
        undo_behind(l, q->kept, 0); /* the nodes that timed out */
    if (f->rc == DLOCK_ECANCELED) {
        /* Cancelled in flight (a look, or a cleanup's leave). */
        undo_behind(l, q->kept, 1);
        dlock__lock_take_cancel(l);
        dlock__err_set(&l->err, "cancelled while waiting in line for \"%s\"", l->name);
        q->rc = DLOCK_ECANCELED;
    } else if (f->rc != DLOCK_OK) {
        q->rc = f->rc;
    } else if (t->yes) {
        q->fence = t->max_fence;
        q->rc = DLOCK_OK;
    } else if (t->no) {
        q->pttl = t->min_pttl;
        q->joined = t->joined;
        q->delayed = t->delayed == t->no;
        q->rc = DLOCK_ENOTACQUIRED;
    } else {
        q->rc = dlock__tally_failure_code(t);
    }
    q->then(q);
}

/* Start one call of a fair script (the step) on q's loop; then(q)
 * follows. With release_behind, a node that does not answer within
 * timeout_ms gets the release by our token queued behind the call (a
 * leave after a cancel: the leave confirms a hand-over, which must not
 * stay ours). A cancel_fd (-1: none) that turns readable stops it, the
 * leave and the release then sent behind. */
static void fair_call(fair_req *q, dlock__step_id step, const char *live_ttl, int64_t timeout_ms,
                      int cancel_fd, int release_behind, void (*then)(fair_req *q))
{
    dlock_lock *l = q->l;
    q->then = then;
    q->release_behind = release_behind;
    q->pttl = -1;
    q->joined = 0;
    q->delayed = 0;
    if (dlock__step_req(l, step, &(dlock__step_in){.live_ttl = live_ttl}, &q->a, &q->req) !=
        DLOCK_OK) {
        q->rc = DLOCK_ENOMEM;
        then(q);
        return;
    }
    q->fo = (dlock__fanout_opts){.io_timeout_ms = timeout_ms, .deadline_ns = INT64_MAX};
    /* The fair scripts answer in the acquire shape (replies.h). */
    dlock__tally_init(&q->t, l->client, &l->err);
    dlock__err_clear(&l->err);
    memset(q->kept, 0, sizeof q->kept);
    dlock__fan_init(&q->fan, l->client, &q->req, 1, &q->fo,
                    dlock__kind_step(l->kind, step)->decode, &q->t);
    q->fan.cancel_fd = cancel_fd;
    q->fan.kept = q->kept;
    q->fan.keep_timed_out = release_behind;
    q->t_sent = dlock__now_ns();
    dlock__fan_start(&q->fan, q->loop, called);
}

/* ---- the cleanup by token ------------------------------------------------ */

/* The cleanup is over (q->rc): still pending while the node has not
 * answered it; the caller's message is back. */
static void cleaned(fair_req *q)
{
    dlock_lock *l = q->l;
    dlock__err_free(&l->err);
    l->err = q->keep;
    if (q->rc == DLOCK_ECANCELED) {
        l->fair_cleanup_pending = 1;
    } else {
        /* Out of memory, nothing was sent: still owed. */
        l->fair_cleanup_pending = q->rc == DLOCK_EUNKNOWN || q->rc == DLOCK_EIO ||
                                  q->rc == DLOCK_EBUSY || q->rc == DLOCK_ENOMEM;
        if (!l->fair_cleanup_pending)
            q->rc = DLOCK_OK;
    }
    q->after(q);
}

static void cleanup_released(dlock__fan *f)
{
    fair_req *q = REQ_OF(f);
    q->rc = q->t.errs ? q->t.all_err : DLOCK_OK;
    cleaned(q);
}

/* The leave answered: if the lock was ours (handed to us, or the leave
 * confirmed it), release it, which hands it to the next live waiter. */
static void cleanup_left(fair_req *q)
{
    dlock_lock *l = q->l;
    if (q->rc != DLOCK_OK) {
        if (q->rc == DLOCK_ENOTACQUIRED)
            q->rc = DLOCK_OK; /* not in line, not ours: nothing left */
        cleaned(q);
        return;
    }
    dlock__release_prepare(l, NULL, l->client->opts.io_timeout_ms, 1, &q->rel, &q->t);
    dlock__release_send(l, &q->rel, &q->t, &q->fan, q->loop, cleanup_released);
}

/* An earlier call's outcome is unknown, so our token may be in the line
 * or hold the lock for a whole TTL while the next waiter waits: leave the
 * line by it and, if the lock is ours, release it. then(q) follows with
 * q->rc: DLOCK_OK once done; while the node has not answered, the code
 * that says why (the cleanup stays pending: the handle's next acquire or
 * free tries again); DLOCK_ECANCELED if cancel_fd (-1: none) stopped it,
 * the leave and release then sent behind. */
static void cleanup_start(fair_req *q, int cancel_fd, void (*then)(fair_req *q))
{
    dlock_lock *l = q->l;
    q->keep = l->err; /* the caller's message stays */
    l->err = (dlock__errbuf){0};
    q->after = then;
    fair_call(q, DLOCK__STEP_LEAVE, NULL, l->client->opts.io_timeout_ms, cancel_fd, 0,
              cleanup_left);
}

/* A cleanup for a chain of the handle's (tidy.c): its own request. */
static void cleanup_over(fair_req *q)
{
    void (*then)(void *arg) = q->cleaned;
    void *arg = q->cleaned_arg;
    dlock__free(q);
    then(arg);
}

int dlock__fair_cleanup_start(dlock_lock *l, dlock__loop *loop, void (*then)(void *arg),
                              void *arg)
{
    fair_req *q = req_new(l, NULL);
    if (!q)
        return DLOCK_ENOMEM; /* still pending */
    q->loop = loop;
    q->cleaned = then;
    q->cleaned_arg = arg;
    cleanup_start(q, -1, cleanup_over);
    return DLOCK_OK;
}

/* ---- the engine's begin ---------------------------------------------------- */

static void begin_take_token(fair_req *q)
{
    dlock_lock *l = q->l;
    /* One token for the whole wait: it is our place in the line. */
    int rc = dlock__lock_new_token(l);
    if (rc != DLOCK_OK) {
        q->op->v.code = rc;
        answer(q);
        return;
    }
    /* Refresh our place often enough that the liveness key (3 refreshes
     * long) never lapses while we wait. A hand-over gives us a claim lease
     * of the rest of that key's life plus one refresh, which the full TTL
     * replaces only once we are seen alive (dlock__fair_handed, or the next
     * fair_acquire.lua call), so a waiter that died lets the line go on
     * after at most 4 refresh periods (docs/waiting.md). */
    l->fair.refresh_ms = DLOCK__MAX(50, DLOCK__MIN(1000, l->opts.ttl_ms / 4));
    snprintf(l->fair.live_ttl, sizeof l->fair.live_ttl, "%" PRId64,
             l->try_once ? 0 : 3 * l->fair.refresh_ms);
    /* When the last look was sent; it counts (dlock__fair_handed) only while
     * every look so far found us in line where the one before put us. */
    l->fair.t_look = 0;
    l->fair.on_message = 1;
    l->fair.in_line = 0;
    q->op->v.code = DLOCK_OK;
    answer(q);
}

/* As in an attempt: the old token's release of unknown outcome again,
 * before the token changes (one resend: fair is not a counted kind). */
static void begin_resent(dlock__fan *f)
{
    fair_req *q = REQ_OF(f);
    dlock_lock *l = q->l;
    dlock__note_release_pending(l, &q->t, q->rel.mask);
    if (l->cancel_fd[0] >= 0 && dlock__lock_use_cancel(l)) { /* still pending */
        dlock__err_set(&l->err, "cancelled while an earlier release of \"%s\" was resent",
                       l->name);
        q->op->v.code = DLOCK_ECANCELED;
        answer(q);
        return;
    }
    l->rel_pending = 0; /* unanswered still: the key ends with its TTL */
    begin_take_token(q);
}

static void begin_resend(fair_req *q)
{
    dlock_lock *l = q->l;
    dlock__release_resend(l, &q->rel, &q->t, &q->fan, q->loop, l->client->opts.io_timeout_ms,
                          l->cancel_fd[0], begin_resent);
}

/* The cleanup of an earlier wait (cleanup_start) is over. A waiting
 * acquire rides out a node that is down or stalled, as its looks do
 * (issue 34 item 6): V_RETRY, and the engine asks again on its backoff
 * until the cleanup is answered, the deadline passes or it is cancelled. */
static void begin_cleaned(fair_req *q)
{
    dlock_lock *l = q->l;
    if (q->rc == DLOCK_ECANCELED) {
        dlock__err_set(&l->err, "cancelled while the cleanup of an earlier acquire of \"%s\" "
                       "was not answered", l->name);
        q->op->v.code = DLOCK_ECANCELED;
        answer(q);
    } else if (q->rc != DLOCK_OK) {
        dlock__err_set(&l->err, "an earlier acquire of \"%s\" has an unknown outcome and its "
                       "cleanup is not answered yet", l->name);
        q->op->v.code = DLOCK_EUNKNOWN;
        q->op->v.flags = DLOCK__V_RETRY;
        answer(q);
    } else if (l->rel_pending) {
        begin_resend(q);
    } else {
        begin_take_token(q);
    }
}

int dlock__fair_begin(dlock_lock *l, dlock__op *op)
{
    fair_req *q = req_new(l, op);
    if (!q)
        return DLOCK_ENOMEM;
    /* The old token may be in the line or hold the lock: it is cleaned
     * up by that token before a new one joins, or the line would hand the
     * lock to the old token. */
    q->starting = 1;
    l->fair.in_line = 0; /* the last wait's place is the cleanup's business */
    /* So is a hand-over to the last wait's token whose message that wait
     * did not take (it came with a cancel, or during its last look or
     * leave): left set, it would end each backoff sleep below at once. */
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    l->waiter.handed_over = 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    if (l->fair_cleanup_pending)
        cleanup_start(q, l->cancel_fd[0], begin_cleaned);
    else
        begin_cleaned(q);
    q->starting = 0; /* an answer is deferred: q is still there */
    return DLOCK_OK;
}

/* ---- the engine's try: one look ------------------------------------------- */

/* The hold is the handle's (a look or a leave found it ours, or its
 * message was enough): its lease runs until until_ns. */
static void hold_taken(dlock_lock *l, int64_t until_ns, uint64_t fence)
{
    dlock__lock_granted(l, until_ns);
    l->fence = fence;
    l->holds = 1;
    l->fair.in_line = 0;
    dlock__err_clear(&l->err);
}

/* A try-once whose look has an unknown outcome: clean up by our token now
 * rather than leave the next waiter a lock nobody holds for the whole TTL
 * (issue 15 item 7). */
static void looked(fair_req *q)
{
    dlock_lock *l = q->l;
    dlock__verdict *v = &q->op->v;
    int rc = q->rc;
    v->code = rc;
    if (rc == DLOCK_ECANCELED) {
        l->fair.in_line = 0; /* the leave went out behind the look */
        answer(q);
        return;
    }
    if (rc == DLOCK_OK) {
        /* Taken now, or a hand-over confirmed: either way the script set
         * the full TTL after t_sent. */
        hold_taken(l, q->t_sent + l->opts.ttl_ms * DLOCK__NS_PER_MS, q->fence);
        answer(q);
        return;
    }
    if (rc != DLOCK_ENOTACQUIRED || (q->joined && l->fair.t_look != 0))
        l->fair.on_message = 0; /* see dlock__fair_handed */
    l->fair.t_look = q->t_sent;
    l->holder_ttl_ms = q->pttl >= 0 ? q->pttl : -1;
    /* A node that is down, busy or silent may come back before the
     * deadline (a restart): ride it out like a default-mode waiter; the
     * next look joins the line again if the restart emptied it. Every
     * look that may have put us in line sleeps one refresh at most. */
    if (rc == DLOCK_ENOTACQUIRED || rc == DLOCK_EBUSY || rc == DLOCK_EUNKNOWN ||
        (rc == DLOCK_EIO && !l->try_once))
        v->flags = DLOCK__V_RETRY | DLOCK__V_QUEUED;
    v->holder_ttl_ms = l->holder_ttl_ms;
    v->look_ms = l->fair.refresh_ms;
    if (rc == DLOCK_ENOTACQUIRED && q->delayed) {
        dlock__err_set(&l->err, "\"%s\" is free but under a lock-delay", l->name);
    } else if (rc == DLOCK_ENOTACQUIRED) {
        dlock__err_set(&l->err, "\"%s\" is held by another owner", l->name);
        if (l->holder_ttl_ms >= 0)
            dlock__err_append(&l->err, "ttl %.1fs", (double)l->holder_ttl_ms / 1000.0);
    }
    if (rc == DLOCK_EUNKNOWN && l->try_once)
        cleanup_start(q, -1, answer);
    else
        answer(q);
}

int dlock__fair_try(dlock_lock *l, dlock__op *op)
{
    fair_req *q = req_new(l, op);
    if (!q)
        return DLOCK_ENOMEM;
    q->starting = 1;
    l->fair.in_line = !l->try_once;
    fair_call(q, DLOCK__STEP_ACQUIRE, l->fair.live_ttl, l->client->opts.io_timeout_ms,
              l->cancel_fd[0], 0, looked);
    q->starting = 0;
    return DLOCK_OK;
}

/* A hand-over message named our token: fair_release.lua set the lock to it
 * with a claim lease that ends one refresh period after our liveness key
 * would have, and that key was set to 3 refresh periods by our last look
 * that found us waiting (sent at t_look). So the lock is ours until at
 * least t_look + 4 refresh periods (less a ms for PTTL's rounding, and the
 * drift), without the confirming round trip. The watchdog sets the full
 * TTL a third of the way into what is left (engine.c, confirm_ms), unless
 * the holder lets go first.
 *
 * That holds only if the hand-over came after that look. A look after a
 * hand-over either finds the lock ours (and confirms it) or, the claim
 * having lapsed, puts us back in the line, which it says (joined): a
 * message read after such a look, or after a look with an unknown outcome,
 * may be the stale one, so on_message is 0 from then on. Then, with less
 * than half of the claim left, no watchdog thread, or no fencing token in
 * the message of a fenced lock, the engine looks (and confirms) instead. */
int dlock__fair_handed(dlock_lock *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    int handed = l->waiter.handed_over;
    uint64_t f = l->waiter.handed_fence;
    l->waiter.handed_over = 0; /* taken, or only a reason to look now */
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    int64_t t_look = l->fair.on_message ? l->fair.t_look : 0, refresh_ms = l->fair.refresh_ms;
    if (!handed || t_look == 0 || (l->fence_key && f == 0))
        return 0;
    int64_t claim_ms = 4 * refresh_ms - 1;
    int64_t until = t_look + claim_ms * DLOCK__NS_PER_MS - dlock__drift_ns(l->client, claim_ms);
    int64_t left_ms = (until - dlock__now_ns()) / DLOCK__NS_PER_MS;
    if (left_ms < 2 * refresh_ms || dlock__watchdog_start(l->client) != DLOCK_OK)
        return 0;
    hold_taken(l, until, f);
    l->confirm_ms = DLOCK__MAX(1, left_ms / 3);
    return 1;
}

/* ---- the engine's leave ---------------------------------------------------- */

/* The leave answered. A wait whose leave went unanswered may still have
 * been handed the lock: the release by our token went out behind it. A
 * cancelled one, or one a cancel cut, leaves the cleanup (by token:
 * harmless) to the handle's next acquire or free; a deadline's leave of
 * unknown outcome, or after a look of unknown outcome, cleans up now,
 * unless a cancel cuts that too. */
static void left(fair_req *q)
{
    dlock_lock *l = q->l;
    dlock__verdict *v = &q->op->v;
    int canceled = v->code == DLOCK_ECANCELED, given_up = v->code;
    int leave_unknown = q->rc == DLOCK_EUNKNOWN;
    l->fair.in_line = 0;
    if (q->rc == DLOCK_OK) {
        /* fair_leave.lua found the lock handed to us, and confirmed it. */
        hold_taken(l, q->t_sent + l->opts.ttl_ms * DLOCK__NS_PER_MS, q->fence);
        v->code = DLOCK_OK;
        answer(q);
        return;
    }
    dlock__err_set(&l->err, canceled ? "cancelled while waiting in line for \"%s\""
                                     : "\"%s\": gave up waiting in line", l->name);
    if ((canceled && leave_unknown) || q->rc == DLOCK_ECANCELED) {
        /* A cancel's leave that went unanswered, or a deadline's leave
         * that a cancel cut (the leave and the release went out behind
         * it): the handle's next acquire or free cleans up. */
        l->fair_cleanup_pending = 1;
        answer(q);
    } else if (given_up == DLOCK_EUNKNOWN || leave_unknown) {
        cleanup_start(q, l->cancel_fd[0], answer); /* a cancel cuts it: then still pending */
    } else {
        answer(q);
    }
}

int dlock__fair_leave(dlock_lock *l, int64_t timeout_ms, dlock__op *op)
{
    if (!l->fair.in_line)
        return DLOCK_ENOTHELD; /* no look went out: nothing to leave */
    fair_req *q = req_new(l, op);
    if (!q)
        return DLOCK_ENOMEM; /* our liveness key lapses, and the line drops us */
    /* A cancel must end the wait at once (issue 34 item 5): its leave
     * gets the engine's short timeout. A leave that goes unanswered, a
     * cancel's or a deadline's, may still run and confirm a hand-over
     * (for the whole TTL), so the release by our token is queued behind
     * it and the node hands the lock on right after. */
    q->starting = 1;
    int64_t leave_ms = DLOCK__MIN(timeout_ms, l->client->opts.io_timeout_ms);
    /* A deadline's leave gets an I/O timeout; a cancel during it ends it
     * at once, as one during the wait does (then the leave and the
     * release go out behind it, in called()). */
    fair_call(q, DLOCK__STEP_LEAVE, NULL, leave_ms,
              leave_ms > DLOCK__CANCEL_LEAVE_MS ? l->cancel_fd[0] : -1, 1, left);
    q->starting = 0;
    return DLOCK_OK;
}
