/* SPDX-License-Identifier: BSD-3-Clause */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "common.h"
#include "etcd_transfer.h"

/* ---- what curl asks of the loop ---------------------------------------------- */

/* The exchange is over (completed, past its deadline, or a record could
 * not be set): its end, once. Only from the loop's callbacks, after curl
 * returned. */
static void check_end(dlock__etcd_transfer *t)
{
    if (!t->running || !(t->done || t->over || t->failed))
        return;
    t->running = 0;
    dlock__timer_clear(t->loop, &t->deadline);
    if (t->on_end)
        t->on_end(t);
}

static void note_done(dlock__etcd_transfer *t)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(t->multi, &left)))
        if (m->msg == CURLMSG_DONE) {
            t->done = 1;
            t->res = m->data.result;
        }
    check_end(t);
}

static void socket_ready(dlock__io *io, unsigned events)
{
    dlock__etcd_socket *k = DLOCK__OWNER(io, dlock__etcd_socket, io);
    dlock__etcd_transfer *t = k->t;
    int ev = ((events & DLOCK__IO_READ) ? CURL_CSELECT_IN : 0) |
             ((events & DLOCK__IO_WRITE) ? CURL_CSELECT_OUT : 0) |
             ((events & DLOCK__IO_ERROR) ? CURL_CSELECT_ERR : 0);
    int running;
    /* May call on_socket() for this very record (curl closes it). */
    curl_multi_socket_action(t->multi, io->fd, ev, &running);
    note_done(t);
}

static void curl_timer_fire(dlock__timer *tm)
{
    dlock__etcd_transfer *t = DLOCK__OWNER(tm, dlock__etcd_transfer, curl_timer);
    int running;
    t->curl_timer_on = 0;
    curl_multi_socket_action(t->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    note_done(t);
}

static void deadline_fire(dlock__timer *tm)
{
    dlock__etcd_transfer *t = DLOCK__OWNER(tm, dlock__etcd_transfer, deadline);
    t->over = 1;
    check_end(t);
}

/* CURLMOPT_SOCKETFUNCTION: watch s for what, or stop watching it. Between
 * calls (no loop bound) only the record is updated; bind() registers it. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    dlock__etcd_transfer *t = userp;
    dlock__etcd_socket *k = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (k) {
            if (t->loop)
                dlock__io_clear(t->loop, &k->io);
            k->used = 0;
        }
        return 0;
    }
    if (!k) {
        for (size_t i = 0; i < DLOCK__ETCD_SOCKETS && !k; i++)
            if (!t->sockets[i].used)
                k = &t->sockets[i];
        if (!k || curl_multi_assign(t->multi, s, k) != CURLM_OK) {
            t->failed = 1;
            return -1;
        }
        memset(&k->io, 0, sizeof k->io);
        k->io.ready = socket_ready;
        k->t = t;
        k->used = 1;
    }
    k->io.fd = s;
    k->io.want = ((what & CURL_POLL_IN) ? DLOCK__IO_READ : 0u) |
                 ((what & CURL_POLL_OUT) ? DLOCK__IO_WRITE : 0u);
    if (t->loop && dlock__io_set(t->loop, &k->io) != DLOCK_OK) {
        t->failed = 1;
        return -1;
    }
    return 0;
}

/* CURLMOPT_TIMERFUNCTION: call socket_action(TIMEOUT) in timeout_ms (-1:
 * never). Never from here: the timer fires from the loop, at its next
 * turn at the earliest. */
static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    dlock__etcd_transfer *t = userp;
    if (timeout_ms < 0) {
        t->curl_timer_on = 0;
        if (t->loop)
            dlock__timer_clear(t->loop, &t->curl_timer);
        return 0;
    }
    t->curl_timer_on = 1;
    t->curl_timer.due_ns = dlock__deadline_after_ms(timeout_ms);
    if (t->loop && dlock__timer_set(t->loop, &t->curl_timer) != DLOCK_OK) {
        t->failed = 1;
        return -1;
    }
    return 0;
}

/* ---- the transfer ----------------------------------------------------------------- */

/* CURLOPT_SOCKOPTFUNCTION: a socket curl just made; noted (a full table
 * leaves it untracked: only a forked child's close would miss it). */
static int on_sockopt(void *arg, curl_socket_t s, curlsocktype purpose)
{
    (void)purpose;
    dlock__etcd_transfer *t = arg;
    for (size_t i = 0; i < DLOCK__ETCD_OPEN_SOCKETS; i++)
        if (t->open[i] == CURL_SOCKET_BAD) {
            t->open[i] = s;
            break;
        }
    return CURL_SOCKOPT_OK;
}

/* CURLOPT_CLOSESOCKETFUNCTION: curl is done with s. */
static int on_close(void *arg, curl_socket_t s)
{
    dlock__etcd_transfer *t = arg;
    for (size_t i = 0; i < DLOCK__ETCD_OPEN_SOCKETS; i++)
        if (t->open[i] == s)
            t->open[i] = CURL_SOCKET_BAD;
    return close(s);
}

void dlock__etcd_transfer_setup(dlock__etcd_transfer *t)
{
    t->curl_err[0] = '\0';
    curl_easy_setopt(t->easy, CURLOPT_ERRORBUFFER, t->curl_err);
    curl_easy_setopt(t->easy, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
    curl_easy_setopt(t->easy, CURLOPT_SOCKOPTDATA, t);
    curl_easy_setopt(t->easy, CURLOPT_CLOSESOCKETFUNCTION, on_close);
    curl_easy_setopt(t->easy, CURLOPT_CLOSESOCKETDATA, t);
}

dlock__etcd_transfer *dlock__etcd_transfer_new(void)
{
    dlock__etcd_transfer *t = dlock__calloc(1, sizeof *t);
    if (!t)
        return NULL;
    for (size_t i = 0; i < DLOCK__ETCD_OPEN_SOCKETS; i++)
        t->open[i] = CURL_SOCKET_BAD;
    t->curl_timer.fire = curl_timer_fire;
    t->deadline.fire = deadline_fire;
    if (!(t->easy = curl_easy_init()) || !(t->multi = curl_multi_init()) ||
        curl_multi_setopt(t->multi, CURLMOPT_SOCKETFUNCTION, on_socket) != CURLM_OK ||
        curl_multi_setopt(t->multi, CURLMOPT_SOCKETDATA, t) != CURLM_OK ||
        curl_multi_setopt(t->multi, CURLMOPT_TIMERFUNCTION, on_timer) != CURLM_OK ||
        curl_multi_setopt(t->multi, CURLMOPT_TIMERDATA, t) != CURLM_OK) {
        dlock__etcd_transfer_free(t);
        return NULL;
    }
    return t;
}

void dlock__etcd_transfer_free(dlock__etcd_transfer *t)
{
    if (!t)
        return;
    if (t->multi)
        curl_multi_cleanup(t->multi);
    if (t->easy)
        curl_easy_cleanup(t->easy);
    dlock__free(t);
}

void dlock__etcd_transfer_free_inherited(dlock__etcd_transfer *t)
{
    if (!t)
        return;
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (size_t i = 0; i < DLOCK__ETCD_OPEN_SOCKETS; i++)
        if (t->open[i] != CURL_SOCKET_BAD && (null_fd < 0 || dup2(null_fd, t->open[i]) < 0)) {
            /* Not blinded: leave it to the process's exit rather than let
             * curl talk on the parent's connection. */
            dlock__free(t);
            if (null_fd >= 0)
                close(null_fd);
            return;
        }
    if (null_fd >= 0)
        close(null_fd);
    dlock__etcd_transfer_free(t);
}

void dlock__etcd_transfer_bind(dlock__etcd_transfer *t, dlock__loop *loop)
{
    t->loop = loop;
    /* A socket whose record cannot be set is noticed by start(): failed. */
    for (size_t i = 0; i < DLOCK__ETCD_SOCKETS; i++)
        if (t->sockets[i].used && dlock__io_set(loop, &t->sockets[i].io) != DLOCK_OK)
            t->failed = 1;
    if (t->curl_timer_on)
        (void)dlock__timer_set(loop, &t->curl_timer);
}

void dlock__etcd_transfer_unbind(dlock__etcd_transfer *t)
{
    if (!t->loop)
        return;
    for (size_t i = 0; i < DLOCK__ETCD_SOCKETS; i++)
        dlock__io_clear(t->loop, &t->sockets[i].io);
    dlock__timer_clear(t->loop, &t->curl_timer);
    dlock__timer_clear(t->loop, &t->deadline);
    t->loop = NULL;
}

int dlock__etcd_transfer_start(dlock__etcd_transfer *t, int64_t deadline_ns,
                               void (*on_end)(dlock__etcd_transfer *t))
{
    t->done = t->over = 0;
    t->res = CURLE_OK;
    t->on_end = on_end;
    if (t->failed || curl_multi_add_handle(t->multi, t->easy) != CURLM_OK)
        return DLOCK_ENOMEM;
    /* Adding the handle asked for a timeout of 0: the first turn starts it. */
    t->running = 1;
    t->deadline.due_ns = deadline_ns;
    (void)dlock__timer_set(t->loop, &t->deadline); /* a poll loop's timers cannot fail */
    return DLOCK_OK;
}

void dlock__etcd_transfer_end(dlock__etcd_transfer *t)
{
    if (t->loop)
        dlock__timer_clear(t->loop, &t->deadline);
    t->running = 0;
    curl_multi_remove_handle(t->multi, t->easy);
    t->failed = 0;
}
