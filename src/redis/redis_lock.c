/* SPDX-License-Identifier: BSD-3-Clause */
/* The Redis part of a new handle (backend.h, lock_init and lock_clear):
 * the keys and arguments its kind's scripts take besides the lock key
 * (docs/design.md, "Key layout"), made once here. The engine makes the
 * lock key itself (the client's prefix + the name), which every store
 * names the lock by. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "handle.h"
#include "keys.h"
#include "kinds.h"
#include "redis_backend.h"

static char *helper(dlock_lock *l, const char *kind, size_t kind_len, size_t *out_len)
{
    return dlock__helper_key(l->client, l->name, l->name_len, kind, kind_len, out_len);
}

/* The holder identity's key and arguments (handle.h, id_*). */
static int ident_init(dlock_lock *l)
{
    static const char mark[] = "\0id:"; /* lib/ident.lua */
    size_t mlen = sizeof mark - 1, tlen = strlen(l->client->identity);
    l->id_key = helper(l, "id", 2, &l->id_len);
    l->id_arg = dlock__malloc(mlen + tlen + 1);
    if (!l->id_key || !l->id_arg)
        return DLOCK_ENOMEM;
    memcpy(l->id_arg, mark, mlen);
    memcpy(l->id_arg + mlen, l->client->identity, tlen + 1);
    l->id_arg_len = mlen + tlen;
    return DLOCK_OK;
}

/* The lock-delay's key and argument (handle.h, delay_*; lib/delay.lua):
 * none without a delay, so a handle without one sends what it sent
 * before. */
static int delay_init(dlock_lock *l)
{
    if (l->opts.lock_delay_ms <= 0)
        return DLOCK_OK;
    l->delay_key = helper(l, "delay", 5, &l->delay_len);
    if (!l->delay_key)
        return DLOCK_ENOMEM;
    /* A NUL byte and "dl:" (lib/delay.lua), then the ms. */
    l->delay_arg[0] = '\0';
    l->delay_arg_len = 1 + (size_t)snprintf(l->delay_arg + 1, sizeof l->delay_arg - 1,
                                            "dl:%" PRId64, l->opts.lock_delay_ms);
    return DLOCK_OK;
}

/* renew_batch.lua's mode: the kind's letter (in upper case with a delay),
 * the delay's part (lib/delay_batch.lua: ms, ':', key length, ':', key)
 * and the identity's key, each when the handle has it; the kind's own
 * letter alone when it has neither. */
static int mode_init(dlock_lock *l)
{
    if (!l->id_key && !l->delay_key)
        return DLOCK_OK;
    char head[64];
    int n = l->delay_key
                ? snprintf(head, sizeof head, "%" PRId64 ":%zu:", l->opts.lock_delay_ms, l->delay_len)
                : 0;
    size_t hlen = (size_t)n, len = 1 + hlen + l->delay_len + l->id_len;
    if (!(l->id_mode = dlock__malloc(len + 1)))
        return DLOCK_ENOMEM;
    char *at = l->id_mode;
    /* 'p', 'r' or 'z' (renew_batch.lua); 'P', 'R', 'Z' with a delay */
    *at++ = l->delay_key ? (char)(l->kind->renew_mode[0] - 'a' + 'A') : l->kind->renew_mode[0];
    memcpy(at, head, hlen);
    at += hlen;
    if (l->delay_key)
        memcpy(at, l->delay_key, l->delay_len);
    at += l->delay_len;
    if (l->id_key)
        memcpy(at, l->id_key, l->id_len);
    l->id_mode[len] = '\0';
    l->renewal.mode = l->id_mode;
    l->renewal.mode_len = len;
    return DLOCK_OK;
}

int dlock__redis_lock_init(dlock_lock *l)
{
    const dlock__kind *kind = l->kind;
    dlock_client *client = l->client;
    l->channel = dlock__wake_channel_for(client, l->name, l->name_len, &l->channel_len);
    int ok = l->channel != NULL;
    if (ok && (kind->fenced || kind->guards) && !(l->opts.flags & DLOCK_NO_FENCE))
        ok = (l->fence_key = helper(l, "fence", 5, &l->fence_len)) != NULL;
    if (ok && kind->aux_key)
        ok = (l->aux_key = helper(l, kind->aux_key, strlen(kind->aux_key), &l->aux_len)) != NULL;
    if (ok && kind->ident && client->identity)
        ok = ident_init(l) == DLOCK_OK;
    if (ok)
        ok = delay_init(l) == DLOCK_OK && mode_init(l) == DLOCK_OK;
    l->aux_arg_len = dlock__kind_aux_arg(kind, l->opts.retry_max_ms, l->permits, l->aux_arg,
                                         sizeof l->aux_arg);
    if (ok && kind->leave != DLOCK__S_NONE) { /* queued: the line and liveness keys */
        l->queue_key = helper(l, "q", 1, &l->queue_len);
        l->live_prefix = helper(l, "w\0", 2, &l->live_prefix_len);
        ok = l->queue_key && l->live_prefix;
    } else if (ok && kind->wake_one && client->n_nodes == 1 && !dlock__client_cluster(client)) {
        /* One waiter woken per release (docs/waiting.md, "Who is woken").
         * Not on Redlock: nodes that wake different waiters split the
         * vote. Not on a cluster: a script with keys that come and go gets
         * TRYAGAIN while its slot migrates. */
        ok = (l->wq_key = helper(l, "wq", 2, &l->wq_len)) != NULL;
        if (ok && kind->runs)
            ok = (l->wr_key = helper(l, "wr", 2, &l->wr_len)) != NULL;
    }
    return ok ? DLOCK_OK : DLOCK_ENOMEM;
}

void dlock__redis_lock_clear(dlock_lock *l, int forked)
{
    (void)forked; /* memory only either way */
    dlock__free(l->channel);
    dlock__free(l->fence_key);
    dlock__free(l->aux_key);
    dlock__free(l->id_key);
    dlock__free(l->id_arg);
    dlock__free(l->id_mode);
    dlock__free(l->delay_key);
    dlock__free(l->inbox);
    dlock__free(l->queue_key);
    dlock__free(l->live_prefix);
    dlock__free(l->wq_key);
    dlock__free(l->wr_key);
    dlock__free(l->owed_token);
}
