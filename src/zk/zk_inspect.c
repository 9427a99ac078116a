/* SPDX-License-Identifier: BSD-3-Clause */
/* What a client asks about a name without a handle (backend.h: status,
 * holders) on ZooKeeper: the lock's line read, its owner the node with the
 * lowest sequence, its fence that node's czxid. Each is a call waited for
 * on a private loop of the caller's (a blocking look). The TTL is -1: a
 * holder lives as long as its session, which the server times. */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "client.h"
#include "loop_poll.h"
#include "zk_lock.h"
#include "zk_session.h"

#define ZK(c) ((dlock__zk *)(c)->store)

typedef struct looking {
    dlock__zk_call c;
    int done;
} looking;

static void looked(dlock__zk_call *c)
{
    DLOCK__OWNER(c, looking, c)->done = 1;
}

static int look_done(void *arg)
{
    return ((looking *)arg)->done;
}

/* One call, waited for on a loop of the caller's own. */
static int look_once(dlock__zk *z, looking *k, int what, const char *path)
{
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    k->done = 0;
    k->c.what = what;
    k->c.done = looked;
    (void)dlock__zk_path_set(k->c.path, path, NULL);
    int rc = dlock__zk_call_start(z, &k->c, &lp.loop);
    if (rc == DLOCK_OK)
        (void)dlock__loop_poll_run(&lp, look_done, k, INT64_MAX);
    dlock__loop_poll_close(&lp);
    return rc;
}

/* The owner of the lock at key: its node's name ("" free) and czxid. */
static int read_owner(dlock__zk *z, const char *key, char *owner, uint64_t *fence)
{
    char path[DLOCK__ZK_PATH_MAX], first[DLOCK__ZK_PATH_MAX] = "";
    owner[0] = '\0';
    *fence = 0;
    if (!dlock__zk_lock_path(path, sizeof path, key))
        return DLOCK_EINVAL;
    looking k = {0};
    int rc = look_once(z, &k, DLOCK__ZK_CHILDREN, path);
    int64_t best = -1;
    for (size_t i = 0; rc == DLOCK_OK && i < k.c.n_children; i++) {
        int64_t s = dlock__zk_node_seq(k.c.children[i]);
        if (s >= 0 && (best < 0 || s < best)) {
            best = s;
            (void)(dlock__zk_path_set(first, path, "/") &&
                   dlock__zk_path_set(first, first, k.c.children[i]));
        }
    }
    if (rc == DLOCK_OK && k.c.zrc != ZOK && k.c.zrc != ZNONODE)
        rc = dlock__zk_error(k.c.zrc);
    if (rc == DLOCK_OK && first[0]) {
        rc = look_once(z, &k, DLOCK__ZK_EXISTS, first);
        if (rc == DLOCK_OK && k.c.zrc == ZOK) { /* (ZNONODE: released since) */
            (void)dlock__zk_path_set(owner, strrchr(first, '/') + 1, NULL);
            *fence = (uint64_t)k.c.stat.czxid;
        }
    }
    dlock__zk_call_clear(&k.c);
    return rc;
}

int dlock__zk_status(dlock_client *c, const char *key, size_t klen, dlock_node_status *out,
                     dlock_lock_status *summary)
{
    (void)klen;
    char owner[DLOCK__ZK_PATH_MAX];
    uint64_t fence;
    int rc = read_owner(ZK(c), key, owner, &fence);
    int held = rc == DLOCK_OK && owner[0];
    *out = (dlock_node_status){.error = rc, .held = held, .ttl_ms = -1, .fence = fence};
    if (summary)
        *summary = (dlock_lock_status){.state = rc != DLOCK_OK ? DLOCK_STATUS_UNKNOWN
                                                : held         ? DLOCK_STATUS_HELD
                                                               : DLOCK_STATUS_FREE,
                                       .nodes = 1, .answered = rc == DLOCK_OK,
                                       .held_on = (size_t)held, .quorum = 1};
    return rc;
}

int dlock__zk_holders(dlock_client *c, const char *key, size_t klen, size_t node,
                      dlock_holders_info *info, dlock_holder *out, size_t max_out)
{
    (void)klen, (void)node; /* one node: the engine checked it */
    char owner[DLOCK__ZK_PATH_MAX];
    uint64_t fence;
    int rc = read_owner(ZK(c), key, owner, &fence);
    if (rc != DLOCK_OK)
        return rc;
    *info = (dlock_holders_info){.mode = owner[0] ? DLOCK_HOLD_EXCLUSIVE : DLOCK_HOLD_FREE,
                                 .permits = 0, .count = owner[0] ? 1 : 0,
                                 .writer_waiting_ms = -1};
    if (owner[0] && max_out > 0) {
        size_t n = strnlen(owner, sizeof out[0].token - 1); /* a node name is ~55 bytes */
        memcpy(out[0].token, owner, n);
        out[0].token[n] = '\0';
        out[0].ttl_ms = -1;
    }
    return DLOCK_OK;
}
