/* SPDX-License-Identifier: BSD-3-Clause */
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "client.h"
#include "error.h"
#include "etcd_client.h"
#include "rand.h"
#include "scripts.h"
#include "versioned.h"

/* Bytes of each dlock_client_options version (versioned.h): version 1
 * (dlock 0.1.0) ended at wakeups, version 2 at the TLS options. */
static const size_t options_sizes[] = {
    offsetof(dlock_client_options, key_prefix),
    offsetof(dlock_client_options, min_replicas),
    sizeof(dlock_client_options),
};
DLOCK__VERSIONED_CHECK(dlock_client_options, options_sizes, DLOCK_CLIENT_OPTIONS_VERSION);

static size_t options_size(unsigned int version)
{
    return dlock__versioned_size(options_sizes, DLOCK__ARRAY_LEN(options_sizes), version);
}

int dlock_client_options_init(dlock_client_options *opts, unsigned int version)
{
    const dlock_client_options defaults = DLOCK_CLIENT_OPTIONS_INIT;
    return dlock__versioned_init(opts, &defaults, options_sizes,
                                 DLOCK__ARRAY_LEN(options_sizes), version);
}

void dlock__client_log(dlock_client *c, dlock_log_level level, const char *fmt, ...)
{
    if (!c->opts.on_log)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->opts.on_log(level, msg, c->opts.log_arg);
}

static int check_options(const dlock_client_options *o, char *err, size_t len)
{
    if (options_size(o->version) == 0) {
        snprintf(err, len, "unknown dlock_client_options version %u (this library knows 1 to %d)",
                 o->version, DLOCK_CLIENT_OPTIONS_VERSION);
        return DLOCK_EINVAL;
    }
    if (o->connect_timeout_ms <= 0 || o->io_timeout_ms <= 0) {
        snprintf(err, len, "connect_timeout_ms and io_timeout_ms must be > 0");
        return DLOCK_EINVAL;
    }
    if (o->pool_size < 0 || o->pool_size > 1024) {
        snprintf(err, len, "pool_size must be 0..1024");
        return DLOCK_EINVAL;
    }
    if (!(o->drift_factor >= 0.0 && o->drift_factor < 0.5)) {
        snprintf(err, len, "drift_factor must be in [0, 0.5)");
        return DLOCK_EINVAL;
    }
    if (o->min_node_uptime_ms < 0) {
        snprintf(err, len, "min_node_uptime_ms must be >= 0");
        return DLOCK_EINVAL;
    }
    if (o->wakeups != 0 && o->wakeups != 1) {
        snprintf(err, len, "wakeups must be 0 or 1");
        return DLOCK_EINVAL;
    }
    if (o->key_prefix && strnlen(o->key_prefix, DLOCK_KEY_PREFIX_MAX + 1) > DLOCK_KEY_PREFIX_MAX) {
        snprintf(err, len, "key_prefix is longer than %d bytes", DLOCK_KEY_PREFIX_MAX);
        return DLOCK_EINVAL;
    }
    if ((o->tls != 0 && o->tls != 1) || (o->tls_insecure != 0 && o->tls_insecure != 1)) {
        snprintf(err, len, "tls and tls_insecure must be 0 or 1");
        return DLOCK_EINVAL;
    }
    if (o->cluster != 0 && o->cluster != 1) {
        snprintf(err, len, "cluster must be 0 or 1");
        return DLOCK_EINVAL;
    }
    if (o->min_replicas < 0 || o->min_replicas > 1000) {
        snprintf(err, len, "min_replicas must be 0..1000");
        return DLOCK_EINVAL;
    }
    if (o->min_replicas_timeout_ms <= 0 || o->min_replicas_timeout_ms > 60000) {
        snprintf(err, len, "min_replicas_timeout_ms must be 1..60000");
        return DLOCK_EINVAL;
    }
    return DLOCK_OK;
}

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

int dlock_client_new(dlock_client **out, const char *const *urls, size_t n_urls,
                     const dlock_client_options *opts, char *errbuf,
                     size_t errbuf_len)
{
    char err[512] = ""; /* room for any message below: no truncation to reason about */
    int rc = DLOCK_OK;
    dlock_client *c = NULL;
    dlock_client_options defaults = DLOCK_CLIENT_OPTIONS_INIT;
    const char *missing = NULL;

    if (out)
        *out = NULL;
    if (!out || !urls) {
        snprintf(err, sizeof err, "NULL %s", out ? "urls" : "out");
        rc = DLOCK_EINVAL;
        goto fail;
    }
    if (n_urls == 0 || n_urls > DLOCK__MAX_NODES) {
        snprintf(err, sizeof err, "need 1 to %d URLs, got %zu", DLOCK__MAX_NODES, n_urls);
        rc = DLOCK_EINVAL;
        goto fail;
    }
    if (opts) {
        /* An older caller's struct is shorter: read only what it has. */
        size_t n = options_size(opts->version);
        if (n == 0) {
            rc = check_options(opts, err, sizeof err);
            goto fail;
        }
        memcpy(&defaults, opts, n);
        defaults.version = DLOCK_CLIENT_OPTIONS_VERSION;
    }
    opts = &defaults;
    if ((rc = check_options(opts, err, sizeof err)) != DLOCK_OK)
        goto fail;
    if (dlock__scripts_check(&missing) != 0) {
        snprintf(err, sizeof err, "build is missing script %s.lua", missing);
        rc = DLOCK_EINVAL;
        goto fail;
    }
    /* Cluster: the URLs are seeds of one cluster, one node of ours. */
    size_t n_seeds = n_urls;
    if (opts->cluster)
        n_urls = 1;
    c = dlock__calloc(1, sizeof *c);
    if (!c || !(c->nodes = dlock__calloc(n_urls, sizeof *c->nodes))) {
        rc = DLOCK_ENOMEM;
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    c->opts = *opts;
    c->fork_gen = dlock__fork_watch();
    c->opts.username = c->opts.password = NULL; /* copied into each node */
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&c->bg_mu, NULL));
    c->opts.key_prefix = NULL;
    if (opts->key_prefix && opts->key_prefix[0] &&
        !(c->opts.key_prefix = c->key_prefix = dlock__strdup(opts->key_prefix))) {
        rc = DLOCK_ENOMEM;
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    if (dlock__etcd_wanted(urls, n_seeds)) { /* the etcd backend, no nodes */
        if (opts->cluster) {
            snprintf(err, sizeof err, "the cluster option is for Redis Cluster, not etcd:// URLs");
            rc = DLOCK_EINVAL;
            goto fail;
        }
        if ((rc = dlock__etcd_client_open(&c->etcd, urls, n_seeds, opts, err, sizeof err)) !=
                DLOCK_OK ||
            (rc = dlock__token_hex(c->id)) != DLOCK_OK)
            goto fail;
        c->quorum = 1;
        *out = c;
        return DLOCK_OK;
    }
    for (size_t i = 0; i < n_urls; i++) {
        char uerr[240] = "";
        if (!urls[i]) {
            snprintf(err, sizeof err, "URL %zu is NULL", i + 1);
            rc = DLOCK_EINVAL;
        } else {
            rc = dlock__node_init(&c->nodes[i], urls[i], (size_t)opts->pool_size, uerr,
                                  sizeof uerr);
            if (rc != DLOCK_OK)
                snprintf(err, sizeof err, "URL %zu: %s", i + 1, uerr);
        }
        if (rc != DLOCK_OK)
            goto fail;
        c->n_nodes++;
        if (opts->cluster && (c->nodes[i].sentinel || c->nodes[i].url.is_unix)) {
            snprintf(err, sizeof err, "URL %zu: a cluster seed must be redis:// or rediss://", i + 1);
            rc = DLOCK_EINVAL;
            goto fail;
        }
        if (opts->cluster) {
            rc = dlock__cluster_new(&c->nodes[i].cluster, urls, n_seeds, (size_t)opts->pool_size,
                                    opts->connect_timeout_ms, uerr, sizeof uerr);
            if (rc != DLOCK_OK) {
                snprintf(err, sizeof err, "%s", uerr);
                goto fail;
            }
            snprintf(c->nodes[i].name, sizeof c->nodes[i].name, "cluster (seed %.200s:%d)",
                     c->nodes[i].url.host, c->nodes[i].url.port);
        }
        if (c->nodes[i].sentinel)
            c->nodes[i].sentinel->timeout_ms = opts->connect_timeout_ms;
        if ((rc = override_credentials(&c->nodes[i].url, opts)) != DLOCK_OK) {
            snprintf(err, sizeof err, "out of memory");
            goto fail;
        }
        if ((rc = setup_tls(c, &c->nodes[i], uerr, sizeof uerr)) != DLOCK_OK) {
            snprintf(err, sizeof err, "URL %zu: %s", i + 1, uerr);
            goto fail;
        }
        /* The same server twice (even with another db) is not an
         * independent node: it would vote twice and fail together. */
        char addr[64] = "";
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(c->nodes[j].name, c->nodes[i].name)) {
                snprintf(err, sizeof err, "URL %zu names the same node as URL %zu (%.200s)",
                         i + 1, j + 1, c->nodes[i].name);
                rc = DLOCK_EINVAL;
                goto fail;
            }
            if (same_address(&c->nodes[j], &c->nodes[i], addr, sizeof addr)) {
                snprintf(err, sizeof err, "URL %zu (%.60s) and URL %zu (%.60s) are the same node "
                         "(both reach %.46s port %d)", j + 1, c->nodes[j].name, i + 1,
                         c->nodes[i].name, addr, c->nodes[i].url.port);
                rc = DLOCK_EINVAL;
                goto fail;
            }
        }
    }
    /* The TLS files were read; the caller's strings need not outlive us. */
    c->opts.tls_ca_file = c->opts.tls_ca_dir = NULL;
    c->opts.tls_cert_file = c->opts.tls_key_file = c->opts.tls_server_name = NULL;
    c->quorum = n_urls / 2 + 1;
    if ((rc = dlock__token_hex(c->id)) != DLOCK_OK) {
        snprintf(err, sizeof err, "getrandom failed");
        goto fail;
    }
    *out = c;
    return DLOCK_OK;
fail:
    dlock__copy_msg(errbuf, errbuf_len, err);
    dlock_client_free(c);
    return rc;
}

/* dlock_client_free() in a child of fork(): no thread to stop or join (they
 * were not copied) and no mutex to take (one may be held by a thread that
 * does not exist here). Close this process's copies of the sockets,
 * sending nothing (close() only drops our reference; the parent's
 * connections go on), and free the memory. */
static void free_inherited(dlock_client *c)
{
    dlock__etcd_client_close(c->etcd, 1);
    if (c->watchdog_ops)
        c->watchdog_ops->forget(c);
    if (c->wakeup_ops)
        c->wakeup_ops->forget(c);
    for (size_t i = 0; i < c->n_nodes; i++) {
        dlock__node *n = &c->nodes[i];
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
    dlock__free(c->key_prefix);
    /* SSL_free() of the connections above sends nothing (no close_notify:
     * src/redis/tls.c), so the parent's TLS sessions go on undisturbed. */
    dlock__tls_ctx_free(c->tls_ctx);
    dlock__free(c);
}

void dlock_client_free(dlock_client *c)
{
    if (!c)
        return;
    if (dlock__client_forked(c)) {
        free_inherited(c);
        return;
    }
    /* Its handles would use freed memory (the watchdog's, the nodes'):
     * say so and stop here, rather than fail later somewhere else. */
    size_t live = atomic_load(&c->live_handles);
    if (live > 0)
        dlock__misuse("dlock_client_free() called while %zu lock handle%s of this client "
                      "%s not freed; call dlock_lock_free() on every handle first",
                      live, live == 1 ? "" : "s", live == 1 ? "is" : "are");
    if (c->watchdog_ops)
        c->watchdog_ops->stop(c);
    if (c->wakeup_ops)
        c->wakeup_ops->stop(c);
    dlock__etcd_client_close(c->etcd, 0);
    for (size_t i = 0; i < c->n_nodes; i++)
        dlock__node_destroy(&c->nodes[i]);
    if (c->nodes)
        DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&c->bg_mu));
    dlock__free(c->nodes);
    dlock__free(c->key_prefix);
    dlock__tls_ctx_free(c->tls_ctx); /* after every connection */
    dlock__free(c);
}

size_t dlock_client_node_count(const dlock_client *c)
{
    if (c && c->etcd) /* the cluster is one node to the caller */
        return 1;
    return c ? c->n_nodes : 0;
}

const char *dlock_client_node_name(const dlock_client *c, size_t i)
{
    if (c && c->etcd)
        return i == 0 ? c->etcd->name : NULL;
    return c && i < c->n_nodes ? c->nodes[i].name : NULL;
}
