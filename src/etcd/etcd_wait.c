/* SPDX-License-Identifier: BSD-3-Clause */
/* etcd's wait in the engine's (etcd_wait.h). */
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include "backend.h"
#include "clock.h"
#include "engine.h"
#include "etcd_kv.h"
#include "etcd_step.h"
#include "etcd_wait.h"
#include "handle.h"
#include "loop_poll.h"
#include "rand.h"

/* A waiter reads the line again at least this often even when its watch
 * says nothing: a watch on a member cut off from the others stays silent. */
#define RECHECK_MS 2000

/* etcd 3.4 registers a watch at the revision it read just before taking
 * its store's lock (v3rpc/watch.go: wsrev + 1; mvcc/watchable_store.go,
 * watch()): a write that lands between the two makes the watcher
 * "unsynced", and its events then come only when the store's sync loop
 * next catches it up, every 100 ms. Under contention that is a hand-over
 * in a few hundred (S3 on one member: 13 of 1993 deletions reached their
 * watcher 68-92 ms late, the rest in 1.4 ms). Nothing in the stream says
 * so, so while a watch is younger than one pass of that loop the waiter
 * also reads its predecessor every CATCHUP_LOOK_MS: a wait that ends
 * sooner pays nothing, a longer one about six reads (no writes). */
#define CATCHUP_LOOK_MS 20
#define CATCHUP_WINDOW_MS 110

/* A watch stream lives this long at most (the wait stops it sooner). */
#define STREAM_MAX_MS (10 * 60 * 1000)

#define LD DLOCK__ETCD_LD
typedef dlock__etcd_shared_hold shared_hold;

/* Get in line: a reentrant kind's re-entry, else a place of our own. */
static int get_in_line(dlock__etcd_wait *w)
{
    int started = 0, rc = DLOCK_OK;
    if ((w->l->opts.flags & DLOCK_REENTRANT) && dlock__etcd_reentrant_crossed(w->l)) {
        dlock__err_set(&w->l->err, "this owner (client x thread) holds \"%s\" in another "
                       "mode (plain, shared, exclusive) through another handle (upgrade and "
                       "downgrade are not offered: release first)", w->l->name);
        return DLOCK_EINVAL; /* not a wait for itself */
    }
    if (w->l->opts.flags & DLOCK_REENTRANT)
        rc = dlock__etcd_reenter(w, &started);
    if (rc == DLOCK_OK && !started)
        rc = dlock__etcd_enter(w);
    return rc;
}

static void owed_paid(dlock__etcd_wait *w, int rc, long code, json_t *rep);

/* What an earlier wait left owed, each once (a key on a session first,
 * then a lease), with a cancel's budget: a member still down costs this
 * acquire that much at most; then into line. */
static int pay_then_enter(dlock__etcd_wait *w, int key_tried)
{
    struct dlock__etcd_lockdata *d = LD(w->l);
    w->paying_key = !key_tried && d->owed_key.key;
    if (w->paying_key)
        return dlock__etcd_step_let_go(w, &d->owed_key, DLOCK__CANCEL_LEAVE_MS, owed_paid);
    if (d->owed_lease)
        return dlock__etcd_step_revoke_lease(w, d->owed_lease, DLOCK__CANCEL_LEAVE_MS, owed_paid);
    return get_in_line(w);
}

/* The owed revoke (or key delete) is back: paid, or owed again if it did
 * not make it (the lease lapses by itself meanwhile); on into line
 * either way, but a cancel ends the begin. */
static void owed_paid(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code, (void)rep;
    int key = w->paying_key;
    if (rc == DLOCK_OK || rc == DLOCK_EEXPIRED) {
        if (key)
            dlock__etcd_owed_key_clear(LD(w->l));
        else
            LD(w->l)->owed_lease = 0;
    }
    if (rc == DLOCK_ECANCELED) {
        dlock__etcd_step_cancelled(w);
        dlock__etcd_step_answer(w, rc, 0, -1);
        return;
    }
    if ((rc = key ? pay_then_enter(w, 1) : get_in_line(w)) != DLOCK_OK)
        dlock__etcd_step_answer(w, rc, 0, -1);
}

int dlock__etcd_wait_begin(dlock_lock *l, dlock__op *op)
{
    dlock__etcd_wait *w = LD(l)->wait;
    if (!w) {
        if (!(w = dlock__calloc(1, sizeof *w)))
            return DLOCK_ENOMEM;
        w->l = l;
        LD(l)->wait = w;
    }
    w->op = op;
    w->trying = 0;
    w->reentered = 0;
    w->breaks = 0;
    w->in_start = 1;
    dlock__etcd_step_place_free(w); /* a wait that ended without a word (a refused start) */
    dlock__err_clear(&l->err);
    if (LD(l)->sh && dlock__lock_get_state(l) == DLOCK_STATE_LOST)
        /* found lost while a re-entry backed off: start over, as a lost
         * handle's acquire does */
        dlock__engine_ended(l, DLOCK_ELOST);
    /* A revoke a cancel cut off is sent again first */
    return dlock__etcd_step_started(w, pay_then_enter(w, 0));
}

/* ---- looking ------------------------------------------------------------------ */

static void watch_ended(dlock__etcd_watch *ww)
{
    dlock__etcd_wait *w = DLOCK__OWNER(ww, dlock__etcd_wait, watch);
    if (ww->look || dlock__now_ns() - ww->started_ns >= RECHECK_MS * DLOCK__NS_PER_MS)
        w->breaks = 0;
    /* A stream the member took that broke (a reset, a member restarting)
     * may have missed the deletion: look again now, as the blocking wait
     * did after a failed stream, else a release just after waits for the
     * next look, RECHECK_MS. Once only until a stream lives RECHECK_MS or
     * sees a deletion: one refused, or cut again at once, leaves the wait
     * to its looks (no loop of looks and watches). */
    if (!ww->look && (!ww->created || w->breaks++ > 0))
        return;
    /* The only key before ours at the last read went, and the stream
     * covers that read: ours is the first, without another read (keys
     * before ours only go: a new one is created after ours). The grant
     * still checks our lease (dlock__etcd_granted), which our key lives
     * by. This takes a read off every hand-over. */
    if (ww->look && ww->deleted && w->last_only && ww->created && ww->created_rev <= ww->read_rev)
        w->owner = 1;
    /* The key before ours went: wake the wait's sleep for a look, as a
     * release message does (wakeup_chan.c). */
    dlock__lock_waiter_wake(w->l);
}

/* The stream started after the line changed since our read: what
 * changed between is not in it (the key before ours may be gone
 * already), so look again now; that read's revision is one the stream
 * covers, and the stream stays. Once per stream. */
static void watch_moved(dlock__etcd_watch *ww)
{
    dlock__lock_waiter_wake(DLOCK__OWNER(ww, dlock__etcd_wait, watch)->l);
}

/* Watch only the key just before ours (no herd). The stream starts at
 * the member's current revision, not at the read's (+1): etcd 3.4 sends
 * the events of a watch that starts in the past only when it catches it
 * up, every 100 ms, and most hand-overs under contention were that
 * late. A deletion between the read and the stream's start is not in
 * the stream, so a stream taken at a later revision than the read's
 * wakes the wait for one more read (watch_moved); a stream on the key
 * already is kept, as it covers every read since it was taken. One that
 * cannot start leaves the wait to its looks.
 *
 * A semaphore's waiter watches the whole line for deletions instead: the
 * deletion of any key before it may let it in (the first waiter is in
 * when any of the N holders goes, and every waiter behind moves up with
 * it), and etcd cannot watch "the keys created before mine". Watching
 * only the N-th key ahead would miss a nearer holder's release. The cost
 * is a look per waiter per deletion in the line (docs/backends.md). */
static void watch_pred(dlock__etcd_wait *w, const dlock__etcd_kv *pred, int64_t rev)
{
    dlock__etcd_watch *ww = &w->watch;
    const dlock__etcd_name *name = &LD(w->l)->range;
    int line = dlock__etcd_permits(w->l) > 1;
    const char *key = line ? name->begin : pred->key;
    size_t key_len = line ? name->len : pred->key_len;
    if (ww->running && ww->key_len == key_len && memcmp(ww->key, key, key_len) == 0) {
        /* Kept: one not taken yet compares its start with this read. */
        ww->read_rev = rev;
        return;
    }
    dlock__etcd_step_unwatch(w);
    ww->ended = watch_ended;
    ww->moved = watch_moved;
    (void)dlock__etcd_watch_start(ww, dlock__etcd_step_etcd(w), w->op->loop, key, key_len,
                                  line ? name->end : NULL, line ? name->len : 0, rev,
                                  dlock__deadline_after_ms(STREAM_MAX_MS));
}

/* Our key is gone (our lease ended while we waited: a pause longer than
 * the TTL, or a break): out of line; the next look gets in line again,
 * after the engine's backoff. */
static void gone(dlock__etcd_wait *w)
{
    dlock__etcd_step_undo(w, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY, 0);
}

/* A look failed in a way another look may not: still in line, the next
 * one after a backoff (the message stays until a look succeeds). */
static void look_failed(dlock__etcd_wait *w, int rc)
{
    if (rc == DLOCK_EEXPIRED) {
        gone(w);
        return;
    }
    if (!dlock__etcd_step_transient(rc)) {
        dlock__etcd_step_failed(w, rc);
        return;
    }
    int64_t pause = dlock__backoff_ms(w->failures++, 10, w->l->opts.retry_max_ms);
    dlock__etcd_step_answer(w, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY | DLOCK__V_QUEUED, pause);
}

static void pred_read(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code;
    dlock__etcd_kv pred;
    int64_t rev = 0;
    size_t ahead = 0;
    if (rc == DLOCK_OK)
        rc = dlock__etcd_predecessor_reply(rep, &pred, &rev, &ahead, &w->l->err);
    if (rc != DLOCK_OK) {
        look_failed(w, rc);
        return;
    }
    w->failures = 0;
    /* nobody before us, or fewer than a semaphore's N: ours */
    if ((int64_t)ahead < dlock__etcd_permits(w->l)) {
        dlock__etcd_kv_clear(&pred);
        w->owner = 1;
        if ((rc = dlock__etcd_granted(w)) != DLOCK_OK)
            dlock__etcd_step_failed(w, rc);
        return;
    }
    w->last_only = dlock__etcd_permits(w->l) == 1 && ahead == 1;
    watch_pred(w, &pred, rev);
    dlock__etcd_kv_clear(&pred);
    dlock__err_clear(&w->l->err);
    int64_t look_ms = DLOCK__MIN(RECHECK_MS, DLOCK__MAX(dlock__ms_until(w->next_renew_ns), 0));
    if (w->watch.running &&
        dlock__now_ns() - w->watch.started_ns < CATCHUP_WINDOW_MS * DLOCK__NS_PER_MS)
        look_ms = DLOCK__MIN(look_ms, CATCHUP_LOOK_MS);
    dlock__etcd_step_answer(w, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY | DLOCK__V_QUEUED, look_ms);
}

/* A look's POST: the client's deadlines, but not past the wait's, as
 * the blocking wait's looks (op.h): a member stopped mid-look ends the
 * look at the deadline, and the engine leaves the line then. */
static int look_call(dlock__etcd_wait *w, const char *path, json_t *body,
                     dlock__etcd_step_fn next)
{
    dlock__etcd *e = dlock__etcd_step_etcd(w);
    int64_t deadline = dlock__etcd_call_deadline(e);
    if (w->op->deadline_ns > 0)
        deadline = DLOCK__MIN(deadline, w->op->deadline_ns);
    return dlock__etcd_step_post(w, path, body, deadline, dlock__etcd_io_timeout_ms(e), next,
                                 &w->l->err);
}

static int read_pred(dlock__etcd_wait *w)
{
    dlock__etcd_line line;
    dlock__etcd_step_line(w, &line);
    dlock__etcd_hold *h = &w->s->h;
    return look_call(w, "/v3/kv/txn",
                     dlock__etcd_predecessor_body(h->key, h->key_len, h->rev, &line,
                                                  dlock__etcd_permits(w->l)),
                     pred_read);
}

static void kept(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code;
    rc = dlock__etcd_step_kept(w, rc, rep); /* a session gone: the next place on a new one */
    if (rc == DLOCK_OK) {
        w->next_renew_ns = dlock__deadline_after_ms(w->renew_every_ms);
        rc = read_pred(w);
    }
    if (rc != DLOCK_OK)
        look_failed(w, rc);
}

/* A look in line: the waiter's own lease kept alive every third of its
 * TTL, then the key before ours read. */
static int look(dlock__etcd_wait *w)
{
    if (w->owner)
        return dlock__etcd_granted(w);
    if (dlock__now_ns() < w->next_renew_ns)
        return read_pred(w);
    w->sent_ns = dlock__now_ns();
    return look_call(w, "/v3/lease/keepalive", dlock__etcd_lease_body(w->s->h.lease), kept);
}

/* The holder's TTL left, for dlock_lock_holder_ttl_ms(): read once per
 * place in line; a failure leaves it unknown. A try-once then leaves the
 * line; a waiter looks. */
static void holder_read(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code;
    int64_t ttl = -1;
    if (rc == DLOCK_OK && dlock__etcd_ttl_reply(rep, &ttl, NULL, NULL) != DLOCK_OK)
        ttl = -1;
    w->holder_ttl_ms = ttl;
    w->first_lease = 0;
    w->fresh = 0;
    atomic_store(&w->l->holder_ttl_ms, ttl);
    if (rc == DLOCK_ECANCELED) {
        dlock__etcd_step_failed(w, rc);
        return;
    }
    if (w->l->try_once) {
        if (w->l->permits > 1)
            dlock__err_set(&w->l->err, "all %u permits held", w->l->permits);
        else
            dlock__err_set(&w->l->err, "held by another owner");
        dlock__etcd_step_undo(w, DLOCK_ENOTACQUIRED, 0, 0);
        return;
    }
    /* In line, behind another key: this try answers so (the line was
     * read by the transaction; the observer counts it, as it counts
     * every read of the line), and the next, at once, looks at the key
     * before ours. */
    w->failures = 0;
    dlock__etcd_step_answer(w, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY | DLOCK__V_QUEUED, 0);
}

/* The first try after getting in line answers from what the transaction
 * said: ours (granted, no read), or the holder's TTL read first. */
int dlock__etcd_after_entry(dlock__etcd_wait *w)
{
    if (w->owner) {
        w->fresh = 0;
        return dlock__etcd_granted(w);
    }
    if (w->first_lease)
        return dlock__etcd_step_call(w, "/v3/lease/timetolive",
                                     dlock__etcd_lease_body(w->first_lease), holder_read);
    holder_read(w, DLOCK_EIO, 0, NULL); /* a first key without a lease: TTL unknown */
    return DLOCK_OK;
}

/* A try: the first after getting in line answers from the transaction,
 * the next ones look; a waiter whose key went gets in line again. */
int dlock__etcd_wait_try(dlock_lock *l, dlock__op *op)
{
    dlock__etcd_wait *w = LD(l)->wait;
    w->op = op;
    w->trying = 1;
    w->in_start = 1;
    if (w->reentered) {
        w->reentered = 0;
        dlock__etcd_step_answer(w, DLOCK_OK, 0, -1);
        return dlock__etcd_step_started(w, DLOCK_OK);
    }
    int rc;
    if (!w->s)
        rc = dlock__etcd_enter(w); /* our key went: in line again */
    else if (w->fresh)
        rc = dlock__etcd_after_entry(w); /* the first try after begin */
    else
        rc = look(w);
    return dlock__etcd_step_started(w, rc);
}

/* ---- watching and leaving ----------------------------------------------------- */

int dlock__etcd_wait_watch(dlock_lock *l)
{
    const dlock__etcd_wait *w = LD(l)->wait;
    /* The stream is the looks' own (every wait here has one, wake-ups or
     * not): nothing to confirm. */
    return w && w->s && !w->owner ? DLOCK_OK : DLOCK_ENOTSUP;
}

int dlock__etcd_wait_watch_ready(dlock_lock *l, int64_t until_ns)
{
    (void)l, (void)until_ns;
    return 1; /* the stream covers the read, or says it does not (watch_moved) */
}

void dlock__etcd_wait_unwatch(dlock_lock *l)
{
    if (LD(l)->wait)
        dlock__etcd_step_unwatch(LD(l)->wait);
}

int dlock__etcd_wait_handed(dlock_lock *l)
{
    (void)l;
    return 0; /* a deletion says "look again", never "yours" */
}

static void left(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code, (void)rep;
    if (rc == DLOCK_ECANCELED && !w->leave_brief) {
        /* A cancel during the deadline's leave ends it as one during the
         * wait does: the revoke again, within DLOCK__CANCEL_LEAVE_MS (one
         * that does not make it leaves the lease to its TTL). The
         * acquire, which the deadline ended, uses the cancel up. */
        w->leave_brief = 1;
        if (dlock__etcd_step_revoke(w, DLOCK__CANCEL_LEAVE_MS, left) == DLOCK_OK)
            return;
    }
    dlock__etcd_step_owe(w, rc);
    dlock__etcd_step_cancel_unwatch(w);
    dlock__etcd_step_place_free(w);
    dlock__op_complete(w->op); /* the engine's code stands */
}

int dlock__etcd_wait_leave(dlock_lock *l, int64_t timeout_ms, dlock__op *op)
{
    dlock__etcd_wait *w = LD(l)->wait;
    if (!w)
        return DLOCK_ENOTACQUIRED;
    w->op = op;
    w->trying = 0;
    dlock__etcd_step_unwatch(w);
    if (!w->s)
        return DLOCK_ENOTACQUIRED; /* not in line: nothing to send */
    w->leave_brief = timeout_ms <= DLOCK__CANCEL_LEAVE_MS;
    int rc = dlock__etcd_step_revoke(w, timeout_ms, left);
    if (rc != DLOCK_OK)
        dlock__etcd_step_place_free(w);
    else if (!w->leave_brief)
        dlock__etcd_step_cancel_watch(w); /* a cancel cuts the deadline's leave short */
    return rc;
}

void dlock__etcd_wait_free(dlock_lock *l, int forked)
{
    dlock__etcd_wait *w = LD(l)->wait;
    if (!w)
        return;
    if (w->s && forked)
        w->s->sess = NULL;
    if (w->s)
        dlock__etcd_hold_free(w->s);
    dlock__free(w);
    LD(l)->wait = NULL;
}
