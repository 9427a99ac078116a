/* SPDX-License-Identifier: BSD-3-Clause */
/* A lock's events for the observer and the statistics (observe.h). */
#include <stddef.h>
#include <string.h>

#include "backend.h"
#include "client.h"
#include "clock.h"
#include "handle.h"
#include "kinds.h"
#include "observe.h"

static const char *lock_name(const dlock_lock *l)
{
    return l->name ? l->name + l->prefix_len : "";
}

static dlock_acquire_event acquire_event(const dlock_lock *l, int64_t wait_ms)
{
    dlock_acquire_event ev;
    memset(&ev, 0, sizeof ev);
    ev.size = sizeof ev;
    ev.name = lock_name(l);
    ev.kind = l->kind ? l->kind->name : "set";
    ev.backend = l->backend ? l->backend->name : "";
    ev.wait_ms = wait_ms;
    return ev;
}

void dlock__obs_acquire_start(dlock_lock *l, int64_t wait_ms)
{
    dlock__obs *o = &l->client->obs;
    l->obs_attempts = 0;
    l->obs_start_ns = dlock__now_ns();
    if (o->hooks.acquire_start) {
        dlock_acquire_event ev = acquire_event(l, wait_ms);
        o->hooks.acquire_start(o->hooks.arg, &ev);
    }
}

void dlock__obs_acquire_end(dlock_lock *l, int64_t wait_ms, int rc)
{
    dlock__obs *o = &l->client->obs;
    int64_t took = dlock__now_ns() - l->obs_start_ns;
    dlock__stats_count(o, DLOCK__C_ACQUIRES, 1);
    dlock__stats_count(o,
                       rc == DLOCK_OK                                        ? DLOCK__C_GRANTED
                       : rc == DLOCK_ENOTACQUIRED || rc == DLOCK_ETIMEDOUT ? DLOCK__C_BUSY
                                                                             : DLOCK__C_FAILED,
                       1);
    dlock__stats_count(o, DLOCK__C_ATTEMPTS, l->obs_attempts);
    dlock__stats_record(&o->acquire, took);
    if (o->hooks.acquire_end) {
        dlock_acquire_event ev = acquire_event(l, wait_ms);
        ev.duration_ns = took;
        ev.attempts = l->obs_attempts;
        ev.result = rc;
        o->hooks.acquire_end(o->hooks.arg, &ev);
    }
}

void dlock__obs_hold_end(dlock_lock *l, dlock_hold_end how, int reason)
{
    static const int which[] = {
        [DLOCK_HOLD_RELEASED] = DLOCK__C_RELEASED,
        [DLOCK_HOLD_LOST] = DLOCK__C_LOST,
        [DLOCK_HOLD_ENDED] = DLOCK__C_ENDED,
        [DLOCK_HOLD_FORGOTTEN] = DLOCK__C_FORGOTTEN,
    };
    dlock__obs *o = &l->client->obs;
    int64_t held = dlock__now_ns() - atomic_load_explicit(&l->obs_held_ns, memory_order_relaxed);
    dlock__stats_count(o, which[how], 1);
    dlock__stats_record(&o->hold, held);
    if (o->hooks.hold_end) {
        dlock_hold_event ev;
        memset(&ev, 0, sizeof ev);
        ev.size = sizeof ev;
        ev.name = lock_name(l);
        ev.kind = l->kind ? l->kind->name : "set";
        ev.backend = l->backend ? l->backend->name : "";
        ev.hold_ns = held;
        ev.how = how;
        ev.reason = reason;
        o->hooks.hold_end(o->hooks.arg, &ev);
    }
}

void dlock__obs_wakeup(dlock_lock *l, int pushed)
{
    dlock__obs *o = &l->client->obs;
    dlock__stats_count(o, pushed ? DLOCK__C_WAKE_PUSHED : DLOCK__C_WAKE_LOOKED, 1);
    if (o->hooks.wakeup) {
        dlock_wakeup_event ev = {sizeof ev, lock_name(l), pushed};
        o->hooks.wakeup(o->hooks.arg, &ev);
    }
}

/* dlock_stats as its first version had it: a program built against that
 * header passes this size for as long as the struct grows at its end. */
#define STATS_V1_SIZE (offsetof(dlock_stats, renewal_duration) + sizeof(dlock_histogram))

int dlock_client_stats(const dlock_client *client, dlock_stats *out, size_t size)
{
    /* Each caller gets the fields its header knows and this library has
     * (out->size says how many bytes); one smaller than version 1 is not
     * ours. */
    if (!client || !out || size < STATS_V1_SIZE)
        return DLOCK_EINVAL;
    dlock_stats all;
    dlock__stats_snapshot(&client->obs, &all);
    if (size > sizeof all)
        size = sizeof all;
    all.size = size;
    memcpy(out, &all, size);
    return DLOCK_OK;
}
