/* SPDX-License-Identifier: BSD-3-Clause */
/* A build without the etcd backend (DLOCK_WITH_ETCD=OFF): etcd:// URLs are
 * recognised and refused with DLOCK_ENOTSUP; no client is ever opened on
 * etcd, so the other entry points are never reached. */
#include <stdio.h>

#include "etcd_backend.h"
#include "etcd_url.h"

int dlock__etcd_wanted(const char *const *urls, size_t n_urls)
{
    return urls && n_urls > 0 && dlock__etcd_url_is(urls[0]);
}

int dlock__etcd_client_open(dlock_client *c, const char *const *urls, size_t n_urls,
                            char *err, size_t err_len)
{
    (void)c;
    (void)urls;
    (void)n_urls;
    snprintf(err, err_len, "etcd:// URLs: this dlock was built without etcd support "
             "(DLOCK_WITH_ETCD=OFF)");
    return DLOCK_ENOTSUP;
}

void dlock__etcd_client_close(dlock_client *c, int forked)
{
    (void)c;
    (void)forked;
}

const char *dlock__etcd_client_name(const dlock_client *c)
{
    (void)c;
    return NULL;
}

int dlock__etcd_lock_init(dlock_lock *l)
{
    (void)l;
    return DLOCK_ENOTSUP;
}

void dlock__etcd_lock_free(dlock_lock *l)
{
    (void)l;
}

int dlock__etcd_lock_acquire(dlock_lock *l, int64_t wait_ms)
{
    (void)l;
    (void)wait_ms;
    return DLOCK_ENOTSUP;
}

int dlock__etcd_lock_release(dlock_lock *l)
{
    (void)l;
    return DLOCK_ENOTSUP;
}

int dlock__etcd_lock_extend(dlock_lock *l, int64_t ttl_ms)
{
    (void)l;
    (void)ttl_ms;
    return DLOCK_ENOTSUP;
}

int dlock__etcd_lock_adopt(dlock_lock *l, const char *token, size_t len)
{
    (void)l;
    (void)token;
    (void)len;
    return DLOCK_ENOTSUP;
}

int dlock__etcd_lock_forget(dlock_lock *l)
{
    (void)l;
    return DLOCK_ENOTSUP;
}

int dlock__etcd_status(dlock_client *c, const char *name, size_t len,
                       dlock_node_status *out)
{
    (void)c;
    (void)name;
    (void)len;
    (void)out;
    return DLOCK_ENOTSUP;
}
