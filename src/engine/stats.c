/* SPDX-License-Identifier: BSD-3-Clause */
/* Observer hooks and statistics (stats.h). */
#include <stdio.h>
#include <string.h>

#include "stats.h"
#include "versioned.h"

/* Bytes of each dlock_observer version (versioned.h). */
static const size_t observer_sizes[] = {
    sizeof(dlock_observer),
};
DLOCK__VERSIONED_CHECK(dlock_observer, observer_sizes, DLOCK_OBSERVER_VERSION);

/* Upper bounds of the histograms' buckets (dlock.h); the last bucket has
 * none. */
static const double bounds_ms[DLOCK_STATS_BUCKETS - 1] = DLOCK_STATS_BOUNDS_MS;

int dlock__stats_init(dlock__obs *o, const dlock_observer *app, char *err, size_t len)
{
    memset(&o->hooks, 0, sizeof o->hooks);
    if (!app)
        return DLOCK_OK;
    size_t size = dlock__versioned_size(observer_sizes, DLOCK__ARRAY_LEN(observer_sizes),
                                        app->version);
    if (!size) {
        snprintf(err, len, "unknown dlock_observer version %u (this library knows 1 to %d)",
                 app->version, DLOCK_OBSERVER_VERSION);
        return DLOCK_EINVAL;
    }
    memcpy(&o->hooks, app, size);
    return DLOCK_OK;
}

void dlock__stats_count(dlock__obs *o, int which, uint64_t n)
{
    atomic_fetch_add_explicit(&o->counter[which], n, memory_order_relaxed);
}

void dlock__stats_record(dlock__hist *h, int64_t ns)
{
    uint64_t us = ns > 0 ? (uint64_t)(ns / 1000) : 0;
    size_t i = 0;
    while (i < DLOCK__ARRAY_LEN(bounds_ms) && (double)us > bounds_ms[i] * 1000.0)
        i++;
    atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

void dlock__stats_renewal(dlock__obs *o, dlock_renewal_event *ev)
{
    ev->size = sizeof *ev;
    dlock__stats_count(o, DLOCK__C_ROUNDS, 1);
    dlock__stats_count(o, DLOCK__C_RENEWALS, ev->renewed);
    dlock__stats_count(o, DLOCK__C_RENEW_FAILURES, ev->failed);
    dlock__stats_record(&o->renewal, ev->duration_ns);
    if (o->hooks.renewal_round)
        o->hooks.renewal_round(o->hooks.arg, ev);
}

static void node_event(dlock__obs *o, dlock_node_what what, const char *node, int code)
{
    dlock__stats_count(o, code ? DLOCK__C_NODE_ERRORS : DLOCK__C_TOPOLOGY, 1);
    if (o->hooks.node_event) {
        dlock_node_event ev = {sizeof ev, what, node ? node : "", code};
        o->hooks.node_event(o->hooks.arg, &ev);
    }
}

void dlock__stats_node_error(dlock__obs *o, const char *node, int code, int timed_out)
{
    /* A timeout (of the connect or of a reply) says the node is stalled
     * or cut off; the server's own refusals (and a server not ready) are
     * refusals; the rest (I/O, TLS, credentials) failed to connect or lost
     * the connection. */
    dlock_node_what what = DLOCK_NODE_CONNECT_FAILED;
    if (code == DLOCK_ENOMEM) /* our memory ran out, not the node */
        return;
    if (timed_out)
        what = DLOCK_NODE_TIMEOUT;
    else if (code == DLOCK_EREFUSED || code == DLOCK_EBUSY)
        what = DLOCK_NODE_REFUSED;
    node_event(o, what, node, code);
}

void dlock__stats_node_refused(dlock__obs *o, const char *node, int code)
{
    node_event(o, DLOCK_NODE_REFUSED, node, code);
}

void dlock__stats_topology(dlock__obs *o, dlock_node_what what, const char *node)
{
    node_event(o, what, node, 0);
}

static void snap_hist(dlock_histogram *out, const dlock__hist *h)
{
    out->count = atomic_load_explicit(&h->count, memory_order_relaxed);
    out->sum_us = atomic_load_explicit(&h->sum_us, memory_order_relaxed);
    for (size_t i = 0; i < DLOCK_STATS_BUCKETS; i++)
        out->bucket[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
}

void dlock__stats_snapshot(const dlock__obs *o, dlock_stats *s)
{
    memset(s, 0, sizeof *s);
    s->size = sizeof *s;
    uint64_t *fields[DLOCK__C_COUNT] = {
        &s->acquires,         &s->acquires_granted, &s->acquires_busy,  &s->acquires_failed,
        &s->acquire_attempts, &s->holds_released,   &s->holds_lost,     &s->holds_ended,
        &s->holds_forgotten,  &s->renewal_rounds,   &s->renewals,       &s->renewal_failures,
        &s->node_errors,      &s->topology_changes, &s->wakeups_pushed, &s->wakeups_looked,
    };
    for (size_t i = 0; i < DLOCK__C_COUNT; i++)
        *fields[i] = atomic_load_explicit(&o->counter[i], memory_order_relaxed);
    snap_hist(&s->acquire_duration, &o->acquire);
    snap_hist(&s->hold_duration, &o->hold);
    snap_hist(&s->renewal_duration, &o->renewal);
}
