/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd backend: what the public lock and client functions do for a
 * client opened from etcd:// URLs (docs/backends.md). The public face
 * dispatches here once, at the top of each function; nothing of Redis
 * runs for such a client, and nothing here knows Redis.
 *
 * Built with DLOCK_WITH_ETCD; without it etcd_none.c refuses etcd:// URLs
 * with DLOCK_ENOTSUP and the rest is unreachable. */
#ifndef DLOCK_ETCD_BACKEND_H
#define DLOCK_ETCD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* 1 if the client is to be opened on etcd: urls[0] is etcd://. */
int dlock__etcd_wanted(const char *const *urls, size_t n_urls);

/* Open the etcd side of client c (options and key prefix already set).
 * DLOCK_OK, DLOCK_EINVAL (bad or mixed URLs, message in err),
 * DLOCK_ENOTSUP (built without etcd), DLOCK_ENOMEM. */
int dlock__etcd_client_open(dlock_client *c, const char *const *urls, size_t n_urls,
                            char *err, size_t err_len);
/* Stop the renewal thread and close; in a child of fork() (forked != 0)
 * free memory only. */
void dlock__etcd_client_close(dlock_client *c, int forked);
/* "host:port,host:port" naming the cluster (its one "node"). */
const char *dlock__etcd_client_name(const dlock_client *c);

/* dlock_lock_new()'s etcd part, once the handle's common fields are set:
 * DLOCK_OK or DLOCK_ENOMEM. */
int dlock__etcd_lock_init(dlock_lock *l);
void dlock__etcd_lock_free(dlock_lock *l); /* releases what it holds */

/* The public functions' etcd bodies (argument checks done by the caller). */
int dlock__etcd_lock_acquire(dlock_lock *l, int64_t wait_ms);
int dlock__etcd_lock_release(dlock_lock *l);
int dlock__etcd_lock_extend(dlock_lock *l, int64_t ttl_ms);
int dlock__etcd_lock_adopt(dlock_lock *l, const char *token, size_t len);
int dlock__etcd_lock_forget(dlock_lock *l);
int dlock__etcd_status(dlock_client *c, const char *name, size_t len,
                       dlock_node_status *out);

#endif
