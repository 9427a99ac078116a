/* SPDX-License-Identifier: BSD-3-Clause */
/* What the etcd backend keeps per handle and per owner, shared by its
 * operations (etcd_backend.c) and its wait (etcd_wait.c). Private to the
 * etcd backend. */
#ifndef DLOCK_ETCD_HOLD_H
#define DLOCK_ETCD_HOLD_H

#include "common.h"
#include "etcd_client.h"
#include "etcd_lock.h"

/* One hold of the lock in etcd (one key, on a lease of its own or on
 * the client's session: etcd_session.h), shared by the handles of one
 * owner in reentrant mode, a handle's own otherwise; also a waiter's
 * place in line until it is taken. */
typedef struct dlock__etcd_shared_hold {
    dlock__etcd_hold h;
    struct dlock__etcd_session *sess; /* h's lease's session (one user of it), or NULL */
    unsigned holds; /* counted over the handles (under the client's mu) */
    unsigned long thread_no; /* reentrant: the owner's thread (dlock__thread_no) */
    int listed; /* in the client's reentrant list */
    struct dlock__etcd_shared_hold *next;
} dlock__etcd_shared_hold;

struct dlock__etcd_wait;

/* The etcd part of a handle. */
struct dlock__etcd_lockdata {
    struct dlock__etcd_client *ec;
    dlock__etcd_name range;        /* the prefix KEY/ */
    dlock__etcd_shared_hold *sh;   /* while held */
    struct dlock__etcd_wait *wait; /* the wait's state (etcd_wait.c), NULL before one */
    /* A waiter's lease whose revoke was cut off (a cancel's 100 ms, a
     * stopped member), or 0: its key would stay in line until the lease
     * lapses, so the handle's next acquire (begin, within
     * DLOCK__CANCEL_LEAVE_MS) or its free revokes it again. Also a lease
     * an extend to a new TTL left without a key (etcd_relet.h): the old
     * one, or the new one of a failed move. One at most: a newer one
     * replaces it, and the older lapses by its TTL. */
    int64_t owed_lease;
    /* The same for a waiter's key on a session (whose lease lives on for
     * its other users): the key, deleted if still on that lease. */
    dlock__etcd_hold owed_key; /* key NULL: none */
};

/* The etcd parts of a client and of a handle: their `store` (client.h,
 * handle.h), which only this backend reads. */
#define DLOCK__ETCD_EC(c) ((struct dlock__etcd_client *)(c)->store)
#define DLOCK__ETCD_LD(l) ((struct dlock__etcd_lockdata *)(l)->store)

/* etcd_backend.c's hold keeping, for the wait: take s over as the
 * handle's hold (its lease end reported); another handle of this owner
 * holding the lock (one more hold of it counted), or NULL; drop n holds
 * of s (1 if they were the last); take s off the owner's list; free it. */
void dlock__etcd_hold_take(dlock_lock *l, dlock__etcd_shared_hold *s);
dlock__etcd_shared_hold *dlock__etcd_reentrant_find(dlock_lock *l);
/* The owner holds the name on the other side of a read-write lock. */
int dlock__etcd_reentrant_crossed(dlock_lock *l);
int dlock__etcd_hold_drop_of(struct dlock__etcd_client *ec, dlock__etcd_shared_hold *s,
                             unsigned n);
void dlock__etcd_hold_unlist(struct dlock__etcd_client *ec, dlock__etcd_shared_hold *s);
void dlock__etcd_hold_free(dlock__etcd_shared_hold *s);
/* No key owed any more (etcd_lockdata.owed_key). */
void dlock__etcd_owed_key_clear(struct dlock__etcd_lockdata *d);

#endif
