/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_holders(): who holds a name on one node, read-only
 * (holders.lua): the holders of a shared lock or a semaphore with what is
 * left of each lease, or the one holder of an exclusive lock; and
 * dlock_client_holder_identity(): what one of them keeps as its identity
 * (lib/ident.lua: a field of KEY NUL "id" per holder token). */
#include <string.h>

#include "client.h"
#include "cluster.h"
#include "fanout.h"
#include "keys.h"
#include "redis_backend.h"
#include "replies.h"
#include "scripts.h"

typedef struct holders_ctx {
    dlock_holders_info *info;
    dlock_holder *out;
    size_t max_out;
    int err;
} holders_ctx;

static int holders_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                      const char *detail, int64_t start_ns)
{
    holders_ctx *h = arg;
    dlock__holders_reply d;
    (void)node;
    (void)idx;
    (void)detail;
    (void)start_ns;
    dlock__decode_holders(err, r, &d);
    h->err = d.err;
    if (d.err != DLOCK_OK)
        return 0;
    /* A foreign key (mode 5) has no holders: its one pair is its type. */
    *h->info = (dlock_holders_info){(dlock_hold_mode)d.mode,
                                    d.permits > 0 ? (unsigned)d.permits : 0,
                                    d.mode == DLOCK_HOLD_FOREIGN ? 0 : d.count, d.mark_ms};
    for (size_t i = 0; i < d.count && i < h->max_out; i++) {
        const redisReply *t = dlock__holders_token(r, i);
        size_t n = t->len < DLOCK_TOKEN_MAX ? t->len : DLOCK_TOKEN_MAX;
        memcpy(h->out[i].token, t->str, n);
        h->out[i].token[n] = '\0';
        h->out[i].ttl_ms = dlock__holders_ttl(r, i);
    }
    return 0;
}

int dlock__redis_holders(dlock_client *c, const char *key, size_t klen, size_t node,
                         dlock_holders_info *info, dlock_holder *out, size_t max_out)
{
    size_t mlen = 0;
    char *mark = dlock__helper_key(c, key, klen, "ww", 2, &mlen);
    if (!mark)
        return DLOCK_ENOMEM;
    const char *args[2] = {key, mark};
    size_t lens[2] = {klen, mlen};
    dlock__req req = {.script = dlock__script_get(DLOCK__S_HOLDERS), .numkeys = 2, .nargs = 2,
                      .args = args, .arglens = lens};
    uint8_t only[DLOCK__MAX_NODES] = {0};
    only[node] = 1;
    dlock__fanout_opts fo = {.io_timeout_ms = c->opts.io_timeout_ms, .deadline_ns = INT64_MAX,
                             .only = only};
    holders_ctx h = {info, out, max_out, DLOCK_EIO};
    *info = (dlock_holders_info){DLOCK_HOLD_FREE, 0, 0, -1};
    int rc = dlock__fanout(c, &req, 1, &fo, holders_cb, &h);
    dlock__free(mark);
    return rc != DLOCK_OK ? rc : h.err;
}

/* One HGET's answer, copied while the reply lives: a string is the
 * identity, nil none. */
typedef struct hident_ctx {
    char *buf;
    size_t len;
    int err;
} hident_ctx;

static int hident_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                     const char *detail, int64_t start_ns)
{
    hident_ctx *h = arg;
    (void)node;
    (void)idx;
    (void)detail;
    (void)start_ns;
    if (err != DLOCK_OK || !r)
        h->err = err != DLOCK_OK ? err : DLOCK_EIO;
    else if (r->type == REDIS_REPLY_ERROR) /* WRONGTYPE, an ACL without HGET */
        h->err = DLOCK_EREFUSED;
    else if (r->type == REDIS_REPLY_NIL)
        h->err = DLOCK_OK;
    else if (r->type != REDIS_REPLY_STRING)
        h->err = DLOCK_EPROTO;
    else {
        size_t n = r->len < h->len - 1 ? r->len : h->len - 1;
        memcpy(h->buf, r->str, n);
        h->buf[n] = '\0';
        h->err = DLOCK_OK;
    }
    return 0;
}

int dlock__redis_holder_identity(dlock_client *c, const char *key, size_t klen, size_t node,
                                 const char *token, size_t tlen, char *buf, size_t len)
{
    size_t ilen = 0;
    char *ikey = dlock__helper_key(c, key, klen, "id", 2, &ilen);
    if (!ikey)
        return DLOCK_ENOMEM;
    const char *args[3] = {"HGET", ikey, token};
    size_t lens[3] = {4, ilen, tlen};
    dlock__req req = {.script = NULL, .numkeys = 0, .nargs = 3, .args = args, .arglens = lens};
    uint8_t only[DLOCK__MAX_NODES] = {0};
    only[node] = 1;
    /* A raw command names no keys for the router: on a Cluster, the
     * lock's slot, which its helper keys share (keys.c). */
    dlock__fanout_opts fo = {
        .io_timeout_ms = c->opts.io_timeout_ms, .deadline_ns = INT64_MAX, .only = only,
        .cluster_slot = dlock__client_cluster(c) ? dlock__cluster_keyslot(key, klen) + 1 : 0};
    hident_ctx h = {buf, len, DLOCK_EIO};
    buf[0] = '\0';
    int rc = dlock__fanout(c, &req, 1, &fo, hident_cb, &h);
    dlock__free(ikey);
    return rc != DLOCK_OK ? rc : h.err;
}
