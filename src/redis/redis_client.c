/* SPDX-License-Identifier: BSD-3-Clause */
/* The Redis side of a client: its nodes from the URLs (one node, Redlock's
 * independent nodes, a Cluster's seeds, a Sentinel's primary), their
 * credentials and TLS, the checks that no node is named twice, and their
 * end. dlock_client_new() (client.c) made the generic part already. */
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "client.h"
#include "cluster.h"
#include "error.h"
#include "node.h"
#include "pipe.h"
#include "redis_backend.h"
#include "scripts.h"
#include "sentinel.h"
#include "tls.h"
#include "url.h"

/* The username and password options win over the URL's: the password then
 * never has to appear in a URL string. */
static int override_credentials(dlock__url *u, const dlock_client_options *o)
{
    char *user = NULL, *pass = NULL;
    if ((o->username && !(user = dlock__strdup(o->username))) ||
        (o->password && !(pass = dlock__strdup(o->password)))) {
        dlock__free(user);
        return DLOCK_ENOMEM;
    }
    if (user) {
        dlock__free(u->user);
        u->user = user;
    }
    if (pass) {
        for (volatile char *p = u->password; p && *p; p++)
            *p = 0; /* as dlock__url_clear(): no secret in freed memory */
        dlock__free(u->password);
        u->password = pass;
    }
    return DLOCK_OK;
}

/* 1 if two TCP nodes resolve to a common address and the same port (say
 * 127.0.0.1, localhost and [::1]), naming it in addr. A name that does not
 * resolve now is left to the run_id check once connected. */
static int same_address(const dlock__node *a, const dlock__node *b, char *addr, size_t len)
{
    if (a->url.is_unix || b->url.is_unix || a->url.port != b->url.port || a->sentinel ||
        b->sentinel)
        return 0;
    struct addrinfo hints, *ra = NULL, *rb = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    int found = 0;
    if (getaddrinfo(a->url.host, NULL, &hints, &ra) == 0 &&
        getaddrinfo(b->url.host, NULL, &hints, &rb) == 0) {
        for (struct addrinfo *x = ra; x && !found; x = x->ai_next)
            for (struct addrinfo *y = rb; y && !found; y = y->ai_next) {
                if (x->ai_family != y->ai_family)
                    continue;
                const void *px, *py;
                size_t n;
                if (x->ai_family == AF_INET) {
                    px = &((const struct sockaddr_in *)(const void *)x->ai_addr)->sin_addr;
                    py = &((const struct sockaddr_in *)(const void *)y->ai_addr)->sin_addr;
                    n = sizeof(struct in_addr);
                } else if (x->ai_family == AF_INET6) {
                    px = &((const struct sockaddr_in6 *)(const void *)x->ai_addr)->sin6_addr;
                    py = &((const struct sockaddr_in6 *)(const void *)y->ai_addr)->sin6_addr;
                    n = sizeof(struct in6_addr);
                } else {
                    continue;
                }
                if (!memcmp(px, py, n)) {
                    found = 1;
                    getnameinfo(x->ai_addr, x->ai_addrlen, addr, (socklen_t)len, NULL, 0,
                                NI_NUMERICHOST);
                }
            }
    }
    if (ra)
        freeaddrinfo(ra);
    if (rb)
        freeaddrinfo(rb);
    return found;
}

int dlock__client_check_distinct(dlock_client *c, char *msg, size_t len)
{
    char ids[DLOCK__MAX_NODES][41];
    for (size_t i = 0; i < c->n_nodes; i++) {
        dlock__node_run_id(&c->nodes[i], ids[i]);
        for (size_t j = 0; j < i && ids[i][0]; j++)
            if (!strcmp(ids[i], ids[j])) {
                snprintf(msg, len, "URL %zu (%.100s) and URL %zu (%.100s) reach the same Redis "
                         "server (run_id %.12s...): name each node once",
                         j + 1, c->nodes[j].name, i + 1, c->nodes[i].name, ids[i]);
                return DLOCK_EINVAL;
            }
    }
    return DLOCK_OK;
}

/* Give node i the client's TLS context if it speaks TLS, building the
 * context on first need (so the TLS files are read only when used). */
static int setup_tls(dlock_client *c, dlock__node *n, char *err, size_t len)
{
    if (!n->url.tls && !c->opts.tls)
        return DLOCK_OK;
    if (n->url.is_unix) {
        /* Never a silent fallback to plain text. */
        snprintf(err, len, "tls is set but %.120s is a unix socket, which has no TLS", n->name);
        return DLOCK_EINVAL;
    }
    n->url.tls = 1;
    if (!c->tls_ctx) {
        int rc = dlock__tls_ctx_new(&c->tls_ctx, &c->opts, err, len);
        if (rc != DLOCK_OK)
            return rc;
    }
    n->tls_ctx = c->tls_ctx;
    if (!(n->tls_cache = dlock__tls_cache_new())) {
        snprintf(err, len, "out of memory");
        return DLOCK_ENOMEM;
    }
    return DLOCK_OK;
}

int dlock__redis_open(dlock_client *c, const char *const *urls, size_t n_urls,
                      const dlock_client_options *opts, char *err, size_t err_len)
{
    const char *missing = NULL;
    if (dlock__scripts_check(&missing) != 0) {
        snprintf(err, err_len, "build is missing script %s.lua", missing);
        return DLOCK_EINVAL;
    }
    /* Cluster: the URLs are seeds of one cluster, one node of ours. */
    size_t n_seeds = n_urls;
    if (opts->cluster)
        n_urls = 1;
    if (!(c->nodes = dlock__calloc(n_urls, sizeof *c->nodes))) {
        snprintf(err, err_len, "out of memory");
        return DLOCK_ENOMEM;
    }
    for (size_t i = 0; i < n_urls; i++) {
        char uerr[240] = "";
        int rc;
        if (!urls[i]) {
            snprintf(err, err_len, "URL %zu is NULL", i + 1);
            return DLOCK_EINVAL;
        }
        rc = dlock__node_init(&c->nodes[i], urls[i], (size_t)opts->pool_size, uerr, sizeof uerr);
        if (rc != DLOCK_OK) {
            snprintf(err, err_len, "URL %zu: %s", i + 1, uerr);
            return rc;
        }
        c->n_nodes++;
        c->nodes[i].obs = &c->obs;
        if (opts->cluster && (c->nodes[i].sentinel || c->nodes[i].url.is_unix)) {
            snprintf(err, err_len, "URL %zu: a cluster seed must be redis:// or rediss://", i + 1);
            return DLOCK_EINVAL;
        }
        if (opts->cluster) {
            rc = dlock__cluster_new(&c->nodes[i].cluster, urls, n_seeds, (size_t)opts->pool_size,
                                    opts->connect_timeout_ms, uerr, sizeof uerr);
            if (rc != DLOCK_OK) {
                snprintf(err, err_len, "%s", uerr);
                return rc;
            }
            snprintf(c->nodes[i].name, sizeof c->nodes[i].name, "cluster (seed %.200s:%d)",
                     c->nodes[i].url.host, c->nodes[i].url.port);
            c->nodes[i].cluster->obs = &c->obs;
        }
        if (c->nodes[i].sentinel)
            c->nodes[i].sentinel->timeout_ms = opts->connect_timeout_ms;
        if ((rc = override_credentials(&c->nodes[i].url, opts)) != DLOCK_OK) {
            snprintf(err, err_len, "out of memory");
            return rc;
        }
        if ((rc = setup_tls(c, &c->nodes[i], uerr, sizeof uerr)) != DLOCK_OK) {
            snprintf(err, err_len, "URL %zu: %s", i + 1, uerr);
            return rc;
        }
        /* The same server twice (even with another db) is not an
         * independent node: it would vote twice and fail together. */
        char addr[64] = "";
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(c->nodes[j].name, c->nodes[i].name)) {
                snprintf(err, err_len, "URL %zu names the same node as URL %zu (%.200s)",
                         i + 1, j + 1, c->nodes[i].name);
                return DLOCK_EINVAL;
            }
            if (same_address(&c->nodes[j], &c->nodes[i], addr, sizeof addr)) {
                snprintf(err, err_len, "URL %zu (%.60s) and URL %zu (%.60s) are the same node "
                         "(both reach %.46s port %d)", j + 1, c->nodes[j].name, i + 1,
                         c->nodes[i].name, addr, c->nodes[i].url.port);
                return DLOCK_EINVAL;
            }
        }
    }
    c->quorum = n_urls / 2 + 1;
    return DLOCK_OK;
}

/* forked: a child of fork() closes its copies of the sockets, sending
 * nothing (close() only drops our reference; the parent's connections go
 * on), and frees the memory. */
void dlock__redis_close(dlock_client *c, int forked)
{
    for (size_t i = 0; i < c->n_nodes; i++) {
        dlock__node *n = &c->nodes[i];
        dlock__pipe_free(n->pipe, forked);
        n->pipe = NULL;
        if (!forked) {
            dlock__node_destroy(n);
            continue;
        }
        while (n->idle) {
            dlock__conn *next = n->idle->next;
            dlock__conn_free(n->idle);
            n->idle = next;
        }
        dlock__tls_cache_forget(n->tls_cache);
        dlock__url_clear(&n->url);
        dlock__sentinel_forget(n->sentinel);
        dlock__cluster_forget(n->cluster);
    }
    dlock__free(c->nodes);
    c->nodes = NULL;
    c->n_nodes = 0;
    /* After every connection. In a fork child, SSL_free() of the
     * connections above sent nothing (no close_notify: tls.c), so the
     * parent's TLS sessions go on undisturbed. */
    dlock__tls_ctx_free(c->tls_ctx);
    c->tls_ctx = NULL;
}

size_t dlock__redis_node_count(const dlock_client *c)
{
    return c->n_nodes;
}

const char *dlock__redis_node_name(const dlock_client *c, size_t i)
{
    return i < c->n_nodes ? c->nodes[i].name : NULL;
}
