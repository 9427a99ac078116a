/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd backend (backend.h): its operations table, a handle's hold of
 * an etcd lock (one lease and key, shared by an owner's handles in
 * reentrant mode; release, extend, adopt, the watchdog's renewal; its
 * wait is etcd_wait.c's), and opening and closing a client's etcd side. What a client
 * asks about a name without a handle (status, break, list) is
 * etcd_inspect.c's. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "client.h"
#include "clock.h"
#include "engine.h"
#include "etcd_client.h"
#include "etcd_delay.h"
#include "etcd_elect.h"
#include "etcd_hold.h"
#include "etcd_inspect.h"
#include "etcd_keepalive.h"
#include "etcd_kv.h"
#include "etcd_lock.h"
#include "etcd_owed.h"
#include "etcd_release.h"
#include "etcd_renew.h"
#include "etcd_session.h"
#include "etcd_url.h"
#include "etcd_wait.h"
#include "handle.h"
#include "kinds.h"
#include "rand.h"
#include "watchdog.h"

typedef dlock__etcd_shared_hold shared_hold;

#define EC DLOCK__ETCD_EC
#define LD DLOCK__ETCD_LD

/* The lock side's part of the client: made on first use, freed by the
 * client's close through ec->lock_side_free. */
static void lock_side_free(struct dlock__etcd_client *ec, int forked)
{
    (void)forked;
    while (ec->reentrant) {
        shared_hold *s = ec->reentrant;
        ec->reentrant = s->next;
        dlock__etcd_hold_clear(&s->h);
        dlock__free(s);
    }
    dlock__etcd_sessions_free(ec, dlock__etcd_keeper_forget);
}

/* ---- handles (state and validity under the handle's mutex: handle.c) ------- */

#define get_state dlock__lock_get_state

/* ---- auto-renew: the client's watchdog keeps the lease alive --------------
 * The watchdog starts renew_start() for each due etcd lock, a request on
 * its loop (a keep-alive and a read of our key, etcd_renew.h), each in a
 * round of its own; its vote goes to settle(), then lost() for a lock
 * settle() found lost: the same rules as for Redis, with a majority of
 * one (etcd's own majority is behind each answer). */

/* One renewal in flight: the request, the round's record of it, and the
 * hold's session (one user of it while in flight), if any. */
typedef struct renewing {
    dlock__etcd_renew_req r;
    dlock__renew_req *q;
    dlock__etcd_session *sess;
} renewing;

static void renewed(dlock__etcd_renew_req *r)
{
    renewing *g = DLOCK__OWNER(r, renewing, r);
    dlock__renew_req *q = g->q;
    int rc = r->rc;
    if (g->sess) {
        /* every lock on the session learns the same at its own renewal;
         * no new key goes on one etcd no longer knows */
        if (rc == DLOCK_OK)
            dlock__etcd_session_kept(g->sess, r->valid_until_ns);
        else if (rc == DLOCK_EEXPIRED)
            dlock__etcd_session_gone(g->sess);
        (void)dlock__etcd_session_put(g->sess); /* a tainted one lapses */
    }
    dlock__free(g);
    q->done(q, rc == DLOCK_OK ? 1 : rc == DLOCK_EEXPIRED || rc == DLOCK_ENOTOWNER ? 0 : -1);
}

static int renew_start(void *owner, int64_t deadline_ns, dlock__loop *loop, dlock__renew_req *q,
                       int *vote)
{
    dlock_lock *l = owner;
    *vote = -1;
    if (deadline_ns == INT64_MAX) /* validity unknown (adopted) */
        deadline_ns = dlock__etcd_call_deadline(LD(l)->ec->e);
    if (dlock__now_ns() >= deadline_ns)
        return 0; /* a confirmation after the lease ended proves nothing */
    renewing *g = dlock__calloc(1, sizeof *g);
    if (!g)
        return 0;
    g->q = q;
    g->r.done = renewed;
    /* the hold is stable while the record is registered; the request
     * copies it, since the record may be let go while it is in flight.
     * Holds on one session share its keep-alive (etcd_keepalive.h): one
     * per look of the watchdog, not one per lock. */
    if ((g->sess = LD(l)->sh->sess))
        dlock__etcd_session_get(g->sess);
    if (dlock__etcd_renew_start_shared(&g->r, LD(l)->ec->e, &LD(l)->sh->h, g->sess, deadline_ns,
                                       loop) != DLOCK_OK) {
        if (g->sess)
            (void)dlock__etcd_session_put(g->sess);
        dlock__free(g);
        return 0;
    }
    return 1;
}

static const dlock__renewal_ops etcd_renewal_ops = {
    dlock__lock_renew_lease_end, dlock__engine_renew_settle, dlock__engine_renew_lost,
    renew_start};

static int lock_init(dlock_lock *l)
{
    struct dlock__etcd_client *ec = EC(l->client);
    if (!dlock__etcd_name_ok(l->name + l->prefix_len, l->name_len - l->prefix_len))
        return DLOCK_EINVAL; /* NAME/read, NAME/write: another name's keys */
    struct dlock__etcd_lockdata *d = dlock__calloc(1, sizeof *d);
    if (!d || dlock__etcd_name_init(&d->range, l->name, l->name_len) != DLOCK_OK) {
        dlock__free(d);
        return DLOCK_ENOMEM;
    }
    if (dlock__etcd_name_role(&d->range, l->opts.flags) != DLOCK_OK) {
        dlock__etcd_name_clear(&d->range);
        dlock__free(d);
        return DLOCK_ENOMEM;
    }
    d->ec = ec;
    d->range.identity = l->client->identity; /* the client outlives its handles */
    l->store = d;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
    ec->lock_side_free = lock_side_free;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    return DLOCK_OK;
}

/* Take the handle's hold over: token, fence, its lease end for the
 * engine (which makes the handle HELD). */
static void hold_taken(dlock_lock *l, shared_hold *s)
{
    LD(l)->sh = s;
    memcpy(l->token_inline, s->h.token, sizeof s->h.token);
    l->token = l->token_inline;
    l->token_len = strlen(s->h.token);
    /* a semaphore's permit has no fence, as on Redis (its create
     * revision orders the line, but N holders share it: no exclusion) */
    l->fence = (l->opts.flags & DLOCK_NO_FENCE) || !l->kind->fenced ? 0 : (uint64_t)s->h.rev;
    l->holds = 1;
    dlock__lock_granted(l, s->h.valid_until_ns);
}

/* Take s off the client's reentrant list (under ec->mu): nobody enters
 * it any more. */
static void unlist_locked(struct dlock__etcd_client *ec, shared_hold *s)
{
    if (!s->listed)
        return;
    shared_hold **p = (shared_hold **)&ec->reentrant;
    while (*p != s)
        p = &(*p)->next;
    *p = s->next;
    s->listed = 0;
}

static void unlist(struct dlock__etcd_client *ec, shared_hold *s)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
    unlist_locked(ec, s);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
}

/* Drop n holds of s; 1 if they were the last (the caller then revokes the
 * lease or lets it run out, and frees). */
static int drop_of(struct dlock__etcd_client *ec, shared_hold *s, unsigned n)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
    s->holds = s->holds > n ? s->holds - n : 0;
    int last = s->holds == 0;
    if (last)
        unlist_locked(ec, s);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    return last;
}

/* The holds of the owner's hold that are the handle's: its holds, or one
 * for a kind whose re-entries through the handle the engine counts in the
 * handle alone (kinds.h, reenter: the read-write kinds), not here. */
static unsigned handle_share(const dlock_lock *l)
{
    return l->kind->reenter ? 1 : l->holds;
}

/* Drop the handle's share of its hold. */
static int hold_drop(dlock_lock *l, unsigned n)
{
    return drop_of(LD(l)->ec, LD(l)->sh, n);
}

/* A hold that goes without a word (a tainted session's last user among
 * them: the session lapses, as nobody keeps it alive). */
static void hold_free(shared_hold *s)
{
    if (s->sess)
        (void)dlock__etcd_session_put(s->sess);
    dlock__etcd_hold_clear(&s->h);
    dlock__free(s);
}

/* Reentrant: another handle of this owner (client x thread, or on a looped
 * client the handle: dlock__lock_owner_no) holds it;
 * counted as one more hold of it. */
static shared_hold *reentrant_find(dlock_lock *l)
{
    struct dlock__etcd_client *ec = LD(l)->ec;
    shared_hold *found = NULL;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
    for (shared_hold *s = ec->reentrant; s; s = s->next)
        if (s->thread_no == dlock__lock_owner_no(l) &&
            dlock__etcd_key_is_waiter(&LD(l)->range, s->h.key, s->h.key_len)) {
            s->holds++;
            found = s;
            break;
        }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    return found;
}

/* Reentrant: does the owner hold this name in another mode (through
 * another handle): a reader and a writer, or either and a plain lock?
 * Then an acquire would wait for the owner itself (their keys differ):
 * upgrade and downgrade are refused, as on Redis. */
static int reentrant_crossed(dlock_lock *l)
{
    struct dlock__etcd_client *ec = LD(l)->ec;
    int found = 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
    for (shared_hold *s = ec->reentrant; s && !found; s = s->next)
        found = s->thread_no == dlock__lock_owner_no(l) &&
                dlock__etcd_key_in_other_role(&LD(l)->range, s->h.key, s->h.key_len);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    return found;
}

/* The last hold revokes the lease when no other handle of the owner shares
 * it, or on a session deletes the key (the last user of a tainted session
 * revokes it: etcd_session.h); another is only counted down (the lease
 * is the owner's). Either is a request on the engine's loop
 * (etcd_release.h). */
static int release_start(dlock_lock *l, int last, dlock__op *op)
{
    struct dlock__etcd_client *ec = LD(l)->ec;
    shared_hold *s = LD(l)->sh;
    if (!last) {
        if (!l->kind->reenter) /* (a reenter kind's are the handle's alone) */
            hold_drop(l, 1); /* others remain: never the last */
        return dlock__etcd_release_op(op, ec->e, NULL, &l->err);
    }
    LD(l)->sh = NULL; /* the engine lets the holds go */
    if (!drop_of(ec, s, handle_share(l)))
        return dlock__etcd_release_op(op, ec->e, NULL, &l->err);
    dlock__etcd_hold h = s->h; /* the request copies what it sends */
    if (s->sess) {
        int64_t lease = s->sess->lease;
        if (dlock__etcd_session_put(s->sess)) {
            h.lease = lease;
            h.on_session = 0;
        }
        s->sess = NULL;
    }
    h.reusable = h.reusable && h.on_session;
    /* a revoke or delete with no answer is the settler's (etcd_owed.h) */
    int rc = dlock__etcd_release_owing(op, ec, l->client->loop, &h, &l->err);
    hold_free(s);
    return rc;
}

/* The hold an extend found ended is gone: the owner's other handles do not
 * re-enter it (the engine lets this handle's holds go). */
static void extend_ended(void *arg)
{
    dlock_lock *l = arg;
    unlist(LD(l)->ec, LD(l)->sh);
}

/* An extend to a new TTL moved the key off its session to a lease of its
 * own (etcd_relet.h): the session has one user less. */
static void extend_off_session(void *arg)
{
    shared_hold *s = LD((dlock_lock *)arg)->sh;
    if (s->sess)
        (void)dlock__etcd_session_put(s->sess);
    s->sess = NULL;
}

static int extend_start(dlock_lock *l, int64_t ttl_ms, int64_t deadline_ns, dlock__op *op)
{
    (void)deadline_ns; /* late_answer_counts: etcd's answer is the truth */
    struct dlock__etcd_client *ec = LD(l)->ec;
    shared_hold *s = LD(l)->sh;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
    int shared = s->holds != handle_share(l); /* another handle of the owner counts some */
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
    dlock__etcd_extend_args a = {.h = &s->h, .ttl_ms = ttl_ms, .err = &l->err,
                                 .ended = extend_ended, .off_session = extend_off_session,
                                 .arg = l,
                                 .owed = &LD(l)->owed_lease, .shared = shared,
                                 .key = l->name, .key_len = l->name_len,
                                 .prefix_len = l->prefix_len,
                                 .delay_ms = l->opts.lock_delay_ms};
    return dlock__etcd_extend_op(op, ec->e, &a);
}

/* A token's 16 hex digits from at as a positive int64; 0 if not one. */
static int64_t token_part(const char *at)
{
    char part[17];
    memcpy(part, at, 16);
    part[16] = '\0';
    unsigned long long v = strtoull(part, NULL, 16);
    return v > INT64_MAX ? 0 : (int64_t)v;
}

static int adopt_check(dlock_lock *l, const char *token, size_t len)
{
    if ((len != 16 && len != 32) || strspn(token, "0123456789abcdef") != len ||
        token_part(token) == 0 || (len == 32 && token_part(token + 16) == 0)) {
        dlock__err_set(&l->err, "etcd: a token is the lock key's ID in 16 hex digits, and "
                                "the hold's fence in 16 more for a key on a session");
        return DLOCK_EINVAL;
    }
    return DLOCK_OK;
}

/* The hold an adopted token names: its key (a key on a lease of its own
 * is named by that lease, one on a session is not: every operation of an
 * adopted hold reads the key for its lease first), TTL unknown (extend
 * asks). */
static int adopt(dlock_lock *l, const char *token, size_t len)
{
    shared_hold *s = dlock__calloc(1, sizeof *s);
    if (!s)
        return DLOCK_ENOMEM;
    s->h.lease = token_part(token); /* checked by adopt_check */
    /* a token of 32 digits names the hold's fence too: a later hold of the
     * same key (its session gave it on) is not this one */
    s->h.named_rev = len == 32 ? token_part(token + 16) : 0;
    s->h.ttl_s = 0; /* unknown: extend asks etcd */
    if (dlock__etcd_hold_key(&s->h, &LD(l)->range) != DLOCK_OK) { /* the token too */
        dlock__free(s);
        return DLOCK_ENOMEM;
    }
    s->h.valid_until_ns = INT64_MIN; /* unknown until an extend */
    /* the token names its lock-delay companion too (etcd_delay.h): kept
     * alive and given back with the hold, as its holder would have */
    if (l->opts.lock_delay_ms > 0)
        s->h.delay_lease = dlock__etcd_delay_lease_of_token(s->h.token);
    s->holds = 1;
    LD(l)->sh = s; /* the engine takes the token, fence 0, holds and state */
    return DLOCK_OK;
}

/* The handle lets go of its share of the hold without a word to etcd
 * (lost, ended, forgotten): the lease runs on until its TTL, or the owner's
 * other handles keep it. */
static void drop(dlock_lock *l)
{
    if (!LD(l) || !LD(l)->sh)
        return;
    if (hold_drop(l, handle_share(l)))
        hold_free(LD(l)->sh);
    LD(l)->sh = NULL;
}

/* Before the token changes (adopt) and after a loss: nothing is owed to
 * etcd; a lost lease is gone or going by itself. Answered from the loop's
 * next turn, as every request (op.h). */
static int nothing_owed(dlock_lock *l, dlock__op *op)
{
    (void)l;
    dlock__op_complete_soon(op, DLOCK_OK);
    return DLOCK_OK;
}

/* A lease whose revoke a cancel cut off (etcd_hold.h, owed_lease): revoked
 * now, as a release's revoke (etcd_release.h); 0 if none is owed. */
static int owed_start(dlock_lock *l, dlock__op *op, int *sent)
{
    int64_t owed = LD(l) ? LD(l)->owed_lease : 0;
    *sent = 0;
    if (LD(l) && LD(l)->owed_key.key) { /* a key on a session: its delete */
        int rc = dlock__etcd_release_op(op, LD(l)->ec->e, &LD(l)->owed_key, &l->err);
        dlock__etcd_owed_key_clear(LD(l)); /* copied by the start; a free's last word */
        *sent = rc == DLOCK_OK;
        return rc;
    }
    if (!owed)
        return DLOCK_OK;
    dlock__etcd_hold h = {.lease = owed, .valid_until_ns = INT64_MIN}; /* copied by the start */
    int rc = dlock__etcd_release_op(op, LD(l)->ec->e, &h, &l->err);
    if (rc == DLOCK_OK) {
        LD(l)->owed_lease = 0; /* best effort: a free's last word */
        *sent = 1;
    }
    return rc;
}

/* dlock_lock_free(): a held lock is released, best effort: the release's
 * request (release_start), which lets the handle's record go at once.
 * A handle that holds nothing revokes the lease a cancel left owed; one
 * that holds leaves that lease to lapse by its TTL (one request here). */
static int cleanup_start(dlock_lock *l, dlock__op *op)
{
    int sent = 0;
    if (LD(l) && LD(l)->sh && get_state(l) == DLOCK_STATE_HELD &&
        release_start(l, 1, op) == DLOCK_OK)
        return DLOCK_OK;
    drop(l); /* out of memory, nothing was sent: the lease runs out */
    if (!(LD(l) && LD(l)->sh) && owed_start(l, op, &sent) == DLOCK_OK && sent)
        return DLOCK_OK;
    dlock__op_complete_soon(op, DLOCK_OK);
    return DLOCK_OK;
}

static void lock_clear(dlock_lock *l, int forked)
{
    /* the store's side is cleanup_start()'s */
    struct dlock__etcd_lockdata *d = LD(l);
    if (!d)
        return;
    dlock__etcd_wait_free(l, forked);
    dlock__etcd_owed_key_clear(d);
    dlock__etcd_name_clear(&d->range);
    dlock__free(d);
    l->store = NULL;
}

static const dlock__kind *kind_for(const dlock_client *c, const dlock__kind *k)
{
    (void)c;
    return dlock__kind_in_line(k);
}

static int64_t lease_ttl_ms(dlock_lock *l)
{
    return LD(l)->sh->h.ttl_s * 1000;
}

static int64_t no_drift(dlock_lock *l, int64_t ttl_ms)
{
    (void)l, (void)ttl_ms;
    return 0; /* etcd's lease is counted by etcd, from our keep-alive's send */
}
/* ---- the wait's hold keeping (etcd_hold.h) -------------------------------- */

void dlock__etcd_hold_take(dlock_lock *l, shared_hold *s)
{
    hold_taken(l, s);
}

shared_hold *dlock__etcd_reentrant_find(dlock_lock *l)
{
    return reentrant_find(l);
}

int dlock__etcd_reentrant_crossed(dlock_lock *l)
{
    return reentrant_crossed(l);
}

int dlock__etcd_hold_drop_of(struct dlock__etcd_client *ec, shared_hold *s, unsigned n)
{
    return drop_of(ec, s, n);
}

void dlock__etcd_hold_unlist(struct dlock__etcd_client *ec, shared_hold *s)
{
    unlist(ec, s);
}

void dlock__etcd_hold_free(shared_hold *s)
{
    hold_free(s);
}

void dlock__etcd_owed_key_clear(struct dlock__etcd_lockdata *d)
{
    dlock__free(d->owed_key.key);
    d->owed_key.key = NULL;
}

/* ---- the client --------------------------------------------------------- */

static int open_client(dlock_client *c, const char *const *urls, size_t n_urls,
                       const dlock_client_options *opts, char *err, size_t err_len)
{
    if (opts->cluster) {
        snprintf(err, err_len, "the cluster option is for Redis Cluster, not etcd:// URLs");
        return DLOCK_EINVAL;
    }
    if (opts->min_replicas > 0) {
        /* Silently ignored before: a caller asking for replicas' acks
         * must hear that nothing here waits for them. */
        snprintf(err, err_len, "min_replicas is Redis's WAIT for replicas, not for etcd:// "
                 "URLs: a write etcd answers is on a majority of its members already");
        return DLOCK_EINVAL;
    }
    c->quorum = 1;
    struct dlock__etcd_client *ec = NULL;
    int rc = dlock__etcd_client_open(&ec, urls, n_urls, opts, err, err_len);
    c->store = ec;
    return rc;
}

static void close_client(dlock_client *c, int forked)
{
    dlock__etcd_client_close(EC(c), forked);
    c->store = NULL;
}

static size_t one_node(const dlock_client *c)
{
    (void)c;
    return 1; /* the cluster is one node to the caller */
}

static const char *node_name(const dlock_client *c, size_t i)
{
    return i == 0 && EC(c) ? EC(c)->name : NULL;
}

const dlock__backend dlock__etcd_backend = {
    .name = "etcd",
    .wants = dlock__etcd_wanted,
    .open = open_client,
    .close = close_client,
    .node_count = one_node,
    .node_name = node_name,
    .status = dlock__etcd_status,
    .holders = dlock__etcd_holders,
    .identity = dlock__etcd_identity,
    .list = dlock__etcd_list_names,
    .break_holds = dlock__etcd_break_holds,
    .lock_delay = dlock__etcd_delay_left,
    .late_answer_counts = 1,
    .sets = 1,
    .lock_delays = 1,
    .renewal = &etcd_renewal_ops,
    .kind_for = kind_for,
    .lock_init = lock_init,
    .lock_clear = lock_clear,
    .in_line = 1,
    .begin = dlock__etcd_wait_begin,
    .try = dlock__etcd_wait_try,
    .watch = dlock__etcd_wait_watch,
    .watch_ready = dlock__etcd_wait_watch_ready,
    .unwatch = dlock__etcd_wait_unwatch,
    .leave = dlock__etcd_wait_leave,
    .handed = dlock__etcd_wait_handed,
    .release_start = release_start,
    .extend_start = extend_start,
    .lease_ttl_ms = lease_ttl_ms,
    .drift_ns = no_drift,
    .adopt_check = adopt_check,
    .adopt = adopt,
    .settle_start = nothing_owed,
    .release_lost_start = nothing_owed,
    .drop = drop,
    .cleanup_start = cleanup_start,
    .elect_value_at_grant = 1,
    .elect_write = dlock__etcd_elect_write,
    .elect_read = dlock__etcd_elect_read,
    .elect_watch = dlock__etcd_elect_watch,
    .elect_unwatch = dlock__etcd_elect_unwatch,
};
