/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_client.h"
#include "etcd_url.h"

int dlock__etcd_wanted(const char *const *urls, size_t n_urls)
{
    return urls && n_urls > 0 && dlock__etcd_url_is(urls[0]);
}

int dlock__etcd_client_open(struct dlock__etcd_client **out, const char *const *urls,
                            size_t n_urls, const dlock_client_options *opts, char *err,
                            size_t err_len)
{
    for (size_t i = 0; i < n_urls; i++)
        if (!urls[i] || (!dlock__etcd_url_is(urls[i]) && !dlock__etcd_url_more(urls[i]))) {
            snprintf(err, err_len, "URL %zu: etcd:// and etcds:// URLs cannot be mixed with Redis URLs "
                     "(one client is on one backend)", i + 1);
            return DLOCK_EINVAL;
        }
    if (opts->username || opts->password) {
        snprintf(err, err_len, "etcd: give credentials in the URL (etcd://user:password@...), "
                 "not in the options");
        return DLOCK_EINVAL;
    }
    /* The transport of the unary requests (etcd_grpc.h): the gateway by
     * default, gRPC when asked for, from the environment so that the
     * dlock command and every program can choose it without new code. */
    const char *transport = getenv("DLOCK_ETCD_TRANSPORT");
    int grpc = transport && strcmp(transport, "grpc") == 0;
    if (transport && *transport && !grpc && strcmp(transport, "gateway") != 0) {
        snprintf(err, err_len, "DLOCK_ETCD_TRANSPORT is \"%s\": it can be grpc or gateway",
                 transport);
        return DLOCK_EINVAL;
    }
    dlock__etcd_url u;
    int rc = dlock__etcd_url_parse(&u, urls, n_urls, err, err_len);
    if (rc != DLOCK_OK)
        return rc;
    struct dlock__etcd_client *ec = dlock__calloc(1, sizeof *ec);
    size_t name_len = 0;
    for (size_t i = 0; i < u.n; i++)
        name_len += strlen(u.name[i]) + 1;
    if (ec)
        ec->name = dlock__malloc(name_len + 1);
    if (!ec || !ec->name) {
        dlock__etcd_url_clear(&u);
        if (ec)
            dlock__free(ec->name);
        dlock__free(ec);
        snprintf(err, err_len, "out of memory");
        return DLOCK_ENOMEM;
    }
    ec->name[0] = '\0';
    for (size_t i = 0; i < u.n; i++) {
        if (i)
            strcat(ec->name, ",");
        strcat(ec->name, u.name[i]);
    }
    ec->io_timeout_ms = opts->io_timeout_ms;
    rc = dlock__etcd_new(&ec->e, &u, opts->connect_timeout_ms, opts->io_timeout_ms);
    if (rc != DLOCK_OK)
        snprintf(err, err_len, "out of memory");
    else
        rc = dlock__etcd_use_tls(ec->e, opts, err, err_len);
    if (rc == DLOCK_OK && grpc)
        rc = dlock__etcd_use_grpc(ec->e, err, err_len);
    if (rc != DLOCK_OK) {
        dlock__etcd_url_clear(&u);
        dlock__etcd_free(ec->e);
        dlock__free(ec->name);
        dlock__free(ec);
        return rc;
    }
    dlock__etcd_pool_size(ec->e, (size_t)opts->pool_size);
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&ec->mu, NULL));
    *out = ec;
    return DLOCK_OK;
}

void dlock__etcd_client_close(struct dlock__etcd_client *ec, int forked)
{
    if (!ec)
        return;
    if (ec->owed_close)
        ec->owed_close(ec, forked); /* its resends use ec->e */
    if (ec->lock_side_free)
        ec->lock_side_free(ec, forked);
    /* curl handles hold sockets shared with the parent after fork(): their
     * cleanup closes our copies and sends nothing on plain HTTP. */
    if (forked)
        dlock__etcd_free_inherited(ec->e);
    else
        dlock__etcd_free(ec->e);
    if (!forked)
        DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&ec->mu));
    dlock__free(ec->name);
    dlock__free(ec);
}

