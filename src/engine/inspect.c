/* SPDX-License-Identifier: BSD-3-Clause */
/* A client's calls on a name rather than a handle: the read-only looks
 * (dlock_client_status, _holders, _list) and breaking a stuck lock
 * (dlock_client_break): their arguments checked once here, then the
 * client's backend. */
#include <string.h>

#include "backend.h"
#include "client.h"
#include "keys.h"

/* The lock's key for a name (the client's prefix + name): NULL with *rc
 * DLOCK_EINVAL for a name of 0 or more than DLOCK_NAME_MAX bytes, or
 * DLOCK_ENOMEM. */
static char *key_of(dlock_client *c, const char *name, size_t *klen, int *rc)
{
    size_t len = strnlen(name, DLOCK_NAME_MAX + 1);
    *rc = len == 0 || len > DLOCK_NAME_MAX ? DLOCK_EINVAL : DLOCK_OK;
    char *key = *rc == DLOCK_OK ? dlock__lock_key(c, name, len, klen) : NULL;
    if (*rc == DLOCK_OK && !key)
        *rc = DLOCK_ENOMEM;
    return key;
}

int dlock_client_status(dlock_client *c, const char *name, size_t n_out,
                        dlock_node_status *out, dlock_lock_status *summary)
{
    if (!c || !name || !out || dlock__client_forked(c) || n_out < c->backend->node_count(c))
        return DLOCK_EINVAL;
    size_t klen = 0;
    int rc;
    char *key = key_of(c, name, &klen, &rc);
    if (!key)
        return rc;
    rc = c->backend->status(c, key, klen, out, summary);
    dlock__free(key);
    return rc;
}

int dlock_client_holders(dlock_client *c, const char *name, size_t node,
                         dlock_holders_info *info, dlock_holder *out, size_t max_out)
{
    if (!c || !name || !info || (max_out && !out) || dlock__client_forked(c))
        return DLOCK_EINVAL;
    if (!c->backend->holders)
        return DLOCK_ENOTSUP; /* etcd: no shares nor permits there (docs/primitives.md) */
    if (node >= c->backend->node_count(c))
        return DLOCK_EINVAL;
    size_t klen = 0;
    int rc;
    char *key = key_of(c, name, &klen, &rc);
    if (!key)
        return rc;
    rc = c->backend->holders(c, key, klen, node, info, out, max_out);
    dlock__free(key);
    return rc;
}

int dlock_client_list(dlock_client *c, const char *pattern, dlock_list_fn cb, void *arg)
{
    if (!c || !cb || dlock__client_forked(c))
        return DLOCK_EINVAL;
    if (!pattern)
        pattern = "*";
    size_t plen = strnlen(pattern, DLOCK_NAME_MAX + 1);
    if (plen == 0 || plen > DLOCK_NAME_MAX)
        return DLOCK_EINVAL;
    if (!c->backend->list) /* a backend without a listing */
        return DLOCK_ENOTSUP;
    return c->backend->list(c, pattern, cb, arg);
}

int dlock_client_break(dlock_client *c, const char *name, uint64_t fence,
                       dlock_break_result *result)
{
    if (!c || !name || dlock__client_forked(c))
        return DLOCK_EINVAL;
    if (!c->backend->break_holds)
        return DLOCK_ENOTSUP;
    dlock_break_result scratch;
    size_t klen = 0;
    int rc;
    char *key = key_of(c, name, &klen, &rc);
    if (!key)
        return rc;
    rc = c->backend->break_holds(c, key, klen, fence, result ? result : &scratch);
    dlock__free(key);
    return rc;
}
