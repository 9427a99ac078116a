/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "common.h"
#include "loop_poll.h"

/* ---- intrusive circular lists ---------------------------------------------- */

static void list_init(dlock__loop_link *head)
{
    head->next = head->prev = head;
}

static int list_empty(const dlock__loop_link *head)
{
    return head->next == head;
}

static void link_insert_before(dlock__loop_link *at, dlock__loop_link *n)
{
    n->next = at;
    n->prev = at->prev;
    at->prev->next = n;
    at->prev = n;
}

/* Take n out of whatever list holds it; a link that is in none is left. */
static void link_remove(dlock__loop_link *n)
{
    if (!n->next)
        return;
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->next = n->prev = NULL;
}

/* Move every link of from to the end of to. */
static void list_move_all(dlock__loop_link *from, dlock__loop_link *to)
{
    if (list_empty(from))
        return;
    from->next->prev = to->prev;
    to->prev->next = from->next;
    from->prev->next = to;
    to->prev = from->prev;
    list_init(from);
}

#define TIMER_OF(l) DLOCK__OWNER(l, dlock__timer, link)
#define IO_OF(l) DLOCK__OWNER(l, dlock__io, link)

/* ---- the hooks --------------------------------------------------------------- */

static void forget_in_turn(dlock__loop_poll *lp, const dlock__io *io)
{
    for (unsigned i = 0; i < lp->n_turn; i++)
        if (lp->turn[i] == io)
            lp->turn[i] = NULL;
}

static int poll_io_set(void *loop, dlock__io *io)
{
    dlock__loop_poll *lp = loop;
    if (!io->link.next) {
        if (lp->n_ios == DLOCK__LOOP_POLL_FDS)
            return DLOCK_ENOMEM;
        link_insert_before(&lp->ios, &io->link);
        lp->n_ios++;
    }
    return DLOCK_OK;
}

static void poll_io_clear(void *loop, dlock__io *io)
{
    dlock__loop_poll *lp = loop;
    if (!io->link.next)
        return;
    link_remove(&io->link);
    lp->n_ios--;
    forget_in_turn(lp, io);
}

/* Timers stay sorted by due_ns; equal ones fire in the order they were set. */
static void timers_insert(dlock__loop_poll *lp, dlock__timer *t)
{
    dlock__loop_link *at = lp->timers.prev;
    while (at != &lp->timers && TIMER_OF(at)->due_ns > t->due_ns)
        at = at->prev;
    link_insert_before(at->next, &t->link);
}

static int poll_timer_set(void *loop, dlock__timer *t)
{
    link_remove(&t->link);
    timers_insert(loop, t);
    return DLOCK_OK;
}

static void poll_timer_clear(void *loop, dlock__timer *t)
{
    (void)loop;
    link_remove(&t->link);
}

static void poll_defer(void *loop, dlock__timer *t)
{
    dlock__loop_poll *lp = loop;
    link_remove(&t->link);
    link_insert_before(&lp->deferred, &t->link);
}

static void poll_wake(void *loop)
{
    dlock__loop_poll *lp = loop;
    uint64_t one = 1;
    /* EAGAIN: the counter is full, so the loop will wake anyway. */
    if (lp->wake_fd >= 0 && write(lp->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        dlock__misuse("loop wake: %s", strerror(errno));
}

static const dlock__loop_ops poll_ops = {
    poll_io_set, poll_io_clear, poll_timer_set, poll_timer_clear, poll_defer, poll_wake,
};

void dlock__loop_poll_init(dlock__loop_poll *lp)
{
    /* Not the turn's arrays (1 KB): a turn fills them before it reads
     * them, and every blocking call makes a loop. */
    memset(lp, 0, offsetof(dlock__loop_poll, turn));
    lp->n_turn = 0;
    lp->loop.ops = &poll_ops;
    lp->loop.data = lp;
    list_init(&lp->ios);
    list_init(&lp->timers);
    list_init(&lp->deferred);
    lp->wake_fd = -1;
}

int dlock__loop_poll_wakeable(dlock__loop_poll *lp)
{
    if (lp->wake_fd < 0)
        lp->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return lp->wake_fd >= 0 ? DLOCK_OK : DLOCK_EIO;
}

void dlock__loop_poll_lend_wake(dlock__loop_poll *lp, int fd)
{
    if (lp->wake_fd >= 0 && !lp->wake_lent)
        close(lp->wake_fd);
    lp->wake_fd = fd;
    lp->wake_lent = 1;
}

static void unlink_all(dlock__loop_link *head)
{
    while (!list_empty(head))
        link_remove(head->next);
}

void dlock__loop_poll_close(dlock__loop_poll *lp)
{
    unlink_all(&lp->ios);
    unlink_all(&lp->timers);
    unlink_all(&lp->deferred);
    lp->n_ios = 0;
    lp->n_turn = 0;
    if (lp->wake_fd >= 0 && !lp->wake_lent)
        close(lp->wake_fd);
    lp->wake_fd = -1;
    lp->wake_lent = 0;
}

/* ---- turning ------------------------------------------------------------------ */

/* Fire the timers of batch (due, or deferred) in order until done says
 * stop; the ones left go back in front of `back` (deferred) or into the
 * sorted list (due). Returns 1 when done. */
static int fire_batch(dlock__loop_poll *lp, dlock__loop_link *batch, int deferred,
                      int (*done)(void *), void *arg)
{
    while (!list_empty(batch)) {
        dlock__timer *t = TIMER_OF(batch->next);
        link_remove(&t->link);
        t->fire(t);
        if (done(arg)) {
            while (!list_empty(batch)) {
                dlock__timer *left = TIMER_OF(batch->prev);
                link_remove(&left->link);
                if (deferred)
                    link_insert_before(lp->deferred.next, &left->link);
                else
                    timers_insert(lp, left);
            }
            return 1;
        }
    }
    return 0;
}

static unsigned events_of(short revents, unsigned want)
{
    unsigned ev = 0;
    if (revents & (POLLIN | POLLHUP))
        ev |= DLOCK__IO_READ;
    if (revents & POLLOUT)
        ev |= DLOCK__IO_WRITE;
    ev &= want;
    if (revents & (POLLERR | POLLHUP | POLLNVAL))
        ev |= DLOCK__IO_ERROR;
    return ev;
}

/* Wait for the fds, the first timer or the deadline; then run the ready
 * fds' callbacks. Returns 1 when done. */
static int poll_and_dispatch(dlock__loop_poll *lp, int64_t deadline_ns, int (*done)(void *),
                             void *arg)
{
    unsigned n = 0;
    for (dlock__loop_link *l = lp->ios.next; l != &lp->ios; l = l->next) {
        dlock__io *io = IO_OF(l);
        if (!io->want || io->fd < 0)
            continue;
        lp->turn[n] = io;
        lp->pfd[n].fd = io->fd;
        lp->pfd[n].events = (short)(((io->want & DLOCK__IO_READ) ? POLLIN : 0) |
                                    ((io->want & DLOCK__IO_WRITE) ? POLLOUT : 0));
        lp->pfd[n].revents = 0;
        n++;
    }
    unsigned nfds = n;
    if (lp->wake_fd >= 0)
        lp->pfd[nfds++] = (struct pollfd){lp->wake_fd, POLLIN, 0};
    int64_t until = deadline_ns;
    if (!list_empty(&lp->timers))
        until = DLOCK__MIN(until, TIMER_OF(lp->timers.next)->due_ns);
    int ms = list_empty(&lp->deferred) ? dlock__ms_until(until) : 0;
    if (n == 1 && lp->n_ios == 1 && nfds == 1 && ms != 0 && lp->turn[0]->alone &&
        lp->turn[0]->alone(lp->turn[0], until))
        return done(arg); /* the record waited by itself (loop.h) */
    for (unsigned i = 0; i < n; i++)
        if (lp->turn[i]->polled)
            lp->turn[i]->polled(lp->turn[i]);
    lp->n_turn = n;
    int got = poll(lp->pfd, nfds, ms);
    if (got < 0 && errno != EINTR)
        dlock__misuse("loop poll: %s", strerror(errno));
    if (got > 0 && nfds > n && lp->pfd[n].revents) {
        uint64_t count;
        (void)!read(lp->wake_fd, &count, sizeof count);
    }
    for (unsigned i = 0; got > 0 && i < n; i++) {
        dlock__io *io = lp->turn[i];
        /* cleared by an earlier callback, or moved to another fd */
        if (!io || io->fd != lp->pfd[i].fd || !lp->pfd[i].revents)
            continue;
        unsigned ev = events_of(lp->pfd[i].revents, io->want);
        if (!ev)
            continue;
        lp->turn[i] = NULL;
        io->ready(io, ev);
        if (done(arg)) {
            lp->n_turn = 0;
            return 1;
        }
    }
    lp->n_turn = 0;
    return 0;
}

int dlock__loop_poll_run(dlock__loop_poll *lp, int (*done)(void *arg), void *arg,
                         int64_t deadline_ns)
{
    for (;;) {
        if (done(arg))
            return 1;
        if (deadline_ns != INT64_MAX && dlock__now_ns() >= deadline_ns)
            return 0;
        /* Only what was deferred before this turn: a callback that defers
         * again runs at the next one. */
        dlock__loop_link batch;
        list_init(&batch);
        list_move_all(&lp->deferred, &batch);
        if (fire_batch(lp, &batch, 1, done, arg))
            return 1;
        if (poll_and_dispatch(lp, deadline_ns, done, arg))
            return 1;
        /* Timers due now; one set again by its callback waits for the next turn. */
        int64_t now = dlock__now_ns();
        list_init(&batch);
        while (!list_empty(&lp->timers) && TIMER_OF(lp->timers.next)->due_ns <= now) {
            dlock__loop_link *l = lp->timers.next;
            link_remove(l);
            link_insert_before(&batch, l);
        }
        if (fire_batch(lp, &batch, 0, done, arg))
            return 1;
    }
}

int dlock__loop_is_poll(const dlock__loop *l)
{
    return l->ops == &poll_ops;
}

/* ---- helpers for blocking calls ------------------------------------------------- */

static void flag_ready(dlock__io *io, unsigned events)
{
    (void)events;
    dlock__fd_flag *f = DLOCK__OWNER(io, dlock__fd_flag, io);
    f->raised = 1;
    dlock__io_clear(f->loop, io);
    if (f->on_raise)
        f->on_raise(f);
}

int dlock__fd_flag_watch(dlock__loop *l, dlock__fd_flag *f, int fd)
{
    memset(f, 0, sizeof *f);
    f->loop = l;
    f->io.fd = fd;
    f->io.want = DLOCK__IO_READ;
    f->io.ready = flag_ready;
    return fd < 0 ? DLOCK_OK : dlock__io_set(l, &f->io);
}

void dlock__fd_flag_clear(dlock__loop *l, dlock__fd_flag *f)
{
    dlock__io_clear(l, &f->io);
}

typedef struct sleeper {
    dlock__fd_flag cancel;
    dlock__timer end;
    int over;
} sleeper;

static void sleep_over(dlock__timer *t)
{
    DLOCK__OWNER(t, sleeper, end)->over = 1;
}

static int sleep_done(void *arg)
{
    sleeper *s = arg;
    return s->over || s->cancel.raised;
}

int dlock__loop_poll_sleep(int64_t deadline_ns, int cancel_fd)
{
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    sleeper s;
    memset(&s, 0, sizeof s);
    s.end.due_ns = deadline_ns;
    s.end.fire = sleep_over;
    /* One fd on an empty loop: there is always room. */
    (void)dlock__fd_flag_watch(&lp.loop, &s.cancel, cancel_fd);
    if (deadline_ns != INT64_MAX)
        (void)dlock__timer_set(&lp.loop, &s.end);
    dlock__loop_poll_run(&lp, sleep_done, &s, INT64_MAX);
    dlock__loop_poll_close(&lp);
    return s.cancel.raised;
}
