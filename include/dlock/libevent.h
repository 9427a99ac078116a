/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock on a libevent 2.1 event_base: the four hooks of dlock.h's "Event
 * loops" over one `struct event` per record while it is set (event_new(),
 * kept in the record's slot): EV_READ/EV_WRITE with EV_PERSIST for an fd,
 * an evtimer for a timer.
 *
 *     struct event_base *base = event_base_new();
 *     dlock_loop hooks = dlock_libevent_loop(base);
 *     dlock_client_options opts = DLOCK_CLIENT_OPTIONS_INIT;
 *     opts.loop = &hooks;                     (copied by dlock_client_new())
 *     dlock_client_new(&client, urls, 1, &opts, err, sizeof err);
 *
 * Header-only, like hiredis's adapters: build with libevent's flags
 * (pkg-config libevent). The events keep event_base_dispatch() running
 * until the client and its handles are freed and their work on the base
 * has ended.
 *
 * A timer is a one-shot: its callback frees its event and clears the slot
 * before dlock_timer_fire() (which may free the record). That frees a
 * running event from inside its own callback, which libevent 2.1 allows
 * for non-signal events: event_process_active_single_queue() does not
 * touch the event after calling back (libevent issue #1287). A cleared
 * record's event is freed at once (event_free() takes it off the active
 * queue too, so it never calls back). The base is used from the loop's
 * thread only, as every hook is (dlock.h). */
#ifndef DLOCK_LIBEVENT_H
#define DLOCK_LIBEVENT_H

#include <event2/event.h>

#include <dlock.h>

static inline void dlock__event_io_cb(evutil_socket_t fd, short what, void *arg)
{
    dlock_io *io = (dlock_io *)arg;
    unsigned int ev = 0;
    (void)fd;
    /* epoll's and poll's error and hang-up come as EV_READ|EV_WRITE (of
     * those asked for): the reader then reads the error or the end. */
    if (what & EV_READ)
        ev |= DLOCK_IO_READ;
    if (what & EV_WRITE)
        ev |= DLOCK_IO_WRITE;
    dlock_io_ready(io, ev);
}

static inline short dlock__event_io_what(const dlock_io *io)
{
    unsigned int want = dlock_io_events(io);
    return (short)(EV_PERSIST | ((want & DLOCK_IO_READ) ? EV_READ : 0) |
                   ((want & DLOCK_IO_WRITE) ? EV_WRITE : 0));
}

static inline int dlock__event_io_set(void *data, dlock_io *io)
{
    void **slot = dlock_io_slot(io);
    struct event *e = (struct event *)*slot;
    evutil_socket_t fd = dlock_io_fd(io);
    short what = dlock__event_io_what(io);
    if (e && event_get_fd(e) == fd && event_get_events(e) == what)
        return DLOCK_OK; /* set already as asked */
    if (e) {
        /* Another fd or other events: event_assign() needs the event not
         * pending, and libevent never sees the old fd again. */
        event_del(e);
        if (event_assign(e, (struct event_base *)data, fd, what, dlock__event_io_cb, io) != 0)
            return DLOCK_EIO;
    } else {
        e = event_new((struct event_base *)data, fd, what, dlock__event_io_cb, io);
        if (!e)
            return DLOCK_ENOMEM;
        *slot = e;
    }
    return event_add(e, NULL) == 0 ? DLOCK_OK : DLOCK_EIO;
}

static inline void dlock__event_io_clear(void *data, dlock_io *io)
{
    void **slot = dlock_io_slot(io);
    (void)data;
    if (*slot)
        event_free((struct event *)*slot);
    *slot = NULL;
}

static inline void dlock__event_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    dlock_timer *t = (dlock_timer *)arg;
    void **slot = dlock_timer_slot(t);
    (void)fd;
    (void)what;
    /* A one-shot: the event goes before dlock may free the record. */
    event_free((struct event *)*slot);
    *slot = NULL;
    dlock_timer_fire(t);
}

static inline int dlock__event_timer_set(void *data, dlock_timer *t)
{
    void **slot = dlock_timer_slot(t);
    struct event *e = (struct event *)*slot;
    uint64_t ms = dlock_timer_delay_ms(t);
    struct timeval tv;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    if (!e) {
        e = evtimer_new((struct event_base *)data, dlock__event_timer_cb, t);
        if (!e)
            return DLOCK_ENOMEM;
        *slot = e;
    }
    /* event_add() on a pending timer moves it to the new time. */
    return evtimer_add(e, &tv) == 0 ? DLOCK_OK : DLOCK_EIO;
}

static inline void dlock__event_timer_clear(void *data, dlock_timer *t)
{
    void **slot = dlock_timer_slot(t);
    (void)data;
    if (*slot)
        event_free((struct event *)*slot);
    *slot = NULL;
}

/* The hooks for a libevent base (copied by dlock_client_new()). */
static inline dlock_loop dlock_libevent_loop(struct event_base *base)
{
    dlock_loop hooks;
    hooks.version = DLOCK_LOOP_VERSION;
    hooks.data = base;
    hooks.io_set = dlock__event_io_set;
    hooks.io_clear = dlock__event_io_clear;
    hooks.timer_set = dlock__event_timer_set;
    hooks.timer_clear = dlock__event_timer_clear;
    return hooks;
}

#endif
