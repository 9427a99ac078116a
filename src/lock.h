/* SPDX-License-Identifier: BSD-3-Clause */
/* The lock handle's internals, shared with the watchdog and wake-up code. */
#ifndef DLOCK_LOCK_H
#define DLOCK_LOCK_H

#include <pthread.h>
#include <stdatomic.h>

#include "common.h"
#include "error.h"

struct dlock_lock {
    dlock_client *client;
    dlock_lock_options opts;
    char ttl_s[24]; /* opts.ttl_ms in decimal, formatted once */
    size_t ttl_s_len;
    char *name; /* the Redis key: client key_prefix + the name given */
    size_t name_len;
    size_t prefix_len; /* dlock_lock_name() is name + prefix_len */
    char *fence_key; /* NULL with DLOCK_NO_FENCE */
    size_t fence_len;
    char *channel; /* wake-up channel: "dlock:wake:" + key */
    size_t channel_len;
    char *queue_key; /* fair mode: the waiters' list */
    size_t queue_len;
    char *live_prefix; /* fair mode: prefix of the waiters' liveness keys */
    size_t live_prefix_len;

    /* mu guards everything below that another thread may touch: state,
     * valid_until_ns, canceled, woken, and the watchdog's fields. */
    pthread_mutex_t mu;
    pthread_cond_t cond; /* waiting acquire sleeps here */
    dlock_lock_state state;
    int canceled;
    /* A waiting acquire's self-pipe ({-1, -1} otherwise): cancel writes a
     * byte so that a round trip in flight stops at once, not after the
     * I/O timeout. Made and closed by the acquiring thread; the write end
     * is used under mu. */
    int cancel_fd[2];
    unsigned woken; /* bumped by the wake-up thread on a release message */
    int64_t valid_until_ns; /* INT64_MIN: unknown (adopted) */
    /* Fair mode: the wake-up thread saw a release script hand the lock to
     * our token, with this fencing token. */
    int handed_over;
    uint64_t handed_fence;

    /* Touched only by the thread using the handle. */
    /* The owner token: token_inline for dlock's own tokens and reentrant
     * owner ids, the heap only for a longer token given to adopt(). */
    char *token;
    size_t token_len;
    char token_inline[64];
    uint64_t fence;
    unsigned holds;
    /* Reentrant mode: an attempt whose outcome stayed unknown on the nodes
     * flagged in undo_nodes, and whose undo (reentrant_undo.lua with its
     * attempt number undo_seq) has not been answered there yet. No newer
     * attempt is sent before it is: the undo relies on that. */
    uint64_t undo_seq;
    int undo_pending;
    uint8_t undo_nodes[DLOCK__MAX_NODES];
    /* Reentrant mode: the release operation (number rel_seq, dropping
     * rel_n holds) being sent, and, while rel_pending, the nodes in
     * rel_nodes that have not answered it: it is sent again (applied at
     * most once) before this handle's next operation. rel_extra: holds
     * the handle dropped locally after that release failed, released in
     * one more operation once it is answered. */
    uint64_t rel_seq;
    unsigned rel_n, rel_extra;
    int rel_pending;
    uint8_t rel_nodes[DLOCK__MAX_NODES];
    /* Reentrant mode: this handle's id among its owner's handles (the
     * scripts keep their operation numbers per handle), and whether an
     * operation of its current holds had an unknown outcome (then its
     * bookkeeping stays in the hash until the key goes). */
    char hid[24];
    size_t hid_len;
    int in_doubt;
    int touched; /* sent an acquire: its bookkeeping may be in the key */
    /* Fair mode: an acquire ended with an unknown outcome, and the cleanup
     * by its token (leave the line; release, handing over, if it was
     * granted) has not been answered yet. The token is kept for it. */
    int fair_cleanup_pending;
    _Atomic int64_t holder_ttl_ms; /* read by any thread (progress reports) */
    int split_vote; /* the last attempt met a split vote, not one holder */
    dlock__errbuf err;

    /* The TTL the watchdog renews to: opts.ttl_ms, or the TTL of the last
     * successful extend of this hold. Written by the handle's thread only
     * while the lock is not registered with the watchdog. */
    int64_t renew_ttl_ms;

    /* Watchdog bookkeeping (watchdog.c), under the watchdog's mutex. */
    int wd_registered;
    int wd_in_round;
    int64_t wd_next_ns;
    struct dlock_lock *wd_prev, *wd_next;
};

/* Mark an auto-renewed lock lost (watchdog thread). Returns 1 if it was
 * held and is now lost (call on_lost once), 0 otherwise. */
int dlock__lock_mark_lost(dlock_lock *lock);

/* A helper key of the lock key `key`: key NUL kind (docs/design.md, "Key
 * layout"): under the lock key's prefix, in its hash slot when the key has a
 * {tag}, and never equal to a lock key or another lock's helper key. */
char *dlock__derived_key(const char *key, size_t len, const char *kind,
                         size_t kind_len, size_t *out_len);
/* The fencing counter key: key NUL "fence". */
char *dlock__fence_key(const char *key, size_t len, size_t *out_len);
/* The Redis key of lock `name`: the client's key_prefix + name. */
char *dlock__lock_key(const dlock_client *client, const char *name, size_t len,
                      size_t *out_len);

#endif
