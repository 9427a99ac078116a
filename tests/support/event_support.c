/* SPDX-License-Identifier: BSD-3-Clause */
/* The libevent test driver (loop_driver.h) over <dlock/libevent.h>. */

#include "dlock/libevent.h"
#include "event_support.h"

static struct event_base *base;
/* Bounds a turn's wait (EVLOOP_ONCE waits for an event otherwise). */
static struct event *bound;

static void noop_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static int ev_open(void)
{
    base = event_base_new();
    bound = base ? evtimer_new(base, noop_cb, NULL) : NULL;
    return bound ? 0 : -1;
}

static dlock_loop ev_hooks(void)
{
    return dlock_libevent_loop(base);
}

static void ev_turn(int max_ms)
{
    struct timeval tv = {max_ms / 1000, (max_ms % 1000) * 1000};
    evtimer_add(bound, &tv);
    event_base_loop(base, EVLOOP_ONCE);
    evtimer_del(bound);
}

static int ev_idle(void)
{
    return event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED | EVENT_BASE_COUNT_ACTIVE) == 0;
}

/* event_base_dispatch() returns 1 when no event is added: nothing of
 * dlock's is left, by libevent's own count. */
static int ev_close(void)
{
    event_free(bound);
    bound = NULL;
    int rc = event_base_dispatch(base);
    event_base_free(base);
    base = NULL;
    return rc == 1 ? 0 : -1;
}

const test_loop_driver test_event_driver = {
    .name = "event",
    .open = ev_open,
    .hooks = ev_hooks,
    .turn = ev_turn,
    .idle = ev_idle,
    .close = ev_close,
};
