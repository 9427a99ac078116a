/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock in a hand-written poll() (or epoll) loop: the four hooks of
 * dlock.h's "Event loops" keep dlock's fds and timers in two arrays, and
 * the loop asks for them before each poll() and hands back what poll()
 * found. It is an adapter over the public hooks like <dlock/libuv.h>, not
 * a loop of dlock's own: the program owns the loop and its poll() call.
 *
 *     dlock_poll dp;
 *     dlock_poll_init(&dp);
 *     dlock_loop hooks = dlock_poll_loop(&dp);
 *     opts.loop = &hooks;                      (then dlock_client_new())
 *     for (;;) {
 *         struct pollfd fds[64];
 *         int timeout_ms = -1;                 (or the program's own)
 *         size_t n = dlock_poll_fill(&dp, fds, 64, &timeout_ms);
 *         ... the program's own fds after fds[n] ...
 *         poll(fds, n + mine, timeout_ms);
 *         dlock_poll_process(&dp, fds, n);
 *         ... the program's own fds ...
 *     }
 *     (after dlock_client_free(): turn until dlock_poll_pending() is 0)
 *     dlock_poll_free(&dp);
 *
 * An epoll loop does the same with the fill's array: add, modify or
 * remove what changed, or simply poll() the array from its own turn.
 * Each hook is O(1) (the record's slot holds its index); fill and process
 * are O(records), and a client has a few records per node and per lock
 * with a request in flight. */
#ifndef DLOCK_POLL_H
#define DLOCK_POLL_H

#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>

#include <dlock.h>

/* One array of records: a record's slot holds its index + 1, and the
 * turn it was set in (a record set during a process waits for the next). */
typedef struct dlock__poll_set {
    void **rec;
    unsigned long *turn;
    size_t n, cap;
} dlock__poll_set;

typedef struct dlock_poll {
    dlock__poll_set ios;    /* dlock_io * */
    dlock__poll_set timers; /* dlock_timer * */
    unsigned long turn;     /* process() calls so far */
} dlock_poll;

static inline void dlock_poll_init(dlock_poll *p)
{
    dlock__poll_set none = {NULL, NULL, 0, 0};
    p->ios = none;
    p->timers = none;
    p->turn = 0;
}

/* Records still set: after dlock_client_free(), keep turning the loop
 * until this is 0 (what was ending finishes there), then free. */
static inline size_t dlock_poll_pending(const dlock_poll *p)
{
    return p->ios.n + p->timers.n;
}

static inline void dlock_poll_free(dlock_poll *p)
{
    free(p->ios.rec);
    free(p->ios.turn);
    free(p->timers.rec);
    free(p->timers.turn);
    dlock_poll_init(p);
}

/* Put rec (whose slot is *slot) in s, or restamp it: DLOCK_OK or
 * DLOCK_ENOMEM. */
static inline int dlock__poll_put(dlock__poll_set *s, void *rec, void **slot, unsigned long turn)
{
    size_t i = (size_t)(uintptr_t)*slot;
    if (i == 0) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 8;
            void **r = (void **)realloc(s->rec, cap * sizeof *r);
            if (!r)
                return DLOCK_ENOMEM;
            s->rec = r;
            unsigned long *t = (unsigned long *)realloc(s->turn, cap * sizeof *t);
            if (!t)
                return DLOCK_ENOMEM;
            s->turn = t;
            s->cap = cap;
        }
        s->rec[s->n] = rec;
        i = ++s->n;
        *slot = (void *)(uintptr_t)i;
    }
    s->turn[i - 1] = turn;
    return DLOCK_OK;
}

/* Take the record of *slot out of s: the last one moves into its place,
 * and its slot (found by slot_of) follows. */
static inline void dlock__poll_take(dlock__poll_set *s, void **slot, void **(*slot_of)(void *))
{
    size_t i = (size_t)(uintptr_t)*slot;
    if (i == 0)
        return;
    *slot = NULL;
    if (i != s->n) {
        s->rec[i - 1] = s->rec[s->n - 1];
        s->turn[i - 1] = s->turn[s->n - 1];
        *slot_of(s->rec[i - 1]) = (void *)(uintptr_t)i;
    }
    s->n--;
}

static inline void **dlock__poll_io_slot(void *rec)
{
    return dlock_io_slot((dlock_io *)rec);
}

static inline void **dlock__poll_timer_slot(void *rec)
{
    return dlock_timer_slot((dlock_timer *)rec);
}

static inline int dlock__poll_io_set(void *data, dlock_io *io)
{
    dlock_poll *p = (dlock_poll *)data;
    return dlock__poll_put(&p->ios, io, dlock_io_slot(io), p->turn);
}

static inline void dlock__poll_io_clear(void *data, dlock_io *io)
{
    dlock__poll_take(&((dlock_poll *)data)->ios, dlock_io_slot(io), dlock__poll_io_slot);
}

static inline int dlock__poll_timer_set(void *data, dlock_timer *t)
{
    dlock_poll *p = (dlock_poll *)data;
    return dlock__poll_put(&p->timers, t, dlock_timer_slot(t), p->turn);
}

static inline void dlock__poll_timer_clear(void *data, dlock_timer *t)
{
    dlock__poll_take(&((dlock_poll *)data)->timers, dlock_timer_slot(t), dlock__poll_timer_slot);
}

/* The hooks over p (copied by dlock_client_new(); p must outlive the
 * client and what it leaves ending on the loop). */
static inline dlock_loop dlock_poll_loop(dlock_poll *p)
{
    dlock_loop hooks;
    hooks.version = DLOCK_LOOP_VERSION;
    hooks.data = p;
    hooks.io_set = dlock__poll_io_set;
    hooks.io_clear = dlock__poll_io_clear;
    hooks.timer_set = dlock__poll_timer_set;
    hooks.timer_clear = dlock__poll_timer_clear;
    return hooks;
}

/* Fill fds[0..] with dlock's fds and lower *timeout_ms (-1: none yet) to
 * its nearest timer. Returns how many fds dlock needs; when that is more
 * than n, only n are filled (call again with a larger array). */
static inline size_t dlock_poll_fill(dlock_poll *p, struct pollfd *fds, size_t n, int *timeout_ms)
{
    for (size_t i = 0; i < p->ios.n && i < n; i++) {
        dlock_io *io = (dlock_io *)p->ios.rec[i];
        unsigned int want = dlock_io_events(io);
        fds[i].fd = dlock_io_fd(io);
        fds[i].events = (short)(((want & DLOCK_IO_READ) ? POLLIN : 0) |
                                ((want & DLOCK_IO_WRITE) ? POLLOUT : 0));
        fds[i].revents = 0;
    }
    for (size_t i = 0; i < p->timers.n; i++) {
        uint64_t ms = dlock_timer_delay_ms((dlock_timer *)p->timers.rec[i]);
        int due = ms > (uint64_t)INT_MAX ? INT_MAX : (int)ms;
        if (*timeout_ms < 0 || due < *timeout_ms)
            *timeout_ms = due;
    }
    return p->ios.n;
}

/* The first io set before this turn whose fd is fd: its index, or n. */
static inline size_t dlock__poll_find_io(const dlock_poll *p, int fd, unsigned long turn)
{
    for (size_t i = 0; i < p->ios.n; i++)
        if (p->ios.turn[i] < turn && dlock_io_fd((dlock_io *)p->ios.rec[i]) == fd)
            return i;
    return p->ios.n;
}

/* The first timer set before this turn that is due: its index, or n. */
static inline size_t dlock__poll_find_due(const dlock_poll *p, unsigned long turn)
{
    for (size_t i = 0; i < p->timers.n; i++)
        if (p->timers.turn[i] < turn && dlock_timer_delay_ms((dlock_timer *)p->timers.rec[i]) == 0)
            return i;
    return p->timers.n;
}

/* After poll(): report what poll() found in fds[0..n) (as filled by
 * dlock_poll_fill()) and fire the timers that are due. Records set during
 * this call wait for the next (a timer due now fires at the next turn, as
 * dlock.h asks). */
static inline void dlock_poll_process(dlock_poll *p, const struct pollfd *fds, size_t n)
{
    unsigned long turn = ++p->turn;
    for (size_t k = 0; k < n; k++) {
        if (!fds[k].revents)
            continue;
        size_t i = dlock__poll_find_io(p, fds[k].fd, turn);
        if (i == p->ios.n)
            continue; /* cleared or changed by an earlier callback */
        dlock_io *io = (dlock_io *)p->ios.rec[i];
        unsigned int ev = 0;
        if (fds[k].revents & POLLIN)
            ev |= DLOCK_IO_READ;
        if (fds[k].revents & POLLOUT)
            ev |= DLOCK_IO_WRITE;
        if (fds[k].revents & (POLLERR | POLLHUP | POLLNVAL)) /* the reader reads the end */
            ev |= DLOCK_IO_ERROR | (dlock_io_events(io) & (DLOCK_IO_READ | DLOCK_IO_WRITE));
        dlock_io_ready(io, ev);
    }
    size_t i;
    while ((i = dlock__poll_find_due(p, turn)) < p->timers.n) {
        dlock_timer *t = (dlock_timer *)p->timers.rec[i];
        /* A one-shot: out of the array before dlock may free it. */
        dlock__poll_take(&p->timers, dlock_timer_slot(t), dlock__poll_timer_slot);
        dlock_timer_fire(t);
    }
}

#endif
