/* SPDX-License-Identifier: BSD-3-Clause */
/* The pieces every step of the etcd wait uses (etcd_step.h). */
#include <string.h>

#include "backend.h"
#include "client.h"
#include "clock.h"
#include "etcd_kv.h"
#include "etcd_owed.h"
#include "etcd_session.h"
#include "etcd_step.h"
#include "handle.h"

#define LD DLOCK__ETCD_LD

dlock__etcd *dlock__etcd_step_etcd(const dlock__etcd_wait *w)
{
    return LD(w->l)->ec->e;
}

int64_t dlock__etcd_permits(const dlock_lock *l)
{
    return l->permits ? (int64_t)l->permits : 1;
}

void dlock__etcd_step_line(const dlock__etcd_wait *w, dlock__etcd_line *line)
{
    const dlock__etcd_name *n = &LD(w->l)->range;
    *line = (dlock__etcd_line){.begin = n->begin, .end = n->end, .begin_len = n->len,
                               .end_len = n->len, .gap_begin = n->gap_begin,
                               .gap_end = n->gap_end, .gap_len = n->gap_len};
}

int dlock__etcd_step_transient(int rc)
{
    return rc == DLOCK_EIO || rc == DLOCK_EUNKNOWN || rc == DLOCK_EBUSY;
}

/* ---- the pieces every step uses ------------------------------------------ */

static void cancel_raised(dlock__fd_flag *f);

/* Steps in flight end at once on dlock_lock_cancel(): its pipe is a
 * record on the wait's loop while one is. */
void dlock__etcd_step_cancel_watch(dlock__etcd_wait *w)
{
    if (w->cancel_on)
        return;
    (void)dlock__fd_flag_watch(w->op->loop, &w->cancel, w->l->cancel_fd[0]);
    w->cancel.on_raise = cancel_raised;
    w->cancel_on = 1;
}

static void cancel_unwatch(dlock__etcd_wait *w)
{
    if (w->cancel_on)
        dlock__fd_flag_clear(w->cancel.loop, &w->cancel);
    w->cancel_on = 0;
}

void dlock__etcd_step_cancel_unwatch(dlock__etcd_wait *w)
{
    cancel_unwatch(w);
}

static void cancel_raised(dlock__fd_flag *f)
{
    dlock__etcd_wait *w = DLOCK__OWNER(f, dlock__etcd_wait, cancel);
    w->cancel_on = 0; /* the flag cleared its record */
    if (w->in_req)
        dlock__etcd_req_cancel(&w->q); /* its reply step sees DLOCK_ECANCELED */
    else if (w->in_renew)
        dlock__etcd_renew_cancel(&w->r);
}

void dlock__etcd_step_unwatch(dlock__etcd_wait *w)
{
    dlock__etcd_watch_stop(&w->watch);
    dlock__etcd_watch_stop(&w->delay_watch);
}

/* The request answers: nothing of the step is left on the loop. From
 * inside the start (known without a word to etcd), at the loop's next
 * turn (op.h). */
void dlock__etcd_step_answer(dlock__etcd_wait *w, int code, unsigned flags, int64_t look_ms)
{
    cancel_unwatch(w);
    if (!(flags & DLOCK__V_QUEUED))
        dlock__etcd_step_unwatch(w); /* no place in line kept: no wake-up wanted */
    w->op->v.flags = flags;
    w->op->v.look_ms = look_ms;
    w->op->v.holder_ttl_ms = -1;
    if (w->in_start) {
        dlock__op_complete_soon(w->op, code);
        return;
    }
    w->op->v.code = code;
    dlock__op_complete(w->op);
}

static void posted(dlock__etcd_req *q)
{
    dlock__etcd_wait *w = DLOCK__OWNER(q, dlock__etcd_wait, q);
    w->in_req = 0;
    json_t *rep = q->rc == DLOCK_OK ? q->out : NULL;
    w->next(w, q->rc, q->server_code, rep);
    json_decref(rep);
}

/* POST body (taken) to path, its outcome to next, every member getting
 * try_ms of the step's deadline_ns. */
int dlock__etcd_step_post(dlock__etcd_wait *w, const char *path, json_t *body, int64_t deadline_ns,
                          int64_t try_ms, dlock__etcd_step_fn next, dlock__errbuf *err)
{
    int rc = DLOCK_ENOMEM;
    w->q.err = err;
    w->q.done = posted;
    w->next = next;
    if (body)
        rc = dlock__etcd_req_start(&w->q, dlock__etcd_step_etcd(w), w->op->loop, path, body,
                                   deadline_ns, try_ms);
    json_decref(body);
    w->in_req = rc == DLOCK_OK;
    return rc;
}

/* A step's POST with the client's deadlines (an I/O timeout per member). */
int dlock__etcd_step_call(dlock__etcd_wait *w, const char *path, json_t *body,
                          dlock__etcd_step_fn next)
{
    dlock__etcd *e = dlock__etcd_step_etcd(w);
    return dlock__etcd_step_post(w, path, body, dlock__etcd_call_deadline(e),
                                 dlock__etcd_io_timeout_ms(e), next, &w->l->err);
}

void dlock__etcd_step_cancelled(dlock__etcd_wait *w)
{
    dlock__lock_take_cancel(w->l); /* that cancel is used up */
    dlock__err_set(&w->l->err, "cancelled while waiting for \"%s\"", w->l->name);
}

int dlock__etcd_step_kept(dlock__etcd_wait *w, int rc, json_t *rep)
{
    dlock__etcd_hold *h = &w->s->h;
    int64_t ttl_s;
    if (rc == DLOCK_OK)
        rc = dlock__etcd_keepalive_reply(rep, h->lease, &ttl_s, &w->l->err);
    if (rc == DLOCK_OK) {
        h->valid_until_ns = w->sent_ns + ttl_s * 1000 * DLOCK__NS_PER_MS;
        if (w->s->sess)
            dlock__etcd_session_kept(w->s->sess, h->valid_until_ns);
    } else if (rc == DLOCK_EEXPIRED && w->s->sess) {
        dlock__etcd_session_gone(w->s->sess); /* no new key goes on it */
    }
    return rc;
}

/* ---- leaving the line ----------------------------------------------------- */

void dlock__etcd_step_place_free(dlock__etcd_wait *w)
{
    dlock__etcd_step_unwatch(w);
    if (w->s)
        dlock__etcd_hold_free(w->s);
    w->s = NULL;
    w->owner = 0;
    w->last_only = 0;
    w->first_lease = 0;
    w->fresh = 0;
    w->keyed = 0;
}

/* Revoke h's lease (deleting our key), or on a session delete h's key,
 * within budget_ms (0: the client's deadlines), without a message; next
 * when it is back, whatever it says. */
int dlock__etcd_step_let_go(dlock__etcd_wait *w, const dlock__etcd_hold *h, int64_t budget_ms,
                            dlock__etcd_step_fn next)
{
    dlock__etcd *e = dlock__etcd_step_etcd(w);
    int64_t io = dlock__etcd_io_timeout_ms(e), n = (int64_t)dlock__etcd_endpoint_count(e);
    int64_t deadline = dlock__etcd_call_deadline(e), try_ms = io;
    dlock__etcd_step_unwatch(w);
    if (budget_ms > 0 && budget_ms < io * n) {
        /* shared by the members, so that one that does not answer leaves
         * time for the others */
        deadline = dlock__deadline_after_ms(budget_ms);
        try_ms = DLOCK__MAX(budget_ms / n, 1);
    }
    if (h->on_session)
        return dlock__etcd_step_post(w, "/v3/kv/txn",
                                     dlock__etcd_key_delete_body(h->key, h->key_len, h->lease),
                                     deadline, try_ms, next, NULL);
    return dlock__etcd_step_post(w, "/v3/lease/revoke", dlock__etcd_lease_body(h->lease), deadline,
                                 try_ms, next, NULL);
}

int dlock__etcd_step_revoke_lease(dlock__etcd_wait *w, int64_t lease, int64_t budget_ms,
                                  dlock__etcd_step_fn next)
{
    dlock__etcd_hold h = {.lease = lease};
    return dlock__etcd_step_let_go(w, &h, budget_ms, next);
}

/* Our place goes: its lease's revoke, or on a session its key's delete,
 * unless ours is the last use of a tainted session, which is revoked
 * then (a late create's key goes with it: etcd_session.h). */
int dlock__etcd_step_revoke(dlock__etcd_wait *w, int64_t budget_ms, dlock__etcd_step_fn next)
{
    dlock__etcd_hold h = w->s->h;
    if (w->s->sess && dlock__etcd_session_last_tainted(w->s->sess))
        h.on_session = 0;
    return dlock__etcd_step_let_go(w, &h, budget_ms, next);
}

/* The owed key's copy (etcd_hold.h): DLOCK_OK or DLOCK_ENOMEM. */
static int owe_key(struct dlock__etcd_lockdata *d, const dlock__etcd_hold *h)
{
    char *key = dlock__malloc(h->key_len + 1);
    if (!key)
        return DLOCK_ENOMEM; /* it stays in line until the session lapses */
    memcpy(key, h->key, h->key_len + 1);
    dlock__etcd_owed_key_clear(d);
    d->owed_key = (dlock__etcd_hold){.lease = h->lease, .key = key, .key_len = h->key_len,
                                     .on_session = 1, .valid_until_ns = INT64_MIN};
    return DLOCK_OK;
}

void dlock__etcd_step_owe(dlock__etcd_wait *w, int rc)
{
    /* "not found": the lease is gone already (revoked, or lapsed) */
    if (!w->s || rc == DLOCK_OK || rc == DLOCK_EEXPIRED)
        return;
    /* unknown, or cut by a cancel's budget: the client's settler sends it
     * again until etcd answers (etcd_owed.h), if the place's key may be
     * there (a create that never went out, or a grant that failed, made
     * none: a wait retrying through an outage owes nothing for those);
     * the handle keeps its copy for its next acquire or free, as a
     * settler out of memory owes */
    if (w->keyed && (dlock__etcd_owed_unknown(rc) || rc == DLOCK_ECANCELED))
        dlock__etcd_owe(LD(w->l)->ec, w->l->client->loop, &w->s->h,
                        &(dlock__etcd_owed_by){.owner = w->l, .leave = 1, .sent_ns = INT64_MAX});
    if (w->s->h.on_session)
        (void)owe_key(LD(w->l), &w->s->h);
    else
        LD(w->l)->owed_lease = w->s->h.lease;
}

static void undone(dlock__etcd_wait *w, int rc, long code, json_t *rep);

/* Undo a place in line that ends with the answer (code, flags): revoke
 * the lease, best effort; after a cancel within DLOCK__CANCEL_LEAVE_MS (a
 * revoke that does not make it leaves the lease to its TTL). */
void dlock__etcd_step_undo(dlock__etcd_wait *w, int code, unsigned flags, int brief)
{
    w->undo_code = code;
    w->undo_flags = flags;
    w->undo_brief = brief;
    if (brief)
        cancel_unwatch(w);
    if (!w->s ||
        dlock__etcd_step_revoke(w, brief ? DLOCK__CANCEL_LEAVE_MS : 0, undone) != DLOCK_OK) {
        dlock__etcd_step_place_free(w);
        dlock__etcd_step_answer(w, code, flags, -1);
    }
}

static void undone(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code, (void)rep;
    if (rc == DLOCK_ECANCELED && !w->undo_brief) {
        /* cancelled during the undo: the rest of it is brief */
        dlock__etcd_step_cancelled(w);
        dlock__etcd_step_undo(w, DLOCK_ECANCELED, 0, 1);
        return;
    }
    dlock__etcd_step_owe(w, rc);
    dlock__etcd_step_place_free(w);
    dlock__etcd_step_answer(w, w->undo_code, w->undo_flags, -1);
}

/* A step failed with rc: a cancel or another failure ends a begin (or a
 * try-once) with the place undone; a transient one may be tried again
 * (V_RETRY: the engine backs off and begins or looks again). */
void dlock__etcd_step_failed(dlock__etcd_wait *w, int rc)
{
    if (rc == DLOCK_ECANCELED) {
        dlock__etcd_step_cancelled(w);
        if (w->trying) { /* the engine's leave revokes (a cancel's 100 ms) */
            dlock__etcd_step_answer(w, rc, DLOCK__V_QUEUED, -1);
            return;
        }
        dlock__etcd_step_undo(w, rc, 0, 1);
        return;
    }
    unsigned flags = dlock__etcd_step_transient(rc) ? DLOCK__V_RETRY : 0;
    if (rc == DLOCK_EEXPIRED) {
        /* The lease ended before the attempt did: in line again after a
         * backoff, until the deadline (a look's: ETIMEDOUT, given up). */
        flags = DLOCK__V_RETRY;
        rc = w->l->try_once ? DLOCK_EUNKNOWN : w->trying ? DLOCK_ENOTACQUIRED : DLOCK_ETIMEDOUT;
    }
    dlock__etcd_step_undo(w, rc, flags, 0);
}

/* The backend's start (begin, try) is over. */
int dlock__etcd_step_started(dlock__etcd_wait *w, int rc)
{
    w->in_start = 0;
    if (rc != DLOCK_OK) {
        dlock__etcd_step_place_free(w); /* nothing in flight: the lease runs out by itself */
        return rc;
    }
    if (w->in_req || w->in_renew)
        dlock__etcd_step_cancel_watch(w);
    return DLOCK_OK;
}
