/* SPDX-License-Identifier: BSD-3-Clause */
/* A client's calls on a name rather than a handle: the read-only looks
 * (dlock_client_status, _holders, _identity, _holder_identity, _list) and breaking a stuck lock
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

/* A call on one name: its own argument checks, then the backend's
 * operation on the name's key. */
typedef struct name_call {
    /* c is given and not a fork child's: DLOCK_OK, or the code to return
     * (NULL: nothing more to check). */
    int (*check)(dlock_client *c, const void *args);
    int (*run)(dlock_client *c, const char *key, size_t klen, const void *args);
} name_call;

/* The checks every call on a name makes (a client not a fork child's, a
 * name), then the call's own, then the key: the name's length is checked
 * there. Returns the first refusal, DLOCK_ENOMEM or what run returns. */
static int on_name(dlock_client *c, const char *name, const name_call *how, const void *args)
{
    if (!c || !name || dlock__client_forked(c))
        return DLOCK_EINVAL;
    int rc = how->check ? how->check(c, args) : DLOCK_OK;
    if (rc != DLOCK_OK)
        return rc;
    size_t klen = 0;
    char *key = key_of(c, name, &klen, &rc);
    if (!key)
        return rc;
    rc = how->run(c, key, klen, args);
    dlock__free(key);
    return rc;
}

typedef struct status_args {
    size_t n_out;
    dlock_node_status *out;
    dlock_lock_status *summary;
} status_args;

static int status_check(dlock_client *c, const void *args)
{
    const status_args *a = args;
    return !a->out || a->n_out < c->backend->node_count(c) ? DLOCK_EINVAL : DLOCK_OK;
}

static int status_run(dlock_client *c, const char *key, size_t klen, const void *args)
{
    const status_args *a = args;
    return c->backend->status(c, key, klen, a->out, a->summary);
}

int dlock_client_status(dlock_client *c, const char *name, size_t n_out,
                        dlock_node_status *out, dlock_lock_status *summary)
{
    static const name_call how = {status_check, status_run};
    return on_name(c, name, &how, &(status_args){n_out, out, summary});
}

typedef struct holders_args {
    size_t node;
    dlock_holders_info *info;
    dlock_holder *out;
    size_t max_out;
} holders_args;

static int holders_check(dlock_client *c, const void *args)
{
    const holders_args *a = args;
    if (!a->info || (a->max_out && !a->out))
        return DLOCK_EINVAL;
    if (!c->backend->holders)
        return DLOCK_ENOTSUP;
    return a->node >= c->backend->node_count(c) ? DLOCK_EINVAL : DLOCK_OK;
}

static int holders_run(dlock_client *c, const char *key, size_t klen, const void *args)
{
    const holders_args *a = args;
    return c->backend->holders(c, key, klen, a->node, a->info, a->out, a->max_out);
}

int dlock_client_holders(dlock_client *c, const char *name, size_t node,
                         dlock_holders_info *info, dlock_holder *out, size_t max_out)
{
    static const name_call how = {holders_check, holders_run};
    return on_name(c, name, &how, &(holders_args){node, info, out, max_out});
}

typedef struct identity_args {
    size_t node;
    char *buf;
    size_t len;
} identity_args;

static int identity_check(dlock_client *c, const void *args)
{
    const identity_args *a = args;
    if (!a->buf || a->len == 0)
        return DLOCK_EINVAL;
    a->buf[0] = '\0';
    if (!c->backend->identity)
        return DLOCK_ENOTSUP; /* a backend that keeps no identities */
    return a->node >= c->backend->node_count(c) ? DLOCK_EINVAL : DLOCK_OK;
}

static int identity_run(dlock_client *c, const char *key, size_t klen, const void *args)
{
    const identity_args *a = args;
    return c->backend->identity(c, key, klen, a->node, a->buf, a->len);
}

int dlock_client_identity(dlock_client *c, const char *name, size_t node, char *buf, size_t len)
{
    static const name_call how = {identity_check, identity_run};
    return on_name(c, name, &how, &(identity_args){node, buf, len});
}

typedef struct holder_identity_args {
    size_t node;
    const char *token;
    char *buf;
    size_t len;
} holder_identity_args;

static int holder_identity_check(dlock_client *c, const void *args)
{
    const holder_identity_args *a = args;
    if (!a->buf || a->len == 0)
        return DLOCK_EINVAL;
    a->buf[0] = '\0';
    if (!a->token || !a->token[0])
        return DLOCK_EINVAL;
    if (!c->backend->holder_identity)
        return DLOCK_ENOTSUP; /* etcd: one holder, dlock_client_identity() */
    return a->node >= c->backend->node_count(c) ? DLOCK_EINVAL : DLOCK_OK;
}

static int holder_identity_run(dlock_client *c, const char *key, size_t klen, const void *args)
{
    const holder_identity_args *a = args;
    return c->backend->holder_identity(c, key, klen, a->node, a->token, strlen(a->token), a->buf,
                                       a->len);
}

typedef struct delay_args {
    size_t node;
    int64_t *left_ms;
} delay_args;

static int delay_check(dlock_client *c, const void *args)
{
    const delay_args *a = args;
    if (!a->left_ms)
        return DLOCK_EINVAL;
    *a->left_ms = 0;
    if (!c->backend->lock_delay)
        return DLOCK_ENOTSUP; /* a store without lock-delays */
    return a->node >= c->backend->node_count(c) ? DLOCK_EINVAL : DLOCK_OK;
}

static int delay_run(dlock_client *c, const char *key, size_t klen, const void *args)
{
    const delay_args *a = args;
    return c->backend->lock_delay(c, key, klen, a->node, a->left_ms);
}

int dlock_client_lock_delay(dlock_client *c, const char *name, size_t node, int64_t *left_ms)
{
    static const name_call how = {delay_check, delay_run};
    return on_name(c, name, &how, &(delay_args){node, left_ms});
}

int dlock_client_holder_identity(dlock_client *c, const char *name, size_t node,
                                 const char *token, char *buf, size_t len)
{
    static const name_call how = {holder_identity_check, holder_identity_run};
    return on_name(c, name, &how, &(holder_identity_args){node, token, buf, len});
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

typedef struct break_args {
    uint64_t fence;
    dlock_break_result *result;
} break_args;

static int break_check(dlock_client *c, const void *args)
{
    (void)args;
    return c->backend->break_holds ? DLOCK_OK : DLOCK_ENOTSUP;
}

static int break_run(dlock_client *c, const char *key, size_t klen, const void *args)
{
    const break_args *a = args;
    dlock_break_result scratch;
    return c->backend->break_holds(c, key, klen, a->fence, a->result ? a->result : &scratch);
}

int dlock_client_break(dlock_client *c, const char *name, uint64_t fence,
                       dlock_break_result *result)
{
    static const name_call how = {break_check, break_run};
    return on_name(c, name, &how, &(break_args){fence, result});
}
