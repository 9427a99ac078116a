/* SPDX-License-Identifier: BSD-3-Clause */
/* Getting in line, re-entering, taking the hold: the etcd wait's begin
 * and grant (etcd_step.h). */
#include <stdatomic.h>
#include <string.h>

#include "backend.h"
#include "clock.h"
#include "engine.h"
#include "etcd_delay_wait.h"
#include "etcd_kv.h"
#include "etcd_session.h"
#include "etcd_step.h"
#include "handle.h"

#define LD DLOCK__ETCD_LD
typedef dlock__etcd_shared_hold shared_hold;

/* ---- taking the hold ------------------------------------------------------ */

/* Ours: the place in line becomes the handle's hold. */
static void take(dlock__etcd_wait *w)
{
    if (dlock__etcd_delay_mark(w, take)) /* a lock-delay's companion first: etcd_delay_wait.h */
        return;
    dlock_lock *l = w->l;
    struct dlock__etcd_client *ec = LD(l)->ec;
    shared_hold *s = w->s;
    w->s = NULL;
    w->owner = 0;
    s->holds = 1;
    if (l->opts.flags & DLOCK_REENTRANT) {
        s->thread_no = dlock__lock_owner_no(l);
        s->listed = 1;
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
        s->next = ec->reentrant;
        ec->reentrant = s;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    }
    atomic_store(&l->holder_ttl_ms, w->holder_ttl_ms);
    dlock__etcd_hold_take(l, s);
    dlock__err_clear(&l->err);
    dlock__etcd_step_answer(w, DLOCK_OK, 0, -1);
}

static void finally_kept(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code;
    dlock__etcd_hold *h = &w->s->h;
    int64_t ttl_s;
    if (rc == DLOCK_OK)
        rc = dlock__etcd_keepalive_reply(rep, h->lease, &ttl_s, NULL);
    if (rc == DLOCK_OK)
        h->valid_until_ns = w->sent_ns + ttl_s * 1000 * DLOCK__NS_PER_MS;
    if (rc == DLOCK_OK || (dlock__etcd_step_transient(rc) && h->valid_until_ns > dlock__now_ns())) {
        take(w);
        return;
    }
    dlock__etcd_step_failed(w, rc);
}

/* Ours is the first key. The wait renewed the lease every third of its
 * TTL, so two thirds of it are normally left, counted from the last
 * renewal sent; only when renewals failed meanwhile is one more sent now
 * (if that fails too, the lease still runs from the last one). */
int dlock__etcd_granted(dlock__etcd_wait *w)
{
    int delayed = 0; /* a dead holder's lock-delay first: etcd_delay_wait.h */
    int rc = dlock__etcd_delay_before_grant(w, &delayed);
    if (rc != DLOCK_OK || delayed)
        return rc;
    dlock__etcd_hold *h = &w->s->h;
    if (h->valid_until_ns - dlock__now_ns() >= h->ttl_s * 2000 / 3 * DLOCK__NS_PER_MS - 1) {
        take(w);
        return DLOCK_OK;
    }
    w->sent_ns = dlock__now_ns();
    dlock__etcd *e = dlock__etcd_step_etcd(w);
    return dlock__etcd_step_post(w, "/v3/lease/keepalive", dlock__etcd_lease_body(h->lease),
                                 dlock__etcd_call_deadline(e), dlock__etcd_io_timeout_ms(e),
                                 finally_kept, NULL);
}

/* ---- getting in line ------------------------------------------------------ */

/* Whether a hold of l may take a key its session kept (etcd_session.h)
 * and give its own back: not a lock-delay's (its companion's lease is
 * named by the token's ID), an election's term (observers tell terms by
 * their keys) or a reentrant hold (re-entered by the owner's other
 * handles by its key). */
static int key_reuse(const dlock_lock *l)
{
    return !(l->opts.flags & DLOCK_REENTRANT) && l->opts.lock_delay_ms <= 0 && !l->is_term;
}

/* A key the session's earlier holds gave back, for this hold: its ID and
 * name instead of the new ID drawn, so the name's line in etcd's index
 * does not grow by a key per hold (etcd_session.h). */
static int take_spare(dlock__etcd_wait *w, dlock__etcd_session *sess)
{
    dlock__etcd_hold *h = &w->s->h;
    const dlock__etcd_name *name = &LD(w->l)->range;
    int64_t id = key_reuse(w->l) ? dlock__etcd_session_spare_take(
                                       sess, h->key, name->len + name->role_len)
                                 : 0;
    if (!id)
        return DLOCK_OK;
    dlock__free(h->key);
    h->key = NULL;
    return dlock__etcd_hold_key_id(h, name, id);
}

/* In line, and what the transaction said: on to the first look (a try
 * that got in line again), or begin's answer. */
static void in_line(dlock__etcd_wait *w)
{
    int rc;
    if (!w->trying) {
        dlock__etcd_step_answer(w, DLOCK_OK, 0, -1);
        return;
    }
    if ((rc = dlock__etcd_after_entry(w)) != DLOCK_OK)
        dlock__etcd_step_failed(w, rc);
}

/* A create whose outcome no reply told (no member answered, a copy went
 * unanswered before the one that did, a cancel cut it) may still be
 * applied after we let the key go: on a session that would make the key
 * again, so the session takes no new keys (etcd_session.h). */
static void taint_if_unknown(dlock__etcd_wait *w, int rc)
{
    if (w->s->sess && (rc == DLOCK_EUNKNOWN || rc == DLOCK_ECANCELED ||
                       rc == DLOCK_ETIMEDOUT || w->q.unknown_before))
        dlock__etcd_session_taint(w->s->sess);
}

static int grant(dlock__etcd_wait *w);

/* etcd says our place's session is gone (revoked behind our back, or
 * lapsed while idle, and nobody's renewal has said so yet): it leaves the
 * table, and the place goes on a new one at once, once per place. */
static int regrant(dlock__etcd_wait *w)
{
    dlock__err_clear(&w->l->err);
    dlock__etcd_session_gone(w->s->sess);
    (void)dlock__etcd_session_put(w->s->sess);
    w->s->sess = NULL;
    w->regranted = 1;
    return grant(w);
}

static void created(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code;
    dlock__etcd_hold *h = &w->s->h;
    dlock__etcd_kv first;
    int ours = 0;
    taint_if_unknown(w, rc);
    /* EIO: no member got it; EBUSY and other refusals: no key made,
     * unless a copy before went unanswered */
    w->keyed = rc == DLOCK_OK || rc == DLOCK_EUNKNOWN || rc == DLOCK_ECANCELED ||
               rc == DLOCK_ETIMEDOUT || w->q.unknown_before;
    /* "lease not found": no key was made on it */
    if (rc == DLOCK_EEXPIRED && w->s->sess && !w->regranted && (rc = regrant(w)) == DLOCK_OK)
        return;
    if (rc == DLOCK_OK)
        rc = dlock__etcd_create_reply(rep, h->lease, dlock__etcd_permits(w->l), &h->rev,
                                      &first, &ours, &w->l->err);
    /* answered the first time: no late copy of it can come */
    h->reusable = rc == DLOCK_OK && !w->q.unknown_before && key_reuse(w->l);
    /* a key a later hold may take: the token names this hold's fence too */
    if (rc == DLOCK_OK && h->on_session && key_reuse(w->l))
        snprintf(h->token + 16, sizeof h->token - 16, "%016llx", (unsigned long long)h->rev);
    if (rc != DLOCK_OK) {
        dlock__etcd_step_failed(w, rc);
        return;
    }
    /* among the first keys: the first, or a semaphore's N; a reader with
     * no other role's key before it */
    w->owner = ours;
    w->first_lease = w->owner ? 0 : first.lease;
    w->fresh = 1;
    dlock__etcd_kv_clear(&first);
    w->renew_every_ms = DLOCK__MAX(h->ttl_s * 1000 / 3, 100);
    w->next_renew_ns = dlock__deadline_after_ms(w->renew_every_ms);
    in_line(w);
}

/* Our key and the first key, in one transaction. */
static int create(dlock__etcd_wait *w)
{
    dlock__etcd_hold *h = &w->s->h;
    const dlock__etcd_name *name = &LD(w->l)->range;
    dlock__etcd_line line;
    dlock__etcd_step_line(w, &line);
    char id[DLOCK_IDENTITY_READ_MAX + 1];
    size_t id_len = name->identity ? dlock__etcd_identity_value(name->identity, id, sizeof id) : 0;
    const char *value = name->identity ? id : NULL;
    if (w->l->elect_value) { /* an election's key holds its value (election.c) */
        value = w->l->elect_value;
        id_len = w->l->elect_value_len;
    }
    return dlock__etcd_step_call(
        w, "/v3/kv/txn",
        dlock__etcd_create_body(h->key, h->key_len, value, id_len, h->lease, &line,
                                dlock__etcd_permits(w->l)),
        created);
}

static void lease_granted(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    dlock__etcd_hold *h = &w->s->h;
    rc = dlock__etcd_grant_reply(rc, code, rep, h->asked_s, &h->ttl_s, &w->l->err);
    if (rc == DLOCK_OK) {
        h->valid_until_ns = w->sent_ns + h->ttl_s * 1000 * DLOCK__NS_PER_MS;
        /* the client's new session; out of memory, a lease of the
         * hold's own (revoked at its release: no other key is on it) */
        if (h->on_session && !(w->s->sess = dlock__etcd_session_new(
                                   LD(w->l)->ec, h->asked_s, h->lease, h->ttl_s,
                                   h->valid_until_ns)))
            h->on_session = 0;
        rc = create(w);
    }
    if (rc != DLOCK_OK)
        dlock__etcd_step_failed(w, rc);
}

/* A lease of our own ID (a grant whose reply was lost can be sent
 * again), then the create: a lease per acquire, or a new session. */
static int grant(dlock__etcd_wait *w)
{
    dlock__etcd_hold *h = &w->s->h;
    int rc = h->on_session ? dlock__etcd_new_lease_id(&h->lease) : DLOCK_OK;
    if (rc != DLOCK_OK)
        return rc;
    w->sent_ns = dlock__now_ns();
    return dlock__etcd_step_call(w, "/v3/lease/grant",
                                 dlock__etcd_grant_body(h->lease, h->asked_s), lease_granted);
}

/* The session's keep-alive is back: on to the create; a session etcd no
 * longer knows leaves the table, and a new one is granted. */
static void session_kept(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code;
    rc = dlock__etcd_step_kept(w, rc, rep);
    if (rc == DLOCK_OK)
        rc = create(w);
    else if (rc == DLOCK_EEXPIRED)
        rc = regrant(w);
    if (rc != DLOCK_OK)
        dlock__etcd_step_failed(w, rc);
}

/* A DLOCK_AUTO_RENEW lock's key goes on the client's session of its
 * TTL: kept alive first when a third of its TTL has passed since its
 * last keep-alive; none yet, or one that may have lapsed, a new one. */
static int on_session(dlock__etcd_wait *w)
{
    dlock__etcd_hold *h = &w->s->h;
    int stale = 0;
    dlock__etcd_session *sess = dlock__etcd_session_find(LD(w->l)->ec, h->asked_s, &stale);
    if (!sess)
        return grant(w);
    w->s->sess = sess;
    h->lease = sess->lease;
    h->ttl_s = sess->ttl_s;
    h->valid_until_ns = dlock__etcd_session_until(sess);
    int rc = take_spare(w, sess);
    if (rc != DLOCK_OK)
        return rc;
    if (!stale)
        return create(w);
    w->sent_ns = dlock__now_ns();
    return dlock__etcd_step_call(w, "/v3/lease/keepalive", dlock__etcd_lease_body(h->lease),
                                 session_kept);
}

/* Get in line: a lease of our own, or the session's (etcd_session.h),
 * then our key and the first key, in one transaction. */
int dlock__etcd_enter(dlock__etcd_wait *w)
{
    dlock__etcd_step_place_free(w);
    /* unknown until this place's read: not an earlier acquire's */
    w->holder_ttl_ms = -1;
    atomic_store(&w->l->holder_ttl_ms, -1);
    w->failures = 0;
    w->regranted = 0;
    if (!(w->s = dlock__calloc(1, sizeof *w->s)))
        return DLOCK_ENOMEM;
    dlock__etcd_hold *h = &w->s->h;
    int session = (w->l->opts.flags & DLOCK_AUTO_RENEW) != 0;
    int rc = dlock__etcd_hold_new(h, &LD(w->l)->range, w->l->opts.ttl_ms, session);
    if (rc == DLOCK_OK)
        rc = session ? on_session(w) : grant(w);
    if (rc != DLOCK_OK)
        dlock__etcd_step_place_free(w);
    return rc;
}

/* ---- re-entry --------------------------------------------------------------- */

/* The re-entry's renewal is back: one more hold of a live hold, or that
 * hold ended (a fresh place in line then), or a failure to answer. */
static void reentered(dlock__etcd_renew_req *r)
{
    dlock__etcd_wait *w = DLOCK__OWNER(r, dlock__etcd_wait, r);
    dlock_lock *l = w->l;
    struct dlock__etcd_client *ec = LD(l)->ec;
    shared_hold *s = w->re;
    int rc = r->rc, own = w->re_own, started = 0;
    w->in_renew = 0;
    w->re = NULL;
    if (rc == DLOCK_OK) {
        if (own)
            l->holds++; /* (a handle found lost meanwhile stays LOST: fsm.c) */
        else
            dlock__etcd_hold_take(l, s);
        dlock__lock_granted(l, r->valid_until_ns);
        w->reentered = 1;
        dlock__etcd_step_answer(w, DLOCK_OK, 0, -1);
        return;
    }
    int ended = rc == DLOCK_EEXPIRED || rc == DLOCK_ENOTOWNER;
    if (ended)
        dlock__etcd_hold_unlist(ec, s); /* that hold has ended: not one to enter */
    if (own) {
        (void)dlock__etcd_hold_drop_of(ec, s, 1); /* the hold counted; ours remain */
        if (ended) /* the lease is gone or going: nothing to tell etcd */
            dlock__engine_ended(l, rc);
    } else if (dlock__etcd_hold_drop_of(ec, s, 1)) { /* its other handles let go meanwhile */
        dlock__etcd_hold_free(s);
    }
    if (!ended) {
        if (rc == DLOCK_ECANCELED)
            dlock__etcd_step_cancelled(w);
        dlock__etcd_step_answer(w, rc, dlock__etcd_step_transient(rc) ? DLOCK__V_RETRY : 0, -1);
        return;
    }
    dlock__err_clear(&l->err);
    /* the owner may hold it anew through another handle; else a fresh place */
    rc = own ? dlock__etcd_reenter(w, &started) : DLOCK_OK;
    if (rc == DLOCK_OK && !started)
        rc = dlock__etcd_enter(w);
    if (rc != DLOCK_OK)
        dlock__etcd_step_answer(w, rc, 0, -1);
}

/* A re-entry: one more hold of the owner's live hold, through this handle
 * (it holds already) or through another handle of the owner. One
 * keep-alive of the lease and a read of our key (etcd_renew.h), so that
 * the handle's validity counts from its own operation and a hold that
 * ended is not re-entered. *started 0: nothing to re-enter. */
int dlock__etcd_reenter(dlock__etcd_wait *w, int *started)
{
    dlock_lock *l = w->l;
    struct dlock__etcd_client *ec = LD(l)->ec;
    int own = LD(l)->sh != NULL; /* HELD through this handle */
    shared_hold *s = own ? LD(l)->sh : dlock__etcd_reentrant_find(l);
    *started = 0;
    if (!s)
        return DLOCK_OK;
    if (own) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
        s->holds++;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    }
    w->re = s;
    w->re_own = own;
    w->r.err = &l->err;
    w->r.done = reentered;
    /* its fields change only while unshared; the request copies them */
    int rc =
        dlock__etcd_renew_start(&w->r, ec->e, &s->h, dlock__etcd_call_deadline(ec->e), w->op->loop);
    if (rc != DLOCK_OK) {
        if (dlock__etcd_hold_drop_of(ec, s, 1) && !own)
            dlock__etcd_hold_free(s);
        w->re = NULL;
        return rc;
    }
    w->in_renew = 1;
    *started = 1;
    return DLOCK_OK;
}
