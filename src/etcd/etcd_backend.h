/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd backend's lock side: what the public lock functions do for a
 * handle of a client opened from etcd:// URLs (docs/backends.md). The
 * public face (lock.c, status.c) dispatches here once, at the top of each
 * function, as libuv's uv_close() switches on the handle type: an etcd
 * acquire is a place in a line, watched for its predecessor's deletion,
 * not attempts with backoff, so it does not fit the Redis backend's
 * attempt/release table (backend.h). Nothing of Redis runs for such a
 * handle, and nothing here knows Redis. The client side is etcd_client.h.
 *
 * Built with DLOCK_WITH_ETCD; without it etcd_none.c refuses etcd:// URLs
 * with DLOCK_ENOTSUP and the rest is unreachable. */
#ifndef DLOCK_ETCD_BACKEND_H
#define DLOCK_ETCD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

struct dlock__etcd_client;

/* dlock_lock_new()'s etcd part, once the handle's common fields are set
 * (l->name is the key): DLOCK_OK or DLOCK_ENOMEM. */
int dlock__etcd_status(struct dlock__etcd_client *ec, const char *key, size_t len,
                       dlock_node_status *out);

#endif
