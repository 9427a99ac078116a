/* SPDX-License-Identifier: BSD-3-Clause */
/* Redis Cluster (cluster.h): the slot map and the connections to the
 * masters; the map is learned in cluster_learn.c, key slots are in
 * cluster_slot.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "common.h"
#include "error.h"
#include "cluster.h"

int dlock__cluster_new(dlock__cluster **out, const char *const *urls, size_t n, size_t max_idle,
                       int timeout_ms, char *err, size_t err_len)
{
    *out = NULL;
    if (n > DLOCK__CLUSTER_MAX_SEEDS) {
        snprintf(err, err_len, "at most %d cluster seed URLs", DLOCK__CLUSTER_MAX_SEEDS);
        return DLOCK_EINVAL;
    }
    dlock__cluster *c = dlock__calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_len, "out of memory");
        return DLOCK_ENOMEM;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&c->mu, NULL));
    c->stale = 1;
    c->max_idle = max_idle;
    c->timeout_ms = timeout_ms;
    for (size_t i = 0; i < n; i++) {
        char uerr[200];
        int rc = dlock__url_parse(&c->seed[i], urls[i], uerr, sizeof uerr);
        if (rc == DLOCK_OK && c->seed[i].is_unix) {
            dlock__url_clear(&c->seed[i]);
            snprintf(uerr, sizeof uerr, "a cluster seed must be a TCP node (redis:// or rediss://)");
            rc = DLOCK_EINVAL;
        }
        if (rc != DLOCK_OK) {
            snprintf(err, err_len, "URL %zu: %s", i + 1, uerr);
            dlock__cluster_free(c);
            return rc;
        }
        c->n_seeds++;
    }
    *out = c;
    return DLOCK_OK;
}

static void free_pools(dlock__cluster *c)
{
    for (size_t i = 0; i < c->n_masters; i++)
        while (c->master[i].idle) {
            dlock__conn *next = c->master[i].idle->next;
            dlock__conn_free(c->master[i].idle);
            c->master[i].idle = next;
        }
}

void dlock__cluster_forget(dlock__cluster *c)
{
    if (!c)
        return;
    free_pools(c);
    for (size_t i = 0; i < c->n_seeds; i++)
        dlock__url_clear(&c->seed[i]);
    dlock__free(c);
}

void dlock__cluster_free(dlock__cluster *c)
{
    if (!c)
        return;
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&c->mu));
    dlock__cluster_forget(c);
}

/* conn->route: 1 + the master's index, and the entry's generation. */
static int route_of(int idx, unsigned gen)
{
    return (int)((gen & 0xffffffu) << 8) | (idx + 1);
}

/* Index of master host:port, added if new. A full table reuses an entry
 * that neither the current map nor `pending` (a map being built, or NULL)
 * points at: after many failovers most entries name servers that serve
 * nothing. -1 when every entry is in use. Under c->mu. */
static int master_index(dlock__cluster *c, const char *host, int port, const uint8_t *pending)
{
    for (size_t i = 0; i < c->n_masters; i++)
        if (c->master[i].port == port && !strcmp(c->master[i].host, host))
            return (int)i;
    if (strlen(host) >= sizeof c->master[0].host)
        return -1;
    int idx = -1;
    if (c->n_masters < DLOCK__CLUSTER_MAX_MASTERS) {
        idx = (int)c->n_masters++;
    } else {
        uint8_t used[DLOCK__CLUSTER_MAX_MASTERS + 1] = {0};
        for (size_t s = 0; s < DLOCK__CLUSTER_SLOTS; s++) {
            used[c->slot_master[s]] = 1;
            if (pending)
                used[pending[s]] = 1;
        }
        for (int i = 0; i < DLOCK__CLUSTER_MAX_MASTERS && idx < 0; i++)
            if (!used[i + 1])
                idx = i;
        if (idx < 0)
            return -1;
    }
    dlock__cmaster *m = &c->master[idx];
    while (m->idle) { /* connections to the address the entry had */
        dlock__conn *next = m->idle->next;
        dlock__conn_free(m->idle);
        m->idle = next;
    }
    m->n_idle = 0;
    m->gen++;
    m->failed_ns = 0;
    snprintf(m->host, sizeof m->host, "%s", host);
    m->port = port;
    return idx;
}

unsigned dlock__cluster_master_gen(dlock__cluster *c, int idx)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    unsigned gen = idx >= 0 && idx < DLOCK__CLUSTER_MAX_MASTERS ? c->master[idx].gen : 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
    return gen;
}

/* A connection that failed before it started, carrying why. */
static dlock__conn *broken_conn(int code, const char *msg)
{
    dlock__conn *conn = dlock__calloc(1, sizeof *conn);
    if (conn)
        dlock__conn_fail(conn, code, "%s", msg);
    return conn;
}

dlock__conn *dlock__cluster_connect_to(const dlock__url *tmpl, dlock__tls_ctx *tls,
                                       const char *host, int port, int load_scripts,
                                       int ask_uptime)
{
    dlock__url u = *tmpl;
    u.host = (char *)host;
    u.port = port;
    u.is_unix = 0;
    dlock__conn_config cfg = {&u, load_scripts, ask_uptime, tls, 0, NULL};
    return dlock__conn_new(&cfg);
}

int dlock__cluster_apply_slots(dlock__cluster *c, const redisReply *r, const char *asked)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0)
        return DLOCK_EPROTO;
    uint8_t map[DLOCK__CLUSTER_SLOTS];
    memset(map, 0, sizeof map);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    int rc = DLOCK_OK;
    for (size_t k = 0; k < r->elements && rc == DLOCK_OK; k++) {
        const redisReply *e = r->element[k];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
            e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
            e->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
            rc = DLOCK_EPROTO;
            break;
        }
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        const char *host = e->element[2]->element[0]->str;
        /* An empty or unknown endpoint means "the address you used". */
        if (!host[0] || !strcmp(host, "?"))
            host = asked;
        int idx = master_index(c, host, (int)e->element[2]->element[1]->integer, map);
        if (idx < 0 || lo < 0 || hi >= DLOCK__CLUSTER_SLOTS || lo > hi) {
            rc = DLOCK_EPROTO;
            break;
        }
        for (long long s = lo; s <= hi; s++)
            map[s] = (uint8_t)(idx + 1);
    }
    if (rc == DLOCK_OK) {
        memcpy(c->slot_master, map, sizeof map);
        c->stale = 0;
        c->learned_ns = dlock__now_ns();
        c->refreshes++;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
    return rc;
}

/* A pooled connection of master idx, or a new one. */
static dlock__conn *checkout_index(dlock__cluster *c, const dlock__url *tmpl, dlock__tls_ctx *tls,
                                   int idx, int load_scripts, int ask_uptime)
{
    char host[256];
    int port;
    unsigned gen;
    for (;;) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
        dlock__cmaster *m = &c->master[idx];
        dlock__conn *conn = m->idle;
        if (conn) {
            m->idle = conn->next;
            m->n_idle--;
        }
        memcpy(host, m->host, sizeof host);
        port = m->port;
        gen = m->gen;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
        if (!conn)
            break;
        conn->next = NULL;
        if (dlock__conn_probe(conn) == 0)
            return conn;
        dlock__conn_free(conn);
    }
    dlock__conn *conn = dlock__cluster_connect_to(tmpl, tls, host, port, load_scripts, ask_uptime);
    if (conn)
        conn->route = route_of(idx, gen);
    return conn;
}

int dlock__cluster_map_wanted(const dlock__cluster *c, unsigned slot, int64_t now_ns)
{
    return c->stale || (!c->slot_master[slot & (DLOCK__CLUSTER_SLOTS - 1)] &&
                        now_ns - c->learned_ns >= DLOCK__CLUSTER_UNCOVERED_MS * DLOCK__NS_PER_MS);
}

int dlock__cluster_needs_map(dlock__cluster *c, unsigned slot)
{
    int64_t now = dlock__now_ns();
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    int need = dlock__cluster_map_wanted(c, slot, now);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
    return need;
}

dlock__conn *dlock__cluster_checkout_known(dlock__cluster *c, const dlock__url *tmpl,
                                           dlock__tls_ctx *tls, unsigned slot, int load_scripts,
                                           int ask_uptime, int learn_rc, const char *learn_err)
{
    slot &= DLOCK__CLUSTER_SLOTS - 1;
    if (learn_rc == DLOCK_ENOMEM)
        return NULL;
    if (learn_rc == DLOCK_ECANCELED)
        return broken_conn(DLOCK_EIO, learn_err);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    int idx = (int)c->slot_master[slot] - 1;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
    if (idx < 0) {
        char err[300];
        if (learn_rc == DLOCK_OK)
            snprintf(err, sizeof err, "no master serves hash slot %u", slot);
        else
            snprintf(err, sizeof err, "%s", learn_err);
        return broken_conn(learn_rc == DLOCK_OK ? DLOCK_EBUSY : learn_rc, err);
    }
    /* A map that could not be learned again is still the best guess. */
    return checkout_index(c, tmpl, tls, idx, load_scripts, ask_uptime);
}

dlock__conn *dlock__cluster_connect_master(dlock__cluster *c, const dlock__url *tmpl,
                                           dlock__tls_ctx *tls, int idx)
{
    char host[256];
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    int known = idx >= 0 && (size_t)idx < c->n_masters;
    int port = known ? c->master[idx].port : 0;
    if (known)
        memcpy(host, c->master[idx].host, sizeof host);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
    if (!known)
        return broken_conn(DLOCK_EIO, "no such cluster master");
    return dlock__cluster_connect_to(tmpl, tls, host, port, 0, 0); /* route 0: never pooled */
}

void dlock__cluster_master_name(dlock__cluster *c, int idx, char *buf, size_t len)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    if (idx >= 0 && (size_t)idx < c->n_masters)
        snprintf(buf, len, "%s:%d", c->master[idx].host, c->master[idx].port);
    else
        snprintf(buf, len, "cluster master %d", idx);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
}

dlock__conn *dlock__cluster_checkout_addr(dlock__cluster *c, const dlock__url *tmpl,
                                          dlock__tls_ctx *tls, const char *host, int port,
                                          int load_scripts, int ask_uptime)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    int idx = master_index(c, host, port, NULL);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
    if (idx < 0)
        return broken_conn(DLOCK_EIO, "too many cluster masters");
    return checkout_index(c, tmpl, tls, idx, load_scripts, ask_uptime);
}

void dlock__cluster_failed(dlock__cluster *c, const dlock__conn *conn)
{
    int idx = (conn->route & 0xff) - 1;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    c->stale = 1;
    if (idx >= 0 && route_of(idx, c->master[idx].gen) == conn->route)
        c->master[idx].failed_ns = dlock__now_ns();
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
}

void dlock__cluster_stale(dlock__cluster *c)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    c->stale = 1;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
}

void dlock__cluster_checkin(dlock__cluster *c, dlock__conn *conn)
{
    if (!conn)
        return;
    int idx = (conn->route & 0xff) - 1;
    if (conn->state != DLOCK__CS_OPEN || dlock__conn_pending(conn) > 64 || idx < 0) {
        /* A failed connection may mean a failover: learn the map again,
         * asking this master last. Not the stand-in of a slot the map has
         * no master for (idx < 0): its map was just learned, and relearning
         * it on every request is what DLOCK__CLUSTER_UNCOVERED_MS bounds. */
        if (conn->state == DLOCK__CS_BROKEN && conn->err_code != DLOCK_ENOMEM && idx >= 0) {
            DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
            c->stale = 1;
            if (idx >= 0 && route_of(idx, c->master[idx].gen) == conn->route)
                c->master[idx].failed_ns = dlock__now_ns();
            DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
        }
        dlock__conn_free(conn);
        return;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    dlock__cmaster *m = &c->master[idx];
    if (route_of(idx, m->gen) == conn->route)
        m->failed_ns = 0; /* it answers again */
    /* Not into the pool of an entry reused for another address. */
    if (route_of(idx, m->gen) == conn->route && m->n_idle < c->max_idle) {
        conn->next = m->idle;
        m->idle = conn;
        m->n_idle++;
        conn = NULL;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
    dlock__conn_free(conn);
}

int dlock__cluster_redirect(const redisReply *r, int *ask, unsigned *slot, char *host,
                            size_t host_len, int *port)
{
    if (r->type != REDIS_REPLY_ERROR)
        return 0;
    const char *p;
    if (r->len > 6 && !memcmp(r->str, "MOVED ", 6)) {
        *ask = 0;
        p = r->str + 6;
    } else if (r->len > 4 && !memcmp(r->str, "ASK ", 4)) {
        *ask = 1;
        p = r->str + 4;
    } else {
        return 0;
    }
    char *end = NULL;
    unsigned long s = strtoul(p, &end, 10);
    if (end == p || *end != ' ' || s >= DLOCK__CLUSTER_SLOTS)
        return 0;
    const char *addr = end + 1;
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= host_len)
        return 0;
    int pt = atoi(colon + 1);
    if (pt <= 0 || pt > 65535)
        return 0;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    *slot = (unsigned)s;
    *port = pt;
    return 1;
}

void dlock__cluster_moved(dlock__cluster *c, unsigned slot, const char *host, int port)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    /* The slot's old master may be the entry reused for the new one. */
    c->slot_master[slot & (DLOCK__CLUSTER_SLOTS - 1)] = 0;
    int idx = master_index(c, host, port, NULL);
    if (idx >= 0)
        c->slot_master[slot & (DLOCK__CLUSTER_SLOTS - 1)] = (uint8_t)(idx + 1);
    /* One slot moved usually means more did (a resharding or failover). */
    c->stale = 1;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
}

int dlock__cluster_master_of(dlock__cluster *c, unsigned slot)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    int idx = (int)c->slot_master[slot & (DLOCK__CLUSTER_SLOTS - 1)] - 1;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
    return idx;
}

size_t dlock__cluster_masters(dlock__cluster *c, int *masters, unsigned *slots)
{
    uint8_t seen[DLOCK__CLUSTER_MAX_MASTERS] = {0};
    size_t n = 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    for (unsigned slot = 0; slot < DLOCK__CLUSTER_SLOTS; slot++) {
        int m = (int)c->slot_master[slot] - 1;
        if (m < 0 || m >= DLOCK__CLUSTER_MAX_MASTERS || seen[m])
            continue;
        seen[m] = 1;
        masters[n] = m;
        slots[n++] = slot;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
    return n;
}
