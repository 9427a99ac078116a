/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_break() on Redis: break.lua on every node (the public
 * checks are inspect.c's). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "error.h"
#include "fanout.h"
#include "keys.h"
#include "redis_backend.h"
#include "scripts.h"

typedef struct break_ctx {
    dlock_break_result *out;
    int err;       /* the last node's error */
    int wrongtype; /* a node said the key is not a lock */
    int refused;   /* a node's counter was above the fence asked for */
    int check;     /* a check round: it removes nothing, so counts no removal */
} break_ctx;

static int break_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                    const char *detail, int64_t start_ns)
{
    break_ctx *b = arg;
    (void)node;
    (void)idx;
    (void)detail;
    (void)start_ns;
    if (err == DLOCK_OK && r->type == REDIS_REPLY_ERROR)
        err = dlock__map_redis_error(r->str, r->len);
    if (err == DLOCK_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
         r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER ||
         r->element[2]->type != REDIS_REPLY_INTEGER || r->element[0]->integer < -1))
        err = DLOCK_EPROTO;
    if (err != DLOCK_OK) {
        b->err = err;
        b->wrongtype |= err == DLOCK_EWRONGTYPE;
        return 0;
    }
    dlock_break_result *o = b->out;
    uint64_t fence = r->element[2]->integer > 0 ? (uint64_t)r->element[2]->integer : 0;
    o->answered++;
    if (fence > o->fence)
        o->fence = fence;
    if (r->element[0]->integer < 0) { /* a grant came since the fence asked for */
        b->refused = 1;
        return 0;
    }
    size_t removed = (size_t)r->element[0]->integer;
    if (removed > 0)
        o->mode = (dlock_hold_mode)r->element[1]->integer; /* what the name was */
    if (b->check)
        return 0; /* it would be removed, but this round removes nothing */
    if (removed > 0)
        o->removed_on++;
    if (removed > o->removed)
        o->removed = removed;
    return 0;
}

/* One round of break.lua on every node; check: remove nothing. */
static int break_round(dlock_client *c, const char **args, size_t *lens, int check,
                       dlock_break_result *out, break_ctx *ctx)
{
    args[5] = "check";
    lens[5] = 5;
    dlock__req req = {.script = dlock__script_get(DLOCK__S_BREAK), .numkeys = 3,
                      .nargs = check ? 6 : 5, .args = args, .arglens = lens};
    dlock__fanout_opts fo = {.io_timeout_ms = c->opts.io_timeout_ms, .deadline_ns = INT64_MAX};
    *out = (dlock_break_result){0, DLOCK_HOLD_FREE, 0, 0, 0, c->n_nodes, c->quorum};
    *ctx = (break_ctx){out, DLOCK_EIO, 0, 0, check};
    return dlock__fanout(c, &req, 1, &fo, break_cb, ctx);
}

int dlock__redis_break(dlock_client *c, const char *key, size_t klen, uint64_t fence,
                       dlock_break_result *out)
{
    char want[24];
    size_t wlen = (size_t)snprintf(want, sizeof want, "%" PRIu64, fence);
    size_t flen = 0, chlen = 0, ilen = 0;
    char *fkey = dlock__helper_key(c, key, klen, "fence", 5, &flen);
    /* The holder identity goes with the holds, whether or not this client
     * keeps identities (lib/ident.lua). */
    char *ikey = dlock__helper_key(c, key, klen, "id", 2, &ilen);
    char *ch = dlock__wake_channel_for(c, key, klen, &chlen);
    if (!fkey || !ikey || !ch) {
        dlock__free(fkey);
        dlock__free(ikey);
        dlock__free(ch);
        return DLOCK_ENOMEM;
    }
    const char *args[6] = {key, fkey, ikey, ch, want, NULL};
    size_t lens[6] = {klen, flen, ilen, chlen, wlen, 0};
    break_ctx ctx;
    int rc = DLOCK_OK;
    /* Guarded on several nodes: every node's counter first, so that a
     * grant seen on one node breaks nothing anywhere (the delete round
     * below still checks each node, for a grant in between). */
    if (fence && c->n_nodes > 1 && (rc = break_round(c, args, lens, 1, out, &ctx)) == DLOCK_OK &&
        ctx.refused)
        rc = DLOCK_ENOTOWNER;
    if (rc == DLOCK_OK)
        rc = break_round(c, args, lens, 0, out, &ctx);
    dlock__free(fkey);
    dlock__free(ikey);
    dlock__free(ch);
    if (rc != DLOCK_OK)
        return rc;
    if (ctx.refused)
        return DLOCK_ENOTOWNER;
    if (out->answered >= c->quorum)
        return DLOCK_OK;
    if (ctx.wrongtype)
        return DLOCK_EWRONGTYPE;
    return c->n_nodes == 1 ? ctx.err : DLOCK_ENOQUORUM;
}
