/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>

#include "clock.h"
#include "common.h"
#include "loop_app.h"

_Static_assert((int)DLOCK_IO_READ == (int)DLOCK__IO_READ &&
                   (int)DLOCK_IO_WRITE == (int)DLOCK__IO_WRITE &&
                   (int)DLOCK_IO_ERROR == (int)DLOCK__IO_ERROR,
               "the public events are the loop's");

static dlock__loop_app *app_of(void *loop)
{
    return loop;
}

static int app_io_set(void *loop, dlock__io *io)
{
    dlock_loop *h = &app_of(loop)->hooks;
    int rc = h->io_set(h->data, io);
    io->app = rc == DLOCK_OK ? loop : NULL;
    return rc;
}

static void app_io_clear(void *loop, dlock__io *io)
{
    if (!io->app)
        return;
    dlock_loop *h = &app_of(loop)->hooks;
    io->app = NULL;
    h->io_clear(h->data, io);
}

static int app_timer_set(void *loop, dlock__timer *t)
{
    dlock_loop *h = &app_of(loop)->hooks;
    int rc = h->timer_set(h->data, t);
    t->app = rc == DLOCK_OK ? loop : NULL;
    return rc;
}

static void app_timer_clear(void *loop, dlock__timer *t)
{
    if (!t->app)
        return;
    dlock_loop *h = &app_of(loop)->hooks;
    t->app = NULL;
    h->timer_clear(h->data, t);
}

/* A deferred record's due time: past whatever the clock says. */
#define DUE_NOW INT64_MIN

/* A timer due now. The engine's defer cannot fail (the poll loop's never
 * does): an adapter that cannot allocate a timer now leaves the record
 * unset, and what waited on it waits for its own deadline instead. Both
 * adapters dlock ships allocate nothing for a timer already set, and
 * allocate with malloc otherwise. */
static void app_defer(void *loop, dlock__timer *t)
{
    t->due_ns = DUE_NOW; /* no clock read: every turn of a loop reads it enough */
    (void)app_timer_set(loop, t);
}

static void app_wake(void *loop)
{
    (void)loop; /* see loop_app.h */
}

static const dlock__loop_ops app_ops = {
    app_io_set, app_io_clear, app_timer_set, app_timer_clear, app_defer, app_wake,
};

int dlock__loop_app_init(dlock__loop_app *la, const dlock_loop *hooks, char *err, size_t len)
{
    if (hooks->version < 1 || hooks->version > DLOCK_LOOP_VERSION) {
        snprintf(err, len, "unknown dlock_loop version %u (this library knows 1 to %d)",
                 hooks->version, DLOCK_LOOP_VERSION);
        return DLOCK_EINVAL;
    }
    if (!hooks->io_set || !hooks->io_clear || !hooks->timer_set || !hooks->timer_clear) {
        snprintf(err, len, "dlock_loop: every hook must be set (io_set, io_clear, timer_set, "
                 "timer_clear)");
        return DLOCK_EINVAL;
    }
    la->hooks = *hooks;
    la->loop.ops = &app_ops;
    la->loop.data = la;
    return DLOCK_OK;
}

/* ---- the records, as adapters see them (dlock.h) ---------------------------------- */

int dlock_io_fd(const dlock_io *io)
{
    return io->fd;
}

unsigned int dlock_io_events(const dlock_io *io)
{
    return io->want & (DLOCK_IO_READ | DLOCK_IO_WRITE);
}

void dlock_io_ready(dlock_io *io, unsigned int events)
{
    io->ready(io, events & (DLOCK_IO_READ | DLOCK_IO_WRITE | DLOCK_IO_ERROR));
}

void **dlock_io_slot(dlock_io *io)
{
    return &io->slot;
}

uint64_t dlock_timer_delay_ms(const dlock_timer *t)
{
    if (t->due_ns == DUE_NOW)
        return 0;
    int64_t left_ns = t->due_ns - dlock__now_ns();
    if (left_ns <= 0)
        return 0;
    return (uint64_t)((left_ns + DLOCK__NS_PER_MS - 1) / DLOCK__NS_PER_MS);
}

void dlock_timer_fire(dlock_timer *t)
{
    void *loop = t->app;
    t->app = NULL; /* fired: no longer set (a one-shot), so never cleared */
    /* A loop's clock is not ours: libuv's is a millisecond count taken
     * at the start of its turn, so a timer can come a little before
     * due_ns, and the engine's callbacks count on a timer never firing
     * early (the poll loop's never does). Such a timer is set again for
     * what is left. */
    if (loop && t->due_ns != DUE_NOW && dlock__now_ns() < t->due_ns &&
        app_timer_set(loop, t) == DLOCK_OK)
        return; /* (set again, or, out of memory, early rather than never) */
    t->fire(t);
}

void **dlock_timer_slot(dlock_timer *t)
{
    return &t->slot;
}
