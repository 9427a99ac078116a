/* SPDX-License-Identifier: BSD-3-Clause */
/* The stores dlock knows, asked in order which one serves a client's
 * URLs. A new backend is its folder (its table, backend.h), its line
 * here and its CMake block. Redis comes last: it serves whatever no other
 * backend claims, and its URL parser says what is wrong with a URL nobody
 * serves. */
#include "backend.h"

extern const dlock__backend dlock__etcd_backend;  /* src/etcd/etcd_backend.c (etcd_none.c) */
extern const dlock__backend dlock__zk_backend;    /* src/zk/zk_backend.c (zk_none.c) */
extern const dlock__backend dlock__redis_backend; /* src/redis/redis_backend.c */

static const dlock__backend *const backends[] = {
    &dlock__etcd_backend, /* etcd:// (etcd_none.c refuses it without etcd) */
    &dlock__zk_backend,   /* zk:// (zk_none.c refuses it without ZooKeeper) */
    &dlock__redis_backend,
};

const dlock__backend *dlock__backend_for(const char *const *urls, size_t n_urls)
{
    size_t n = sizeof backends / sizeof backends[0];
    for (size_t i = 0; i + 1 < n; i++)
        if (backends[i]->wants(urls, n_urls))
            return backends[i];
    return backends[n - 1];
}
