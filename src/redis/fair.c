/* SPDX-License-Identifier: BSD-3-Clause */
/* Fair mode (fair.h): one fair_acquire.lua call per look; between looks
 * the waiter sleeps until the release script hands the lock to its token
 * (the message is enough: see take_handed), a release message, the
 * holder's expiry, its liveness refresh, or the deadline. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "attempt.h"
#include "client.h"
#include "clock.h"
#include "fair.h"
#include "fanout.h"
#include "handle.h"
#include "kind_steps.h"
#include "kinds.h"
#include "observe.h"
#include "quorum.h"
#include "rand.h"
#include "release.h"
#include "wait.h"
#include "watchdog.h"

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

/* One call of a fair script. "Held": *out_pttl, and *out_joined (may be
 * NULL) says whether the call put us in the line. With release_behind, a
 * node that does not answer within timeout_ms gets the release by our
 * token queued behind the call (a leave after a cancel: the leave confirms
 * a hand-over, which must not stay ours). */
static int fair_call(dlock_lock *l, dlock__step_id step, const char *live_ttl,
                     int64_t timeout_ms, int cancel_fd, int release_behind, int64_t *out_pttl,
                     uint64_t *out_fence, int *out_joined)
{
    dlock__step_args a;
    dlock__req req;
    if (dlock__step_req(l, step, &(dlock__step_in){.live_ttl = live_ttl}, &a, &req) != DLOCK_OK)
        return DLOCK_ENOMEM;
    dlock__fanout_opts fo = {.io_timeout_ms = timeout_ms, .deadline_ns = INT64_MAX};
    /* The fair scripts answer in the acquire shape (replies.h). */
    dlock__tally t;
    dlock__tally_init(&t, l->client, &l->err);
    dlock__err_clear(&l->err);
    dlock__conn *kept[DLOCK__MAX_NODES] = {0};
    dlock__on_reply decode = dlock__kind_step(l->kind, step)->decode;
    int rc = release_behind ? dlock__fanout_attempt(l->client, &req, 1, &fo, cancel_fd, kept,
                                                    decode, &t)
                            : dlock__fanout_cancellable(l->client, &req, 1, &fo, cancel_fd, kept,
                                                        decode, &t);
    if (rc != DLOCK_ECANCELED && release_behind)
        undo_behind(l, kept, 0); /* the nodes that timed out */
    if (rc == DLOCK_ECANCELED) {
        /* Cancelled in flight (a look, or a leave). */
        undo_behind(l, kept, 1);
        dlock__lock_take_cancel(l);
        dlock__step_args_free(&a);
        dlock__err_set(&l->err, "cancelled while waiting in line for \"%s\"", l->name);
        return DLOCK_ECANCELED;
    }
    dlock__step_args_free(&a);
    if (rc != DLOCK_OK)
        return rc;
    if (t.yes) {
        *out_fence = t.max_fence;
        return DLOCK_OK;
    }
    if (t.no) {
        *out_pttl = t.min_pttl;
        if (out_joined)
            *out_joined = t.joined;
        return DLOCK_ENOTACQUIRED;
    }
    return dlock__tally_failure_code(&t);
}

int dlock__fair_cleanup(dlock_lock *l, int cancel_fd)
{
    /* The script may have run, leaving our token in the line or in the
     * lock key for the full TTL while the next waiter waits. Releasing it
     * hands it to the next live waiter. The handle tries again on its next
     * acquire or free while the node has not answered. */
    int64_t dummy;
    uint64_t fence;
    dlock__errbuf keep = l->err; /* the caller's message stays */
    l->err = (dlock__errbuf){0};
    int rc = fair_call(l, DLOCK__STEP_LEAVE, NULL, l->client->opts.io_timeout_ms, cancel_fd, 0,
                       &dummy, &fence, NULL);
    if (rc == DLOCK_ECANCELED) { /* the leave and release went out behind */
        dlock__err_free(&l->err);
        l->err = keep;
        l->fair_cleanup_pending = 1;
        return DLOCK_ECANCELED;
    }
    if (rc == DLOCK_OK) {
        dlock__tally t;
        dlock__send_release(l, NULL, l->client->opts.io_timeout_ms, 1, &t);
        rc = t.errs ? t.all_err : DLOCK_OK;
    }
    dlock__err_free(&l->err);
    l->err = keep;
    l->fair_cleanup_pending = rc == DLOCK_EUNKNOWN || rc == DLOCK_EIO || rc == DLOCK_EBUSY;
    return l->fair_cleanup_pending ? rc : DLOCK_OK;
}

/* An earlier call's outcome is unknown, so our old token may be in the
 * line or hold the lock: it is cleaned up by that token before a new one
 * joins, or the line would hand the lock to the old token. A try gives up
 * at once; a waiting acquire rides out a node that is down or stalled, as
 * its looks do (issue 34 item 6): the cleanup is retried on the backoff
 * until it is answered, the deadline passes or the wait is cancelled. */
static int settle_cleanup(dlock_lock *l, int64_t wait_ms, int64_t deadline)
{
    unsigned attempts = 0;
    int rc;
    while (l->fair_cleanup_pending &&
           (rc = dlock__fair_cleanup(l, wait_ms ? l->cancel_fd[0] : -1)) != DLOCK_OK) {
        int64_t now = dlock__now_ns();
        int canceled = rc == DLOCK_ECANCELED;
        if (!canceled && wait_ms != 0 && now < deadline) {
            int64_t sleep_ms =
                dlock__backoff_ms(attempts++, l->opts.retry_min_ms, l->opts.retry_max_ms);
            canceled = dlock__wait_sleep_until(l, dlock__wait_woken(l),
                                               DLOCK__MIN(deadline, now + sleep_ms * DLOCK__NS_PER_MS));
            if (!canceled)
                continue;
        }
        if (canceled) {
            dlock__err_set(&l->err, "cancelled while the cleanup of an earlier acquire of \"%s\" "
                           "was not answered", l->name);
            return DLOCK_ECANCELED;
        }
        dlock__err_set(&l->err, "an earlier acquire of \"%s\" has an unknown outcome and its "
                       "cleanup is not answered yet", l->name);
        return DLOCK_EUNKNOWN;
    }
    return DLOCK_OK;
}

static void clear_handed_over(dlock_lock *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    l->waiter.handed_over = 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
}

/* A hand-over message named our token: fair_release.lua set the lock to it
 * with a claim lease that ends one refresh period after our liveness key
 * would have, and that key was set to 3 refresh periods by our last look
 * that found us waiting (sent at t_look). So the lock is ours until at
 * least t_look + 4 refresh periods (less a ms for PTTL's rounding, and the
 * drift), without the confirming round trip. The watchdog sets the full
 * TTL a third of the way into what is left (lock.c, confirm_ms), unless
 * the holder lets go first.
 *
 * That holds only if the hand-over came after that look. A look after a
 * hand-over either finds the lock ours (and confirms it) or, the claim
 * having lapsed, puts us back in the line, which it says (joined): a
 * message read after such a look, or after a look with an unknown outcome,
 * may be the stale one, so the caller passes t_look = 0 from then on.
 * With t_look = 0, less than half of the claim left, no watchdog thread,
 * or no fencing token in the message of a fenced lock, the caller confirms
 * with a call as before. */
static int take_handed(dlock_lock *l, int64_t t_look, int64_t refresh_ms, uint64_t *fence)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    int handed = l->waiter.handed_over;
    uint64_t f = l->waiter.handed_fence;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    if (!handed || t_look == 0 || (l->fence_key && f == 0))
        return 0;
    int64_t claim_ms = 4 * refresh_ms - 1;
    int64_t until = t_look + claim_ms * DLOCK__NS_PER_MS - dlock__drift_ns(l->client, claim_ms);
    int64_t left_ms = (until - dlock__now_ns()) / DLOCK__NS_PER_MS;
    if (left_ms < 2 * refresh_ms || dlock__watchdog_start(l->client) != DLOCK_OK)
        return 0;
    dlock__lock_granted(l, until);
    l->confirm_ms = DLOCK__MAX(1, left_ms / 3);
    *fence = f;
    return 1;
}

/* Did a message (a release's wake-up, a hand-over) end the sleep that
 * began with the waiter record's count at woken? */
static int pushed(dlock_lock *l, unsigned woken)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    int p = l->waiter.handed_over || l->waiter.woken != woken;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return p;
}

/* As in an attempt: the old token's release of unknown outcome again,
 * before the token changes. DLOCK_OK or DLOCK_ECANCELED. */
static int resend_release(dlock_lock *l, int64_t wait_ms)
{
    if (!l->rel_pending)
        return DLOCK_OK;
    dlock__flush_release(l, l->client->opts.io_timeout_ms, wait_ms ? l->cancel_fd[0] : -1);
    if (wait_ms && dlock__lock_use_cancel(l)) { /* still pending, as in an attempt */
        dlock__err_set(&l->err, "cancelled while an earlier release of \"%s\" was resent",
                       l->name);
        return DLOCK_ECANCELED;
    }
    l->rel_pending = 0;
    return DLOCK_OK;
}

/* Deadline or cancel: leave the line, unless it was handed to us (then
 * fair_leave.lua confirms the claim). A cancel must end the wait at once
 * (issue 34 item 5): the leave gets CANCEL_LEAVE_MS, as the default
 * mode's. One that goes unanswered may still run and confirm a hand-over,
 * so the release by our token is queued behind it and the node hands the
 * lock on right after; the handle's next acquire or free does it again
 * (by token: harmless). rc: the last look's code. Returns the acquire's;
 * *leave_unknown: the leave's outcome is unknown. */
static int leave_line(dlock_lock *l, int rc, int canceled, uint64_t *fence, int *leave_unknown)
{
    int64_t dummy, t_leave = dlock__now_ns();
    int lrc = fair_call(l, DLOCK__STEP_LEAVE, NULL,
                        canceled ? DLOCK__MIN(DLOCK__CANCEL_LEAVE_MS,
                                              l->client->opts.io_timeout_ms)
                                 : l->client->opts.io_timeout_ms,
                        -1, canceled, &dummy, fence, NULL);
    *leave_unknown = lrc == DLOCK_EUNKNOWN;
    if (lrc == DLOCK_OK) {
        dlock__lock_granted(l, t_leave + l->opts.ttl_ms * DLOCK__NS_PER_MS);
        return DLOCK_OK;
    }
    dlock__err_set(&l->err, canceled ? "cancelled while waiting in line for \"%s\""
                                     : "\"%s\": gave up waiting in line", l->name);
    return canceled ? DLOCK_ECANCELED : (rc == DLOCK_ENOTACQUIRED ? DLOCK_ETIMEDOUT : rc);
}

/* The end of a fair acquire: what an unknown outcome owes, and the hold
 * or the message. */
static int fair_end(dlock_lock *l, int rc, uint64_t fence, int deferred, int leave_unknown)
{
    if (deferred)
        l->fair_cleanup_pending = 1;
    else if (rc == DLOCK_EUNKNOWN || (rc != DLOCK_OK && leave_unknown)) {
        /* The outcome of the last call is unknown: clean up by our token
         * now rather than leave the next waiter a lock nobody holds for
         * the whole TTL (issue 15 item 7). */
        dlock__fair_cleanup(l, -1);
    }
    if (rc == DLOCK_OK) {
        l->fence = fence;
        l->holds = 1;
        dlock__err_clear(&l->err);
    } else if (rc == DLOCK_ENOTACQUIRED) {
        dlock__err_set(&l->err, "\"%s\" is held by another owner", l->name);
        if (l->holder_ttl_ms >= 0)
            dlock__err_append(&l->err, "ttl %.1fs", (double)l->holder_ttl_ms / 1000.0);
    }
    return rc;
}

int dlock__fair_acquire(dlock_lock *l, int64_t wait_ms, int64_t deadline)
{
    int rc = settle_cleanup(l, wait_ms, deadline);
    if (rc != DLOCK_OK || (rc = resend_release(l, wait_ms)) != DLOCK_OK)
        return rc;
    /* One token for the whole wait: it is our place in the line. */
    rc = dlock__lock_new_token(l);
    if (rc != DLOCK_OK)
        return rc;
    clear_handed_over(l);

    /* Refresh our place often enough that the liveness key (3 refreshes
     * long) never lapses while we wait. A hand-over gives us a claim lease
     * of the rest of that key's life plus one refresh, which the full TTL
     * replaces only once we are seen alive (take_handed, or the next
     * fair_acquire.lua call), so a waiter that died lets the line go on
     * after at most 4 refresh periods (docs/waiting.md). */
    int64_t refresh_ms = DLOCK__MAX(50, DLOCK__MIN(1000, l->opts.ttl_ms / 4));
    char live_ttl[24];
    snprintf(live_ttl, sizeof live_ttl, "%" PRId64, wait_ms == 0 ? 0 : 3 * refresh_ms);
    int watching = 0;
    if (wait_ms != 0 && l->client->opts.wakeups)
        watching = dlock__wait_watch(l, 1) == DLOCK_OK;

    uint64_t fence = 0;
    int leave_unknown = 0, deferred = 0;
    /* When the last look was sent; it counts (take_handed) only while
     * every look so far found us in line where the one before put us. */
    int64_t t_look = 0;
    int on_message = 1; /* a hand-over may be taken on its message */
    int slept_out = 0;  /* the last sleep ended with no message */
    for (;;) {
        unsigned woken = dlock__wait_woken(l);
        int64_t t_sent = dlock__now_ns(), pttl = -1;
        int joined = 0;
        l->obs_attempts++;
        rc = fair_call(l, DLOCK__STEP_ACQUIRE, live_ttl, l->client->opts.io_timeout_ms,
                       wait_ms ? l->cancel_fd[0] : -1, 0, &pttl, &fence, &joined);
        if (rc == DLOCK_OK) {
            /* Taken now, or a hand-over confirmed: either way the script
             * set the full TTL after t_sent. */
            dlock__lock_granted(l, t_sent + l->opts.ttl_ms * DLOCK__NS_PER_MS);
            if (slept_out)
                dlock__obs_wakeup(l, 0); /* no message: this look found it ours */
            break;
        }
        if (rc != DLOCK_ENOTACQUIRED || (joined && t_look != 0))
            on_message = 0; /* see take_handed */
        t_look = t_sent;
        /* A node that is down, busy or silent may come back before the
         * deadline (a restart): ride it out like a default-mode waiter;
         * the next look joins the line again if the restart emptied it. */
        if (rc != DLOCK_ENOTACQUIRED && rc != DLOCK_EBUSY && rc != DLOCK_EUNKNOWN &&
            !(rc == DLOCK_EIO && wait_ms != 0))
            break;
        l->holder_ttl_ms = pttl >= 0 ? pttl : -1;
        int64_t now = dlock__now_ns();
        int canceled = 0;
        if (wait_ms != 0 && now < deadline) {
            int64_t sleep_ms = refresh_ms;
            if (pttl >= 0)
                sleep_ms = DLOCK__MIN(sleep_ms, pttl + 1);
            canceled = dlock__wait_sleep_until(
                l, woken, DLOCK__MIN(deadline, now + sleep_ms * DLOCK__NS_PER_MS));
            if (!canceled) {
                slept_out = !pushed(l, woken);
                if (!slept_out)
                    dlock__obs_wakeup(l, 1);
            }
            if (!canceled && take_handed(l, on_message ? t_look : 0, refresh_ms, &fence)) {
                rc = DLOCK_OK;
                break;
            }
            /* Else a hand-over message only makes us look (and confirm) now. */
            clear_handed_over(l);
            if (!canceled && dlock__now_ns() < deadline)
                continue;
        }
        if (wait_ms == 0)
            break;
        rc = leave_line(l, rc, canceled, &fence, &leave_unknown);
        deferred = canceled && leave_unknown;
        break;
    }
    if (watching)
        dlock__wait_unwatch(l);
    return fair_end(l, rc, fence, deferred, leave_unknown);
}
