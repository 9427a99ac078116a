/* SPDX-License-Identifier: BSD-3-Clause */
/* What a client asks about a name without a handle (backend.h: status,
 * holders) on ZooKeeper: the lock's line read, its owner the node with the
 * lowest sequence, its fence that node's czxid. Each is a call waited for
 * on a private loop of the caller's (a blocking look). The TTL is -1: a
 * holder lives as long as its session, which the server times. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "client.h"
#include "zk_lock.h"
#include "zk_session.h"

#define ZK(c) ((dlock__zk *)(c)->store)

/* One call, waited for on a loop of the caller's own. */
static int look_once(dlock__zk *z, dlock__zk_call *c, int what, const char *path)
{
    c->what = what;
    (void)dlock__zk_path_set(c->path, path, NULL);
    return dlock__zk_call_wait(z, c);
}

/* Who holds the lock at key: the node with the lowest sequence, or, when
 * that is a reader's, every reader before the first writer (Curator's
 * read-write lock); their names (up to max, each DLOCK__ZK_PATH_MAX
 * bytes) and count, and an exclusive owner's czxid as the fence (readers
 * have none). */
typedef struct holding {
    size_t count;
    int shared;
    uint64_t fence;
} holding;

static int read_holders(dlock__zk *z, const char *key, char (*names)[DLOCK__ZK_PATH_MAX],
                        size_t max, holding *h)
{
    char path[DLOCK__ZK_PATH_MAX], first[DLOCK__ZK_PATH_MAX] = "";
    *h = (holding){0};
    if (!dlock__zk_lock_path(path, sizeof path, key))
        return DLOCK_EINVAL;
    dlock__zk_call k = {0};
    int rc = look_once(z, &k, DLOCK__ZK_CHILDREN, path);
    if (rc == DLOCK_OK && k.zrc != ZOK && k.zrc != ZNONODE)
        rc = dlock__zk_error(k.zrc);
    int64_t lowest = -1, first_writer = INT64_MAX;
    int role = 0;
    for (size_t i = 0; rc == DLOCK_OK && i < k.n_children; i++) {
        int64_t s = dlock__zk_node_seq(k.children[i], &role);
        if (s < 0)
            continue;
        if (lowest < 0 || s < lowest) {
            lowest = s;
            (void)dlock__zk_path_set(first, k.children[i], NULL);
        }
        if (role != DLOCK__ZK_READ && s < first_writer)
            first_writer = s;
    }
    if (lowest >= 0 && lowest < first_writer) { /* readers hold */
        h->shared = 1;
        for (size_t i = 0; i < k.n_children; i++) {
            int64_t s = dlock__zk_node_seq(k.children[i], &role);
            if (s >= 0 && s < first_writer && h->count++ < max)
                (void)dlock__zk_path_set(names[h->count - 1], k.children[i], NULL);
        }
    } else if (lowest >= 0) {
        char node[DLOCK__ZK_PATH_MAX];
        (void)(dlock__zk_path_set(node, path, "/") && dlock__zk_path_set(node, node, first));
        rc = look_once(z, &k, DLOCK__ZK_EXISTS, node);
        if (rc == DLOCK_OK && k.zrc == ZOK) { /* (ZNONODE: released since) */
            h->count = 1;
            h->fence = (uint64_t)k.stat.czxid;
            if (max > 0)
                (void)dlock__zk_path_set(names[0], first, NULL);
        }
    }
    dlock__zk_call_clear(&k);
    return rc;
}

int dlock__zk_status(dlock_client *c, const char *key, size_t klen, dlock_node_status *out,
                     dlock_lock_status *summary)
{
    (void)klen;
    holding h;
    int rc = read_holders(ZK(c), key, NULL, 0, &h);
    int held = rc == DLOCK_OK && h.count > 0;
    *out = (dlock_node_status){.error = rc, .held = held, .ttl_ms = -1, .fence = h.fence};
    if (summary)
        *summary = (dlock_lock_status){.state = rc != DLOCK_OK ? DLOCK_STATUS_UNKNOWN
                                                : held         ? DLOCK_STATUS_HELD
                                                               : DLOCK_STATUS_FREE,
                                       .nodes = 1, .answered = rc == DLOCK_OK,
                                       .held_on = (size_t)held, .quorum = 1};
    return rc;
}

/* Holder names kept per call: a node name is ~55 bytes. */
#define HOLDERS_MAX 64

int dlock__zk_holders(dlock_client *c, const char *key, size_t klen, size_t node,
                      dlock_holders_info *info, dlock_holder *out, size_t max_out)
{
    (void)klen, (void)node; /* one node: the engine checked it */
    static const size_t cap = HOLDERS_MAX;
    char(*names)[DLOCK__ZK_PATH_MAX] = dlock__calloc(cap, sizeof *names);
    if (!names)
        return DLOCK_ENOMEM;
    holding h;
    int rc = read_holders(ZK(c), key, names, max_out < cap ? max_out : cap, &h);
    if (rc == DLOCK_OK) {
        *info = (dlock_holders_info){.mode = !h.count   ? DLOCK_HOLD_FREE
                                             : h.shared ? DLOCK_HOLD_SHARED
                                                        : DLOCK_HOLD_EXCLUSIVE,
                                     .count = h.count, .writer_waiting_ms = -1};
        for (size_t i = 0; i < h.count && i < max_out && i < cap; i++) {
            size_t n = strnlen(names[i], sizeof out[i].token - 1);
            memcpy(out[i].token, names[i], n);
            out[i].token[n] = '\0';
            out[i].ttl_ms = -1;
        }
    }
    dlock__free(names);
    return rc;
}
