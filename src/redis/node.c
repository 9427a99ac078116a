/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "common.h"
#include "node.h"

int dlock__node_init(dlock__node *n, const char *url, size_t max_idle, char *err,
                     size_t err_len)
{
    memset(n, 0, sizeof *n);
    int rc = dlock__sentinel_is_url(url)
                 ? dlock__sentinel_parse(&n->sentinel, &n->url, url, err, err_len)
                 : dlock__url_parse(&n->url, url, err, err_len);
    if (rc != DLOCK_OK)
        return rc;
    if (n->sentinel)
        snprintf(n->name, sizeof n->name, "sentinel master %.200s", n->sentinel->master_name);
    else if (n->url.is_unix)
        snprintf(n->name, sizeof n->name, "%s", n->url.host);
    else if (strchr(n->url.host, ':'))
        snprintf(n->name, sizeof n->name, "[%.256s]:%d", n->url.host, n->url.port);
    else
        snprintf(n->name, sizeof n->name, "%.256s:%d", n->url.host, n->url.port);
    n->max_idle = max_idle;
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&n->mu, NULL));
    return DLOCK_OK;
}

void dlock__node_destroy(dlock__node *n)
{
    dlock__conn *c = n->idle;
    while (c) {
        dlock__conn *next = c->next;
        dlock__conn_free(c);
        c = next;
    }
    n->idle = NULL;
    dlock__tls_cache_free(n->tls_cache); /* after its connections */
    n->tls_cache = NULL;
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&n->mu));
    dlock__url_clear(&n->url);
    dlock__sentinel_free(n->sentinel);
    n->sentinel = NULL;
    dlock__cluster_free(n->cluster);
    n->cluster = NULL;
}

dlock__conn *dlock__node_broken_conn(int code, const char *msg)
{
    dlock__conn *c = dlock__calloc(1, sizeof *c);
    if (c)
        dlock__conn_fail(c, code, "%s", msg);
    return c;
}

int dlock__node_connect_known(dlock__node *n, int load_scripts, int ask_uptime,
                              dlock__conn **out)
{
    dlock__sentinel *s = n->sentinel;
    char host[256];
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
    int known = s->known;
    int port = s->port;
    if (known)
        snprintf(host, sizeof host, "%s", s->host);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
    if (!known)
        return 0;
    /* The primary's credentials with the address the sentinels gave. */
    dlock__url u = n->url;
    u.host = host;
    u.port = port;
    dlock__conn_config cfg = {&u, load_scripts, ask_uptime, n->tls_ctx, 1, NULL};
    dlock__conn *c = dlock__conn_new(&cfg);
    if (c && c->state == DLOCK__CS_BROKEN)
        dlock__node_stale(n);
    *out = c;
    return 1;
}

void dlock__node_stale(dlock__node *n)
{
    if (!n->sentinel)
        return;
    /* A new primary may take SET ... NX GET where the old one refused it:
     * its connections' handshakes say. */
    atomic_store(&n->set_get, 0);
    atomic_fetch_add(&n->primary_gen, 1);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
    n->sentinel->known = 0;
    dlock__conn *idle = n->idle;
    n->idle = NULL;
    n->n_idle = 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
    while (idle) {
        dlock__conn *next = idle->next;
        dlock__conn_free(idle);
        idle = next;
    }
}

int dlock__node_checkout_ready(dlock__node *n, unsigned slot, dlock__conn **out)
{
    if (n->cluster) {
        if (dlock__cluster_needs_map(n->cluster, slot))
            return 0;
        *out = dlock__cluster_checkout_known(n->cluster, &n->url, n->tls_ctx, slot, 1, 0,
                                             DLOCK_OK, "");
        return 1;
    }
    for (;;) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
        dlock__conn *c = n->idle;
        if (c) {
            n->idle = c->next;
            n->n_idle--;
        }
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
        if (!c)
            break;
        c->next = NULL;
        /* A server restart or idle timeout closes pooled connections; find
         * out now rather than after sending (which would make the outcome
         * of the next command unknown). A connection back in the pool for
         * less than DLOCK__PROBE_IDLE_MS is not probed: back-to-back calls
         * then cost no system call for this. A close in that window makes
         * the next command's outcome unknown, as a close between the probe
         * and the send always could: never "not sent" for a command that
         * may have run. */
        if (dlock__now_ns() - c->checkin_ns < DLOCK__PROBE_IDLE_MS * DLOCK__NS_PER_MS ||
            dlock__conn_probe(c) == 0) {
            *out = c;
            return 1;
        }
        dlock__conn_free(c);
    }
    /* Pooled connections load the scripts and ask INFO server: its uptime
     * (the restart rule), run_id (one server behind two URLs) and version
     * (SET ... NX GET, first_try.c). */
    if (n->sentinel)
        return dlock__node_connect_known(n, 1, 1, out);
    dlock__conn_config cfg = {&n->url, 1, 1, n->tls_ctx, 0, n->tls_cache};
    *out = dlock__conn_new(&cfg);
    return 1;
}

void dlock__node_checkin(dlock__node *n, dlock__conn *c)
{
    if (!c)
        return;
    if (n->cluster) {
        dlock__cluster_checkin(n->cluster, c);
        return;
    }
    if (c->server_start_ns)
        atomic_store(&n->server_start_ns, c->server_start_ns);
    dlock__node_note_run_id(n, c);
    /* A connection with many stale replies owed is more trouble than a new
     * one is worth. */
    if (c->state != DLOCK__CS_OPEN || dlock__conn_pending(c) > 64) {
        /* Sentinel: a failed connection may mean a failover. */
        if (c->state == DLOCK__CS_BROKEN && c->err_code != DLOCK_ENOMEM)
            dlock__node_stale(n);
        dlock__conn_free(c);
        return;
    }
    c->checkin_ns = dlock__now_ns();
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
    if (n->n_idle < n->max_idle) {
        c->next = n->idle;
        n->idle = c;
        n->n_idle++;
        c = NULL;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
    dlock__conn_free(c);
}

void dlock__node_note_run_id(dlock__node *n, dlock__conn *c)
{
    if (!c->run_id[0] || c->run_id_noted)
        return;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
    memcpy(n->run_id, c->run_id, sizeof n->run_id);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
    int was = atomic_load(&n->set_get);
    if (was >= 0) /* a refusal (-1) stays */
        atomic_compare_exchange_strong(&n->set_get, &was, c->set_get);
    c->run_id_noted = 1;
}

int dlock__node_set_get(dlock__node *n)
{
    return atomic_load(&n->set_get) > 0;
}

void dlock__node_no_set_get(dlock__node *n)
{
    atomic_store(&n->set_get, -1);
}

void dlock__node_run_id(dlock__node *n, char *out)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
    memcpy(out, n->run_id, sizeof n->run_id);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
}
