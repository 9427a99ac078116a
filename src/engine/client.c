/* SPDX-License-Identifier: BSD-3-Clause */
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "backend.h"
#include "client.h"
#include "error.h"
#include "identity.h"
#include "rand.h"
#include "scripts.h"
#include "versioned.h"

/* Bytes of each dlock_client_options version (versioned.h): version 1
 * (dlock 0.1.0) ended at wakeups, version 2 at the TLS options, version 3
 * at cluster, version 4 at observer, version 5 at identity_text. */
static const size_t options_sizes[] = {
    offsetof(dlock_client_options, key_prefix),
    offsetof(dlock_client_options, min_replicas),
    offsetof(dlock_client_options, observer),
    offsetof(dlock_client_options, identity),
    offsetof(dlock_client_options, loop),
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
    return dlock__identity_check(o, err, len);
}

int dlock_client_new(dlock_client **out, const char *const *urls, size_t n_urls,
                     const dlock_client_options *opts, char *errbuf,
                     size_t errbuf_len)
{
    char err[512] = ""; /* room for any message below: no truncation to reason about */
    int rc = DLOCK_OK;
    dlock_client *c = NULL;
    dlock_client_options defaults = DLOCK_CLIENT_OPTIONS_INIT;

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
    c = dlock__calloc(1, sizeof *c);
    if (!c) {
        rc = DLOCK_ENOMEM;
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    c->opts = *opts;
    c->fork_gen = dlock__fork_watch();
    c->opts.username = c->opts.password = NULL; /* copied into each node */
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&c->bg_mu, NULL));
    c->opts.observer = NULL; /* copied: the caller's need not outlive us */
    if ((rc = dlock__stats_init(&c->obs, opts->observer, err, sizeof err)) != DLOCK_OK)
        goto fail;
    c->opts.identity_text = NULL; /* made into c->identity */
    if (opts->identity && !(c->identity = dlock__identity_make(opts))) {
        rc = DLOCK_ENOMEM;
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    c->opts.loop = NULL; /* copied into c->app */
    if (opts->loop) {
        if ((rc = dlock__loop_app_init(&c->app, opts->loop, err, sizeof err)) != DLOCK_OK)
            goto fail;
        c->loop = &c->app.loop;
    }
    c->opts.key_prefix = NULL;
    if (opts->key_prefix && opts->key_prefix[0] &&
        !(c->opts.key_prefix = c->key_prefix = dlock__strdup(opts->key_prefix))) {
        rc = DLOCK_ENOMEM;
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    /* The store, chosen once by the URLs (backends.c); it checks its URLs
     * and the options that are its own. */
    c->backend = dlock__backend_for(urls, n_urls);
    if ((rc = c->backend->open(c, urls, n_urls, opts, err, sizeof err)) != DLOCK_OK)
        goto fail;
    /* The TLS files were read; the caller's strings need not outlive us. */
    c->opts.tls_ca_file = c->opts.tls_ca_dir = NULL;
    c->opts.tls_cert_file = c->opts.tls_key_file = c->opts.tls_server_name = NULL;
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
    if (c->watchdog_ops)
        c->watchdog_ops->forget(c);
    if (c->wakeup_ops)
        c->wakeup_ops->forget(c);
    if (c->backend)
        c->backend->close(c, 1);
    dlock__free(c->key_prefix);
    dlock__free(c->identity);
    dlock__free(c);
}

/* The client's end, once no handle of it is left: its threads (a looped
 * client's records on the loop), its store, its memory. A looped client's
 * renewal round in flight ends on the loop first, which comes back here
 * through dlock__client_closed(). */
static void client_end(dlock_client *c)
{
    if (c->watchdog_ops && !c->watchdog_ops->stop(c)) {
        c->closing++;
        return;
    }
    if (c->wakeup_ops)
        (void)c->wakeup_ops->stop(c);
    if (c->backend)
        c->backend->close(c, 0);
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&c->bg_mu));
    dlock__free(c->key_prefix);
    dlock__free(c->identity);
    dlock__free(c);
}

void dlock__client_closed(dlock_client *c)
{
    if (--c->closing == 0 && c->freeing)
        client_end(c);
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
     * say so and stop here, rather than fail later somewhere else. A
     * looped client's handles that are closing on the loop are freed
     * already, for the caller: the client ends after them. */
    size_t live = atomic_load(&c->live_handles) - c->closing_handles;
    if (live > 0)
        dlock__misuse("dlock_client_free() called while %zu lock handle%s of this client "
                      "%s not freed; call dlock_lock_free() on every handle first",
                      live, live == 1 ? "" : "s", live == 1 ? "is" : "are");
    if (c->freeing)
        dlock__misuse("dlock_client_free() called twice on one client");
    c->freeing = 1;
    if (c->closing == 0)
        client_end(c);
}

size_t dlock_client_node_count(const dlock_client *c)
{
    return c ? c->backend->node_count(c) : 0;
}

const char *dlock_client_node_name(const dlock_client *c, size_t i)
{
    return c ? c->backend->node_name(c, i) : NULL;
}
