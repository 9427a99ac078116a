/* SPDX-License-Identifier: BSD-3-Clause */
/* A session's calls and watches (zk_session.h): a call is posted to the
 * session thread, sent with the C client's asynchronous API under the
 * library mutex, and answered on the caller's loop through an eventfd; a
 * watch is a record the handle and the C client both reference. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "loop_poll.h"
#include "zk_session.h"
#include "zk_session_priv.h"

/* ---- calls ------------------------------------------------------------------ */

/* The answer is in: the caller's loop runs done (call_ready). */
static void answered(dlock__zk_call *c, int zrc)
{
    c->zrc = zrc;
    uint64_t one = 1;
    ssize_t n;
    do
        n = write(c->efd, &one, sizeof one);
    while (n < 0 && errno == EINTR);
}

static void created(int rc, const char *name, const struct Stat *st, const void *data)
{
    dlock__zk_call *c = (dlock__zk_call *)data;
    if (rc == ZOK) {
        (void)dlock__zk_path_set(c->created, name ? name : "", NULL);
        if (st)
            c->stat = *st;
    }
    answered(c, rc);
}

static void send_parent(dlock__zk_call *c);

static void parent_made(int rc, const char *name, const struct Stat *st, const void *data)
{
    (void)name, (void)st;
    dlock__zk_call *c = (dlock__zk_call *)data;
    if (rc != ZOK && rc != ZNODEEXISTS) {
        answered(c, rc);
        return;
    }
    send_parent(c);
}

/* The next ancestor of c->path (a lock's path: "/a/b/c" makes /a, then
 * /a/b; the lock's own node, /a/b/c, too), as a container node, which the
 * server deletes once its last child went. */
static void send_parent(dlock__zk_call *c)
{
    const char *slash = strchr(c->path + c->parent_at + 1, '/');
    size_t end = slash ? (size_t)(slash - c->path) : strlen(c->path);
    if (c->parent_at >= strlen(c->path)) {
        answered(c, ZOK);
        return;
    }
    char up[DLOCK__ZK_PATH_MAX];
    memcpy(up, c->path, end);
    up[end] = '\0';
    c->parent_at = end;
    int rc = zoo_acreate2(c->z->zh, up, "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER, parent_made,
                          c);
    if (rc != ZOK)
        answered(c, rc);
}

static void children_read(int rc, const struct String_vector *sv, const void *data)
{
    dlock__zk_call *c = (dlock__zk_call *)data;
    if (rc == ZOK && sv && sv->count > 0) {
        c->children = dlock__calloc((size_t)sv->count, sizeof *c->children);
        for (int32_t i = 0; c->children && i < sv->count; i++) {
            if (!(c->children[i] = dlock__strdup(sv->data[i]))) {
                rc = ZSYSTEMERROR; /* out of memory: the look fails, and is made again */
                break;
            }
            c->n_children++;
        }
        if (!c->children)
            rc = ZSYSTEMERROR;
    }
    answered(c, rc);
}

static void stat_read(int rc, const struct Stat *st, const void *data)
{
    dlock__zk_call *c = (dlock__zk_call *)data;
    if (rc == ZOK && st)
        c->stat = *st;
    answered(c, rc);
}

static void data_read(int rc, const char *value, int value_len, const struct Stat *st,
                      const void *data)
{
    dlock__zk_call *c = (dlock__zk_call *)data;
    if (rc == ZOK && st)
        c->stat = *st;
    if (rc == ZOK) { /* a node without data (value_len -1) reads as empty */
        size_t n = value && value_len > 0 ? (size_t)value_len : 0;
        if ((c->value = dlock__malloc(n + 1)) == NULL) {
            rc = ZSYSTEMERROR; /* out of memory: the look fails, and is made again */
        } else {
            if (n)
                memcpy(c->value, value, n);
            c->value[n] = '\0';
            c->value_len = n;
        }
    }
    answered(c, rc);
}

static void deleted(int rc, const void *data)
{
    answered((dlock__zk_call *)data, rc);
}

/* A watch set by a waiter's look: a node event ends it (the C client
 * forgets the watch then), a session event only wakes the waiter. */
static void watch_fired(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh, (void)state, (void)path;
    dlock__zk_watch *w = ctx;
    dlock__zk *z = w->z;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&z->mu));
    if (w->fired) { /* not dropped: its eventfd is open, and watch_ready runs fired */
        uint64_t one = 1;
        ssize_t n;
        do
            n = write(w->efd, &one, sizeof one);
        while (n < 0 && errno == EINTR);
    }
    if (type != ZOO_SESSION_EVENT && w->zh) {
        w->zh = NULL;
        dlock__zk_watch_unref_locked(z, w);
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&z->mu));
}

/* A watch's call: on the node (its stat, or its data), or on its
 * children (their names), the watch shared by the waiter's calls. */
static int send_watch(dlock__zk_call *c)
{
    dlock__zk *z = c->z;
    dlock__zk_watch *w = c->watch;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&z->mu));
    int set_before = w->zh != NULL;
    if (!set_before) {
        w->zh = z->zh;
        w->refs++;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&z->mu));
    int rc;
    if (c->what == DLOCK__ZK_WATCH_CHILDREN)
        rc = zoo_awget_children(z->zh, c->path, watch_fired, w, children_read, c);
    else if (c->what == DLOCK__ZK_WATCH_DATA)
        rc = zoo_awget(z->zh, c->path, watch_fired, w, data_read, c);
    else
        rc = zoo_awexists(z->zh, c->path, watch_fired, w, stat_read, c);
    if (rc != ZOK && !set_before) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&z->mu));
        w->zh = NULL;
        dlock__zk_watch_unref_locked(z, w);
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&z->mu));
    }
    return rc;
}

/* On the session thread: send c. */
static void send_call(dlock__post *p)
{
    dlock__zk_call *c = DLOCK__OWNER(p, dlock__zk_call, post);
    dlock__zk *z = c->z;
    int rc = ZINVALIDSTATE;
    dlock__zk_lib_lock();
    if (z->zh) {
        switch (c->what) {
        case DLOCK__ZK_CREATE:
            /* (an election's node holds its value: Curator's LeaderSelector's id) */
            rc = zoo_acreate2(z->zh, c->path, c->data ? c->data : "", (int)c->data_len,
                              &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created, c);
            break;
        case DLOCK__ZK_PARENTS:
            c->parent_at = 0;
            send_parent(c);
            rc = ZOK;
            break;
        case DLOCK__ZK_CHILDREN:
            rc = zoo_aget_children(z->zh, c->path, 0, children_read, c);
            break;
        case DLOCK__ZK_EXISTS:
            rc = zoo_aexists(z->zh, c->path, 0, stat_read, c);
            break;
        case DLOCK__ZK_WATCH:
        case DLOCK__ZK_WATCH_CHILDREN:
        case DLOCK__ZK_WATCH_DATA:
            rc = send_watch(c);
            break;
        case DLOCK__ZK_GET_DATA:
            rc = zoo_aget(z->zh, c->path, 0, data_read, c);
            break;
        case DLOCK__ZK_SET_DATA:
            rc = zoo_aset(z->zh, c->path, c->data ? c->data : "", (int)c->data_len, -1,
                          stat_read, c);
            break;
        default:
            rc = zoo_adelete(z->zh, c->path, -1, deleted, c);
        }
    }
    if (rc != ZOK)
        answered(c, rc);
    dlock__zk_drive(z);
    dlock__zk_lib_unlock();
}

/* On the caller's loop: the answer came. */
static void call_ready(dlock__io *io, unsigned events)
{
    (void)events;
    dlock__zk_call *c = DLOCK__OWNER(io, dlock__zk_call, io);
    uint64_t n;
    if (read(c->efd, &n, sizeof n) != (ssize_t)sizeof n)
        return; /* not yet (a spurious wake-up) */
    dlock__io_clear(c->loop, &c->io);
    close(c->efd);
    c->efd = -1;
    c->done(c);
}

int dlock__zk_call_start(dlock__zk *z, dlock__zk_call *c, dlock__loop *loop)
{
    dlock__zk_call_clear(c); /* the last answer's */
    c->z = z;
    c->loop = loop;
    c->zrc = ZOK;
    c->created[0] = '\0';
    memset(&c->stat, 0, sizeof c->stat);
    c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->efd < 0)
        return errno == ENOMEM ? DLOCK_ENOMEM : DLOCK_EIO;
    memset(&c->io, 0, sizeof c->io);
    c->io.fd = c->efd;
    c->io.want = DLOCK__IO_READ;
    c->io.ready = call_ready;
    int rc = dlock__io_set(loop, &c->io);
    if (rc != DLOCK_OK) {
        close(c->efd);
        c->efd = -1;
        return rc;
    }
    c->sent_ns = dlock__now_ns();
    memset(&c->post, 0, sizeof c->post);
    c->post.run = send_call;
    dlock__loop_thread_post(&z->lt, &c->post);
    return DLOCK_OK;
}

void dlock__zk_call_clear(dlock__zk_call *c)
{
    dlock__free(c->value);
    c->value = NULL;
    c->value_len = 0;
    for (size_t i = 0; i < c->n_children; i++)
        dlock__free(c->children[i]);
    dlock__free(c->children);
    c->children = NULL;
    c->n_children = 0;
}

static void waited(dlock__zk_call *c)
{
    (void)c; /* call_ready closed the eventfd: the wait sees it */
}

static int answer_in(void *arg)
{
    return ((dlock__zk_call *)arg)->efd < 0;
}

int dlock__zk_call_wait(dlock__zk *z, dlock__zk_call *c)
{
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    c->done = waited;
    int rc = dlock__zk_call_start(z, c, &lp.loop);
    if (rc == DLOCK_OK)
        (void)dlock__loop_poll_run(&lp, answer_in, c, INT64_MAX);
    dlock__loop_poll_close(&lp);
    return rc;
}

int dlock__zk_path_set(char *out, const char *a, const char *b)
{
    size_t na = strlen(a), nb = b ? strlen(b) : 0;
    if (na + nb >= DLOCK__ZK_PATH_MAX) {
        out[0] = '\0';
        return 0;
    }
    memmove(out, a, na);
    if (nb)
        memcpy(out + na, b, nb);
    out[na + nb] = '\0';
    return 1;
}

int dlock__zk_error(int zrc)
{
    if (zrc == ZOK)
        return DLOCK_OK;
    if (zrc == ZNOAUTH || zrc == ZAUTHFAILED)
        return DLOCK_EAUTH;
    if (zrc == ZSESSIONEXPIRED || zrc == ZINVALIDSTATE)
        return DLOCK_EEXPIRED;
    if (zrc == ZSYSTEMERROR)
        return DLOCK_ENOMEM;
    return DLOCK_EIO;
}

/* ---- watches ---------------------------------------------------------------- */

/* On the watch's loop: the session thread saw an event. */
static void watch_ready(dlock__io *io, unsigned events)
{
    (void)events;
    dlock__zk_watch *w = DLOCK__OWNER(io, dlock__zk_watch, io);
    uint64_t n;
    if (read(w->efd, &n, sizeof n) != (ssize_t)sizeof n)
        return; /* not yet (a spurious wake-up) */
    /* fired is set and cleared on this thread only: no lock to read it */
    if (w->fired)
        w->fired(w->arg);
}

dlock__zk_watch *dlock__zk_watch_new(dlock__zk *z, dlock__loop *loop, void (*fired)(void *arg),
                                     void *arg)
{
    dlock__zk_watch *w = dlock__calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->z = z;
    w->fired = fired;
    w->arg = arg;
    w->refs = 1;
    w->loop = loop;
    w->io.fd = w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    w->io.want = DLOCK__IO_READ;
    w->io.ready = watch_ready;
    if (w->efd < 0 || dlock__io_set(loop, &w->io) != DLOCK_OK) {
        if (w->efd >= 0)
            close(w->efd);
        dlock__free(w);
        return NULL;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&z->mu));
    w->next = z->watches;
    z->watches = w;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&z->mu));
    return w;
}

void dlock__zk_watch_drop(dlock__zk *z, dlock__zk_watch *w)
{
    if (!w)
        return;
    dlock__io_clear(w->loop, &w->io);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&z->mu));
    w->fired = NULL; /* the session thread writes efd no more */
    w->arg = NULL;
    close(w->efd);
    w->efd = -1;
    dlock__zk_watch_unref_locked(z, w);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&z->mu));
}
