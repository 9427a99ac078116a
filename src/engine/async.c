/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs of a looped client (async.h). Each handle of a looped client
 * has one record, made with the handle: its pending request (the engine's
 * acquire, release or extend, or a set's), the application's callback,
 * and two timers: `soon` for what answers from the loop's next turn (an
 * answer known at once, the handle's end), `poke` for a wait's wake-up or
 * cancel. A verb's completion calls the application back; a handle freed
 * meanwhile goes on to its let-go, then to its end, which the client's
 * end waits for (client.h, closing). */
#include <string.h>

#include "async.h"
#include "client.h"
#include "engine.h"
#include "error.h"
#include "handle.h"
#include "set.h"

enum verb { NONE, ACQUIRE, RELEASE, EXTEND, LET_GO };

struct dlock__async {
    dlock_lock *l;
    enum verb verb; /* pending (NONE: idle) */
    dlock_done_fn cb;
    void *arg;
    int closing;       /* dlock_lock_free() came: the handle goes once idle */
    int soon_rc;       /* what `soon` answers */
    size_t names_left; /* the let-go's: the names (or the one handle) to go, the last first */
    dlock__timer soon;
    dlock__timer poke;
    union {
        dlock__engine_acq acq;
        dlock__engine_req req;
        dlock__set_req set;
    } u;
};

static dlock__loop *loop_of(const dlock__async *as)
{
    return as->l->client->loop;
}

static void req_done(dlock__engine_req *r);

/* ---- the handle's end ------------------------------------------------------------ */

void dlock__async_drop(dlock_lock *l)
{
    dlock__free(l->async);
    l->async = NULL;
}

/* From the loop's next turn after the let-go: nothing of the handle's is
 * on the stack or on the loop any more. */
static void end_now(dlock__timer *t)
{
    dlock__async *as = DLOCK__OWNER(t, dlock__async, soon);
    dlock_lock *l = as->l;
    dlock_client *c = l->client;
    size_t records = 1 + (l->set ? l->set->n : 0);
    dlock__timer_clear(loop_of(as), &as->poke); /* (a late wake-up's) */
    dlock__async_drop(l);
    if (l->set)
        dlock__set_destroy(l);
    else
        dlock__lock_destroy(l);
    c->closing_handles -= records;
    dlock__client_closed(c);
}

/* What the blocking free lets go of (engine.h, dlock__engine_let_go), one
 * name after the other, the last first, as dlock__set_free() does. */
static void let_go_next(dlock__async *as)
{
    dlock_lock *l = as->l;
    while (as->names_left > 0) {
        size_t i = --as->names_left;
        dlock_lock *h = l->set ? l->set->names[i] : l;
        memset(&as->u.req, 0, sizeof as->u.req);
        as->u.req.done = req_done;
        if (dlock__engine_let_go_start(h, loop_of(as), &as->u.req) == DLOCK_OK)
            return; /* req_done() goes on */
    }
    as->soon.fire = end_now;
    dlock__defer(loop_of(as), &as->soon);
}

static void let_go_start(dlock__async *as)
{
    as->verb = LET_GO;
    as->names_left = as->l->set ? as->l->set->n : 1;
    let_go_next(as);
}

/* ---- a verb's answer --------------------------------------------------------------- */

/* The pending verb ended with rc: the application hears it, or, on a
 * handle freed meanwhile (whose callback ran then), the let-go begins. */
static void answer(dlock__async *as, int rc)
{
    dlock__timer_clear(loop_of(as), &as->poke);
    as->verb = NONE;
    if (as->closing) {
        let_go_start(as);
        return;
    }
    dlock_done_fn cb = as->cb;
    as->cb = NULL;
    /* The record is not touched after: the callback may start the next
     * request or free the handle. */
    cb(as->l, rc, as->arg);
}

static void soon_fire(dlock__timer *t)
{
    dlock__async *as = DLOCK__OWNER(t, dlock__async, soon);
    answer(as, as->soon_rc);
}

/* An answer known inside the start: from the loop's next turn. */
static void answer_soon(dlock__async *as, int rc)
{
    as->soon_rc = rc;
    as->soon.fire = soon_fire;
    dlock__defer(loop_of(as), &as->soon);
}

static void req_done(dlock__engine_req *r)
{
    dlock__async *as = DLOCK__OWNER(r, dlock__async, u.req);
    if (as->verb == LET_GO)
        let_go_next(as);
    else
        answer(as, r->rc);
}

static void acq_done(dlock__engine_acq *r)
{
    answer(DLOCK__OWNER(r, dlock__async, u.acq), r->rc);
}

static void set_done(dlock__set_req *r)
{
    answer(DLOCK__OWNER(r, dlock__async, u.set), r->rc);
}

/* ---- a wait's wake-ups and cancels ------------------------------------------------- */

/* Every call of a looped client is on the loop's thread (dlock.h), the
 * wake-up subscriptions' callbacks too: nothing to make wakeable. */
static int wakeable(void *arg)
{
    (void)arg;
    return DLOCK_OK;
}

static void poked(dlock__timer *t)
{
    dlock__async *as = DLOCK__OWNER(t, dlock__async, poke);
    if (as->verb != ACQUIRE)
        return;
    if (as->l->set)
        dlock__set_poked(&as->u.set);
    else
        dlock__engine_acquire_poked(&as->u.acq);
}

/* A wake-up message or a cancel for the wait (called with the handle's
 * mutex held, or the wake-up's): the wait looks at the next turn. */
static void wake(void *arg)
{
    dlock__async *as = arg;
    as->poke.fire = poked;
    dlock__defer(loop_of(as), &as->poke);
}

static void wait_hooks(dlock__async *as, dlock__wait_hooks *h)
{
    h->wakeable = wakeable;
    h->wake = wake;
    h->wake_arg = as;
    h->sleep_blocking = NULL;
}

/* ---- the verbs ------------------------------------------------------------------------ */

/* A start's checks (dlock.h): DLOCK_OK with the request booked as v. */
static int begin(dlock_lock *l, dlock_done_fn cb, void *arg, enum verb v)
{
    if (!l || !cb)
        return DLOCK_EINVAL;
    if (dlock__client_forked(l->client)) {
        dlock__err_set(&l->err, "\"%s\": used after fork(); a client and its locks belong to "
                       "the process that made them", l->name);
        return DLOCK_EINVAL;
    }
    dlock__async *as = l->async;
    if (!l->client->loop || !as) {
        dlock__err_set(&l->err, "the _start verbs need a client made with an event loop "
                       "(dlock_client_options.loop)");
        return DLOCK_EINVAL;
    }
    if (as->closing) {
        dlock__err_set(&l->err, "\"%s\": used after dlock_lock_free()", l->name);
        return DLOCK_EINVAL;
    }
    if (as->verb != NONE) {
        dlock__err_set(&l->err, "\"%s\": a request of this handle is pending", l->name);
        return DLOCK_EBUSY;
    }
    as->verb = v;
    as->cb = cb;
    as->arg = arg;
    return DLOCK_OK;
}

/* The booked verb's start on the client's loop, the engine's or the
 * set's (arg: wait_ms or ttl_ms); an answer it gives at once comes from
 * the loop's next turn. */
static int run(dlock__async *as, int64_t arg)
{
    dlock_lock *l = as->l;
    dlock__loop *loop = loop_of(as);
    int rc;
    if (l->set) {
        memset(&as->u.set, 0, sizeof as->u.set);
        as->u.set.done = set_done;
        wait_hooks(as, &as->u.set.hooks);
        rc = as->verb == ACQUIRE   ? dlock__set_acquire_start(l, arg, loop, &as->u.set)
             : as->verb == RELEASE ? dlock__set_release_start(l, loop, &as->u.set)
                                   : dlock__set_extend_start(l, arg, loop, &as->u.set);
    } else if (as->verb == ACQUIRE) {
        memset(&as->u.acq, 0, sizeof as->u.acq);
        as->u.acq.done = acq_done;
        wait_hooks(as, &as->u.acq.hooks);
        rc = dlock__engine_acquire_start(l, arg, loop, &as->u.acq);
    } else {
        memset(&as->u.req, 0, sizeof as->u.req);
        as->u.req.done = req_done;
        rc = as->verb == RELEASE ? dlock__engine_release_start(l, loop, &as->u.req)
                                 : dlock__engine_extend_start(l, arg, loop, &as->u.req);
    }
    if (rc != DLOCK_OK)
        answer_soon(as, rc);
    return DLOCK_OK;
}

int dlock_lock_acquire_start(dlock_lock *l, int64_t wait_ms, dlock_done_fn cb, void *arg)
{
    int rc = begin(l, cb, arg, ACQUIRE);
    if (rc != DLOCK_OK)
        return rc;
    if ((rc = dlock__lock_check_wait_ms(l, wait_ms)) != DLOCK_OK) {
        answer_soon(l->async, rc);
        return DLOCK_OK;
    }
    return run(l->async, wait_ms);
}

int dlock_lock_release_start(dlock_lock *l, dlock_done_fn cb, void *arg)
{
    int rc = begin(l, cb, arg, RELEASE);
    return rc != DLOCK_OK ? rc : run(l->async, 0);
}

int dlock_lock_extend_start(dlock_lock *l, int64_t ttl_ms, dlock_done_fn cb, void *arg)
{
    int rc = begin(l, cb, arg, EXTEND);
    if (rc != DLOCK_OK)
        return rc;
    dlock__err_clear(&l->err);
    if ((rc = dlock__lock_check_ttl_ms(l, ttl_ms)) != DLOCK_OK) {
        answer_soon(l->async, rc);
        return DLOCK_OK;
    }
    return run(l->async, ttl_ms);
}

int dlock_lock_pending(const dlock_lock *l)
{
    return l && l->async && l->async->verb != NONE && l->async->verb != LET_GO &&
           !l->async->closing;
}

/* ---- making and freeing a handle ------------------------------------------------------ */

int dlock__async_made(dlock_lock **out, int rc)
{
    if (rc != DLOCK_OK || !(*out)->client->loop)
        return rc;
    dlock_lock *l = *out;
    if (!(l->async = dlock__calloc(1, sizeof *l->async))) {
        if (l->set)
            dlock__set_destroy(l);
        else
            dlock__lock_destroy(l);
        *out = NULL;
        return DLOCK_ENOMEM;
    }
    l->async->l = l;
    return DLOCK_OK;
}

void dlock__async_free(dlock_lock *l)
{
    dlock__async *as = l->async;
    dlock_client *c = l->client;
    if (as->closing)
        dlock__misuse("dlock_lock_free() called twice on \"%s\"", l->name);
    as->closing = 1;
    /* Freed for the caller: no callback of it may see the handle again. */
    l->opts.on_lost = NULL;
    c->closing_handles += 1 + (l->set ? l->set->n : 0);
    c->closing++;
    if (as->verb == NONE) {
        let_go_start(as);
        return;
    }
    /* The request goes on to its end, from which the let-go follows
     * (answer()); its caller hears of it now. A wait is cut short. */
    dlock_done_fn cb = as->cb;
    as->cb = NULL;
    if (as->verb == ACQUIRE) {
        if (l->set)
            dlock__set_cancel(l);
        else
            dlock__engine_cancel(l);
    }
    cb(l, DLOCK_ECANCELED, as->arg);
}
