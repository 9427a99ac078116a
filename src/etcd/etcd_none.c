/* SPDX-License-Identifier: BSD-3-Clause */
/* A build without the etcd backend (DLOCK_WITH_ETCD=OFF): etcd:// URLs are
 * recognised and refused with DLOCK_ENOTSUP; no client is ever opened on
 * etcd, so the other entry points (etcd_client.h, etcd_backend.h) are
 * never reached. */
#include <stdio.h>

#include "backend.h"
#include "etcd_backend.h"
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
    (void)out;
    (void)opts;
    (void)urls;
    (void)n_urls;
    snprintf(err, err_len, "etcd:// URLs: this dlock was built without etcd support "
             "(DLOCK_WITH_ETCD=OFF)");
    return DLOCK_ENOTSUP;
}

void dlock__etcd_client_close(struct dlock__etcd_client *ec, int forked)
{
    (void)ec;
    (void)forked;
}

/* Never used: no client opens on etcd in this build (above). */
const dlock__backend dlock__etcd_backend = {.name = "etcd"};

int dlock__etcd_status(struct dlock__etcd_client *ec, const char *key, size_t len,
                       dlock_node_status *out)
{
    (void)ec;
    (void)key;
    (void)len;
    (void)out;
    return DLOCK_ENOTSUP;
}
