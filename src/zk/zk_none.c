/* SPDX-License-Identifier: BSD-3-Clause */
/* A build without the ZooKeeper backend (DLOCK_WITH_ZOOKEEPER=OFF): zk://
 * URLs are recognised and refused with DLOCK_ENOTSUP; no client is ever
 * opened on ZooKeeper, so no other entry point is reached. */
#include <stdio.h>

#include "backend.h"
#include "zk_url.h"

static int refuse(dlock_client *c, const char *const *urls, size_t n_urls,
                  const dlock_client_options *opts, char *err, size_t err_len)
{
    (void)c, (void)urls, (void)n_urls, (void)opts;
    snprintf(err, err_len, "zk:// URLs: this dlock was built without ZooKeeper support "
             "(DLOCK_WITH_ZOOKEEPER=OFF)");
    return DLOCK_ENOTSUP;
}

static void nothing(dlock_client *c, int forked)
{
    (void)c, (void)forked;
}

/* Only wants, open and close are used: no client opens on ZooKeeper here. */
const dlock__backend dlock__zk_backend = {
    .name = "zookeeper", .wants = dlock__zk_wanted, .open = refuse, .close = nothing};
