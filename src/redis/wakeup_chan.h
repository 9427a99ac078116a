/* SPDX-License-Identifier: BSD-3-Clause */
/* The wake-up thread's channel table (wakeup.c): which waiters watch which
 * pub/sub channel, and what a message on a channel wakes. No I/O here; the
 * caller holds the wake-up thread's mutex around every call. */
#ifndef DLOCK_WAKEUP_CHAN_H
#define DLOCK_WAKEUP_CHAN_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "waiter.h"

typedef struct dlock__watcher {
    dlock__waiter *lock;
    struct dlock__watcher *next;
} dlock__watcher;

typedef struct dlock__chan {
    char *name;
    size_t len;
    dlock__watcher *watchers;
    int64_t idle_since_ns; /* 0 while watched */
    uint8_t sent[DLOCK__MAX_NODES];      /* SUBSCRIBE sent on node i */
    uint8_t confirmed[DLOCK__MAX_NODES]; /* ... and confirmed */
    /* Cluster: the channel's hash slot and the master it is subscribed
     * on (-1: none yet), with SSUBSCRIBE: sharded pub/sub keeps a
     * release's message on the lock's shard. */
    unsigned slot;
    int master;
    int inbox; /* a client's inbox for a lock (keys.h), not a lock's channel */
    struct dlock__chan *next;
} dlock__chan;

/* The channel called name in the list, or NULL. */
dlock__chan *dlock__chan_find(dlock__chan *list, const char *name, size_t len);

/* Put watcher w on channel name (an inbox if `inbox`), made and put first
 * in *list if new (*made = 1: the thread must subscribe it). NULL: out of
 * memory, w put nowhere. */
dlock__chan *dlock__chan_join(dlock__chan **list, const char *name, size_t len, int inbox,
                              dlock__watcher *w, int *made);

/* Take waiter l's watcher off channel name, if it is there. Returns 1 when
 * nobody watches the channel any more (it lingers from now). */
int dlock__chan_leave(dlock__chan *list, const char *name, size_t len, const dlock__waiter *l);

/* Deliver one message on ch: "r" wakes everyone; "w ID" the waiter listed
 * as ID (and those that are not listed); "g TOKEN FENCE" only the waiter
 * the lock was handed to. */
void dlock__chan_deliver(dlock__chan *ch, const char *msg, size_t len);

/* Wake every watcher of ch: it may have missed a message, it must look. */
void dlock__chan_wake_all(dlock__chan *ch);

/* Call the wake hook of every watcher of every channel in list, without
 * a wake-up (their count stays): a subscription was confirmed or refused,
 * and an engine's wait for that (acquire.c) looks again. */
void dlock__chan_poke_all(dlock__chan *list);

/* Free every channel of *list and its watchers; *list becomes NULL. */
void dlock__chan_free_all(dlock__chan **list);

#endif
