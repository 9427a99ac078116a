/* SPDX-License-Identifier: BSD-3-Clause */
/* One lock's state machine (unlocked / held / lost), below the public
 * face: lock.c checks each verb's arguments and calls in here; a set of
 * names (set.c) drives its names through here too. Watchdog
 * registration, the lost path and cancel live here; every round trip goes
 * through the handle's backend (backend.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "engine.h"
#include "fsm.h"
#include "client.h"
#include "clock.h"
#include "error.h"
#include "handle.h"
#include "keys.h"
#include "kinds.h"
#include "observe.h"
#include "wakeup.h"
#include "watchdog.h"

/* The handle's renewal record hands the watchdog's rounds back here
 * (watchdog.h): only the engine changes the handle's state. A round
 * confirmed by a majority before the lease ran out moves the lease's end
 * to the round's start + its TTL - drift; not ours on more nodes than a
 * majority can spare, or no majority by the end, and it is lost. The same
 * for every backend (etcd: a majority of one, no drift). */
int dlock__engine_renew_settle(void *owner, const dlock__renew_votes *v)
{
    dlock_lock *l = owner;
    int64_t drift = l->backend->drift_ns(l, v->ttl_ms);
    int64_t now = dlock__now_ns();
    int lost = 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    if (l->state == DLOCK_STATE_HELD) {
        int64_t end = l->valid_until_ns == INT64_MIN ? INT64_MAX : l->valid_until_ns;
        if (v->yes >= v->quorum && now < end) {
            l->valid_until_ns = v->t0_ns + v->ttl_ms * DLOCK__NS_PER_MS - drift;
        } else if (v->no > v->n - v->quorum) {
            lost = DLOCK_LOST_NOT_OWNER;
        } else if (now >= end || v->yes >= v->quorum) {
            /* Not confirmed by a majority before the lease ran out. */
            lost = DLOCK_LOST_NO_QUORUM;
        }
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    if (l->watch.moved && !lost) /* one name of a set: the set's validity moves */
        l->watch.moved(l->watch.arg, 0);
    return lost;
}

/* Register the held lock with the watchdog, renewing to ttl_ms, the first
 * time first_ms from now (watchdog.h). */
static void renew_start(dlock_lock *l, int64_t ttl_ms, int64_t first_ms)
{
    l->renewal.token = l->token;
    l->renewal.token_len = l->token_len;
    l->renewal.ttl_ms = ttl_ms;
    dlock__watchdog_add(l->client, &l->renewal, first_ms);
}

static int renew_stop(dlock_lock *l)
{
    return dlock__watchdog_remove(l->client, &l->renewal);
}

/* The handle lets go of every hold without a word to the store (the
 * store's side is the caller's). A hold that was HELD ends here, `how`
 * and `reason` say why (observe.h); a lost one was told at its loss. */
static void drop_holds(dlock_lock *l, dlock_hold_end how, int reason)
{
    l->backend->drop(l);
    l->holds = 0;
    if (dlock__fsm_fire(l, DLOCK__EV_LET_GO, 0) == DLOCK_STATE_HELD)
        dlock__obs_hold_end(l, how, reason);
}

/* The store says the hold is gone (reason: its code, 0 not known). */
static void end_hold(dlock_lock *l, int reason)
{
    renew_stop(l);
    drop_holds(l, DLOCK_HOLD_ENDED, reason);
}

void dlock__engine_ended(dlock_lock *l, int why)
{
    end_hold(l, why);
}

/* A grant: a handle that did not hold starts its hold's clock. */
static void granted(dlock_lock *l, int64_t until_ns)
{
    if (dlock__fsm_fire(l, DLOCK__EV_GRANTED, until_ns) != DLOCK_STATE_HELD)
        atomic_store_explicit(&l->obs_held_ns, dlock__now_ns(), memory_order_relaxed);
}

static int not_held(dlock_lock *l)
{
    dlock__err_set(&l->err, "this handle does not hold \"%s\"", l->name);
    return DLOCK_ENOTHELD;
}

/* The acquire is over (rc): the observer hears of it, then its driver. */
static void acquire_over(dlock__engine_acq *r, int rc)
{
    dlock__obs_acquire_end(r->l, r->wait_ms, rc);
    r->rc = rc;
    r->done(r);
}

/* The wait answered: a grant starts the hold's clock and, for a new hold
 * that renews or must confirm a hand-over, its renewal. */
static void waited(dlock__acq *a)
{
    dlock__engine_acq *r = DLOCK__OWNER(a, dlock__engine_acq, acq);
    dlock_lock *l = r->l;
    int rc = a->rc;
    r->waiting = 0;
    dlock__lock_close_cancel(l, r->wait_ms);
    if (rc == DLOCK_OK)
        granted(l, l->granted_until_ns);
    if (rc == DLOCK_OK && l->holds == 1 && ((l->opts.flags & DLOCK_AUTO_RENEW) || l->confirm_ms)) {
        /* A new hold: no extend yet. A fair hand-over taken on its message
         * has a claim lease, which one renewal makes the full TTL. */
        l->renewal.once = !(l->opts.flags & DLOCK_AUTO_RENEW);
        /* The confirmation's schedule (its look-ahead, its retries when a
         * round gets no answer) is the claim's, not the TTL's. */
        l->renewal.interval_ms = l->renewal.once ? l->confirm_ms : l->opts.renew_interval_ms;
        renew_start(l, l->backend->lease_ttl_ms(l),
                    l->confirm_ms ? l->confirm_ms : DLOCK__RENEW_INTERVAL);
    }
    l->confirm_ms = 0;
    acquire_over(r, rc);
}

/* A fresh acquire: the wait (acquire.c) on r's loop. DLOCK_OK when it
 * started; any other code is the acquire's answer now. */
static int wait_start(dlock__engine_acq *r)
{
    dlock_lock *l = r->l;
    int rc = dlock__lock_begin_acquire(l, r->wait_ms);
    if (rc != DLOCK_OK)
        return rc;
    l->try_once = r->wait_ms == 0;
    /* Every exchange of this acquire ends at once on dlock_lock_cancel(). */
    dlock__lock_open_cancel(l, r->wait_ms);
    l->granted_until_ns = 0; /* a grant that forgot its lease end has none */
    dlock__acq_init(&r->acq, l, r->wait_ms, dlock__deadline_after_ms(r->wait_ms), r->loop,
                    waited);
    r->acq.hooks = r->hooks;
    /* Each try in turn keeps its record there (a Redis try's chain). */
    r->acq.op.scratch = r->scratch;
    r->acq.op.scratch_len = r->scratch_len;
    r->waiting = 1;
    dlock__acq_start(&r->acq); /* its done() comes from the loop */
    return DLOCK_OK;
}

/* A step of the prologue answered rc on the loop: the wait next, or the
 * acquire's answer. */
static void then_wait(dlock__engine_acq *r, int rc)
{
    if (rc == DLOCK_OK)
        rc = wait_start(r);
    if (rc != DLOCK_OK)
        acquire_over(r, rc);
}

/* A lost hold's token is out of the store (best effort): the handle
 * starts over. */
static void lost_let_go(dlock__op *op)
{
    dlock__engine_acq *r = DLOCK__OWNER(op, dlock__engine_acq, lost);
    drop_holds(r->l, DLOCK_HOLD_LOST, 0); /* not HELD: told at the loss */
    then_wait(r, DLOCK_OK);
}

/* reentered(): the re-entry is not taken, a new share is asked for. */
#define ASK_AGAIN 1

/* A re-entry's extend answered rc (kinds.h, reenter): the share is the
 * handle's already, so it is renewed, never asked for again (a writer's
 * mark would keep its own holder waiting). A share whose lease ended (or
 * that is not ours any more) is not re-entered: the extend let it go,
 * and a new one is asked for (dlock.h, DLOCK_REENTRANT). The acquire's
 * answer, or ASK_AGAIN. */
static int reentered(dlock__engine_acq *r, int rc)
{
    if (rc == DLOCK_OK)
        r->l->holds++;
    if (rc != DLOCK_EEXPIRED && rc != DLOCK_ENOTOWNER)
        return rc;
    dlock__err_clear(&r->l->err);
    return ASK_AGAIN;
}

static void reentry_over(dlock__engine_req *e)
{
    dlock__engine_acq *r = DLOCK__OWNER(e, dlock__engine_acq, ext);
    int rc = reentered(r, e->rc);
    if (rc == ASK_AGAIN) {
        then_wait(r, DLOCK_OK);
        return;
    }
    /* A cancel that came while the extend was out was this waiting
     * acquire's (dlock.h): it is used up here, as the wait's would be. */
    if (r->wait_ms != 0)
        dlock__lock_take_cancel(r->l);
    acquire_over(r, rc);
}

/* The verb's prologue, by the handle's state: DLOCK_OK when a step (or
 * the wait) started on the loop, else the acquire's answer now. */
static int acquire_begin(dlock__engine_acq *r)
{
    dlock_lock *l = r->l;
    dlock_lock_state st = dlock__lock_get_state(l);
    if (st == DLOCK_STATE_LOST) {
        /* The handle starts over, without its old token in the store. The
         * renewal's stop still waits for a round in flight. */
        renew_stop(l);
        dlock__op_begin(&r->lost, l, r->loop, lost_let_go);
        r->lost.scratch = r->scratch;
        r->lost.scratch_len = r->scratch_len;
        if (l->backend->release_lost_start(l, &r->lost) == DLOCK_OK)
            return DLOCK_OK;
        drop_holds(l, DLOCK_HOLD_LOST, 0); /* nothing sent: best effort */
    } else if (st == DLOCK_STATE_HELD && l->kind->reenter) {
        r->ext.done = reentry_over;
        int rc = dlock__engine_extend_start(l, 0, r->loop, &r->ext);
        if (rc == DLOCK_OK)
            return DLOCK_OK; /* started: reentry_over() goes on */
        /* Answered at once, never with DLOCK_OK (engine.h). */
        if ((rc = reentered(r, rc)) != ASK_AGAIN)
            return rc;
    } else if (st == DLOCK_STATE_HELD && !l->kind->counted) {
        dlock__err_set(&l->err, "this handle already holds \"%s\"", l->name);
        return DLOCK_EINVAL;
    }
    return wait_start(r);
}

int dlock__engine_acquire_start(dlock_lock *l, int64_t wait_ms, dlock__loop *loop,
                                dlock__engine_acq *r)
{
    r->l = l;
    r->loop = loop;
    r->wait_ms = wait_ms;
    r->waiting = 0;
    r->ext.scratch = r->scratch; /* a re-entry's extend needs none, but never garbage */
    r->ext.scratch_len = r->scratch_len;
    dlock__obs_acquire_start(l, wait_ms);
    int rc = acquire_begin(r);
    if (rc != DLOCK_OK)
        dlock__obs_acquire_end(l, wait_ms, rc);
    return rc;
}

void dlock__engine_acquire_poked(dlock__engine_acq *r)
{
    if (r->waiting)
        dlock__acq_poked(&r->acq);
}

/* The release's answer came (rc): one hold fewer, or the hold let go. */
static int release_finish(dlock__engine_req *r, int rc)
{
    dlock_lock *l = r->op.l;
    int last_hold = r->last_hold;
    if (rc == DLOCK_OK && !last_hold) {
        l->holds--;
        return DLOCK_OK;
    }
    if (rc != DLOCK_OK && dlock__lock_get_state(l) == DLOCK_STATE_LOST) {
        /* A non-last release raced a round that found the lock lost. */
        rc = DLOCK_ELOST;
        dlock__err_set(&l->err, "\"%s\" was lost before this release", l->name);
    }
    if (!last_hold)
        /* A failed non-last release drops every hold of the handle: one
         * that holds nothing must never have anything renewed, or the key
         * would outlive the handle for as long as the process runs. */
        renew_stop(l);
    drop_holds(l, rc == DLOCK_OK ? DLOCK_HOLD_RELEASED : DLOCK_HOLD_ENDED, rc);
    if (rc == DLOCK_OK)
        dlock__err_clear(&l->err);
    return rc;
}

/* A verb's backend request answered: the verb's completion (r->finish)
 * turns the request's verdict into the verb's code, then its driver. */
static void verb_over(dlock__op *op)
{
    dlock__engine_req *r = DLOCK__OWNER(op, dlock__engine_req, op);
    r->rc = r->finish(r, op->v.code);
    r->done(r);
}

/* Before the backend's start: the request is the verb's, on loop, with
 * the driver's scratch (op.h); finish is its completion. */
static void verb_begin(dlock__engine_req *r, dlock_lock *l, dlock__loop *loop,
                       int (*finish)(dlock__engine_req *r, int rc))
{
    dlock__op_begin(&r->op, l, loop, verb_over);
    r->op.scratch = r->scratch;
    r->op.scratch_len = r->scratch_len;
    r->finish = finish;
}

/* A lost handle's release: its token is out of the store (best effort);
 * the handle lets go, and the release answers ELOST. */
static int lost_release_finish(dlock__engine_req *r, int rc)
{
    dlock_lock *l = r->op.l;
    (void)rc; /* best effort */
    drop_holds(l, DLOCK_HOLD_LOST, 0); /* not HELD: told at the loss */
    dlock__err_set(&l->err, "\"%s\" was lost before this release", l->name);
    return DLOCK_ELOST;
}

int dlock__engine_release_start(dlock_lock *l, dlock__loop *loop, dlock__engine_req *r)
{
    dlock_lock_state st = dlock__lock_get_state(l);
    dlock__err_clear(&l->err);
    if (st == DLOCK_STATE_UNLOCKED)
        return not_held(l);
    int last_hold = !l->kind->counted && !l->kind->reenter ? 1 : l->holds <= 1;
    if (last_hold || st == DLOCK_STATE_LOST) {
        /* A lost handle's record may still be registered: the round that
         * found it lost takes it out only after its on_lost returns. Left
         * there, a hold taken again meanwhile (in on_lost) would not be
         * registered, and that round would then take out its renewal. */
        renew_stop(l);
        /* A round in flight may have found the lock lost (and run on_lost)
         * while we waited for it: read the state it left. */
        st = dlock__lock_get_state(l);
    }
    if (st == DLOCK_STATE_LOST) {
        /* Its token out of the store, then ELOST (lost_released). */
        verb_begin(r, l, loop, lost_release_finish);
        int rc = l->backend->release_lost_start(l, &r->op);
        return rc == DLOCK_OK ? DLOCK_OK : lost_release_finish(r, rc);
    }
    if (st == DLOCK_STATE_UNLOCKED) /* on_lost released it meanwhile */
        return not_held(l);
    r->last_hold = last_hold;
    verb_begin(r, l, loop, release_finish);
    int rc = l->backend->release_start(l, last_hold, &r->op);
    /* Refused, nothing sent: answered now (never DLOCK_OK). */
    return rc == DLOCK_OK ? DLOCK_OK : release_finish(r, rc);
}

/* The extend's answer came (rc, the request's verdict): the lease's new
 * end, or the hold let go; renewal back on as it was. Its code. */
static int extend_finish(dlock__engine_req *r, int rc)
{
    dlock_lock *l = r->op.l;
    int64_t deadline = r->deadline_ns;
    if (rc == DLOCK_OK && deadline != INT64_MAX && dlock__now_ns() >= deadline) {
        dlock__err_set(&l->err, "majority confirmed only after the lease had ended");
        rc = l->client->n_nodes > 1 ? DLOCK_ENOQUORUM : DLOCK_EEXPIRED;
    }
    if (rc == DLOCK_OK) {
        dlock__fsm_fire(l, DLOCK__EV_RENEWED, r->op.v.until_ns);
        dlock__err_clear(&l->err);
        l->renewal.ttl_ms = r->op.v.renew_ttl_ms;
    }
    if (r->renewed && !(rc == DLOCK_OK && l->renewal.once) &&
        (rc == DLOCK_OK || (rc != DLOCK_ENOTOWNER && rc != DLOCK_EEXPIRED))) {
        /* Renewal goes on (a failed extend leaves the lease as it was, so
         * it is renewed at once). An extend the backend refused sent
         * nothing (etcd: another TTL than the lease's): the renewal keeps
         * the schedule it had. */
        int64_t first_ms = rc == DLOCK_OK ? DLOCK__RENEW_INTERVAL : 0;
        if (rc == DLOCK_ENOTSUP) {
            int64_t left_ms = (r->due_ns - dlock__now_ns()) / DLOCK__NS_PER_MS;
            first_ms = left_ms > 0 ? left_ms : 0;
        }
        renew_start(l, l->renewal.ttl_ms, first_ms);
    }
    if (rc == DLOCK_ENOTOWNER || rc == DLOCK_EEXPIRED) {
        /* Not ours any more: the handle lets go. */
        end_hold(l, rc);
    }
    return rc;
}

int dlock__engine_extend_start(dlock_lock *l, int64_t ttl_ms, dlock__loop *loop,
                               dlock__engine_req *r)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    dlock_lock_state st = l->state;
    int64_t old_end = l->valid_until_ns;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    if (st == DLOCK_STATE_LOST) {
        dlock__err_set(&l->err, "\"%s\" was lost", l->name);
        return DLOCK_ELOST;
    }
    if (st != DLOCK_STATE_HELD)
        return not_held(l);
    int late_counts = l->backend->late_answer_counts;
    if (old_end != INT64_MIN && dlock__now_ns() >= old_end && !late_counts) {
        /* Too late: whatever the server says now proves nothing about the
         * time in between, so nothing is sent and the handle lets go. */
        end_hold(l, DLOCK_EEXPIRED);
        dlock__err_set(&l->err, "the lease on \"%s\" had already ended", l->name);
        return DLOCK_EEXPIRED;
    }
    /* Auto-renew: take the lock out of the watchdog for the extend, so no
     * round in flight sets the old TTL after ours; it goes back with the
     * new TTL as its renewal TTL for the rest of the hold. A fair
     * hand-over's pending confirmation is taken out too; a successful
     * extend does its work. */
    r->renewed = renew_stop(l);
    /* When it was due (out of the watchdog now, and no round has it). */
    r->due_ns = l->renewal.next_ns;
    if (r->renewed && dlock__lock_get_state(l) == DLOCK_STATE_LOST) { /* that round found it lost */
        dlock__err_set(&l->err, "\"%s\" was lost", l->name);
        return DLOCK_ELOST;
    }
    /* A confirmation after the current lease ended proves nothing (unless
     * the store's answer does, late_answer_counts): the key may have
     * expired and been taken in between. */
    r->deadline_ns = old_end == INT64_MIN || late_counts ? INT64_MAX : old_end;
    verb_begin(r, l, loop, extend_finish);
    int rc = l->backend->extend_start(l, ttl_ms, r->deadline_ns, &r->op);
    /* Refused, nothing sent: answered now (never DLOCK_OK). */
    return rc == DLOCK_OK ? DLOCK_OK : extend_finish(r, rc);
}

/* The adopt's settle answered rc: the token is the handle's, held. */
static int adopt_finish(dlock__engine_req *r, int rc)
{
    dlock_lock *l = r->op.l;
    const char *token = r->token;
    size_t n = r->token_len;
    if (rc != DLOCK_OK) /* what is owed under the old token is kept */
        return rc;
    rc = l->backend->adopt_check(l, token, n);
    if (rc != DLOCK_OK)
        return rc;
    dlock__lock_inline_token(l);
    if (n >= sizeof l->token_inline) {
        char *t = dlock__malloc(n + 1);
        if (!t) {
            dlock__err_set(&l->err, "out of memory");
            return DLOCK_ENOMEM;
        }
        l->token = t;
    }
    if ((rc = l->backend->adopt(l, token, n)) != DLOCK_OK) {
        dlock__lock_inline_token(l);
        dlock__err_set(&l->err, "out of memory");
        return rc;
    }
    memcpy(l->token, token, n + 1);
    l->token_len = n;
    l->holds = 1;
    l->fence = 0; /* the grant's fence is not known here */
    granted(l, INT64_MIN); /* validity unknown */
    dlock__err_clear(&l->err);
    return DLOCK_OK;
}

int dlock__engine_adopt_start(dlock_lock *l, const char *token, dlock__loop *loop,
                              dlock__engine_req *r)
{
    size_t n = strnlen(token, DLOCK_TOKEN_MAX + 1);
    if (n == 0 || n > DLOCK_TOKEN_MAX || !l->kind->adopt ||
        dlock__lock_get_state(l) != DLOCK_STATE_UNLOCKED) {
        dlock__err_set(&l->err, "adopt needs a 1..%d byte token, a handle of a single name that "
                       "is not reentrant and holds nothing", DLOCK_TOKEN_MAX);
        return DLOCK_EINVAL;
    }
    /* Only now: a refused adopt sends nothing (the settle resends a
     * release owed under an older token, which waits for the nodes that
     * owe it). One that could not keep what is owed under the old token
     * fails before the token changes: nothing owed is dropped unheard. */
    r->token = token;
    r->token_len = n;
    verb_begin(r, l, loop, adopt_finish);
    int rc = l->backend->settle_start(l, &r->op);
    return rc == DLOCK_OK ? DLOCK_OK : adopt_finish(r, rc);
}

void dlock__engine_renew_lost(void *owner, int reason)
{
    dlock_lock *l = owner;
    int was_held = dlock__fsm_fire(l, DLOCK__EV_LOST, 0) == DLOCK_STATE_HELD;
    /* A set's own handle tells nothing: its lost name just did, and the
     * set never started a hold's clock (set.c takes its grants itself). */
    if (was_held && !l->set)
        dlock__obs_hold_end(l, DLOCK_HOLD_LOST, reason);
    if (was_held && l->opts.on_lost)
        l->opts.on_lost(l, (dlock_lost_reason)reason, l->opts.on_lost_arg);
    if (was_held && l->watch.moved) /* a name of a set: the set is lost */
        l->watch.moved(l->watch.arg, reason);
}

int dlock__engine_forget_local(dlock_lock *l, dlock_lock_state prior_state)
{
    l->holds = 0;
    /* A set's own handle tells nothing: each of its names did. */
    if (dlock__fsm_fire(l, DLOCK__EV_LET_GO, 0) == DLOCK_STATE_HELD && !l->set)
        dlock__obs_hold_end(l, DLOCK_HOLD_FORGOTTEN, 0);
    if (prior_state == DLOCK_STATE_UNLOCKED) {
        dlock__err_set(&l->err, "this handle does not hold \"%s\"", l->name);
        return DLOCK_ENOTHELD;
    }
    dlock__err_clear(&l->err);
    return DLOCK_OK;
}

int dlock__engine_forget(dlock_lock *l)
{
    renew_stop(l);
    dlock_lock_state st = dlock__lock_get_state(l);
    l->backend->drop(l);
    return dlock__engine_forget_local(l, st);
}

void dlock__engine_cancel(dlock_lock *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    l->canceled = 1;
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&l->cond));
    if (l->waiter.wake) /* the engine's wait, asleep on its loop */
        l->waiter.wake(l->waiter.wake_arg);
    if (l->cancel_fd[1] >= 0) {
        /* Wake a round trip in flight (a full pipe already will). */
        uint64_t one = 1;
        while (write(l->cancel_fd[1], &one, sizeof one) < 0 && errno == EINTR)
            ;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    /* ...and a wait for a silent node to confirm our subscription. */
    dlock__wakeup_kick(l->client);
}

/* The free's cleanup answered (best effort, not read): a hold the
 * handle had ends as a release. */
static int let_go_finish(dlock__engine_req *r, int rc)
{
    (void)rc; /* best effort */
    if (r->last_hold)
        dlock__obs_hold_end(r->op.l, DLOCK_HOLD_RELEASED, 0);
    return DLOCK_OK;
}

int dlock__engine_let_go_start(dlock_lock *l, dlock__loop *loop, dlock__engine_req *r)
{
    renew_stop(l);
    /* Read after the renewal stopped: a round in flight may have found it
     * lost (and told so). A held handle's cleanup releases it. */
    r->last_hold = dlock__lock_get_state(l) == DLOCK_STATE_HELD;
    verb_begin(r, l, loop, let_go_finish);
    int rc = l->backend->cleanup_start(l, &r->op);
    if (rc != DLOCK_OK)
        (void)let_go_finish(r, rc); /* nothing sent: no done */
    return rc;
}
