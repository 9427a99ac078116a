/* SPDX-License-Identifier: BSD-3-Clause */
/* A build without the etcd backend (DLOCK_WITH_ETCD=OFF): etcd:// and
 * etcds:// URLs are recognised and refused with DLOCK_ENOTSUP; no client is ever opened on
 * etcd, so the other entry points (etcd_client.h, the lock operations) are
 * never reached. */
#include <stdio.h>

#include "backend.h"
#include "etcd_client.h"
#include "etcd_url.h"

int dlock__etcd_wanted(const char *const *urls, size_t n_urls)
{
    return urls && n_urls > 0 && dlock__etcd_url_is(urls[0]);
}

static int refuse(dlock_client *c, const char *const *urls, size_t n_urls,
                  const dlock_client_options *opts, char *err, size_t err_len)
{
    (void)c, (void)urls, (void)n_urls, (void)opts;
    snprintf(err, err_len, "etcd:// and etcds:// URLs: this dlock was built without etcd support "
             "(DLOCK_WITH_ETCD=OFF)");
    return DLOCK_ENOTSUP;
}

static void nothing(dlock_client *c, int forked)
{
    (void)c, (void)forked;
}

/* Only wants, open and close are used: no client opens on etcd here. */
const dlock__backend dlock__etcd_backend = {
    .name = "etcd", .wants = dlock__etcd_wanted, .open = refuse, .close = nothing};
