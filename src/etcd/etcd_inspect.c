/* SPDX-License-Identifier: BSD-3-Clause */
/* What a client asks etcd about a name without a handle: its status (the
 * cluster is one node, so the verdict is that node's), breaking its
 * holder's key, and the list of held names. Each is one request over the
 * client's transport (etcd_client.h), with no handle and no hold of ours:
 * the handle's side is etcd_backend.c's. */
#include <string.h>

#include "client.h"
#include "etcd_client.h"
#include "etcd_inspect.h"
#include "etcd_kv.h"
#include "etcd_list.h"
#include "etcd_lock.h"

/* The client's etcd side (etcd_client.h): its store (client.h). */
#define EC(c) ((struct dlock__etcd_client *)(c)->store)

static int node_status(struct dlock__etcd_client *ec, const char *key, size_t len,
                       dlock_node_status *out)
{
    dlock__etcd_name range;
    if (dlock__etcd_name_init(&range, key, len) != DLOCK_OK)
        return DLOCK_ENOMEM;
    int held = 0;
    int64_t ttl = -1;
    uint64_t fence = 0;
    int rc = dlock__etcd_peek(ec->e, &range, &held, &ttl, &fence, NULL);
    dlock__etcd_name_clear(&range);
    *out = (dlock_node_status){rc, rc == DLOCK_OK && held, rc == DLOCK_OK ? ttl : -1,
                               rc == DLOCK_OK ? fence : 0};
    return rc;
}

int dlock__etcd_status(dlock_client *c, const char *key, size_t klen, dlock_node_status *out,
                       dlock_lock_status *summary)
{
    int rc = node_status(EC(c), key, klen, out);
    if (summary)
        *summary = (dlock_lock_status){rc != DLOCK_OK ? DLOCK_STATUS_UNKNOWN
                                       : out->held    ? DLOCK_STATUS_HELD
                                                      : DLOCK_STATUS_FREE,
                                       1, rc == DLOCK_OK, (size_t)(rc == DLOCK_OK && out->held),
                                       1};
    return rc;
}

int dlock__etcd_identity(dlock_client *c, const char *key, size_t klen, size_t node, char *buf,
                         size_t len)
{
    (void)node; /* the cluster is one node */
    dlock__etcd_name range;
    if (dlock__etcd_name_init(&range, key, klen) != DLOCK_OK)
        return DLOCK_ENOMEM;
    dlock__etcd_kv first;
    int rc = dlock__etcd_first_value(EC(c)->e, range.begin, range.len, range.end, range.len,
                                     &first, dlock__etcd_call_deadline(EC(c)->e), NULL);
    size_t idlen = 0;
    const char *id = rc == DLOCK_OK ? dlock__etcd_kv_identity(&first, &idlen) : NULL;
    if (id) {
        size_t n = idlen < len - 1 ? idlen : len - 1;
        memcpy(buf, id, n);
        buf[n] = '\0';
    }
    dlock__etcd_kv_clear(&first);
    dlock__etcd_name_clear(&range);
    return rc;
}

int dlock__etcd_break_holds(dlock_client *c, const char *key, size_t klen, uint64_t fence,
                            dlock_break_result *out)
{
    *out = (dlock_break_result){0, DLOCK_HOLD_FREE, 0, 0, 0, 1, 1};
    dlock__etcd_name range;
    if (dlock__etcd_name_init(&range, key, klen) != DLOCK_OK)
        return DLOCK_ENOMEM;
    int removed = 0;
    uint64_t owner_fence = 0;
    int rc = dlock__etcd_break(EC(c)->e, &range, fence, &removed, &owner_fence, NULL);
    dlock__etcd_name_clear(&range);
    if (rc == DLOCK_OK || rc == DLOCK_ENOTOWNER)
        *out = (dlock_break_result){(size_t)removed,
                                    removed ? DLOCK_HOLD_EXCLUSIVE : DLOCK_HOLD_FREE, owner_fence,
                                    (size_t)removed, 1, 1, 1};
    return rc;
}

int dlock__etcd_list_names(dlock_client *c, const char *pattern, dlock_list_fn cb, void *arg)
{
    return dlock__etcd_list(c, EC(c)->e, pattern, cb, arg);
}
