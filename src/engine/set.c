/* SPDX-License-Identifier: BSD-3-Clause */
/* Several names at once (set.h): a composite above single locks.
 *
 * Why handles and not one script: every name keeps its own key, token,
 * lease, fencing counter and kind (a set of shared locks works as a set of
 * exclusive ones), and on several masters each name is a Redlock lock of
 * its own. All or nothing: a failed acquire gives back what it took before
 * it returns. No deadlock: every set takes its names in one order (bytewise
 * sorted), so no two callers each hold a name the other waits for.
 *
 * The names are driven through the engine (engine.h), never the public
 * verbs, so nothing below lock.c calls back up. The set's handle has no
 * kind, backend or key: its state, validity, token and fence are kept
 * here from its names'. Its validity is the least of its names': each
 * name's watch (handle.h) tells the set, on the watchdog's thread, when a
 * renewal moved the name's validity or found the name lost. Mutex order:
 * the set's, then a name's, never the other way (the watch takes no
 * name's mutex while it holds the set's). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "backend.h"
#include "engine.h"
#include "fsm.h"
#include "handle.h"
#include "set.h"

static int64_t name_end_ns(dlock_lock *n)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
    int64_t end = n->state == DLOCK_STATE_HELD ? n->valid_until_ns : 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
    return end;
}

/* The least lease end of the names (0 if one is not held). */
static int64_t names_end_ns(const struct dlock__set *s)
{
    int64_t end = INT64_MAX;
    for (size_t i = 0; i < s->n; i++) {
        int64_t e = name_end_ns(s->names[i]);
        if (e < end)
            end = e;
    }
    return end;
}

/* A name's watch (handle.h; the watchdog's thread): a renewal moved its
 * validity, so the set's is the least of its names' again; or it was lost,
 * so the set is: the one lost path (handle.h), on_lost of the set once. */
void dlock__set_name_moved(void *arg, int lost)
{
    dlock_lock *set = arg;
    if (lost) {
        dlock__engine_renew_lost(set, lost);
        return;
    }
    int64_t end = names_end_ns(set->set);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&set->mu));
    if (set->state == DLOCK_STATE_HELD && end > 0)
        set->valid_until_ns = end;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&set->mu));
}

/* The set's message names the name a verb failed on. */
static void name_failed(dlock_lock *set, dlock_lock *n)
{
    dlock__err_set(&set->err, "\"%s\": %s", n->name + n->prefix_len, dlock__err_str(&n->err));
}

/* ---- the verbs: chains of the names' requests on the verb's loop ------ */

/* The set's answer: done() from the loop, or, inside the start, the
 * start's return (run_start()). */
static void answer(dlock__set_req *r, int rc)
{
    r->rc = rc;
    if (r->in_start)
        r->answered = 1;
    else
        r->done(r);
}

static void answer_deferred(dlock__timer *t)
{
    dlock__set_req *r = DLOCK__OWNER(t, dlock__set_req, defer);
    r->done(r);
}

/* A verb's first step, run inside its start: DLOCK_OK when done() will
 * follow from the loop; another code was the answer now (no done). One
 * that needed no word to a store and answered DLOCK_OK at once (the
 * names already let go) is answered from the loop's next turn. */
static int run_start(dlock__set_req *r, dlock_lock *set, dlock__loop *loop,
                     void (*first)(dlock__set_req *r))
{
    r->set = set;
    r->loop = loop;
    r->rel.scratch = r->name.scratch = r->scratch;
    r->rel.scratch_len = r->name.scratch_len = r->scratch_len;
    r->acquiring = 0;
    r->why = DLOCK__SET_NAME_SAYS;
    r->in_start = 1;
    r->answered = 0;
    first(r);
    r->in_start = 0;
    if (!r->answered)
        return DLOCK_OK;
    if (r->rc != DLOCK_OK)
        return r->rc;
    /* r is not zeroed (call.c: hot path), and a loop's defer reads the
     * timer's link to take it out of a list it may be in: in none. */
    memset(&r->defer, 0, sizeof r->defer);
    r->defer.fire = answer_deferred;
    dlock__defer(loop, &r->defer);
    return DLOCK_OK;
}

/* The set holds nothing (its names were given back). */
static void let_go(dlock_lock *set)
{
    set->holds = 0;
    dlock__fsm_fire(set, DLOCK__EV_LET_GO, 0);
}

static void give_back_next(dlock__set_req *r);

/* A name's release answered rc: the first failure is the give-back's. */
static void note_back(dlock__set_req *r, int rc)
{
    if (rc != DLOCK_OK && r->back_rc == DLOCK_OK) {
        r->back_rc = rc;
        name_failed(r->set, r->set->set->names[r->back]);
    }
}

static void given_back(dlock__engine_req *e)
{
    dlock__set_req *r = DLOCK__OWNER(e, dlock__set_req, rel);
    note_back(r, e->rc);
    give_back_next(r);
}

static void give_back_next(dlock__set_req *r)
{
    struct dlock__set *s = r->set->set;
    while (r->back > 0) {
        dlock_lock *n = s->names[--r->back];
        if (dlock__lock_get_state(n) == DLOCK_STATE_UNLOCKED)
            continue;
        r->rel.done = given_back;
        int rc = dlock__engine_release_start(n, r->loop, &r->rel);
        if (rc == DLOCK_OK)
            return; /* given_back() goes on */
        note_back(r, rc);
    }
    r->then(r);
}

/* Give back the first n names (best effort), the last first, one at a
 * time; then(r) follows, with the first failure in r->back_rc. */
static void give_back(dlock__set_req *r, size_t n, void (*then)(dlock__set_req *r))
{
    r->back = n;
    r->back_rc = DLOCK_OK;
    r->then = then;
    give_back_next(r);
}

/* Given back after a verb decided its answer (r->answer_rc): the set
 * holds nothing. */
static void dropped(dlock__set_req *r)
{
    let_go(r->set);
    /* the verb's message, over a name's failed give-back */
    if (r->why == DLOCK__SET_WAS_LOST)
        dlock__err_set(&r->set->err, "\"%s\" was lost before this release", r->set->name);
    else if (r->why == DLOCK__SET_HAD_ENDED)
        dlock__err_set(&r->set->err, "the lease on \"%s\" had already ended", r->set->name);
    answer(r, r->answer_rc);
}

/* The names are all held, each lease ending after `end`: the set is. */
static void hold(dlock_lock *set, int64_t end)
{
    dlock_lock *first = set->set->names[0];
    set->holds = 1;
    set->fence = first->fence;
    /* The set's token is its first name's; one too long for the inline
     * buffer (none is today: 32 hex digits and an inbox tag) reads as
     * empty rather than as a cut one. */
    size_t len = first->token_len;
    if (len >= sizeof set->token_inline)
        len = 0;
    memcpy(set->token_inline, first->token, len);
    set->token_inline[len] = '\0';
    set->token = set->token_inline;
    set->token_len = len;
    dlock__fsm_fire(set, DLOCK__EV_GRANTED, end);
    dlock__err_clear(&set->err);
}

/* ---- acquire: every name in order, each waiting up to the deadline (or
 * trying once when wait_ms is 0); all or nothing. */

static void take_next(dlock__set_req *r);

/* The acquire's answer: a cancel that came during a waiting acquire is
 * used up by it, also when it ended otherwise or came while names were
 * given back (dlock.h); the names' flags are cleared by the next one. */
static void acquire_answer(dlock__set_req *r, int rc)
{
    if (r->wait_ms != 0)
        dlock__lock_take_cancel(r->set);
    answer(r, rc);
}

static void given_up(dlock__set_req *r)
{
    acquire_answer(r, r->answer_rc);
}

/* The name being taken (r->i) answered rc. */
static void name_taken(dlock__set_req *r, int rc)
{
    dlock_lock *set = r->set;
    if (rc == DLOCK_ENOTACQUIRED && r->wait_ms != 0)
        rc = DLOCK_ETIMEDOUT; /* the deadline came while taking this name */
    if (rc != DLOCK_OK) {
        name_failed(set, set->set->names[r->i]);
        r->answer_rc = rc;
        give_back(r, r->i, given_up);
        return;
    }
    r->i++;
    take_next(r);
}

static void name_acquired(dlock__engine_acq *a)
{
    dlock__set_req *r = DLOCK__OWNER(a, dlock__set_req, name);
    r->acquiring = 0;
    name_taken(r, a->rc);
}

/* The first names' leases ran out while later ones were waited for, and
 * all were given back: try again while the wait lasts. */
static void taken_too_late(dlock__set_req *r)
{
    if (r->wait_ms == 0 || dlock__now_ns() >= r->deadline_ns) {
        dlock__err_set(&r->set->err, "the names' leases ran out before all of them were held");
        acquire_answer(r, r->wait_ms == 0 ? DLOCK_ENOTACQUIRED : DLOCK_ETIMEDOUT);
        return;
    }
    r->i = 0;
    take_next(r);
}

static void take_next(dlock__set_req *r)
{
    struct dlock__set *s = r->set->set;
    if (r->i == s->n) {
        int64_t end = names_end_ns(s);
        if (end > dlock__now_ns()) {
            hold(r->set, end);
            acquire_answer(r, DLOCK_OK);
        } else {
            give_back(r, s->n, taken_too_late);
        }
        return;
    }
    int64_t w = r->wait_ms;
    if (w > 0) {
        int64_t left = (r->deadline_ns - dlock__now_ns()) / DLOCK__NS_PER_MS;
        w = left > 0 ? left : 0;
    }
    r->name.done = name_acquired;
    r->name.hooks = r->hooks;
    r->acquiring = 1;
    int rc = dlock__engine_acquire_start(s->names[r->i], w, r->loop, &r->name);
    if (rc != DLOCK_OK) { /* answered at once */
        r->acquiring = 0;
        name_taken(r, rc);
    }
}

static void acquire_begin(dlock__set_req *r)
{
    dlock_lock *set = r->set;
    struct dlock__set *s = set->set;
    /* A cancel of the set reaches its names (dlock__set_cancel()): one left
     * on a name from an earlier call is not for this one. Cleared before
     * the set's own flag is read, so a cancel in between is seen there. */
    for (size_t i = 0; i < s->n; i++) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&s->names[i]->mu));
        s->names[i]->canceled = 0;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&s->names[i]->mu));
    }
    int rc = dlock__lock_begin_acquire(set, r->wait_ms); /* a cancel that came before */
    if (rc != DLOCK_OK) {
        answer(r, rc);
        return;
    }
    r->deadline_ns = dlock__deadline_after_ms(r->wait_ms);
    r->i = 0;
    take_next(r);
}

/* A lost set's names given back (the loss was reported): it starts over. */
static void lost_dropped(dlock__set_req *r)
{
    let_go(r->set);
    acquire_begin(r);
}

static void acquire_first(dlock__set_req *r)
{
    dlock_lock_state st = dlock__lock_get_state(r->set);
    if (st == DLOCK_STATE_LOST) {
        give_back(r, r->set->set->n, lost_dropped);
    } else if (st == DLOCK_STATE_HELD) {
        dlock__err_set(&r->set->err, "this handle already holds \"%s\"", r->set->name);
        answer(r, DLOCK_EINVAL);
    } else {
        acquire_begin(r);
    }
}

int dlock__set_acquire_start(dlock_lock *set, int64_t wait_ms, dlock__loop *loop,
                             dlock__set_req *r)
{
    r->wait_ms = wait_ms;
    return run_start(r, set, loop, acquire_first);
}

void dlock__set_poked(dlock__set_req *r)
{
    if (r->acquiring)
        dlock__engine_acquire_poked(&r->name);
}

/* ---- release: every name given back, the last first ----------------------- */

static void released(dlock__set_req *r)
{
    dlock_lock *set = r->set;
    int rc = r->back_rc;
    if (rc != DLOCK_OK && dlock__lock_get_state(set) == DLOCK_STATE_LOST) {
        rc = DLOCK_ELOST; /* a round found a name lost meanwhile */
        dlock__err_set(&set->err, "\"%s\" was lost before this release", set->name);
    }
    let_go(set);
    answer(r, rc);
}

static void release_first(dlock__set_req *r)
{
    dlock_lock *set = r->set;
    dlock_lock_state st = dlock__lock_get_state(set);
    dlock__err_clear(&set->err);
    if (st == DLOCK_STATE_UNLOCKED) {
        dlock__err_set(&set->err, "this handle does not hold \"%s\"", set->name);
        answer(r, DLOCK_ENOTHELD);
        return;
    }
    if (st == DLOCK_STATE_LOST) {
        /* A lost name's release takes its token out. */
        r->why = DLOCK__SET_WAS_LOST;
        r->answer_rc = DLOCK_ELOST;
        give_back(r, set->set->n, dropped);
        return;
    }
    give_back(r, set->set->n, released);
}

int dlock__set_release_start(dlock_lock *set, dlock__loop *loop, dlock__set_req *r)
{
    return run_start(r, set, loop, release_first);
}

/* ---- extend: each name in order checks and extends its own lease ---------- */

static void extend_next(dlock__set_req *r);

/* The name being extended (r->i) answered rc. */
static void name_extend_answer(dlock__set_req *r, int rc)
{
    if (rc == DLOCK_OK) {
        r->i++;
        extend_next(r);
        return;
    }
    name_failed(r->set, r->set->set->names[r->i]);
    if (rc == DLOCK_ENOTOWNER || rc == DLOCK_EEXPIRED || rc == DLOCK_ELOST) {
        r->answer_rc = rc == DLOCK_ELOST ? DLOCK_EEXPIRED : rc;
        give_back(r, r->set->set->n, dropped); /* the set is gone: all of it */
        return;
    }
    answer(r, rc); /* the lease stays as it was */
}

static void name_extended(dlock__engine_req *e)
{
    dlock__set_req *r = DLOCK__OWNER(e, dlock__set_req, rel);
    name_extend_answer(r, e->rc);
}

static void extend_next(dlock__set_req *r)
{
    dlock_lock *set = r->set;
    struct dlock__set *s = set->set;
    if (r->i < s->n) {
        r->rel.done = name_extended;
        int rc = dlock__engine_extend_start(s->names[r->i], r->ttl_ms, r->loop, &r->rel);
        if (rc != DLOCK_OK) /* answered at once */
            name_extend_answer(r, rc);
        return;
    }
    if (dlock__now_ns() >= r->old_end_ns) {
        dlock__err_set(&set->err, "majority confirmed only after the lease had ended");
        if (set->client->n_nodes > 1) {
            answer(r, DLOCK_ENOQUORUM);
        } else {
            r->answer_rc = DLOCK_EEXPIRED;
            give_back(r, s->n, dropped);
        }
        return;
    }
    dlock__fsm_fire(set, DLOCK__EV_RENEWED, names_end_ns(s));
    dlock__err_clear(&set->err);
    answer(r, DLOCK_OK);
}

static void extend_first(dlock__set_req *r)
{
    dlock_lock *set = r->set;
    if (r->ttl_ms == 0)
        r->ttl_ms = set->opts.ttl_ms;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&set->mu));
    dlock_lock_state st = set->state;
    r->old_end_ns = set->valid_until_ns;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&set->mu));
    if (st == DLOCK_STATE_LOST) {
        dlock__err_set(&set->err, "\"%s\" was lost", set->name);
        answer(r, DLOCK_ELOST);
    } else if (st != DLOCK_STATE_HELD) {
        dlock__err_set(&set->err, "this handle does not hold \"%s\"", set->name);
        answer(r, DLOCK_ENOTHELD);
    } else if (dlock__now_ns() >= r->old_end_ns) {
        /* Too late, as for one name (engine.c): nothing is sent, and the
         * set lets go of every name. */
        r->why = DLOCK__SET_HAD_ENDED;
        r->answer_rc = DLOCK_EEXPIRED;
        give_back(r, set->set->n, dropped);
    } else {
        r->i = 0;
        extend_next(r);
    }
}

int dlock__set_extend_start(dlock_lock *set, int64_t ttl_ms, dlock__loop *loop,
                            dlock__set_req *r)
{
    r->ttl_ms = ttl_ms;
    return run_start(r, set, loop, extend_first);
}

int dlock__set_adopt(dlock_lock *set)
{
    dlock__err_set(&set->err, "adopt needs a 1..%d byte token, a handle of a single name that "
                   "is not reentrant and holds nothing", DLOCK_TOKEN_MAX);
    return DLOCK_EINVAL;
}

int dlock__set_forget(dlock_lock *set)
{
    struct dlock__set *s = set->set;
    for (size_t i = 0; i < s->n; i++) /* every name, nothing sent */
        (void)dlock__engine_forget(s->names[i]);
    return dlock__engine_forget_local(set, dlock__lock_get_state(set));
}

void dlock__set_cancel(dlock_lock *set)
{
    struct dlock__set *s = set->set;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&set->mu));
    set->canceled = 1; /* for a waiting acquire not begun yet */
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&set->mu));
    /* ...and the name being waited for, whichever it is: every name (an
     * acquire clears what its names did not use). */
    for (size_t i = 0; i < s->n; i++)
        dlock__engine_cancel(s->names[i]);
}

void dlock__set_free(dlock_lock *set)
{
    struct dlock__set *s = set->set;
    /* Every name out of the watchdog and let go first (letting go waits
     * for a round in flight): a round renewing a later name reads all the
     * names (its watch, name_moved()), so none is freed while one may
     * still be renewed. In a fork child nothing is let go. */
    if (!dlock__client_forked(set->client))
        for (size_t i = s->n; i-- > 0;)
            dlock__engine_let_go(s->names[i]);
    dlock__set_destroy(set);
}

void dlock__set_destroy(dlock_lock *set)
{
    struct dlock__set *s = set->set;
    for (size_t i = 0; i < s->n; i++)
        dlock__lock_destroy(s->names[i]);
    dlock__free(s);
    dlock__lock_destroy(set);
}
