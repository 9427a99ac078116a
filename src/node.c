/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "node.h"

int dlock__node_init(dlock__node *n, const char *url, size_t max_idle,
                     int ask_uptime, char *err, size_t err_len)
{
    memset(n, 0, sizeof *n);
    int rc = dlock__url_parse(&n->url, url, err, err_len);
    if (rc != DLOCK_OK)
        return rc;
    if (n->url.is_unix)
        snprintf(n->name, sizeof n->name, "%s", n->url.host);
    else if (strchr(n->url.host, ':'))
        snprintf(n->name, sizeof n->name, "[%.256s]:%d", n->url.host, n->url.port);
    else
        snprintf(n->name, sizeof n->name, "%.256s:%d", n->url.host, n->url.port);
    n->max_idle = max_idle;
    n->ask_uptime = ask_uptime;
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
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&n->mu));
    dlock__url_clear(&n->url);
}

dlock__conn *dlock__node_checkout(dlock__node *n)
{
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
         * of the next command unknown). */
        if (dlock__conn_probe(c) == 0)
            return c;
        dlock__conn_free(c);
    }
    dlock__conn_config cfg = {&n->url, 1, n->ask_uptime, n->tls_ctx};
    return dlock__conn_new(&cfg);
}

void dlock__node_checkin(dlock__node *n, dlock__conn *c)
{
    if (!c)
        return;
    if (c->server_start_ns)
        atomic_store(&n->server_start_ns, c->server_start_ns);
    dlock__node_note_run_id(n, c);
    /* A connection with many stale replies owed is more trouble than a new
     * one is worth. */
    if (c->state != DLOCK__CS_OPEN || dlock__conn_pending(c) > 64) {
        dlock__conn_free(c);
        return;
    }
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
    c->run_id_noted = 1;
}

void dlock__node_run_id(dlock__node *n, char *out)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
    memcpy(out, n->run_id, sizeof n->run_id);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
}
