/* SPDX-License-Identifier: BSD-3-Clause */
/* What a client asks etcd about a name without a handle (etcd_inspect.c):
 * the backend's status, break_holds and list (backend.h). */
#ifndef DLOCK_ETCD_INSPECT_H
#define DLOCK_ETCD_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* The lock at key (the client's prefix + name) on the cluster, as one
 * node: *out, and *summary if not NULL. The error of the read, or
 * DLOCK_ENOMEM. */
int dlock__etcd_status(dlock_client *c, const char *key, size_t klen, dlock_node_status *out,
                       dlock_lock_status *summary);

/* dlock_client_holders() on etcd: the readers before the oldest key that
 * is not a reader's (shared), or that key (exclusive), each with its
 * token and what is left of its lease. The error of the read, or
 * DLOCK_ENOMEM. */
int dlock__etcd_holders(dlock_client *c, const char *key, size_t klen, size_t node,
                        dlock_holders_info *info, dlock_holder *out, size_t max_out);

/* Delete the holder's key at key (if its fence is fence, unless 0):
 * *out says what was removed. DLOCK_OK, DLOCK_ENOTOWNER (another fence
 * holds it; *out filled in), DLOCK_ENOMEM or the request's error. */
int dlock__etcd_break_holds(dlock_client *c, const char *key, size_t klen, uint64_t fence,
                            dlock_break_result *out);

/* dlock_client_list() on etcd: etcd_list.c over the client's transport. */
/* dlock_client_identity(): the owner key's value when it is an identity
 * (a key whose value is itself, an older dlock's or `etcdctl lock`'s,
 * has none). */
int dlock__etcd_identity(dlock_client *c, const char *key, size_t klen, size_t node, char *buf,
                         size_t len);
int dlock__etcd_list_names(dlock_client *c, const char *pattern, dlock_list_fn cb, void *arg);

#endif
