/* SPDX-License-Identifier: BSD-3-Clause */
/* ZooKeeper's part of the engine's wait (backend.h: begin, try, watch,
 * watch_ready, unwatch, leave, handed; every wait here is in line,
 * in_line = 1), Curator's InterProcessMutex recipe:
 *
 *   begin  a node owed a delete first (zk_lock.h, owed), and a node whose
 *          create's answer was lost (zk_lock.h, lost) looked for and
 *          deleted; then an ephemeral sequential node
 *          <path>/_c_<uuid>-lock-, creating the missing ancestors as
 *          container nodes when the server says there are none (a try
 *          whose node went does the same);
 *   try    a look: the lock's children read; ours the lowest sequence:
 *          granted (fence: our node's czxid); else a try-once deletes its
 *          node and is refused, a waiter watches the one node just before
 *          its own (no herd: one deletion wakes one waiter) and sleeps
 *          until it goes, RECHECK_MS at most;
 *   leave  the delete of our node.
 *
 * Our node gone while we wait (the session expired) puts the next try in
 * line again. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "client.h"
#include "clock.h"
#include "engine.h"
#include "handle.h"
#include "kinds.h"
#include "rand.h"
#include "zk_lock.h"

/* A waiter looks again at least this often even when its watch says
 * nothing (a watch lost with a connection that came back late). */
#define RECHECK_MS 2000

#define LD DLOCK__ZK_LD

enum {
    STEP_OWED = 1,
    STEP_FIND,
    STEP_PARENTS,
    STEP_CREATE,
    STEP_CHILDREN,
    STEP_WATCH,
    STEP_GIVE_UP,
    STEP_REENTER,
    STEP_LEAVE
};

int64_t dlock__zk_node_seq(const char *name, int *role)
{
    static const char *const names[] = {[DLOCK__ZK_MUTEX] = DLOCK__ZK_LOCK_NAME,
                                        [DLOCK__ZK_READ] = DLOCK__ZK_READ_NAME,
                                        [DLOCK__ZK_WRITE] = DLOCK__ZK_WRITE_NAME};
    size_t n = strlen(name);
    if (n < 10 || strspn(name + n - 10, "0123456789") != 10)
        return -1;
    for (int r = 0; r < (int)(sizeof names / sizeof names[0]); r++) {
        size_t m = strlen(names[r]);
        if (n >= 10 + m && memcmp(name + n - 10 - m, names[r], m) == 0) {
            if (role)
                *role = r;
            return strtoll(name + n - 10, NULL, 10);
        }
    }
    return -1;
}

int dlock__zk_role(const dlock__kind *k)
{
    switch (k->id) {
    case DLOCK__KIND_SHARED:
    case DLOCK__KIND_SHARED_COUNTED:
        return DLOCK__ZK_READ;
    case DLOCK__KIND_EXCLUSIVE:
    case DLOCK__KIND_EXCLUSIVE_COUNTED:
        return DLOCK__ZK_WRITE;
    default:
        return DLOCK__ZK_MUTEX;
    }
}

int dlock__zk_blocks(int mine, int role)
{
    return mine != DLOCK__ZK_READ || role != DLOCK__ZK_READ;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Answer the engine's request (from the call's done: on op->loop). An
 * answer that ends the wait drops the watch: a try's grant (a lock's, a
 * re-entry's, a semaphore's), or a failure without a retry. Its eventfd
 * is on this wait's loop, which a blocking call takes down with it. (A
 * begin's DLOCK_OK only says "in line".) */
static void answer(dlock_lock *l, int code, unsigned flags, int64_t look_ms)
{
    dlock__op *op = LD(l)->op;
    LD(l)->step = 0;
    if (code == DLOCK_OK ? LD(l)->trying : !(flags & DLOCK__V_RETRY))
        dlock__zk_wait_unwatch(l);
    op->v.code = code;
    op->v.flags = flags;
    op->v.look_ms = look_ms;
    dlock__op_complete(op);
}

static void step_done(dlock__zk_call *c);

static int call(dlock_lock *l, int step, int what, const char *path)
{
    dlock__zk_lockdata *d = LD(l);
    d->step = step;
    d->call.what = what;
    d->call.done = step_done;
    /* An election's node holds its value from its create (Curator's
     * LeaderSelector: the participant's id), so that the first in line
     * is a leader with a value at once (backend.h, elect_value_at_grant). */
    d->call.data = NULL;
    d->call.data_len = 0;
    if (what == DLOCK__ZK_CREATE && l->elect_value) {
        d->call.data = l->elect_value;
        d->call.data_len = l->elect_value_len;
    } else if (what == DLOCK__ZK_CREATE && l->client->identity) {
        /* The holder's identity (dlock_client_options.identity) is the
         * node's data, where Curator's lock recipes keep their client's
         * address and never read it back: dlock_client_identity() reads
         * it, with the node's ctime as its since. */
        d->call.data = l->client->identity;
        d->call.data_len = strlen(l->client->identity);
    }
    if (!dlock__zk_path_set(d->call.path, path, NULL))
        return DLOCK_EINVAL;
    int rc = dlock__zk_call_start(d->z, &d->call, d->op->loop);
    if (rc != DLOCK_OK)
        d->step = 0;
    return rc;
}

/* A step failed in a way a later one may not: the wait backs off (still in
 * line if it was). */
static void failed(dlock_lock *l, int zrc)
{
    dlock__zk_lockdata *d = LD(l);
    int rc = dlock__zk_error(zrc);
    dlock__err_set(&l->err, "ZooKeeper %s: %s", dlock__zk_name(d->z), zerror(zrc));
    if (rc == DLOCK_EAUTH || rc == DLOCK_ENOMEM) {
        answer(l, rc, 0, -1);
        return;
    }
    int64_t pause = dlock__backoff_ms((unsigned)d->failures++, 10, l->opts.retry_max_ms);
    answer(l, rc == DLOCK_EEXPIRED ? DLOCK_EIO : rc,
           DLOCK__V_RETRY | (d->node[0] ? DLOCK__V_QUEUED : 0), pause);
}

int dlock__zk_wait_call(dlock_lock *l, int step, int what, const char *path)
{
    return call(l, step, what, path);
}

void dlock__zk_wait_answer(dlock_lock *l, int code, unsigned flags, int64_t look_ms)
{
    answer(l, code, flags, look_ms);
}

void dlock__zk_wait_failed(dlock_lock *l, int zrc)
{
    failed(l, zrc);
}

void dlock__zk_wait_give_up(dlock_lock *l)
{
    dlock__err_set(&l->err, "held by another owner");
    if (call(l, STEP_GIVE_UP, DLOCK__ZK_DELETE, LD(l)->node) != DLOCK_OK)
        answer(l, DLOCK_ENOTACQUIRED, 0, -1);
}

/* Our node's name prefix: Curator's protected name, a random UUID, and
 * the lock name of the handle's role. */
static int create(dlock_lock *l)
{
    static const char *const names[] = {[DLOCK__ZK_MUTEX] = DLOCK__ZK_LOCK_NAME,
                                        [DLOCK__ZK_READ] = DLOCK__ZK_READ_NAME,
                                        [DLOCK__ZK_WRITE] = DLOCK__ZK_WRITE_NAME};
    char hex[33], name[64], prefix[DLOCK__ZK_PATH_MAX];
    if (dlock__token_hex(hex) != DLOCK_OK)
        return DLOCK_EIO;
    snprintf(name, sizeof name, "/_c_%.8s-%.4s-4%.3s-a%.3s-%.12s-%s", hex, hex + 8, hex + 12,
             hex + 15, hex + 18, names[LD(l)->role]);
    if (!dlock__zk_path_set(prefix, LD(l)->line, name))
        return DLOCK_EINVAL;
    return call(l, STEP_CREATE, DLOCK__ZK_CREATE, prefix);
}

static void created(dlock_lock *l, dlock__zk_call *c)
{
    dlock__zk_lockdata *d = LD(l);
    if (c->zrc == ZNONODE && !d->parents_made) {
        d->parents_made = 1; /* a second ZNONODE is a failure */
        int rc = call(l, STEP_PARENTS, DLOCK__ZK_PARENTS, d->line);
        if (rc != DLOCK_OK)
            answer(l, rc, 0, -1);
        return;
    }
    if (c->zrc != ZOK) {
        /* The connection went with the request: the server may have made
         * the node, which would stand first in line, ours, unknown to us. */
        if (c->zrc == ZCONNECTIONLOSS || c->zrc == ZOPERATIONTIMEOUT)
            (void)dlock__zk_path_set(d->lost, c->path, NULL);
        failed(l, c->zrc);
        return;
    }
    (void)dlock__zk_path_set(d->node, c->created, NULL);
    d->czxid = c->stat.czxid;
    d->owner_session = c->stat.ephemeralOwner;
    d->failures = 0;
    if (d->trying) /* back in line (our node had gone): the next try looks */
        answer(l, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY | DLOCK__V_QUEUED, 0);
    else
        answer(l, DLOCK_OK, 0, -1); /* the begin: in line */
}

/* Into the line: what a node of ours in it that we do not know of first
 * (owed: a delete that did not get through; lost: a create whose answer
 * did not come), else a node of ours. Every create goes through here: a
 * node of ours left before the new one would keep it, and everyone
 * behind, waiting until the session ends. */
static int enter_line(dlock_lock *l)
{
    dlock__zk_lockdata *d = LD(l);
    if (d->owed[0])
        return call(l, STEP_OWED, DLOCK__ZK_DELETE, d->owed);
    if (d->lost[0]) { /* the line it was made in */
        char dir[DLOCK__ZK_PATH_MAX];
        (void)dlock__zk_path_set(dir, d->lost, NULL);
        *strrchr(dir, '/') = '\0';
        return call(l, STEP_FIND, DLOCK__ZK_CHILDREN, dir);
    }
    return create(l);
}

/* The owed node deleted, or the line read for the lost one (which then
 * is owed): into the line, or back off (the connection is not back). */
static void cleared(dlock_lock *l, dlock__zk_call *c)
{
    dlock__zk_lockdata *d = LD(l);
    int gone = c->zrc == ZOK || c->zrc == ZNONODE || c->zrc == ZINVALIDSTATE ||
               c->zrc == ZSESSIONEXPIRED; /* (an ended session took its nodes) */
    if (!gone) {
        failed(l, c->zrc);
        return;
    }
    if (d->step == STEP_OWED) {
        d->owed[0] = '\0';
    } else {
        const char *name = base_name(d->lost);
        for (size_t i = 0; c->zrc == ZOK && i < c->n_children; i++)
            if (strncmp(c->children[i], name, strlen(name)) == 0)
                (void)(dlock__zk_path_set(d->owed, c->path, "/") &&
                       dlock__zk_path_set(d->owed, d->owed, c->children[i]));
        d->lost[0] = '\0';
    }
    if (enter_line(l) != DLOCK_OK)
        answer(l, DLOCK_EIO, DLOCK__V_RETRY, 0);
}

/* The node before ours went, or the session moved: the waiter's sleep
 * ends, as a release message ends it (wakeup_chan.c). On the wait's loop
 * (the watch's hop). */
void dlock__zk_wait_woken(void *arg)
{
    dlock__lock_waiter_wake(arg);
}

/* The line read: ours first, or the node before ours to watch. */
static void looked(dlock_lock *l, dlock__zk_call *c)
{
    dlock__zk_lockdata *d = LD(l);
    if (c->zrc != ZOK) {
        failed(l, c->zrc);
        return;
    }
    int64_t ours = dlock__zk_node_seq(base_name(d->node), NULL), pred_seq = -1;
    const char *pred = NULL;
    int found = 0, role = 0;
    for (size_t i = 0; i < c->n_children; i++) {
        int64_t s = dlock__zk_node_seq(c->children[i], &role);
        if (s < 0)
            continue;
        found |= strcmp(c->children[i], base_name(d->node)) == 0;
        /* the nearest node before ours that keeps us waiting */
        if (s < ours && s > pred_seq && dlock__zk_blocks(d->role, role)) {
            pred_seq = s;
            pred = c->children[i];
        }
    }
    d->failures = 0;
    if (!found) { /* our node went (the session expired): in line again */
        d->node[0] = '\0';
        dlock__err_set(&l->err, "our place in line on ZooKeeper went (the session expired)");
        answer(l, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY, 0);
        return;
    }
    if (!pred && l->kind->id == DLOCK__KIND_SEMAPHORE) {
        dlock__zk_sem_first(l); /* first in the locks line: now a lease */
        return;
    }
    if (!pred) {
        /* First in line: ours, for as long as the session lives, which
         * the read proves it did when it was sent. */
        memcpy(l->token_inline, base_name(d->node), strlen(base_name(d->node)) + 1);
        l->token = l->token_inline;
        l->token_len = strlen(l->token_inline);
        l->fence = (l->opts.flags & DLOCK_NO_FENCE) || !l->kind->fenced ? 0 : (uint64_t)d->czxid;
        l->holds = 1;
        dlock__lock_granted(l, c->sent_ns + dlock__zk_session_ms(d->z) * DLOCK__NS_PER_MS);
        answer(l, DLOCK_OK, 0, -1);
        return;
    }
    if (l->try_once) {
        dlock__zk_wait_give_up(l);
        return;
    }
    char path[DLOCK__ZK_PATH_MAX];
    (void)(dlock__zk_path_set(path, d->line, "/") && dlock__zk_path_set(path, path, pred));
    dlock__zk_watch_drop(d->z, d->watch);
    d->watch = dlock__zk_watch_new(d->z, d->op->loop, dlock__zk_wait_woken, l);
    d->call.watch = d->watch;
    if (!d->watch || call(l, STEP_WATCH, DLOCK__ZK_WATCH, path) != DLOCK_OK)
        answer(l, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY | DLOCK__V_QUEUED, RECHECK_MS);
}

static void watched(dlock_lock *l, dlock__zk_call *c)
{
    if (c->zrc == ZNONODE) { /* gone between the read and the watch: look now */
        answer(l, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY | DLOCK__V_QUEUED, 0);
        return;
    }
    if (c->zrc != ZOK) {
        failed(l, c->zrc);
        return;
    }
    answer(l, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY | DLOCK__V_QUEUED, RECHECK_MS);
}

/* A counted kind's re-entry, the look at our node back: one more hold,
 * counted in the handle as Curator counts a thread's re-entries, if the
 * node is still ours; else that hold ended with its session, and the
 * acquire gets in line anew. */
static void reentry_looked(dlock_lock *l, dlock__zk_call *c)
{
    dlock__zk_lockdata *d = LD(l);
    if (c->zrc == ZOK && c->stat.ephemeralOwner == d->owner_session &&
        c->stat.czxid == d->czxid) {
        l->holds++;
        dlock__lock_granted(l, c->sent_ns + dlock__zk_session_ms(d->z) * DLOCK__NS_PER_MS);
        d->reentered = 1;
        answer(l, DLOCK_OK, 0, -1);
        return;
    }
    if (c->zrc != ZOK && c->zrc != ZNONODE && c->zrc != ZINVALIDSTATE &&
        c->zrc != ZSESSIONEXPIRED) {
        failed(l, c->zrc); /* not known: the begin comes again */
        return;
    }
    dlock__engine_ended(l, DLOCK_EEXPIRED); /* drop() forgets the node */
    dlock__err_clear(&l->err);
    if (enter_line(l) != DLOCK_OK)
        answer(l, DLOCK_EIO, DLOCK__V_RETRY, 0);
}

/* A node deleted (given up, left): "" when gone, owed otherwise. */
static void node_deleted(dlock_lock *l, int zrc)
{
    dlock__zk_lockdata *d = LD(l);
    if (zrc != ZOK && zrc != ZNONODE && zrc != ZINVALIDSTATE && zrc != ZSESSIONEXPIRED)
        (void)dlock__zk_path_set(d->owed, d->node, NULL);
    d->node[0] = '\0';
}

static void step_done(dlock__zk_call *c)
{
    dlock__zk_lockdata *d = DLOCK__OWNER(c, dlock__zk_lockdata, call);
    dlock_lock *l = d->op->l;
    if (d->step >= DLOCK__ZK_SEM_STEP) {
        dlock__zk_sem_done(l, c);
        return;
    }
    switch (d->step) {
    case STEP_OWED:
    case STEP_FIND:
        cleared(l, c);
        break;
    case STEP_PARENTS:
        if (c->zrc == ZNONODE) { /* even the first: the URL's chroot is not there */
            dlock__err_set(&l->err, "ZooKeeper %s: its chroot does not exist (create it first)",
                           dlock__zk_name(d->z));
            answer(l, DLOCK_EIO, 0, -1);
        } else if (c->zrc != ZOK)
            failed(l, c->zrc);
        else if (create(l) != DLOCK_OK)
            answer(l, DLOCK_EIO, DLOCK__V_RETRY, 0);
        break;
    case STEP_CREATE:
        created(l, c);
        break;
    case STEP_CHILDREN:
        looked(l, c);
        break;
    case STEP_WATCH:
        watched(l, c);
        break;
    case STEP_REENTER:
        reentry_looked(l, c);
        break;
    case STEP_GIVE_UP:
        node_deleted(l, c->zrc);
        if (!d->lease[0] || !dlock__zk_sem_leave(l, 1))
            answer(l, DLOCK_ENOTACQUIRED, 0, -1);
        break;
    default: /* STEP_LEAVE: the engine's code stands */
        node_deleted(l, c->zrc);
        if (d->lease[0] && dlock__zk_sem_leave(l, 0))
            break; /* a semaphore's lease goes too */
        d->step = 0;
        dlock__op_complete(d->op);
    }
}

int dlock__zk_wait_begin(dlock_lock *l, dlock__op *op)
{
    dlock__zk_lockdata *d = LD(l);
    d->op = op;
    d->trying = 0;
    d->failures = 0;
    d->parents_made = 0;
    d->reentered = 0;
    dlock__err_clear(&l->err);
    if (d->node[0] && l->kind->counted && dlock__lock_get_state(l) == DLOCK_STATE_HELD)
        return call(l, STEP_REENTER, DLOCK__ZK_EXISTS, d->node);
    if (d->node[0]) { /* a wait that ended without a word: its node is owed */
        (void)dlock__zk_path_set(d->owed, d->node, NULL);
        d->node[0] = '\0';
    }
    return enter_line(l);
}

int dlock__zk_wait_try(dlock_lock *l, dlock__op *op)
{
    dlock__zk_lockdata *d = LD(l);
    d->op = op;
    d->trying = 1;
    d->parents_made = 0;
    if (d->reentered) { /* the begin took one more hold of ours */
        d->reentered = 0;
        dlock__op_complete_soon(op, DLOCK_OK);
        return DLOCK_OK;
    }
    if (!d->node[0])
        return enter_line(l); /* our node went: in line again (the next try looks) */
    return call(l, STEP_CHILDREN, DLOCK__ZK_CHILDREN, d->line);
}

int dlock__zk_wait_watch(dlock_lock *l)
{
    dlock__zk_lockdata *d = LD(l);
    if (!d->node[0])
        return DLOCK_ENOTSUP;
    /* The looks set the watch; this one only says where it wakes. */
    if (!d->watch && !(d->watch = dlock__zk_watch_new(d->z, d->op->loop, dlock__zk_wait_woken, l)))
        return DLOCK_ENOMEM;
    return DLOCK_OK;
}

int dlock__zk_wait_watch_ready(dlock_lock *l, int64_t until_ns)
{
    (void)l, (void)until_ns;
    return 1; /* each look sets its watch before it answers: nothing is missed */
}

void dlock__zk_wait_unwatch(dlock_lock *l)
{
    dlock__zk_lockdata *d = LD(l);
    dlock__zk_watch_drop(d->z, d->watch);
    d->watch = NULL;
}

int dlock__zk_wait_leave(dlock_lock *l, int64_t timeout_ms, dlock__op *op)
{
    (void)timeout_ms; /* the C client's own timeout ends the delete */
    dlock__zk_lockdata *d = LD(l);
    dlock__zk_wait_unwatch(l);
    if (!d->node[0])
        return DLOCK_ENOTACQUIRED; /* not in line: nothing to send */
    d->op = op;
    return call(l, STEP_LEAVE, DLOCK__ZK_DELETE, d->node);
}

int dlock__zk_wait_handed(dlock_lock *l)
{
    (void)l;
    return 0; /* a deletion says "look again", never "yours" */
}
