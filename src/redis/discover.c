/* SPDX-License-Identifier: BSD-3-Clause */
/* Discovery as a sub-request (discover.h), and the blocking entry points
 * that run it on a private loop of their own for a caller outside a
 * request (the wake-up thread's subscriber). */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "common.h"
#include "discover.h"
#include "loop_poll.h"
#include "stats.h"

enum { IDLE = 0, FLYING = 1, OBSERVING = 2 };

static int begin(dlock__discover *d);

static pthread_mutex_t *flight_mu(const dlock__discover *d)
{
    return d->node->cluster ? &d->node->cluster->mu : &d->node->sentinel->ask_mu;
}

static dlock__flight *flight_of(const dlock__discover *d)
{
    return d->node->cluster ? &d->node->cluster->flight : &d->node->sentinel->flight;
}

/* Our flight is over: its observers look again. */
static void land(dlock__discover *d)
{
    pthread_mutex_t *mu = flight_mu(d);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(mu));
    dlock__flight_land(flight_of(d));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(mu));
    d->phase = IDLE;
}

static void finish(dlock__discover *d, int rc, const char *err)
{
    d->rc = rc;
    snprintf(d->err, sizeof d->err, "%s", err);
    d->done(d);
}

/* The learning is over: its callback returns before it is freed. */
static void learned_later(dlock__timer *t)
{
    dlock__discover *d = DLOCK__OWNER(t, dlock__discover, fin);
    dlock__cluster_learn_stop(d->learning);
    d->learning = NULL;
    d->done(d);
}

static void learned(void *arg, int rc, const char *err)
{
    dlock__discover *d = arg;
    land(d);
    d->rc = rc;
    snprintf(d->err, sizeof d->err, "%s", err);
    d->fin.fire = learned_later;
    dlock__defer(d->loop, &d->fin);
}

static void asked(dlock__sentinel_asking *a)
{
    dlock__discover *d = DLOCK__OWNER(a, dlock__discover, asking);
    dlock__node *n = d->node;
    int moved = 0;
    if (a->rc == DLOCK_OK) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
        /* A primary known before and another one now: a failover. */
        moved = n->sentinel->generation > 0 &&
                (strcmp(n->sentinel->host, a->host) || n->sentinel->port != a->port);
        snprintf(n->sentinel->host, sizeof n->sentinel->host, "%s", a->host);
        n->sentinel->port = a->port;
        n->sentinel->known = 1;
        n->sentinel->generation++;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
    }
    if (moved && n->obs) {
        char name[300];
        snprintf(name, sizeof name, "%s:%d", a->host, a->port);
        dlock__stats_topology(n->obs, DLOCK_NODE_FAILOVER_FOLLOWED, name);
    }
    dlock__sentinel_ask_stop(a);
    land(d);
    finish(d, a->rc, a->rc == DLOCK_OK ? "" : a->err);
}

/* The request's deadline passed while it observed another's flight: it
 * ends as its own discovery would have at that deadline. */
static void observe_due(dlock__timer *t)
{
    dlock__discover *d = DLOCK__OWNER(t, dlock__discover, fin);
    dlock__flight_unobserve(&d->obs, flight_mu(d));
    d->phase = IDLE;
    finish(d, DLOCK_EIO,
           d->node->cluster ? "no cluster node answered CLUSTER SLOTS in time"
                            : "no sentinel asked in time");
}

/* Another request's flight landed: look again. */
static void observed(dlock__io *io, unsigned events)
{
    (void)events;
    dlock__discover *d = DLOCK__OWNER(io, dlock__discover, obs.io);
    dlock__timer_clear(d->loop, &d->fin);
    dlock__flight_unobserve(&d->obs, flight_mu(d));
    d->phase = IDLE;
    int r = begin(d);
    if (r == 0)
        finish(d, DLOCK_OK, "");
    else if (r < 0)
        finish(d, r, r == DLOCK_ENOMEM ? "out of memory" : "cannot wait for a discovery");
}

/* Whether the node still needs it; under the flight's mutex. */
static int needed(dlock__discover *d)
{
    dlock__node *n = d->node;
    if (n->cluster) {
        return dlock__cluster_map_wanted(n->cluster, d->cslot, dlock__now_ns());
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
    int known = n->sentinel->known;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
    return !known;
}

/* 0 nothing to learn, 1 flying or observing, or a negative code. */
static int begin(dlock__discover *d)
{
    dlock__node *n = d->node;
    pthread_mutex_t *mu = flight_mu(d);
    dlock__flight *fl = flight_of(d);
    dlock__cluster_learn_stop(d->learning); /* a previous one, landed */
    d->learning = NULL;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(mu));
    int rc = needed(d);
    if (rc && fl->busy) {
        rc = dlock__flight_observe(fl, &d->obs, d->loop, observed);
        if (rc == DLOCK_OK) {
            d->phase = OBSERVING;
            rc = 1;
        }
    } else if (rc) {
        fl->busy = 1;
        d->phase = FLYING;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(mu));
    if (d->phase == OBSERVING && d->deadline_ns != INT64_MAX) {
        /* The other flight may run past this request's deadline. */
        d->fin.fire = observe_due;
        d->fin.due_ns = d->deadline_ns;
        (void)dlock__timer_set(d->loop, &d->fin);
    }
    if (d->phase != FLYING)
        return rc;
    if (!n->cluster) {
        dlock__sentinel_ask_start(&d->asking, n->sentinel, n->tls_ctx, d->loop, d->deadline_ns,
                                  asked);
        return 1;
    }
    if (dlock__cluster_learn_start(&d->learning, n->cluster, &n->url, n->tls_ctx, d->loop,
                                   d->deadline_ns, learned, d) == DLOCK_OK)
        return 1;
    land(d);
    return DLOCK_ENOMEM;
}

int dlock__discover_start(dlock__discover *d, dlock__node *n, unsigned slot, dlock__loop *l,
                          int64_t deadline_ns, void (*done)(dlock__discover *d))
{
    if (!n->cluster && !n->sentinel)
        return 0;
    if (!d->node)
        d->obs.efd = -1;
    d->node = n;
    d->cslot = slot;
    d->loop = l;
    d->deadline_ns = deadline_ns;
    d->done = done;
    d->rc = DLOCK_OK;
    d->err[0] = '\0';
    return begin(d);
}

void dlock__discover_stop(dlock__discover *d)
{
    if (!d->node)
        return;
    if (d->phase == OBSERVING)
        dlock__flight_unobserve(&d->obs, flight_mu(d));
    if (d->phase == FLYING) {
        dlock__cluster_learn_stop(d->learning);
        d->learning = NULL;
        if (!d->node->cluster)
            dlock__sentinel_ask_stop(&d->asking);
        land(d);
    }
    d->phase = IDLE;
    dlock__timer_clear(d->loop, &d->fin);
    dlock__cluster_learn_stop(d->learning);
    d->learning = NULL;
}

int dlock__discover_checkout(dlock__discover *d, dlock__conn **out)
{
    dlock__node *n = d->node;
    if (n->cluster) {
        *out = dlock__cluster_checkout_known(n->cluster, &n->url, n->tls_ctx, d->cslot, 1, 0,
                                             d->rc, d->err);
        return 1;
    }
    if (d->rc != DLOCK_OK) {
        *out = d->rc == DLOCK_ENOMEM ? NULL : dlock__node_broken_conn(d->rc, d->err);
        return 1;
    }
    return dlock__node_checkout_ready(n, d->cslot, out);
}

/* ---- blocking, on a private loop ------------------------------------------ */

typedef struct blocking {
    dlock__discover d;
    int finished;
} blocking;

static void blocking_done(dlock__discover *d)
{
    DLOCK__OWNER(d, blocking, d)->finished = 1;
}

static int blocking_finished(void *arg)
{
    return ((const blocking *)arg)->finished;
}

/* Learn what n needs for slot, the caller's thread waiting: b->d.rc and
 * b->d.err say how it went. */
static void discover_blocking(dlock__node *n, unsigned slot, blocking *b)
{
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    memset(b, 0, sizeof *b);
    int r = dlock__discover_start(&b->d, n, slot, &lp.loop, INT64_MAX, blocking_done);
    if (r == 1)
        (void)dlock__loop_poll_run(&lp, blocking_finished, b, INT64_MAX);
    else if (r < 0)
        snprintf(b->d.err, sizeof b->d.err, "%s",
                 r == DLOCK_ENOMEM ? "out of memory" : "cannot wait for a discovery");
    if (r <= 0)
        b->d.rc = r < 0 ? r : DLOCK_OK;
    dlock__discover_stop(&b->d);
    dlock__loop_poll_close(&lp);
}

void dlock__discover_cluster_node(dlock__node *n, dlock__cluster *c, const dlock__url *tmpl,
                                  dlock__tls_ctx *tls)
{
    memset(n, 0, sizeof *n);
    n->url = *tmpl;
    n->tls_ctx = tls;
    n->cluster = c;
}

int dlock__cluster_prepare(dlock__cluster *c, const dlock__url *tmpl, dlock__tls_ctx *tls,
                           unsigned slot)
{
    dlock__node n;
    blocking b;
    dlock__discover_cluster_node(&n, c, tmpl, tls);
    discover_blocking(&n, slot, &b);
    return b.d.rc;
}

dlock__conn *dlock__cluster_connect(dlock__cluster *c, const dlock__url *tmpl,
                                    dlock__tls_ctx *tls, unsigned slot)
{
    dlock__node n;
    blocking b;
    dlock__discover_cluster_node(&n, c, tmpl, tls);
    discover_blocking(&n, slot, &b);
    dlock__conn *conn = dlock__cluster_checkout_known(c, tmpl, tls, slot, 0, 0, b.d.rc, b.d.err);
    if (conn && conn->route && conn->q_len > 0) {
        /* A pooled one may owe stale replies, which a subscriber would
         * read as messages: give it back and make a new one. */
        int idx = (conn->route & 0xff) - 1;
        dlock__cluster_checkin(c, conn);
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
        char host[256];
        memcpy(host, c->master[idx].host, sizeof host);
        int port = c->master[idx].port;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
        conn = dlock__cluster_connect_to(tmpl, tls, host, port, 0, 0);
    }
    if (conn)
        conn->route = 0; /* never pooled */
    return conn;
}

dlock__conn *dlock__node_connect(dlock__node *n, int load_scripts, int ask_uptime)
{
    if (n->cluster)
        return dlock__cluster_connect(n->cluster, &n->url, n->tls_ctx, 0);
    if (!n->sentinel) {
        /* A plain node resumes its newest TLS session; a Sentinel
         * primary or a Cluster master may be another server each time. */
        dlock__conn_config cfg = {&n->url, load_scripts, ask_uptime, n->tls_ctx, 0,
                                  n->tls_cache};
        return dlock__conn_new(&cfg);
    }
    for (;;) {
        dlock__conn *conn = NULL;
        if (dlock__node_connect_known(n, load_scripts, ask_uptime, &conn))
            return conn;
        blocking b;
        discover_blocking(n, 0, &b);
        if (b.d.rc != DLOCK_OK)
            return b.d.rc == DLOCK_ENOMEM ? NULL : dlock__node_broken_conn(b.d.rc, b.d.err);
    }
}
