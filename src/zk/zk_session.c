/* SPDX-License-Identifier: BSD-3-Clause */
/* A client's ZooKeeper session on its own loop thread (zk_session.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "loop_poll.h"
#include "zk_session.h"
#include "zk_session_priv.h"

/* ---- the session thread ---------------------------------------------------- */

/* libzookeeper_st formats its log lines in static buffers (log_message),
 * also when a callback takes them: two session threads (or a client
 * opening beside one) logging at once raced there (TSan, test_zk_lock's
 * contenders). So every call into the library goes under this mutex,
 * taken at the entry points (the thread's io, timer and posts, the open);
 * the library's callbacks run inside zookeeper_process(), under it. Order:
 * this mutex, then a session's mu, then a handle's. */
static pthread_mutex_t lib_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

/* fork(): no session thread is inside the library when the child is made
 * (the child may open clients of its own), and the child's copy of the
 * mutex is free. */
static void lib_prepare(void)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&lib_mu));
}

static void lib_after(void)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&lib_mu));
}

static void lib_init(void)
{
    DLOCK__CHECK_PTHREAD(pthread_atfork(lib_prepare, lib_after, lib_after));
}

void dlock__zk_lib_lock(void)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&lib_mu));
}

void dlock__zk_lib_unlock(void)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&lib_mu));
}

static void io_ready(dlock__io *io, unsigned events)
{
    dlock__zk *z = DLOCK__OWNER(io, dlock__zk, io);
    int ev = 0;
    if (events & (DLOCK__IO_READ | DLOCK__IO_ERROR))
        ev |= ZOOKEEPER_READ;
    if (events & DLOCK__IO_WRITE)
        ev |= ZOOKEEPER_WRITE;
    dlock__zk_lib_lock();
    (void)zookeeper_process(z->zh, ev); /* its failures come back through interest */
    dlock__zk_drive(z);
    dlock__zk_lib_unlock();
}

static void timer_fired(dlock__timer *t)
{
    dlock__zk *z = DLOCK__OWNER(t, dlock__zk, timer);
    dlock__zk_lib_lock();
    if (z->zh) /* (none: a new session could not be made, drive tries again) */
        (void)zookeeper_process(z->zh, 0); /* timeouts, pings: interest asks for them */
    dlock__zk_drive(z);
    dlock__zk_lib_unlock();
}

/* The session's own events (connected, expired, ...), on the thread. */
static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh, (void)path;
    dlock__zk *z = ctx;
    if (type != ZOO_SESSION_EVENT)
        return;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&z->mu));
    z->state = state;
    if (state == ZOO_CONNECTED_STATE) {
        z->session_ms = zoo_recv_timeout(zh);
        z->id = *zoo_client_id(zh);
    }
    if (state == ZOO_EXPIRED_SESSION_STATE)
        z->expired = 1;
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&z->cond));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&z->mu));
}

void dlock__zk_watch_unref_locked(dlock__zk *z, dlock__zk_watch *w)
{
    if (--w->refs > 0)
        return;
    dlock__zk_watch **p = &z->watches;
    while (*p && *p != w)
        p = &(*p)->next;
    if (*p)
        *p = w->next;
    dlock__free(w);
}

/* Close the handle and let go of every watch set on it: the C client
 * references none of them once zookeeper_close() returned. */
static void handle_close(dlock__zk *z)
{
    zhandle_t *old = z->zh;
    if (!old)
        return;
    z->zh = NULL;
    (void)zookeeper_close(old);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&z->mu));
    for (dlock__zk_watch *w = z->watches, *next; w; w = next) {
        next = w->next;
        if (w->zh == old) {
            w->zh = NULL;
            dlock__zk_watch_unref_locked(z, w);
        }
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&z->mu));
}

/* The C client logs to stderr by default: an application's stderr is
 * not ours to write on (its failures come back as codes). */
static void quiet_log(const char *message)
{
    (void)message;
}

static int handle_open(dlock__zk *z)
{
    z->zh = zookeeper_init2(z->url.hosts, session_watcher, (int)z->url.session_timeout_ms,
                            NULL, z, 0, quiet_log);
    if (!z->zh)
        return errno == ENOMEM ? DLOCK_ENOMEM : DLOCK_EIO;
    if (z->url.user) {
        char cred[512];
        int n = snprintf(cred, sizeof cred, "%s:%s", z->url.user, z->url.password);
        if (n > 0 && (size_t)n < sizeof cred)
            (void)zoo_add_auth(z->zh, "digest", cred, n, NULL, NULL);
        memset(cred, 0, sizeof cred);
    }
    return DLOCK_OK;
}

/* After every event: an expired session is replaced (its nodes are gone,
 * each hold learns it at its next look), then the io record and the timer
 * follow what the C client wants now. */
void dlock__zk_drive(dlock__zk *z)
{
    if (z->expired) {
        z->expired = 0;
        handle_close(z);
        if (handle_open(z) != DLOCK_OK) {
            /* No memory now: try again in a second. */
            dlock__io_clear(dlock__loop_thread_loop(&z->lt), &z->io);
            z->expired = 1;
            z->timer.due_ns = dlock__deadline_after_ms(1000);
            (void)dlock__timer_set(dlock__loop_thread_loop(&z->lt), &z->timer);
            return;
        }
    }
    if (!z->zh)
        return;
    dlock__loop *loop = dlock__loop_thread_loop(&z->lt);
    int fd = -1, interest = 0;
    struct timeval tv = {1, 0};
    (void)zookeeper_interest(z->zh, &fd, &interest, &tv);
    unsigned want = (interest & ZOOKEEPER_READ ? DLOCK__IO_READ : 0) |
                    (interest & ZOOKEEPER_WRITE ? DLOCK__IO_WRITE : 0);
    if (fd != z->io.fd || want != z->io.want || fd < 0) {
        dlock__io_clear(loop, &z->io);
        z->io.fd = fd;
        z->io.want = want;
        if (fd >= 0 && want)
            (void)dlock__io_set(loop, &z->io); /* the poll loop's fails only past its fds */
    }
    int64_t ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    z->timer.due_ns = dlock__deadline_after_ms(DLOCK__MAX(ms, 1));
    (void)dlock__timer_set(loop, &z->timer);
}

static void kicked(dlock__post *p)
{
    dlock__zk_lib_lock();
    dlock__zk_drive(DLOCK__OWNER(p, dlock__zk, kick));
    dlock__zk_lib_unlock();
}

/* ---- the client's session --------------------------------------------------- */

static int wait_connected(dlock__zk *z, int64_t timeout_ms, char *err, size_t err_len)
{
    int64_t until = dlock__deadline_after_ms(timeout_ms);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&z->mu));
    while (z->state != ZOO_CONNECTED_STATE && z->state != ZOO_AUTH_FAILED_STATE &&
           dlock__now_ns() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        (void)pthread_cond_timedwait(&z->cond, &z->mu, &ts);
    }
    int state = z->state;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&z->mu));
    if (state == ZOO_CONNECTED_STATE)
        return DLOCK_OK;
    if (state == ZOO_AUTH_FAILED_STATE) {
        snprintf(err, err_len, "ZooKeeper %s refused the credentials", z->url.hosts);
        return DLOCK_EAUTH;
    }
    snprintf(err, err_len, "no ZooKeeper member of %s answered within %" PRId64 " ms",
             z->url.hosts, timeout_ms);
    return DLOCK_EIO;
}

/* On the session thread: the last drive (the handle's close). */
static void closing(dlock__post *p)
{
    dlock__zk *z = DLOCK__OWNER(p, dlock__zk, closer);
    dlock__loop *loop = dlock__loop_thread_loop(&z->lt);
    dlock__io_clear(loop, &z->io);
    dlock__timer_clear(loop, &z->timer);
    dlock__zk_lib_lock();
    handle_close(z);
    dlock__zk_lib_unlock();
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&z->mu));
    z->closed = 1;
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&z->cond));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&z->mu));
}

int dlock__zk_open(dlock__zk **out, dlock__zk_url *u, int64_t connect_timeout_ms,
                   char *err, size_t err_len)
{
    *out = NULL;
    dlock__zk *z = dlock__calloc(1, sizeof *z);
    if (!z)
        return DLOCK_ENOMEM;
    z->url = *u; /* taken over: the caller's copy is cleared below */
    z->io.fd = -1;
    z->io.ready = io_ready;
    z->timer.fire = timer_fired;
    z->kick.run = kicked;
    z->closer.run = closing;
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&z->mu, NULL));
    DLOCK__CHECK_PTHREAD(pthread_cond_init(&z->cond, NULL));
    DLOCK__CHECK_PTHREAD(pthread_once(&lib_once, lib_init));
    dlock__zk_lib_lock();
    int rc = handle_open(z);
    if (rc == DLOCK_OK) {
        rc = dlock__loop_thread_start(&z->lt, NULL);
        if (rc != DLOCK_OK)
            handle_close(z);
    }
    dlock__zk_lib_unlock();
    if (rc != DLOCK_OK) {
        snprintf(err, err_len, "ZooKeeper %s: cannot start its session", u->hosts);
        memset(&z->url, 0, sizeof z->url); /* the caller's still */
        pthread_cond_destroy(&z->cond);
        pthread_mutex_destroy(&z->mu);
        dlock__free(z);
        return rc;
    }
    memset(u, 0, sizeof *u); /* ours now */
    *out = z;
    dlock__loop_thread_post(&z->lt, &z->kick);
    if ((rc = wait_connected(z, connect_timeout_ms, err, err_len)) != DLOCK_OK) {
        dlock__zk_close(z, 0);
        *out = NULL;
    }
    return rc;
}

void dlock__zk_close(dlock__zk *z, int forked)
{
    if (!z)
        return;
    if (forked) {
        /* The parent's session is the parent's: nothing is sent. */
        if (z->io.fd >= 0)
            close(z->io.fd);
        dlock__loop_thread_forget(&z->lt);
        return;
    }
    /* The handle is closed on its own thread (its closeSession goes out,
     * so the nodes go now, not after the timeout), then the thread stops. */
    dlock__loop_thread_post(&z->lt, &z->closer);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&z->mu));
    while (!z->closed)
        DLOCK__CHECK_PTHREAD(pthread_cond_wait(&z->cond, &z->mu));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&z->mu));
    (void)dlock__loop_thread_stop(&z->lt);
    dlock__loop_thread_free(&z->lt);
    while (z->watches) { /* a handle's watch it never dropped */
        dlock__zk_watch *w = z->watches;
        z->watches = w->next;
        dlock__free(w);
    }
    dlock__zk_url_clear(&z->url);
    pthread_cond_destroy(&z->cond);
    pthread_mutex_destroy(&z->mu);
    dlock__free(z);
}

const char *dlock__zk_name(const dlock__zk *z)
{
    return z->url.hosts;
}

void dlock__zk_session_id(dlock__zk *z, clientid_t *out)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&z->mu));
    *out = z->id;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&z->mu));
}

int64_t dlock__zk_session_ms(dlock__zk *z)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&z->mu));
    int64_t ms = z->session_ms;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&z->mu));
    return ms > 0 ? ms : z->url.session_timeout_ms;
}
