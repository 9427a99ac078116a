/* SPDX-License-Identifier: BSD-3-Clause */
/* An election's calls on ZooKeeper (backend.h, "elections"; the design is
 * src/engine/election.c's), in the layout of Curator's LeaderSelector,
 * which is its InterProcessMutex's: each candidate an ephemeral
 * sequential node <path>/_c_<uuid>-lock-<seq> whose data is the
 * candidate's value (Curator's participant id; zk_wait.c writes it at the
 * node's create, from the term lock's elect_value), the leader the node of
 * the lowest sequence, whose czxid is the term's fence (the lock's own
 * fence rule, so it strictly grows from term to term). So a Curator
 * LeaderSelector and dlock campaign in one line, and
 * LeaderSelector.getLeader() and dlock_election_leader() each see the
 * other's leader.
 *   - proclaim: a setData of our node. Its path is ours alone (a random
 *     UUID in its name), and it is there only while our session is: a
 *     write that finds it gone is a term over, and one that finds a node
 *     of another create there (never, but cheap to see) not ours;
 *   - leader: the line read, then the first node's data and stat;
 *   - observe: watches ZooKeeper pushes, set again after each fires, on
 *     a loop thread of the observer's own: on the path's children (a
 *     candidate came or went: a resign, a session that ended) and on the
 *     first node's data (a proclaim); on the path's existence while it is
 *     not there. The observer is woken when one fires, each time the
 *     watches are set again (its look then sees whatever changed before,
 *     and a change after fires them), and after a failed call (it looks
 *     again as the calls back off). */
#include <stdatomic.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "election.h"
#include "handle.h"
#include "loop_thread.h"
#include "zk_lock.h"
#include "zk_session.h"

#define ZK(c) ((dlock__zk *)(c)->store)

/* A leader read that keeps finding its first node gone between the two
 * reads gives up after this many (a line that turns over that fast). */
#define READ_TRIES 10

/* The first node of a line's children (the lowest sequence), "" none. */
static void first_of(const dlock__zk_call *c, char *first)
{
    int64_t lowest = -1;
    first[0] = '\0';
    for (size_t i = 0; i < c->n_children; i++) {
        int64_t s = dlock__zk_node_seq(c->children[i], NULL);
        if (s >= 0 && (lowest < 0 || s < lowest)) {
            lowest = s;
            (void)dlock__zk_path_set(first, c->children[i], NULL);
        }
    }
}

/* ---- proclaim ---------------------------------------------------------------- */

int dlock__zk_elect_write(dlock_lock *l, const char *value, size_t len)
{
    dlock__zk_lockdata *d = DLOCK__ZK_LD(l);
    if (!d->node[0])
        return DLOCK_ENOTHELD;
    dlock__zk_call c = {0};
    c.what = DLOCK__ZK_SET_DATA;
    c.data = value;
    c.data_len = len;
    (void)dlock__zk_path_set(c.path, d->node, NULL);
    int rc = dlock__zk_call_wait(d->z, &c);
    if (rc == DLOCK_OK && c.zrc == ZOK &&
        (c.stat.czxid != d->czxid || c.stat.ephemeralOwner != d->owner_session)) {
        rc = DLOCK_ENOTOWNER;
        dlock__err_set(&l->err, "the election's value was not written where meant: the term's "
                                "node was made again");
    } else if (rc == DLOCK_OK && (c.zrc == ZNONODE || c.zrc == ZSESSIONEXPIRED ||
                                  c.zrc == ZINVALIDSTATE)) {
        rc = DLOCK_EEXPIRED;
        dlock__err_set(&l->err, "the election's value was not written: the term's node is gone "
                                "(its session ended)");
    } else if (rc == DLOCK_OK && c.zrc != ZOK) {
        rc = dlock__zk_error(c.zrc);
        dlock__err_set(&l->err, "the election's value was not written: ZooKeeper %s: %s",
                       dlock__zk_name(d->z), zerror(c.zrc));
    }
    dlock__zk_call_clear(&c);
    return rc;
}

/* ---- leader -------------------------------------------------------------------- */

int dlock__zk_elect_read(dlock_client *cl, const char *key, size_t klen, dlock__leader *out)
{
    (void)klen; /* the name is NUL-terminated */
    char path[DLOCK__ZK_PATH_MAX], node[DLOCK__ZK_PATH_MAX];
    if (!dlock__zk_lock_path(path, sizeof path, key))
        return DLOCK_EINVAL;
    /* ZooKeeper ends a dead leader's node with its session and the watch
     * tells: no look at a lease's end is needed (ttl_ms -1). */
    out->ttl_ms = -1;
    dlock__zk_call c = {0};
    int rc = DLOCK_OK;
    for (int tries = 0; rc == DLOCK_OK; tries++) {
        c.what = DLOCK__ZK_CHILDREN;
        (void)dlock__zk_path_set(c.path, path, NULL);
        if ((rc = dlock__zk_call_wait(ZK(cl), &c)) != DLOCK_OK)
            break;
        if (c.zrc == ZNONODE) /* nobody ever campaigned, or the container went */
            break;
        if (c.zrc != ZOK) {
            rc = dlock__zk_error(c.zrc);
            break;
        }
        char first[DLOCK__ZK_PATH_MAX];
        first_of(&c, first);
        if (!first[0]) /* nobody leads */
            break;
        (void)(dlock__zk_path_set(node, path, "/") && dlock__zk_path_set(node, node, first));
        c.what = DLOCK__ZK_GET_DATA;
        (void)dlock__zk_path_set(c.path, node, NULL);
        if ((rc = dlock__zk_call_wait(ZK(cl), &c)) != DLOCK_OK)
            break;
        if (c.zrc == ZOK) {
            out->fence = (uint64_t)c.stat.czxid;
            out->value = c.value; /* taken over */
            out->value_len = c.value_len;
            c.value = NULL;
            break;
        }
        if (c.zrc != ZNONODE) {
            rc = dlock__zk_error(c.zrc);
            break;
        }
        if (tries + 1 == READ_TRIES) /* the leader went between the reads, every time */
            rc = DLOCK_EIO;
    }
    dlock__zk_call_clear(&c);
    return rc;
}

/* ---- observe --------------------------------------------------------------------- */

enum { ARM_CHILDREN = 1, ARM_EXISTS, ARM_DATA };

typedef struct elect_rec {
    dlock__loop_thread lt;
    dlock__post start, stop;
    dlock__timer again; /* a failed call is made again after a pause */
    dlock__zk_call call;
    dlock__zk *z;
    char path[DLOCK__ZK_PATH_MAX];
    /* This arming's watches, on the line and on its first node: each
     * arming sets new ones (a record the C client may still hold until
     * its watch fires is dropped, not reused). */
    dlock__zk_watch *line, *first;
    dlock__elect_watch *ew;
    int step;    /* the call in flight (ARM_*), 0 none */
    int rearm;   /* a watch fired while a call was in flight */
    int stopping;
    int idle;    /* under ew->mu: stopping, and no call in flight */
    int64_t pause_ms;
    atomic_int armed; /* the watches were set once: the first look may go */
} elect_rec;

static void bump(elect_rec *r)
{
    dlock__elect_watch_bump(r->ew);
}

static void arm(elect_rec *r);

/* A watch fired: the observer looks at once (a term shorter than the
 * arming's two calls is seen that way), and the watches are set again,
 * which wakes it once more. */
static void fired(void *arg)
{
    bump(arg);
    arm(arg);
}

static void drop_watches(elect_rec *r)
{
    dlock__zk_watch_drop(r->z, r->line);
    dlock__zk_watch_drop(r->z, r->first);
    r->line = r->first = NULL;
}

static int send_call(elect_rec *r, int step, int what, const char *path, dlock__zk_watch *w)
{
    r->step = step;
    r->call.what = what;
    r->call.watch = w;
    (void)dlock__zk_path_set(r->call.path, path, NULL);
    int rc = w ? dlock__zk_call_start(r->z, &r->call, dlock__loop_thread_loop(&r->lt))
               : DLOCK_ENOMEM;
    if (rc != DLOCK_OK)
        r->step = 0;
    return rc;
}

/* Set again after a pause that doubles, 50 ms to 1 s (the connection is
 * not back); the observer looks meanwhile, and backs off as it fails. */
static void back_off(elect_rec *r)
{
    bump(r);
    r->pause_ms = r->pause_ms ? DLOCK__MIN(r->pause_ms * 2, 1000) : 50;
    r->again.due_ns = dlock__deadline_after_ms(r->pause_ms);
    (void)dlock__timer_set(dlock__loop_thread_loop(&r->lt), &r->again);
}

/* The watches are set: the observer looks (a change from now on fires
 * one), and a watch that fired meanwhile sets them again. */
static void armed(elect_rec *r)
{
    r->pause_ms = 0;
    atomic_store(&r->armed, 1);
    bump(r);
    if (r->rearm) {
        r->rearm = 0;
        arm(r);
    }
}

/* On the observer's loop: set the watches anew (a watch fired, or the
 * observe starts). */
static void arm(elect_rec *r)
{
    if (r->stopping)
        return;
    if (r->step) { /* once the call in flight is answered */
        r->rearm = 1;
        return;
    }
    dlock__timer_clear(dlock__loop_thread_loop(&r->lt), &r->again);
    drop_watches(r);
    r->line = dlock__zk_watch_new(r->z, dlock__loop_thread_loop(&r->lt), fired, r);
    if (send_call(r, ARM_CHILDREN, DLOCK__ZK_WATCH_CHILDREN, r->path, r->line) != DLOCK_OK)
        back_off(r);
}

/* The line read with its watch: the first node's data watched next. */
static void line_read(elect_rec *r, dlock__zk_call *c)
{
    char first[DLOCK__ZK_PATH_MAX], node[DLOCK__ZK_PATH_MAX];
    first_of(c, first);
    if (!first[0]) { /* nobody: a candidate's create fires the line's watch */
        armed(r);
        return;
    }
    (void)(dlock__zk_path_set(node, r->path, "/") && dlock__zk_path_set(node, node, first));
    r->first = dlock__zk_watch_new(r->z, dlock__loop_thread_loop(&r->lt), fired, r);
    if (send_call(r, ARM_DATA, DLOCK__ZK_WATCH_DATA, node, r->first) != DLOCK_OK)
        back_off(r);
}

static void answered(dlock__zk_call *c)
{
    elect_rec *r = DLOCK__OWNER(c, elect_rec, call);
    int step = r->step;
    r->step = 0;
    if (r->stopping) {
        drop_watches(r); /* the call no longer uses them */
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&r->ew->mu));
        r->idle = 1;
        DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&r->ew->cond));
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&r->ew->mu));
        return;
    }
    if (step == ARM_CHILDREN && c->zrc == ZNONODE) {
        /* No line yet: its creation fires an existence watch. */
        if (send_call(r, ARM_EXISTS, DLOCK__ZK_WATCH, r->path, r->line) != DLOCK_OK)
            back_off(r);
    } else if ((step == ARM_EXISTS && c->zrc == ZNONODE) || (step == ARM_DATA && c->zrc == ZOK)) {
        armed(r);
    } else if ((step == ARM_EXISTS && c->zrc == ZOK) || (step == ARM_DATA && c->zrc == ZNONODE)) {
        arm(r); /* made, or the first went, since the line's read: read it again */
    } else if (step == ARM_CHILDREN && c->zrc == ZOK) {
        line_read(r, c);
    } else {
        back_off(r); /* the connection is not there: again soon */
    }
}

static void start_posted(dlock__post *p)
{
    arm(DLOCK__OWNER(p, elect_rec, start));
}

static void again_fired(dlock__timer *t)
{
    arm(DLOCK__OWNER(t, elect_rec, again));
}

/* On the observer's loop: no more calls; idle once none is in flight. A
 * call in flight may not have been sent yet, its watch record still to be
 * referenced by the session thread: the watches go with its answer. */
static void stop_posted(dlock__post *p)
{
    elect_rec *r = DLOCK__OWNER(p, elect_rec, stop);
    r->stopping = 1;
    dlock__timer_clear(dlock__loop_thread_loop(&r->lt), &r->again);
    if (!r->step) {
        drop_watches(r);
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&r->ew->mu));
        r->idle = 1;
        DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&r->ew->cond));
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&r->ew->mu));
    }
}

int dlock__zk_elect_watch(dlock_client *c, const char *key, size_t klen, dlock__elect_watch *ew)
{
    (void)klen;
    elect_rec *r = dlock__calloc(1, sizeof *r);
    if (!r)
        return DLOCK_ENOMEM;
    if (!dlock__zk_lock_path(r->path, sizeof r->path, key)) {
        dlock__free(r);
        return DLOCK_EINVAL;
    }
    r->z = ZK(c);
    r->ew = ew;
    r->call.done = answered;
    r->start.run = start_posted;
    r->stop.run = stop_posted;
    r->again.fire = again_fired;
    atomic_init(&r->armed, 0);
    int rc = dlock__loop_thread_start(&r->lt, NULL);
    if (rc != DLOCK_OK) {
        dlock__free(r);
        return rc;
    }
    ew->rec = r;
    dlock__loop_thread_post(&r->lt, &r->start);
    /* The observer's first look comes once the watches are set (or after
     * the I/O timeout: then the arming goes on, and wakes it when set). */
    int64_t until = dlock__deadline_after_ms(c->opts.io_timeout_ms);
    struct timespec ts = dlock__timespec_of(until);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ew->mu));
    while (!atomic_load(&r->armed) && !ew->canceled && dlock__now_ns() < until)
        (void)pthread_cond_timedwait(&ew->cond, &ew->mu, &ts);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ew->mu));
    return DLOCK_OK;
}

void dlock__zk_elect_unwatch(dlock_client *c, dlock__elect_watch *ew)
{
    elect_rec *r = ew->rec;
    (void)c;
    if (!r)
        return;
    /* A call in flight is answered on our loop (the C client answers
     * every call, at the latest when the connection goes): wait for it,
     * its record is ours to free. */
    dlock__loop_thread_post(&r->lt, &r->stop);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ew->mu));
    while (!r->idle)
        DLOCK__CHECK_PTHREAD(pthread_cond_wait(&ew->cond, &ew->mu));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ew->mu));
    (void)dlock__loop_thread_stop(&r->lt);
    dlock__loop_thread_free(&r->lt);
    dlock__zk_call_clear(&r->call);
    dlock__free(r);
    ew->rec = NULL;
}
