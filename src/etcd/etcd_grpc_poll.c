/* SPDX-License-Identifier: BSD-3-Clause */
/* Who polls the gRPC transport's completion queue (etcd_grpc_call.h).
 *
 * Issue 38: every call's completion comes on the
 * client's one queue, and one thread at a time polls it (in gRPC 1.51 the
 * thread in grpc_completion_queue_next() also runs the channels' I/O),
 * taking each completion for its call: it tells the call's loop by the
 * call's eventfd, or, for its own call, answers it at once. A blocking
 * call whose gRPC call is alone on its private loop (loop.h, `alone`)
 * polls the queue itself: no thread hop, no eventfd round. Any other call
 * is "handed" to the client's queue thread, which polls only while such
 * calls are pending and nobody else polls: a call on an application's
 * loop at its start, one on a private loop that the loop polls with
 * other records (loop.h, `polled`) or that finds someone polling already,
 * and a cancelled one. So a completion always has a poller coming: the
 * thread while a handed call is pending, the blocking caller otherwise,
 * and a caller that stops polling wakes the thread for what is left.
 *
 * Between calls nobody may poll, and gRPC runs a channel's I/O only under
 * a poller: a call's start first takes what is on the queue without
 * waiting (dlock__etcd_grpc_catch_up(): an idle connection's end is read then, before the
 * call would go out on it), and a channel that connects or waits to
 * reconnect is watched on the queue, the watch counted as a handed call,
 * so the thread polls until it is ready (watch_locked()), asleep between
 * the channel's changes of state. */
#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <grpc/support/time.h>

#include "clock.h"
#include "etcd_grpc_call.h"

/* A call's eventfd, off every loop, kept for the next call; written and
 * never read (a cancelled call's): zeroed first, so that it is not
 * readable for its next call before that call's completion. */
static void efd_give(dlock__etcd_grpc *g, int fd, int unread)
{
    uint64_t n;
    if (unread)
        (void)!read(fd, &n, sizeof n);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
    int kept = g->n_spare < DLOCK__ETCD_GRPC_SPARE_FDS;
    if (kept)
        atomic_store(&g->spare_fd[g->n_spare++], fd);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
    if (!kept)
        close(fd);
}

void dlock__etcd_gcall_free(dlock__etcd_gcall *c)
{
    if (c->call)
        grpc_call_unref(c->call);
    if (c->send)
        grpc_byte_buffer_destroy(c->send);
    if (c->recv)
        grpc_byte_buffer_destroy(c->recv);
    grpc_metadata_array_destroy(&c->head);
    grpc_metadata_array_destroy(&c->tail);
    grpc_slice_unref(c->details);
    if (c->has_token) {
        grpc_slice_unref(c->token.key);
        grpc_slice_unref(c->token.value);
    }
    if (c->efd >= 0)
        efd_give(c->g, c->efd, c->told && !c->heard);
    dlock__free(c);
}

int dlock__etcd_grpc_efd_take(dlock__etcd_grpc *g)
{
    int fd = -1;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
    if (g->n_spare)
        fd = atomic_exchange(&g->spare_fd[--g->n_spare], -1);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
    return fd >= 0 ? fd : eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

void dlock__etcd_grpc_efd_init(dlock__etcd_grpc *g)
{
    for (size_t i = 0; i < DLOCK__ETCD_GRPC_SPARE_FDS; i++)
        atomic_init(&g->spare_fd[i], -1);
}

void dlock__etcd_grpc_efd_close_spares(dlock__etcd_grpc *g)
{
    for (size_t i = 0; i < DLOCK__ETCD_GRPC_SPARE_FDS; i++) {
        int fd = atomic_exchange(&g->spare_fd[i], -1);
        if (fd >= 0)
            close(fd);
    }
    g->n_spare = 0;
}


/* One side (the loop, or the thread) is done with the call's record. */
void dlock__etcd_gcall_let_go(dlock__etcd_gcall *c)
{
    if (atomic_fetch_sub(&c->holders, 1) == 1)
        dlock__etcd_gcall_free(c);
}

/* Under g->mu: c's completion is the queue thread's to poll for from now
 * on (nothing if it was, or was taken already). */
static void hand_back_locked(dlock__etcd_gcall *c)
{
    dlock__etcd_grpc *g = c->g;
    if (c->handed || c->completed)
        return;
    c->handed = 1;
    g->need++;
    if (!g->polling)
        DLOCK__CHECK_PTHREAD(pthread_cond_signal(&g->cv));
}

void dlock__etcd_gcall_hand_back(dlock__etcd_gcall *c)
{
    dlock__etcd_grpc *g = c->g;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
    hand_back_locked(c);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
}

/* Under g->mu: while channel ep connects (or waits to), keep a watch of
 * it on the queue, counted in need, so that the thread polls: gRPC runs
 * a connect's I/O only under a poller, and nobody else may poll between
 * calls. A ready or idle channel needs none. The watch has no deadline:
 * it completes when the channel's state changes (a connect tried, failed
 * or made), and the transport's free ends it by destroying the channel
 * (dlock__etcd_grpc_free()), so a channel to a dead member wakes the
 * thread once per state change, not on a timer. */
static void watch_locked(dlock__etcd_grpc *g, size_t ep)
{
    if (g->watching[ep] || g->closing)
        return;
    grpc_connectivity_state st = grpc_channel_check_connectivity_state(g->ch[ep], 0);
    if (st != GRPC_CHANNEL_CONNECTING && st != GRPC_CHANNEL_TRANSIENT_FAILURE)
        return;
    g->watching[ep] = 1;
    g->need++;
    grpc_channel_watch_connectivity_state(g->ch[ep], st, gpr_inf_future(GPR_CLOCK_MONOTONIC),
                                          g->cq, &g->watch_tag[ep]);
    if (!g->polling)
        DLOCK__CHECK_PTHREAD(pthread_cond_signal(&g->cv));
}

/* A completion its poller took (under g->mu): its call's, or NULL for a
 * channel's watch (made again while the channel still connects). */
static dlock__etcd_gcall *taken_locked(dlock__etcd_grpc *g, const grpc_event *ev)
{
    char *w = ev->tag;
    if (w >= g->watch_tag && w < g->watch_tag + DLOCK__ETCD_MAX_ENDPOINTS) {
        size_t ep = (size_t)(w - g->watch_tag);
        g->watching[ep] = 0;
        g->need--;
        watch_locked(g, ep);
        return NULL;
    }
    dlock__etcd_gcall *c = ev->tag;
    /* the loop's set-up, released before the batch started */
    (void)atomic_load_explicit(&c->holders, memory_order_acquire);
    c->batch_ok = ev->success;
    c->completed = 1;
    if (c->handed)
        g->need--;
    watch_locked(g, c->ep); /* a call that failed to connect, say */
    return c;
}

/* Tell c's loop (whose flag may be cleared already: a cancelled call),
 * then let go of the record. */
static void tell(dlock__etcd_gcall *c)
{
    uint64_t one = 1;
    ssize_t n;
    c->told = 1;
    do
        n = write(c->efd, &one, sizeof one);
    while (n < 0 && errno == EINTR);
    dlock__etcd_gcall_let_go(c);
}

/* A caller stops polling cq: what is left is the thread's. */
static void polled_off(dlock__etcd_grpc *g)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
    g->polling = 0;
    if (g->need || g->closing)
        DLOCK__CHECK_PTHREAD(pthread_cond_signal(&g->cv));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
}

/* Poll cq while handed calls are pending and no caller polls it (and to
 * the end at the transport's free); every completion is a call's end. */
void *dlock__etcd_grpc_poll_main(void *arg)
{
    dlock__etcd_grpc *g = arg;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
    for (;;) {
        while (g->polling || (!g->closing && g->need == 0))
            DLOCK__CHECK_PTHREAD(pthread_cond_wait(&g->cv, &g->mu));
        g->polling = 1;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
        grpc_event ev = grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
        g->polling = 0;
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        dlock__etcd_gcall *c = taken_locked(g, &ev);
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
        if (c)
            tell(c);
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
    return NULL;
}

/* Take what is on the queue without waiting, and run the channels' I/O
 * that came while nobody polled, unless someone polls now: an idle
 * connection's end (a member restarted, a proxy's reset) is read only by
 * a poller, and a call must not start on a connection the channel would
 * know is gone (it would fail as sent, DLOCK_EUNKNOWN, where a reconnect
 * answers). */
void dlock__etcd_grpc_catch_up(dlock__etcd_grpc *g)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
    int busy = g->polling;
    if (!busy)
        g->polling = 1;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
    if (busy)
        return;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(g->cq, gpr_time_0(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            break;
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
        dlock__etcd_gcall *t = taken_locked(g, &ev);
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
        if (t)
            tell(t);
    }
    polled_off(g);
}

/* The call alone on a private loop (loop.h): its caller polls the queue
 * until its own completion or until_ns, telling the loops of the others
 * it takes; unless someone polls already, or it was taken: then the loop
 * polls its eventfd. */
int dlock__etcd_gcall_alone(dlock__io *io, int64_t until_ns)
{
    dlock__etcd_gcall *c = DLOCK__OWNER(io, dlock__etcd_gcall, done.io);
    dlock__etcd_grpc *g = c->g;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
    int busy = c->completed || g->polling;
    if (busy)
        hand_back_locked(c);
    else
        g->polling = 1;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
    if (busy)
        return 0;
    int64_t left_ns = until_ns == INT64_MAX ? INT64_MAX / 2 : until_ns - dlock__now_ns();
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_nanos(left_ns > 0 ? left_ns : 0,
                                                             GPR_TIMESPAN));
    int mine = 0;
    while (!mine) {
        grpc_event ev = grpc_completion_queue_next(g->cq, deadline, NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            break; /* until_ns: the loop's timers run */
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
        dlock__etcd_gcall *t = taken_locked(g, &ev);
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
        if (t == c)
            mine = 1;
        else if (t)
            tell(t);
    }
    polled_off(g);
    if (mine) { /* as the flag's ready would, without the eventfd */
        c->done.raised = 1;
        dlock__io_clear(c->loop, io);
        dlock__etcd_gcall_let_go(c); /* the poller's hold */
        dlock__etcd_gcall_answered(c);
    }
    return 1;
}

/* The loop polls the eventfd (the call is not alone there, or declined):
 * the thread takes the completion. */
void dlock__etcd_gcall_polled(dlock__io *io)
{
    dlock__etcd_gcall_hand_back(DLOCK__OWNER(io, dlock__etcd_gcall, done.io));
}

void dlock__etcd_grpc_watch(dlock__etcd_grpc *g, size_t ep)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
    watch_locked(g, ep);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
}

void dlock__etcd_grpc_closing(dlock__etcd_grpc *g)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&g->mu));
    g->closing = 1;
    DLOCK__CHECK_PTHREAD(pthread_cond_signal(&g->cv));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&g->mu));
}
