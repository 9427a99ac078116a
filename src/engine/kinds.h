/* SPDX-License-Identifier: BSD-3-Clause */
/* Lock kinds. A handle's kind is fixed at dlock_lock_new() from its flags;
 * one const table says, per kind, what it is (counted, fenced, queued, its
 * helper key, how it wakes) and how a waiting acquire goes. The lock path
 * reads the table instead of testing flags, so a new kind (shared,
 * semaphore: issue 17) is a new row here, its row of Redis
 * steps (src/redis/kind_steps.c) and its scripts, and, if it waits
 * differently, a wait style of its own (a loop in its own file). */
#ifndef DLOCK_KINDS_H
#define DLOCK_KINDS_H

#include <stdint.h>

#include "common.h"
#include "scripts.h"

/* A step the kind has no script for. */
#define DLOCK__S_NONE DLOCK__S_COUNT

typedef enum dlock__kind_id {
    DLOCK__KIND_PLAIN,   /* one owner token per hold */
    DLOCK__KIND_COUNTED, /* DLOCK_REENTRANT: holds counted per owner */
    DLOCK__KIND_FAIR,    /* DLOCK_FAIR: waiters served in line */
    DLOCK__KIND_EXCLUSIVE, /* DLOCK_EXCLUSIVE: writer of a read-write lock */
    DLOCK__KIND_SHARED,    /* DLOCK_SHARED: one of many readers, own lease */
    DLOCK__KIND_SEMAPHORE, /* dlock_semaphore_new(): N leased permits */
    DLOCK__KIND_SHARED_COUNTED, /* DLOCK_SHARED | DLOCK_REENTRANT */
    DLOCK__KIND_EXCLUSIVE_COUNTED, /* DLOCK_EXCLUSIVE | DLOCK_REENTRANT */
    DLOCK__KIND_COUNT
} dlock__kind_id;

/* How a waiting acquire of the kind goes (the engine's wait, acquire.c,
 * drives both; a queued kind also begins its wait and may be handed the
 * hold by a message: backend.h, begin and handed). */
typedef enum dlock__wait_style {
    DLOCK__WAIT_RETRY, /* attempts with backoff, woken by release messages */
    DLOCK__WAIT_QUEUE, /* a place in line, handed the lock in turn */
    DLOCK__WAIT_COUNT
} dlock__wait_style;

typedef struct dlock__kind {
    dlock__kind_id id;
    const char *name;
    int counted;               /* holds counted per owner (re-entry, op numbers) */
    /* Re-entry counted in the handle, not the server: the handle's one
     * member (token OWNER#RANDOM, OWNER the counted kinds' owner id) stays
     * until its last release; a re-entry renews its lease; a first hold of
     * an owner that holds through another handle passes a writer's mark. */
    int reenter;
    int multi_node;            /* may span several masters (Redlock) */
    /* The queued kinds' leave-the-line script (DLOCK__S_NONE: not
     * queued), which lock.c reads to make the line's keys. The other steps'
     * scripts are the backend's: src/redis/kind_steps.c. */
    dlock__script_id leave;
    const char *renew_mode;    /* renew_batch.lua's mode argument */
    dlock__wait_style wait;    /* how a waiting acquire goes */
    int fenced;                /* keeps a fencing counter (unless DLOCK_NO_FENCE) */
    /* Holds no fence, but each grant raises the name's fencing counter
     * (unless DLOCK_NO_FENCE) and syncs it on several masters as a fenced
     * kind's: a reader's, so that the counter status shows for a name its
     * readers hold is a guard for dlock_client_break() that a later
     * grant, a writer's or another reader's, moves past. */
    int guards;
    int adopt;                 /* dlock_lock_adopt() may give it a token */
    /* The kind's extra key and argument of its acquire script: a helper
     * key KEY NUL aux_key (NULL: none), sent after the fencing counter, and
     * an argument after the TTL (what aux_arg says to send). */
    const char *aux_key;
    enum { DLOCK__AUX_NONE, DLOCK__AUX_MARK_MS, DLOCK__AUX_ZERO, DLOCK__AUX_PERMITS } aux_arg;
    /* Its acquire and release scripts keep a waiter list (lib/waitq.lua),
     * so a release wakes one listed waiter, not every subscriber (issue
     * 20). Kinds without it (readers, permits: a release may let several
     * in) wait unlisted and wake on every release message. */
    int wake_one;
    /* With wake_one, on one node: a contended holder keeps the lock for a
     * run and hands it to the longest waiter when the run ends
     * (lib/waitq.lua, docs/waiting.md "Runs and turns"). Only the plain
     * kind: the turn is a string in the lock key that its acquire script
     * alone knows. */
    int runs;
    /* A wake-up addressed to one of its waiters (a "w ID" wake-up or a
     * fair hand-over) may go to that waiter's process alone: on one node
     * its wait id or fair token names a channel of the waiting client's
     * (docs/waiting.md, "Addressed wake-ups"). Writers have none: readers,
     * which wait unlisted on the lock's channel, share their names, and
     * must see the release that wakes a writer. */
    int inbox;
    /* DLOCK_NO_FENCE's first try may be a bare SET NX PX (first_try.c):
     * the kind's lock key is a plain string its acquire script alone sets. */
    int raw_first_try;
    /* The holder identity (dlock_client_options.identity) is kept for it
     * (lib/ident.lua): one holder at a time, a plain string (the plain and
     * fair scripts) or a reentrant hash (the reentrant_*.lua scripts), or
     * one field per lease of a shared lock or semaphore (zlease.lua). */
    int ident;
    /* The kind a store whose locks are one line of owners serves for it
     * (etcd; ZooKeeper's recipe is the same shape): the kind itself,
     * waiting in line (a writer behind every key, a reader behind every
     * key that is not a reader's; a semaphore's holders the N first
     * owners), or DLOCK__KIND_COUNT: none. A backend of that shape
     * answers kind_for (backend.h) with dlock__kind_in_line(). */
    dlock__kind_id in_line;
} dlock__kind;

/* The kind for a lock's flags (flags no kind combines give NULL), or for
 * a semaphore (permits > 0). A set of names has no kind: each of its names
 * has its own (set.c). */
const dlock__kind *dlock__kind_of(unsigned flags, unsigned permits);

/* The kind a store of exclusive owners in line serves for `kind`
 * (kinds.h, in_line), or NULL if it has none. */
const dlock__kind *dlock__kind_in_line(const dlock__kind *kind);

/* The kind's extra acquire argument (kinds.h, aux_arg) into buf; its
 * length (0: none). */
size_t dlock__kind_aux_arg(const dlock__kind *kind, int64_t retry_max_ms, unsigned permits,
                           char *buf, size_t cap);

#endif
