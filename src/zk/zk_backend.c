/* SPDX-License-Identifier: BSD-3-Clause */
/* The ZooKeeper backend (backend.h): its operations table, a handle's
 * hold of a ZooKeeper lock (an ephemeral sequential node, first in its
 * line: zk_lock.h; its wait is zk_wait.c's), release, extend and the
 * watchdog's renewal, status, and opening and closing a client's session
 * (zk_session.h).
 *
 * The lease: a hold lives as long as the client's session, which the
 * session thread keeps alive by itself; what the engine counts as the
 * hold's lease is the session timeout from the last answer that showed
 * our node still there and still our session's (a look, an extend, a
 * renewal). Extend is that check: the session's timeout cannot be pushed
 * out by a request, and need not be (docs/backends.md). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "client.h"
#include "clock.h"
#include "engine.h"
#include "handle.h"
#include "kinds.h"
#include "watchdog.h"
#include "zk_lock.h"
#include "zk_session.h"
#include "zk_url.h"

#define LD DLOCK__ZK_LD
#define ZK(c) ((dlock__zk *)(c)->store)

enum { STEP_RELEASE = 50, STEP_EXTEND, STEP_CLEANUP };

#define AGAIN_MS 50 /* a cut release's delete is sent again this often */

/* ---- the node's path ----------------------------------------------------- */

int dlock__zk_lock_path(char *out, size_t cap, const char *key)
{
    int n = snprintf(out, cap, "%s%s", key[0] == '/' ? "" : "/", key);
    if (n <= 1 || (size_t)n >= cap - 64 || out[n - 1] == '/')
        return 0;
    for (const char *p = out; *p; p++) {
        if (*p != '/')
            continue;
        if (p[1] == '/' || (p[1] == '.' && (p[2] == '/' || p[2] == '\0')) ||
            (p[1] == '.' && p[2] == '.' && (p[3] == '/' || p[3] == '\0')))
            return 0;
    }
    return 1;
}

static int lock_init(dlock_lock *l)
{
    dlock__zk_lockdata *d = dlock__calloc(1, sizeof *d);
    if (!d)
        return DLOCK_ENOMEM;
    d->z = ZK(l->client);
    l->store = d; /* lock_clear frees it, also on a refusal */
    /* a key that is no path would be refused by every request */
    if (!dlock__zk_lock_path(d->path, sizeof d->path, l->name))
        return DLOCK_EINVAL;
    d->role = dlock__zk_role(l->kind);
    /* a semaphore waits in Curator's InterProcessSemaphoreV2 locks line */
    (void)dlock__zk_path_set(d->line, d->path,
                             l->kind->id == DLOCK__KIND_SEMAPHORE ? "/locks" : NULL);
    return DLOCK_OK;
}

static void lock_clear(dlock_lock *l, int forked)
{
    dlock__zk_lockdata *d = LD(l);
    if (!d)
        return;
    if (!forked)
        dlock__zk_watch_drop(d->z, d->watch);
    dlock__zk_call_clear(&d->call);
    dlock__free(d);
    l->store = NULL;
}

/* ---- release, extend, cleanup: one call each on the op's loop -------------- */

static void delete_again(dlock__timer *t)
{
    dlock__zk_lockdata *d = DLOCK__OWNER(t, dlock__zk_lockdata, again);
    d->again_n++;
    if (dlock__zk_call_start(d->z, &d->call, d->op->loop) != DLOCK_OK) {
        d->call.zrc = ZSYSTEMERROR;
        d->call.done(&d->call); /* owed, as any failed release */
    }
}

/* A release's delete that the connection cut (the C client reconnects to
 * another member meanwhile, a leader's failover takes a few hundred ms):
 * 1 if it is sent again. */
static int release_again(dlock__zk_lockdata *d, const dlock__zk_call *c)
{
    if ((c->zrc != ZCONNECTIONLOSS && c->zrc != ZOPERATIONTIMEOUT) ||
        dlock__now_ns() >= d->again_until_ns)
        return 0;
    d->again.fire = delete_again;
    d->again.due_ns = dlock__now_ns() + AGAIN_MS * DLOCK__NS_PER_MS;
    return dlock__timer_set(d->op->loop, &d->again) == DLOCK_OK;
}

static void verb_done(dlock__zk_call *c)
{
    dlock__zk_lockdata *d = DLOCK__OWNER(c, dlock__zk_lockdata, call);
    dlock_lock *l = d->op->l;
    dlock__op *op = d->op;
    int step = d->step;
    if (step == STEP_RELEASE && release_again(d, c))
        return;
    d->step = 0;
    if (step == STEP_EXTEND) {
        int ours = c->zrc == ZOK && c->stat.ephemeralOwner == d->owner_session &&
                   c->stat.czxid == d->czxid;
        if (ours) {
            int64_t ms = dlock__zk_session_ms(d->z);
            op->v.until_ns = c->sent_ns + ms * DLOCK__NS_PER_MS;
            op->v.renew_ttl_ms = ms;
            op->v.code = DLOCK_OK;
        } else if (c->zrc == ZOK || c->zrc == ZNONODE) {
            dlock__err_set(&l->err, "our node on ZooKeeper went (the session expired)");
            op->v.code = DLOCK_EEXPIRED;
        } else {
            dlock__err_set(&l->err, "ZooKeeper: %s", zerror(c->zrc));
            op->v.code = dlock__zk_error(c->zrc);
            if (op->v.code == DLOCK_EEXPIRED) /* our session is over: so is the hold */
                dlock__err_set(&l->err, "the ZooKeeper session expired");
        }
        dlock__op_complete(op);
        return;
    }
    /* A release or a free's delete: gone now (a delete sent again finds
     * none when the one cut got through), or owed. */
    if (c->zrc == ZOK || (c->zrc == ZNONODE && d->again_n > 0))
        op->v.code = DLOCK_OK;
    else if (c->zrc == ZNONODE || c->zrc == ZINVALIDSTATE || c->zrc == ZSESSIONEXPIRED) {
        dlock__err_set(&l->err, "our node on ZooKeeper went (the session expired)");
        op->v.code = DLOCK_EEXPIRED;
    } else {
        (void)dlock__zk_path_set(d->owed, c->path, NULL);
        dlock__err_set(&l->err, "ZooKeeper: %s", zerror(c->zrc));
        op->v.code = dlock__zk_error(c->zrc);
    }
    if (step == STEP_CLEANUP)
        op->v.code = DLOCK_OK; /* best effort */
    dlock__op_complete(op);
}

static int verb(dlock_lock *l, dlock__op *op, int step, int what, const char *path)
{
    dlock__zk_lockdata *d = LD(l);
    d->op = op;
    d->step = step;
    d->call.what = what;
    d->call.done = verb_done;
    (void)dlock__zk_path_set(d->call.path, path, NULL);
    return dlock__zk_call_start(d->z, &d->call, op->loop);
}

/* The hold's node goes (the next in line is woken by its watch). */
static int release_start(dlock_lock *l, int last, dlock__op *op)
{
    dlock__zk_lockdata *d = LD(l);
    if (!last) { /* a counted kind's re-entry: counted down in the handle (engine.c) */
        dlock__op_complete_soon(op, DLOCK_OK);
        return DLOCK_OK;
    }
    char node[DLOCK__ZK_PATH_MAX];
    (void)dlock__zk_path_set(node, d->node, NULL);
    d->node[0] = '\0'; /* the engine lets the hold go */
    if (!node[0]) {
        dlock__op_complete_soon(op, DLOCK_EEXPIRED);
        return DLOCK_OK;
    }
    d->again_n = 0;
    d->again_until_ns = dlock__now_ns() + dlock__zk_session_ms(d->z) * DLOCK__NS_PER_MS;
    return verb(l, op, STEP_RELEASE, DLOCK__ZK_DELETE, node);
}

static int extend_start(dlock_lock *l, int64_t ttl_ms, int64_t deadline_ns, dlock__op *op)
{
    (void)ttl_ms, (void)deadline_ns; /* late_answer_counts: a session never comes back */
    dlock__zk_lockdata *d = LD(l);
    if (!d->node[0])
        return DLOCK_EEXPIRED;
    return verb(l, op, STEP_EXTEND, DLOCK__ZK_EXISTS, d->node);
}

static int nothing_owed(dlock_lock *l, dlock__op *op)
{
    (void)l;
    dlock__op_complete_soon(op, DLOCK_OK);
    return DLOCK_OK;
}

/* A lost hold's release (or the lost handle's next acquire): its node goes
 * should it still be there. The watchdog calls a hold lost when no answer
 * came before its lease's end, which a session that lives on (a member
 * slow to answer) outlives: left there, the node would keep the lock from
 * everyone until the client closes. Best effort. */
static int release_lost_start(dlock_lock *l, dlock__op *op)
{
    dlock__zk_lockdata *d = LD(l);
    if (d->node[0] && verb(l, op, STEP_CLEANUP, DLOCK__ZK_DELETE, d->node) == DLOCK_OK)
        return DLOCK_OK; /* drop() forgets the node when the engine lets go */
    dlock__op_complete_soon(op, DLOCK_OK);
    return DLOCK_OK;
}

/* dlock_lock_free(): the node the handle has, held or in line, goes, or
 * the one it owes a delete; else nothing to send. */
static int cleanup_start(dlock_lock *l, dlock__op *op)
{
    dlock__zk_lockdata *d = LD(l);
    char node[DLOCK__ZK_PATH_MAX];
    (void)dlock__zk_path_set(node, d->node[0] ? d->node : d->owed, NULL);
    d->node[0] = '\0';
    d->owed[0] = '\0';
    if (node[0] && verb(l, op, STEP_CLEANUP, DLOCK__ZK_DELETE, node) == DLOCK_OK)
        return DLOCK_OK;
    dlock__op_complete_soon(op, DLOCK_OK);
    return DLOCK_OK;
}

/* The handle lets go without a word (lost, ended, forgotten): a node
 * still there stays as long as the session (a forgotten hold is held
 * until the client closes). */
static void drop(dlock_lock *l)
{
    if (LD(l))
        LD(l)->node[0] = '\0';
}

static int adopt_check(dlock_lock *l, const char *token, size_t len)
{
    (void)token, (void)len;
    dlock__err_set(&l->err, "ZooKeeper: a hold is its session's, which no other client can "
                   "take over (adopt is not supported)");
    return DLOCK_ENOTSUP;
}

static int adopt(dlock_lock *l, const char *token, size_t len)
{
    (void)l, (void)token, (void)len;
    return DLOCK_ENOTSUP;
}

/* ---- auto-renew: the watchdog checks the node ------------------------------- */

/* A renewal's look at our node. No answer by the hold's lease's end is
 * no vote then (lease_ended): the ZooKeeper client fails a request that
 * a silent member holds up only when it gives up the connection (two
 * thirds of the session timeout) and queues the next while it connects
 * again, so waiting for its answer held on_lost back (2.6 s into a 2 s
 * session, 11.6 s into an 8 s one, measured) while the ensemble may have
 * ended the session and served the next holder. A late answer then only
 * frees the record. */
typedef struct renewing {
    dlock__zk_call c;
    dlock__renew_req *q; /* NULL once the lease's end answered for it */
    dlock__loop *loop;
    dlock__timer lease_end;
    int64_t czxid, owner;
} renewing;

static void lease_ended(dlock__timer *t)
{
    renewing *g = DLOCK__OWNER(t, renewing, lease_end);
    dlock__renew_req *q = g->q;
    g->q = NULL;
    q->done(q, -1);
}

static void renewed(dlock__zk_call *c)
{
    renewing *g = DLOCK__OWNER(c, renewing, c);
    dlock__renew_req *q = g->q;
    if (!q) { /* the lease's end answered for it */
        dlock__free(g);
        return;
    }
    if (g->lease_end.fire)
        dlock__timer_clear(g->loop, &g->lease_end);
    int vote = -1;
    if (c->zrc == ZOK)
        vote = c->stat.ephemeralOwner == g->owner && c->stat.czxid == g->czxid;
    else if (c->zrc == ZNONODE || c->zrc == ZINVALIDSTATE || c->zrc == ZSESSIONEXPIRED)
        vote = 0;
    dlock__free(g);
    q->done(q, vote);
}

static int renew_start(void *owner, int64_t deadline_ns, dlock__loop *loop, dlock__renew_req *q,
                       int *vote)
{
    dlock_lock *l = owner; /* deadline_ns: the hold's lease's end */
    dlock__zk_lockdata *d = LD(l);
    *vote = -1;
    renewing *g = dlock__calloc(1, sizeof *g);
    if (!g)
        return 0;
    g->q = q;
    g->czxid = d->czxid;
    g->owner = d->owner_session;
    g->c.what = DLOCK__ZK_EXISTS;
    g->c.done = renewed;
    /* the node is stable while the record is registered; the call copies it */
    (void)dlock__zk_path_set(g->c.path, d->node, NULL);
    g->loop = loop; /* the call answers on it too: the timer and the answer never race */
    if (deadline_ns != INT64_MAX) {
        g->lease_end.fire = lease_ended;
        g->lease_end.due_ns = deadline_ns;
        if (dlock__timer_set(loop, &g->lease_end) != DLOCK_OK)
            g->lease_end.fire = NULL; /* the call's answer alone, as before */
    }
    if (!g->c.path[0] || dlock__zk_call_start(d->z, &g->c, loop) != DLOCK_OK) {
        *vote = g->c.path[0] ? -1 : 0;
        if (g->lease_end.fire)
            dlock__timer_clear(loop, &g->lease_end);
        dlock__free(g);
        return 0;
    }
    return 1;
}

static const dlock__renewal_ops zk_renewal_ops = {
    dlock__lock_renew_lease_end, dlock__engine_renew_settle, dlock__engine_renew_lost,
    renew_start};

static int64_t lease_ttl_ms(dlock_lock *l)
{
    return dlock__zk_session_ms(LD(l)->z);
}

static int64_t no_drift(dlock_lock *l, int64_t ttl_ms)
{
    (void)l, (void)ttl_ms;
    return 0; /* the session is timed by the server, from our last word */
}

/* What ZooKeeper serves for kind k: the read-write kinds themselves
 * (Curator's InterProcessReadWriteLock: readers and writers in one line,
 * zk_wait.c), the others as a line of owners (InterProcessMutex; a
 * counted kind's re-entries counted in the handle), and a semaphore as
 * InterProcessSemaphoreV2 (zk_semaphore.c). */
static const dlock__kind *kind_for(const dlock_client *c, const dlock__kind *k)
{
    (void)c;
    if (dlock__zk_role(k) != DLOCK__ZK_MUTEX)
        return k;
    const dlock__kind *in_line = dlock__kind_in_line(k);
    return in_line;
}

/* ---- the client --------------------------------------------------------- */

/* The options' user and password over the URL's, each on its own (as for
 * Redis: a password kept out of the URL, and of ps, goes with the URL's
 * user). ZooKeeper's digest is user:password: half of one is refused
 * rather than dropped without a word. */
static int credentials(dlock__zk_url *u, const dlock_client_options *opts, char *err,
                       size_t err_len)
{
    if (opts->username) {
        dlock__free(u->user);
        if (!(u->user = dlock__strdup(opts->username)))
            return DLOCK_ENOMEM;
    }
    if (opts->password) {
        if (u->password)
            memset(u->password, 0, strlen(u->password));
        dlock__free(u->password);
        if (!(u->password = dlock__strdup(opts->password)))
            return DLOCK_ENOMEM;
    }
    if (!u->user != !u->password) {
        snprintf(err, err_len, "zk:// digest authentication needs both a user and a password "
                 "(zk://user:password@..., or the username and password options)");
        return DLOCK_EINVAL;
    }
    return DLOCK_OK;
}

static int open_client(dlock_client *c, const char *const *urls, size_t n_urls,
                       const dlock_client_options *opts, char *err, size_t err_len)
{
    if (opts->cluster || opts->tls || opts->min_replicas > 0) {
        snprintf(err, err_len, "the %s option is not for zk:// URLs",
                 opts->cluster ? "cluster" : opts->tls ? "tls" : "min_replicas");
        return DLOCK_EINVAL;
    }
    c->quorum = 1;
    dlock__zk_url u;
    int rc = dlock__zk_url_parse(&u, urls, n_urls, err, err_len);
    if (rc != DLOCK_OK)
        return rc;
    if ((rc = credentials(&u, opts, err, err_len)) != DLOCK_OK) {
        dlock__zk_url_clear(&u);
        return rc;
    }
    dlock__zk *z = NULL;
    rc = dlock__zk_open(&z, &u, opts->connect_timeout_ms, err, err_len);
    dlock__zk_url_clear(&u);
    c->store = z;
    return rc;
}

static void close_client(dlock_client *c, int forked)
{
    dlock__zk_close(ZK(c), forked);
    c->store = NULL;
}

static size_t one_node(const dlock_client *c)
{
    (void)c;
    return 1; /* the ensemble is one node to the caller */
}

static const char *node_name(const dlock_client *c, size_t i)
{
    return i == 0 && ZK(c) ? dlock__zk_name(ZK(c)) : NULL;
}

const dlock__backend dlock__zk_backend = {
    .name = "zookeeper",
    .wants = dlock__zk_wanted,
    .open = open_client,
    .close = close_client,
    .node_count = one_node,
    .node_name = node_name,
    .status = dlock__zk_status,
    .holders = dlock__zk_holders,
    .list = dlock__zk_list,
    .identity = dlock__zk_identity,
    .holder_identity = dlock__zk_holder_identity,
    .break_holds = dlock__zk_break_holds,
    .late_answer_counts = 1,
    .sets = 1,
    .renewal = &zk_renewal_ops,
    .kind_for = kind_for,
    .lock_init = lock_init,
    .lock_clear = lock_clear,
    .in_line = 1,
    .begin = dlock__zk_wait_begin,
    .try = dlock__zk_wait_try,
    .watch = dlock__zk_wait_watch,
    .watch_ready = dlock__zk_wait_watch_ready,
    .unwatch = dlock__zk_wait_unwatch,
    .leave = dlock__zk_wait_leave,
    .handed = dlock__zk_wait_handed,
    .release_start = release_start,
    .extend_start = extend_start,
    .lease_ttl_ms = lease_ttl_ms,
    .drift_ns = no_drift,
    .adopt_check = adopt_check,
    .adopt = adopt,
    .settle_start = nothing_owed,
    .release_lost_start = release_lost_start,
    .drop = drop,
    .cleanup_start = cleanup_start,
    .elect_value_at_grant = 1,
    .elect_write = dlock__zk_elect_write,
    .elect_read = dlock__zk_elect_read,
    .elect_watch = dlock__zk_elect_watch,
    .elect_unwatch = dlock__zk_elect_unwatch,
};
