/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock on a libuv loop: the four hooks of dlock.h's "Event loops" over
 * uv_poll_t and uv_timer_t watchers, one per record while it is set,
 * allocated with malloc and closed with uv_close() (their memory goes in
 * the close callback, after dlock may have freed the record).
 *
 *     uv_loop_t *loop = uv_default_loop();
 *     dlock_loop hooks = dlock_libuv_loop(loop);
 *     dlock_client_options opts = DLOCK_CLIENT_OPTIONS_INIT;
 *     opts.loop = &hooks;                     (copied by dlock_client_new())
 *     dlock_client_new(&client, urls, 1, &opts, err, sizeof err);
 *
 * Header-only, like hiredis's adapters: build with libuv's flags
 * (pkg-config libuv). The watchers keep the loop alive (uv_run() returns
 * only once the client and its handles are freed and their work on the
 * loop has ended, or on uv_stop()). */
#ifndef DLOCK_LIBUV_H
#define DLOCK_LIBUV_H

#include <stdlib.h>
#include <uv.h>

#include <dlock.h>

typedef struct dlock__uv_io {
    uv_poll_t poll;
    dlock_io *io; /* NULL once cleared: the close is on its way */
    int fd;
} dlock__uv_io;

typedef struct dlock__uv_timer {
    uv_timer_t timer;
    dlock_timer *t; /* NULL once cleared or fired */
} dlock__uv_timer;

static inline void dlock__uv_free(uv_handle_t *h)
{
    free(h->data);
}

static inline void dlock__uv_io_cb(uv_poll_t *p, int status, int events)
{
    dlock__uv_io *w = (dlock__uv_io *)p->data;
    unsigned int ev = 0;
    if (!w->io)
        return;
    if (events & UV_READABLE)
        ev |= DLOCK_IO_READ;
    if (events & UV_WRITABLE)
        ev |= DLOCK_IO_WRITE;
    if (status < 0) /* the reader then reads the error or the end */
        ev |= DLOCK_IO_ERROR | (dlock_io_events(w->io) & (DLOCK_IO_READ | DLOCK_IO_WRITE));
    dlock_io_ready(w->io, ev);
}

static inline void dlock__uv_io_close(dlock__uv_io *w)
{
    w->io = NULL;
    uv_poll_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, dlock__uv_free);
}

static inline int dlock__uv_io_set(void *data, dlock_io *io)
{
    void **slot = dlock_io_slot(io);
    dlock__uv_io *w = (dlock__uv_io *)*slot;
    int fd = dlock_io_fd(io);
    unsigned int want = dlock_io_events(io);
    if (w && w->fd != fd) { /* another fd in the same record */
        dlock__uv_io_close(w);
        *slot = w = NULL;
    }
    if (!w) {
        w = (dlock__uv_io *)malloc(sizeof *w);
        if (!w)
            return DLOCK_ENOMEM;
        if (uv_poll_init((uv_loop_t *)data, &w->poll, fd) != 0) {
            free(w);
            return DLOCK_EIO;
        }
        w->poll.data = w;
        w->io = io;
        w->fd = fd;
        *slot = w;
    }
    int rc = uv_poll_start(&w->poll, ((want & DLOCK_IO_READ) ? UV_READABLE : 0) |
                                         ((want & DLOCK_IO_WRITE) ? UV_WRITABLE : 0),
                           dlock__uv_io_cb);
    return rc == 0 ? DLOCK_OK : DLOCK_EIO;
}

static inline void dlock__uv_io_clear(void *data, dlock_io *io)
{
    void **slot = dlock_io_slot(io);
    (void)data;
    if (*slot)
        dlock__uv_io_close((dlock__uv_io *)*slot);
    *slot = NULL;
}

static inline void dlock__uv_timer_cb(uv_timer_t *h)
{
    dlock__uv_timer *w = (dlock__uv_timer *)h->data;
    dlock_timer *t = w->t;
    /* A one-shot: the watcher goes before dlock may free the record. */
    w->t = NULL;
    *dlock_timer_slot(t) = NULL;
    uv_close((uv_handle_t *)h, dlock__uv_free);
    dlock_timer_fire(t);
}

static inline int dlock__uv_timer_set(void *data, dlock_timer *t)
{
    void **slot = dlock_timer_slot(t);
    dlock__uv_timer *w = (dlock__uv_timer *)*slot;
    if (!w) {
        w = (dlock__uv_timer *)malloc(sizeof *w);
        if (!w)
            return DLOCK_ENOMEM;
        uv_timer_init((uv_loop_t *)data, &w->timer);
        w->timer.data = w;
        w->t = t;
        *slot = w;
    }
    uv_timer_start(&w->timer, dlock__uv_timer_cb, dlock_timer_delay_ms(t), 0);
    return DLOCK_OK;
}

static inline void dlock__uv_timer_clear(void *data, dlock_timer *t)
{
    void **slot = dlock_timer_slot(t);
    dlock__uv_timer *w = (dlock__uv_timer *)*slot;
    (void)data;
    if (!w)
        return;
    *slot = NULL;
    w->t = NULL;
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, dlock__uv_free);
}

/* The hooks for a libuv loop (copied by dlock_client_new()). */
static inline dlock_loop dlock_libuv_loop(uv_loop_t *loop)
{
    dlock_loop hooks;
    hooks.version = DLOCK_LOOP_VERSION;
    hooks.data = loop;
    hooks.io_set = dlock__uv_io_set;
    hooks.io_clear = dlock__uv_io_clear;
    hooks.timer_set = dlock__uv_timer_set;
    hooks.timer_clear = dlock__uv_timer_clear;
    return hooks;
}

#endif
