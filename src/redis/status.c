/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_status(), dlock_client_identity() and
 * dlock_client_lock_delay() on Redis: read-only looks at a lock (the public checks are inspect.c's). */
#include <string.h>

#include "client.h"
#include "error.h"
#include "redis_backend.h"
#include "fanout.h"
#include "keys.h"
#include "replies.h"
#include "scripts.h"

typedef struct status_ctx {
    dlock_node_status *out;
    size_t answered;
} status_ctx;

static int status_cb(void *arg, size_t node, uint32_t idx, int err,
                     const redisReply *r, const char *detail, int64_t start_ns)
{
    status_ctx *s = arg;
    dlock_node_status *o = &s->out[node];
    dlock__status_reply st;
    (void)idx;
    (void)detail;
    (void)start_ns;
    dlock__decode_status(err, r, &st);
    o->error = st.err;
    if (st.err == DLOCK_OK) {
        o->held = st.held;
        o->ttl_ms = st.ttl_ms;
        o->fence = st.fence;
        s->answered++;
    }
    return 0;
}

/* The verdict over all nodes: the same majority as an acquire's. */
static void summarize(const dlock_client *c, const dlock_node_status *st, dlock_lock_status *s)
{
    *s = (dlock_lock_status){DLOCK_STATUS_UNKNOWN, c->n_nodes, 0, 0, c->quorum};
    for (size_t i = 0; i < c->n_nodes; i++) {
        if (st[i].error != DLOCK_OK)
            continue;
        s->answered++;
        s->held_on += st[i].held != 0;
    }
    if (s->held_on >= s->quorum)
        s->state = DLOCK_STATUS_HELD;
    else if (s->answered >= s->quorum)
        s->state = s->held_on ? DLOCK_STATUS_PARTIAL : DLOCK_STATUS_FREE;
}

int dlock__redis_status(dlock_client *c, const char *key, size_t klen, dlock_node_status *out,
                        dlock_lock_status *summary)
{
    size_t flen = 0;
    char *fkey = dlock__helper_key(c, key, klen, "fence", 5, &flen);
    if (!fkey)
        return DLOCK_ENOMEM;
    const char *args[2] = {key, fkey};
    size_t lens[2] = {klen, flen};
    dlock__req req = {.script = dlock__script_get(DLOCK__S_STATUS), .numkeys = 2, .nargs = 2,
                      .args = args, .arglens = lens};
    dlock__fanout_opts fo = {.io_timeout_ms = c->opts.io_timeout_ms, .deadline_ns = INT64_MAX};
    status_ctx ctx = {out, 0};
    for (size_t i = 0; i < c->n_nodes; i++)
        out[i] = (dlock_node_status){DLOCK_EIO, 0, -1, 0};
    int rc = dlock__fanout(c, &req, 1, &fo, status_cb, &ctx);
    dlock__free(fkey);
    if (rc != DLOCK_OK)
        return rc;
    if (summary)
        summarize(c, out, summary);
    if (ctx.answered > 0)
        return DLOCK_OK;
    return c->n_nodes == 1 ? out[0].error : DLOCK_ENOQUORUM;
}

/* One node's status.lua with the identity hash (KEYS[3]): the holder's
 * identity, copied while the reply lives. */
typedef struct ident_ctx {
    char *buf;
    size_t len;
    int err;
} ident_ctx;

static int ident_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                    const char *detail, int64_t start_ns)
{
    ident_ctx *s = arg;
    dlock__status_reply st;
    (void)node;
    (void)idx;
    (void)detail;
    (void)start_ns;
    dlock__decode_status(err, r, &st);
    s->err = st.err;
    if (st.err == DLOCK_OK && st.held && st.identity) {
        size_t n = st.identity_len < s->len - 1 ? st.identity_len : s->len - 1;
        memcpy(s->buf, st.identity, n);
        s->buf[n] = '\0';
    }
    return 0;
}

int dlock__redis_identity(dlock_client *c, const char *key, size_t klen, size_t node, char *buf,
                          size_t len)
{
    size_t flen = 0, ilen = 0;
    char *fkey = dlock__helper_key(c, key, klen, "fence", 5, &flen);
    char *ikey = dlock__helper_key(c, key, klen, "id", 2, &ilen);
    int rc = fkey && ikey ? DLOCK_OK : DLOCK_ENOMEM;
    if (rc == DLOCK_OK) {
        const char *args[3] = {key, fkey, ikey};
        size_t lens[3] = {klen, flen, ilen};
        dlock__req req = {.script = dlock__script_get(DLOCK__S_STATUS), .numkeys = 3,
                          .nargs = 3, .args = args, .arglens = lens};
        uint8_t only[DLOCK__MAX_NODES] = {0};
        only[node] = 1;
        dlock__fanout_opts fo = {.io_timeout_ms = c->opts.io_timeout_ms,
                                 .deadline_ns = INT64_MAX, .only = only};
        ident_ctx ctx = {buf, len, DLOCK_EIO};
        buf[0] = '\0';
        rc = dlock__fanout(c, &req, 1, &fo, ident_cb, &ctx);
        if (rc == DLOCK_OK)
            rc = ctx.err;
    }
    dlock__free(fkey);
    dlock__free(ikey);
    return rc;
}

/* One node's delay_status.lua: the ms its lock-delay has left. */
typedef struct delay_ctx {
    int64_t left_ms;
    int err;
} delay_ctx;

static int delay_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                    const char *detail, int64_t start_ns)
{
    delay_ctx *s = arg;
    (void)node;
    (void)idx;
    (void)detail;
    (void)start_ns;
    if (err != DLOCK_OK)
        s->err = err;
    else if (!r || r->type != REDIS_REPLY_INTEGER || r->integer < 0)
        s->err = r && r->type == REDIS_REPLY_ERROR ? DLOCK_EIO : DLOCK_EPROTO;
    else {
        s->err = DLOCK_OK;
        s->left_ms = r->integer;
    }
    return 0;
}

int dlock__redis_lock_delay(dlock_client *c, const char *key, size_t klen, size_t node,
                            int64_t *left_ms)
{
    size_t dlen = 0;
    char *dkey = dlock__helper_key(c, key, klen, "delay", 5, &dlen);
    if (!dkey)
        return DLOCK_ENOMEM;
    const char *args[2] = {key, dkey};
    size_t lens[2] = {klen, dlen};
    dlock__req req = {.script = dlock__script_get(DLOCK__S_DELAY_STATUS), .numkeys = 2,
                      .nargs = 2, .args = args, .arglens = lens};
    uint8_t only[DLOCK__MAX_NODES] = {0};
    only[node] = 1;
    dlock__fanout_opts fo = {.io_timeout_ms = c->opts.io_timeout_ms, .deadline_ns = INT64_MAX,
                             .only = only};
    delay_ctx ctx = {0, DLOCK_EIO};
    int rc = dlock__fanout(c, &req, 1, &fo, delay_cb, &ctx);
    dlock__free(dkey);
    if (rc == DLOCK_OK && (rc = ctx.err) == DLOCK_OK)
        *left_ms = ctx.left_ms;
    return rc;
}
