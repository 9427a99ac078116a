/* SPDX-License-Identifier: BSD-3-Clause */
/* The client's settler: owed revokes and deletes sent again until etcd
 * answers them (etcd_owed.h). */
#include <stddef.h>
#include <string.h>

#include "clock.h"
#include "common.h"
#include "etcd_json.h"
#include "etcd_kv.h"
#include "etcd_owed.h"
#include "etcd_release.h"
#include "etcd_request.h"
#include "etcd_session.h"
#include "loop_thread.h"

#define OWED_FIRST_BACKOFF_MS 100
#define OWED_MAX_BACKOFF_MS 1000
/* A lease whose TTL we never learned (an owed lease a relet or a cut
 * leave left, its TTL not kept): sent again for this long at most. */
#define OWED_UNKNOWN_TTL_S 60
/* With no leader no lease expires, and a new leader renews every lease
 * by its TTL when it takes over: an unknown answer keeps the record at
 * least this long past one TTL from now, the time an election may take. */
#define OWED_ELECTION_MARGIN_MS 5000
/* Records per client at most: past it the oldest is dropped (its key
 * ends with its lease, as before the settler). */
#define OWED_MAX_RECORDS 64

typedef struct settler settler;

/* One owed request. */
typedef struct owed {
    settler *st;
    dlock__etcd_req q;
    dlock__timer again;  /* the backoff's end */
    const void *owner;   /* the handle that owed it (supersedes()) */
    int leave;           /* a waiter's leave, not a hold's release */
    int64_t lease;       /* revoked, or the lease the key must still be on */
    char *key;           /* a key on a session: deleted, not its lease revoked */
    size_t key_len;
    int64_t rev;         /* the key's create revision (0: unknown), compared too */
    int64_t delay_lease; /* the lock-delay companion, revoked after a clean send */
    int64_t ttl_ms;      /* the lease's TTL, as far as known */
    int64_t until_ns;    /* past this the lease has ended anyway */
    /* The first send (the engine's) and the hold's validity then: "not
     * found" after it means that send went through (valid_until INT64_MIN:
     * never counted so). */
    int64_t first_sent_ns, valid_until_ns;
    int64_t backoff_ms;
    int in_flight;
    int companion;       /* the request in flight is the companion's revoke */
    int dropped;         /* replaced or over the cap: ends when it is back */
    struct owed *next, *prev;
} owed;

struct settler {
    dlock__loop_thread lt;
    dlock__etcd *e;
    dlock__post take; /* moves the handed-over records onto the loop */
    pthread_mutex_t mu;
    owed *incoming; /* under mu: handed over, not on the loop yet */
    owed *active;   /* the loop's own, newest first */
    int closing;    /* the close cuts: a record that ends is freed */
};

_Atomic int dlock__etcd_owed_off_for_tests;

int dlock__etcd_owed_unknown(int rc)
{
    return rc == DLOCK_EIO || rc == DLOCK_EUNKNOWN || rc == DLOCK_EBUSY ||
           rc == DLOCK_ETIMEDOUT;
}

static dlock__loop *settler_loop(settler *st)
{
    return dlock__loop_thread_loop(&st->lt);
}

static void owed_free(owed *o)
{
    dlock__free(o->key);
    dlock__free(o);
}

static void unlink_active(owed *o)
{
    settler *st = o->st;
    if (o->prev)
        o->prev->next = o->next;
    else
        st->active = o->next;
    if (o->next)
        o->next->prev = o->prev;
}

static void owed_end(owed *o)
{
    unlink_active(o);
    owed_free(o);
}

static void sent(dlock__etcd_req *q);

/* The owed key's delete (etcd_kv.h), its create revision compared too
 * when known: a resend long after the first copy deletes only the key
 * the hold made. */
static json_t *key_delete_body(const owed *o)
{
    return dlock__etcd_json_if_created(dlock__etcd_key_delete_body(o->key, o->key_len, o->lease),
                                       o->key, o->key_len, o->rev);
}

static int send_now(owed *o)
{
    settler *st = o->st;
    o->q.err = NULL;
    o->q.done = sent;
    json_t *body = o->companion ? dlock__etcd_lease_body(o->delay_lease)
                   : o->key     ? key_delete_body(o)
                                : dlock__etcd_lease_body(o->lease);
    const char *path = o->key && !o->companion ? "/v3/kv/txn" : "/v3/lease/revoke";
    int rc = dlock__etcd_req_post(&o->q, st->e, settler_loop(st), path, body,
                                  dlock__etcd_call_deadline(st->e));
    o->in_flight = rc == DLOCK_OK;
    return rc;
}

static void again_fired(dlock__timer *t)
{
    owed *o = DLOCK__OWNER(t, owed, again);
    if (send_now(o) != DLOCK_OK)
        owed_end(o); /* out of memory: the lease lapses by its TTL */
}

/* Sent again after the backoff, unless the lease ends before that. */
static void resend_later(owed *o)
{
    int64_t at = dlock__now_ns() + o->backoff_ms * DLOCK__NS_PER_MS;
    if (at >= o->until_ns) {
        owed_end(o);
        return;
    }
    o->backoff_ms = o->backoff_ms * 2 > OWED_MAX_BACKOFF_MS ? OWED_MAX_BACKOFF_MS
                                                            : o->backoff_ms * 2;
    o->again.due_ns = at;
    o->again.fire = again_fired;
    if (dlock__timer_set(settler_loop(o->st), &o->again) != DLOCK_OK)
        owed_end(o);
}

/* The owed request is back: done or definitely refused (the lease or the
 * key gone, "not found"), paid; unknown again, sent again later. A clean
 * release's companion goes next, once. */
static void sent(dlock__etcd_req *q)
{
    owed *o = DLOCK__OWNER(q, owed, q);
    int rc = q->rc;
    o->in_flight = 0;
    if (rc == DLOCK_OK && o->key && !o->companion)
        rc = dlock__etcd_key_delete_reply(q->out, NULL);
    if (q->rc == DLOCK_OK)
        json_decref(q->out);
    if (o->st->closing || o->companion || o->dropped) {
        owed_end(o);
        return;
    }
    if (dlock__etcd_owed_unknown(rc)) {
        /* no leader, or none reached: no lease ends meanwhile, and the
         * next leader renews it by its TTL */
        int64_t at = dlock__now_ns() + (o->ttl_ms + OWED_ELECTION_MARGIN_MS) * DLOCK__NS_PER_MS;
        o->until_ns = DLOCK__MAX(o->until_ns, at);
        resend_later(o);
        return;
    }
    /* "Not found" after the engine's send went unanswered while the hold
     * was valid: that send went through, a clean release (as revoked() in
     * etcd_release.c counts it), so its companion goes too. */
    if (rc == DLOCK_EEXPIRED && o->valid_until_ns != INT64_MIN &&
        o->first_sent_ns < o->valid_until_ns)
        rc = DLOCK_OK;
    o->companion = rc == DLOCK_OK && o->delay_lease;
    if (!o->companion || send_now(o) != DLOCK_OK)
        owed_end(o);
}

/* A record replaced or over the cap: cut now if in flight (its sent()
 * ends it), else ended. */
static void drop(owed *o)
{
    o->dropped = 1;
    if (o->in_flight) {
        dlock__etcd_req_cancel(&o->q);
        return;
    }
    dlock__timer_clear(settler_loop(o->st), &o->again);
    owed_end(o);
}

/* Whether newer record o makes a superfluous. A key on a session is
 * its own target: the same key on the same lease (a wait on a session
 * that fails again and again owes its one key's delete). Otherwise the
 * same handle's older record of its kind (a wait that fails again and
 * again owes one leave, not one per try; an older one's lease ends with
 * its TTL). Never by the handle alone when a key is involved: a handle
 * freed and a new one made at its address would replace a key's delete,
 * leaving that key held on a session lease kept alive. */
static int supersedes(const owed *o, const owed *a)
{
    if (a->dropped || a->leave != o->leave)
        return 0;
    if (a->key || o->key)
        return a->key && o->key && a->lease == o->lease && a->key_len == o->key_len &&
               memcmp(a->key, o->key, o->key_len) == 0;
    return a->owner == o->owner;
}

/* o is new: a record it supersedes goes, and the oldest past
 * OWED_MAX_RECORDS. */
static void make_room(settler *st, const owed *o)
{
    owed *last = NULL;
    for (owed *a = st->active, *next; a; a = next) {
        next = a->next;
        if (supersedes(o, a))
            drop(a);
        else if (!a->dropped)
            last = a;
    }
    size_t live = 0;
    for (owed *a = st->active; a; a = a->next)
        live += !a->dropped;
    if (live >= OWED_MAX_RECORDS && last)
        drop(last);
}

/* On the loop: the records handed over start their backoff, in the
 * order they were owed. */
static void take_posted(dlock__post *p)
{
    settler *st = DLOCK__OWNER(p, settler, take);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&st->mu));
    owed *list = st->incoming, *fifo = NULL;
    st->incoming = NULL;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&st->mu));
    while (list) { /* handed over newest first */
        owed *o = list;
        list = o->next;
        o->next = fifo;
        fifo = o;
    }
    while (fifo) {
        owed *o = fifo;
        fifo = o->next;
        make_room(st, o);
        o->prev = NULL;
        o->next = st->active;
        if (st->active)
            st->active->prev = o;
        st->active = o;
        resend_later(o);
    }
}

/* The client's settler, made on first use (under ec->mu); NULL when out
 * of memory or threads. */
static settler *settler_get(dlock__etcd_client *ec, dlock__loop *loop)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
    settler *st = ec->owed;
    if (!st && (st = dlock__calloc(1, sizeof *st))) {
        st->e = ec->e;
        st->take.run = take_posted;
        DLOCK__CHECK_PTHREAD(pthread_mutex_init(&st->mu, NULL));
        if (dlock__loop_thread_start(&st->lt, loop) != DLOCK_OK) {
            DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&st->mu));
            dlock__free(st);
            st = NULL;
        }
        ec->owed = st;
        ec->owed_close = dlock__etcd_owed_close;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    return st;
}

/* Past this, the lease has ended whatever we send, unless an unknown
 * answer comes first (sent() pushes it then): one TTL and an election's
 * margin after its end as last known (a session's: while the client
 * keeps it, the session's life, its keep-alives answered). */
static int64_t owed_until(const dlock__etcd_hold *h, int64_t ttl_ms)
{
    int64_t now = dlock__now_ns();
    int64_t end = h->valid_until_ns > now ? h->valid_until_ns : now;
    return end + (ttl_ms + OWED_ELECTION_MARGIN_MS) * DLOCK__NS_PER_MS;
}

void dlock__etcd_owe(dlock__etcd_client *ec, dlock__loop *loop, const dlock__etcd_hold *h,
                     const dlock__etcd_owed_by *by)
{
    if (!h->lease || (h->on_session && !h->key) || dlock__etcd_owed_off_for_tests)
        return;
    owed *o = dlock__calloc(1, sizeof *o);
    if (!o)
        return;
    int64_t ttl_ms = (h->ttl_s > 0 ? h->ttl_s : OWED_UNKNOWN_TTL_S) * 1000;
    *o = (owed){.owner = by->owner, .leave = by->leave, .lease = h->lease,
                .rev = h->on_session ? h->rev : 0, .delay_lease = h->delay_lease,
                .ttl_ms = ttl_ms, .until_ns = owed_until(h, ttl_ms),
                .first_sent_ns = by->sent_ns, .valid_until_ns = h->valid_until_ns,
                .backoff_ms = OWED_FIRST_BACKOFF_MS};
    if (h->on_session) {
        if (!(o->key = dlock__malloc(h->key_len + 1))) {
            dlock__free(o);
            return;
        }
        memcpy(o->key, h->key, h->key_len);
        o->key[h->key_len] = '\0';
        o->key_len = h->key_len;
    }
    settler *st = settler_get(ec, loop);
    if (!st) {
        owed_free(o);
        return;
    }
    o->st = st;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&st->mu));
    o->next = st->incoming;
    st->incoming = o;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&st->mu));
    dlock__loop_thread_post(&st->lt, &st->take);
}

/* ---- the engine's release, owing what it could not settle ----------------- */

typedef struct owing {
    dlock__op inner; /* the release's request, on the engine's loop */
    dlock__op *op;   /* the engine's */
    dlock__etcd_client *ec;
    dlock__loop *app;
    dlock__etcd_hold h; /* what was sent: its key is our copy */
    int64_t sent_ns;
    int on_heap; /* allocated here, not in the op's scratch (op.h) */
} owing;

/* Where the release under an owing record starts in the scratch it
 * shares (aligned as the scratch is). */
#define OWING_SPAN ((sizeof(owing) + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1))

/* The owing record: in what a blocking release lends (op.h), with the
 * rest lent on to the release under it (no allocation of either per
 * release), else on the heap. */
static owing *owing_new(dlock__op *op)
{
    int on_heap = op->scratch_len < OWING_SPAN;
    owing *w = on_heap ? dlock__calloc(1, sizeof *w) : memset(op->scratch, 0, sizeof(owing));
    if (w)
        w->on_heap = on_heap;
    return w;
}

static void owing_free(owing *w)
{
    dlock__free(w->h.key);
    if (w->on_heap)
        dlock__free(w);
}

static void owing_answered(dlock__op *inner)
{
    owing *w = DLOCK__OWNER(inner, owing, inner);
    dlock__op *op = w->op;
    op->v.code = inner->v.code;
    /* our own delete removed the key, and no copy of it may land later
     * (it went out once): the session's next hold may take the key */
    if (inner->v.code == DLOCK_OK && !(inner->v.flags & DLOCK__V_RESENT) && w->h.reusable &&
        w->h.on_session && w->h.rev && w->h.key)
        dlock__etcd_session_spare_put(w->ec, w->h.lease, w->h.key, w->h.key_len, w->h.key_id);
    if (dlock__etcd_owed_unknown(inner->v.code))
        dlock__etcd_owe(w->ec, w->app, &w->h,
                        &(dlock__etcd_owed_by){.owner = op->l, .sent_ns = w->sent_ns});
    owing_free(w);
    dlock__op_complete(op);
}

int dlock__etcd_release_owing(dlock__op *op, dlock__etcd_client *ec, dlock__loop *app,
                              const dlock__etcd_hold *h, dlock__errbuf *err)
{
    /* nothing to send, or an adopted hold's (its lease learned on the way) */
    owing *w = h && h->rev != 0 ? owing_new(op) : NULL;
    if (w && h->key && !(w->h.key = dlock__malloc(h->key_len + 1))) {
        owing_free(w);
        w = NULL;
    }
    if (!w)
        return dlock__etcd_release_op(op, ec->e, h, err);
    w->op = op;
    w->ec = ec;
    w->app = app;
    char *key = w->h.key;
    w->h = *h;
    w->h.key = key;
    if (key)
        memcpy(key, h->key, h->key_len + 1);
    dlock__op_begin(&w->inner, op->l, op->loop, owing_answered);
    if (!w->on_heap) {
        w->inner.scratch = (unsigned char *)op->scratch + OWING_SPAN;
        w->inner.scratch_len = op->scratch_len - OWING_SPAN;
    }
    w->sent_ns = dlock__now_ns();
    int rc = dlock__etcd_release_op(&w->inner, ec->e, h, err);
    if (rc != DLOCK_OK)
        owing_free(w);
    return rc;
}

/* ---- the close ------------------------------------------------------------ */

void dlock__etcd_owed_close(dlock__etcd_client *ec, int forked)
{
    settler *st = ec->owed;
    if (!st)
        return;
    ec->owed = NULL;
    if (forked) {
        /* memory only: a resend in flight is the parent's (its transfer
         * is not ours to close) */
        dlock__loop_thread_forget(&st->lt);
    } else {
        /* the loop stops first (a thread is joined), so nothing runs
         * beside the cuts below */
        (void)dlock__loop_thread_stop(&st->lt);
        st->closing = 1;
        while (st->active) {
            owed *o = st->active;
            if (o->in_flight) {
                dlock__etcd_req_cancel(&o->q); /* its sent() frees it */
            } else {
                dlock__timer_clear(settler_loop(st), &o->again);
                owed_end(o);
            }
        }
        dlock__loop_thread_free(&st->lt);
        DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&st->mu));
    }
    for (owed *o = st->incoming, *next; o; o = next) {
        next = o->next;
        owed_free(o);
    }
    if (forked)
        for (owed *o = st->active, *next; o; o = next) {
            next = o->next;
            owed_free(o);
        }
    dlock__free(st);
}
