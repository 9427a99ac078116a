/* SPDX-License-Identifier: BSD-3-Clause */
/* The lock on etcd, the etcd way (docs/backends.md):
 *
 *   - a plain lock's acquire grants a lease of the lock's TTL (rounded
 *     up to whole seconds, etcd's unit) with an ID we draw, so a lost
 *     grant reply can be retried; a DLOCK_AUTO_RENEW lock's key goes on
 *     the client's session of that TTL instead (etcd_session.h: one lease
 *     per client and TTL, as Go's concurrency.Session);
 *   - the waiter's key is KEY/<ID in lowercase hex, no padding>: the
 *     lease's ID for a lease of its own, a random ID of its own on a
 *     session (or a key the session's earlier hold released cleanly:
 *     etcd_session.h); created in a transaction if absent, with the lease
 *     attached: when the lease ends (released, expired, the holder
 *     killed) etcd deletes the key. This is etcd's own lock's layout
 *     (concurrency.Mutex, `etcdctl lock KEY`: the owner is the lowest
 *     create revision, whatever the suffix), so the two exclude each
 *     other;
 *   - the owner is the key under the prefix KEY/ with the lowest create
 *     revision (any locker's: a key of etcdctl's lease is a holder too);
 *     the fencing token is that create revision, so it grows with every
 *     grant by construction (revisions never go back);
 *   - a waiter watches only the key created just before its own (no herd),
 *     and looks again when that one is deleted (takes the lock, when it
 *     was the only key before its own: etcd_wait.c);
 *   - a semaphore of N permits is the same line: its holders are the N
 *     first keys, and its waiters watch the whole line for deletions
 *     (etcd_wait.c says why).
 *
 * Every request is idempotent (create-if-absent, grant of our own ID,
 * revoke, keep-alive, a key's delete if on our lease, reads), so a reply
 * lost to a member failure is retried on another member. These functions know nothing of handles:
 * the backend (etcd_backend.c, etcd_wait.c) keeps the state. */
#ifndef DLOCK_ETCD_LOCK_H
#define DLOCK_ETCD_LOCK_H

#include <stdint.h>

#include "etcd_http.h"
#include "etcd_kv.h"

/* One hold (or one waiter's place in line). */
typedef struct dlock__etcd_hold {
    int64_t lease;          /* 0: none */
    int64_t rev;            /* our key's create revision: the fence */
    int64_t ttl_s;          /* the lease's granted TTL */
    int64_t asked_s;        /* the TTL asked for (0: unknown, adopted) */
    /* The owner token: the key's ID in 16 hex digits, and for a hold
     * whose key its session may give to a later hold (reusable below),
     * 16 more: the hold's fence, so that a token names one hold. */
    char token[33];
    char *key;              /* KEY/<ID in hex, no padding> */
    size_t key_len;
    int64_t valid_until_ns; /* from the last grant or keep-alive sent */
    /* The lease is the client's session's (etcd_session.h), not this
     * hold's: the key's ID is not the lease's, and giving the hold back
     * deletes the key, never revokes the lease. */
    int on_session;
    /* The lease of the hold's lock-delay companion (etcd_delay.h), kept
     * alive with the hold's and revoked by its clean release; 0: none. */
    int64_t delay_lease;
    int64_t key_id; /* the ID the key names */
    /* On a session: the key may be taken again by the session's next hold
     * once this one's own delete removed it (etcd_session.h): its create
     * was answered the first time, and nothing rules it out (a lock-delay,
     * an election's term, a reentrant hold). */
    int reusable;
    /* An adopted hold whose token named its fence too: its key must still
     * be the one made at this revision (0: the token named the key only). */
    int64_t named_rev;
} dlock__etcd_hold;

void dlock__etcd_hold_clear(dlock__etcd_hold *h);

/* The range of a lock's waiter keys: the prefix KEY/, [KEY/, KEY0). It
 * holds the keys of the names under KEY/ too, as etcd's own lock's does. */
typedef struct dlock__etcd_name {
    char *begin, *end;
    size_t len; /* of both */
    /* The holder identity our keys carry as their value (the client's,
     * dlock_client_options.identity; not owned), or NULL: the key. */
    const char *identity;
    /* Our keys' part between KEY/ and their ID: "" for a plain lock or a
     * semaphore (KEY/<ID>), "read/" or "write/" for a reader or a writer
     * of a read-write lock (etcd's recipe RWMutex: KEY/read/<ID>,
     * KEY/write/<ID>). Static text. */
    const char *role;
    size_t role_len;
    /* A reader's gap in the line: the readers' keys [KEY/read/, KEY/read0),
     * which it does not wait behind (NULL: no gap, every key counts). */
    char *gap_begin, *gap_end;
    size_t gap_len; /* of both */
} dlock__etcd_name;

int dlock__etcd_name_init(dlock__etcd_name *n, const char *key, size_t key_len);
void dlock__etcd_name_clear(dlock__etcd_name *n);

/* Our keys' role in the line, by the handle's flags: a reader
 * (DLOCK_SHARED: KEY/read/<ID>, waiting only behind the keys that are
 * not readers'), a writer (DLOCK_EXCLUSIVE: KEY/write/<ID>, waiting
 * behind every key, as a plain lock), or neither (KEY/<ID>). DLOCK_OK or
 * DLOCK_ENOMEM. */
int dlock__etcd_name_role(dlock__etcd_name *n, unsigned flags);

/* h's key for its lease under name: KEY/, name's role, and the lease in
 * hex without padding (Go's %x), and its token (16 hex digits). DLOCK_OK
 * or DLOCK_ENOMEM. */
int dlock__etcd_hold_key(dlock__etcd_hold *h, const dlock__etcd_name *name);
/* The same for a key of its own ID (a hold on a session: etcd_session.h). */
int dlock__etcd_hold_key_id(dlock__etcd_hold *h, const dlock__etcd_name *name, int64_t id);
/* 1 if key's ID (its suffix) is lease's: a key on a lease of its own, as
 * a plain lock's and etcdctl's are, not a key on a session. */
int dlock__etcd_key_names_lease(const char *key, size_t key_len, int64_t lease);

/* 1 if key is a waiter key of name in another role than name's: a
 * plain lock's, a reader's or a writer's (an owner's reentrant holds of
 * one name in two modes, which would wait for each other). */
int dlock__etcd_key_in_other_role(const dlock__etcd_name *name, const char *key,
                                  size_t key_len);

/* 0 if a lock may not be named name (len bytes, the client's prefix
 * left out) on etcd: a name that ends in /read or /write, or holds
 * /read/. Its keys would read as another name's reader's or writer's
 * (NAME/read/<ID>, NAME/write/<ID>), and no key tells which: a reader of
 * NAME would not wait for NAME/read's holders (they are in its gap), and
 * NAME's readers and writers would keep NAME/read and NAME/write busy.
 * 1 otherwise. */
int dlock__etcd_name_ok(const char *name, size_t len);

/* The length of key's lease suffix after its last '/': a lease ID (not 0)
 * in 1 to 16 lowercase hex digits, or a negative one as Go's %x prints it
 * ('-' and the magnitude, up to 2^63); 0 when key has none, so it is no
 * locker's key. Any locker's: etcdctl's lease IDs are etcd's, and etcd
 * grants negative IDs a client asks for. */
size_t dlock__etcd_key_suffix_len(const char *key, size_t key_len);

/* 1 if key is a waiter key of name itself in name's role (KEY/<lease>,
 * KEY/read/<lease>, KEY/write/<lease>), not of a name below it
 * (KEY/sub/<lease>) nor of the other role. */
int dlock__etcd_key_is_waiter(const dlock__etcd_name *name, const char *key, size_t key_len);

/* A new place in line for name: a lease ID drawn at random (the token),
 * our key KEY/<lease hex>, the TTL to ask for; nothing sent yet (the grant
 * and the create transaction are etcd_wait.c's requests). On a session
 * (on_session), the key's ID is drawn apart from the lease's (the
 * session's, set by the caller). DLOCK_OK or DLOCK_ENOMEM (h then half
 * made: dlock__etcd_hold_clear()). */
int dlock__etcd_hold_new(dlock__etcd_hold *h, const dlock__etcd_name *name, int64_t ttl_ms,
                         int on_session);

/* A fresh lease ID: 63 random bits, never 0 (0 asks etcd to choose).
 * DLOCK_OK, or the random source's error. */
int dlock__etcd_new_lease_id(int64_t *id);

/* Our key's value with an identity: the text and " since=" with the
 * wall-clock time in ms (a stamp for a person, never used in lease
 * arithmetic). Its length. */
size_t dlock__etcd_identity_value(const char *text, char *out, size_t len);

/* Acquire: the engine's wait with etcd_wait.c's steps (get in line,
 * look at the key before ours, watch it, leave), not a call here. */

/* Release: dlock__etcd_release() (etcd_release.h). */

/* Renew: dlock__etcd_renew() (etcd_renew.h). */

/* Status: the current owner's key, if any. */
int dlock__etcd_peek(dlock__etcd *e, const dlock__etcd_name *name, int *held,
                     int64_t *ttl_ms, uint64_t *fence, dlock__errbuf *err);

/* Who holds the lock at key (the client's prefix + the name), read in
 * one transaction: the oldest key of its line when that is not a
 * reader's (a writer's, a plain lock's, etcdctl's: one exclusive holder,
 * its create revision the fence), else every reader older than the
 * oldest other key (shared, no fence: docs/backends.md). A semaphore's
 * line reads as its oldest key's: no stored N tells its holders from its
 * waiters. dlock__etcd_holding_clear() frees it (also after a failed
 * read). */
typedef struct dlock__etcd_holding {
    dlock__etcd_kv writer;   /* the oldest key that is not a reader's */
    dlock__etcd_kv *readers; /* the first readers' keys, oldest first */
    size_t n_readers;        /* read */
    size_t count;            /* holders: readers before the writer, or it */
    int shared;              /* readers hold */
} dlock__etcd_holding;

int dlock__etcd_holding_read(dlock__etcd *e, const char *key, size_t len,
                             dlock__etcd_holding *h);
void dlock__etcd_holding_clear(dlock__etcd_holding *h);

/* Seconds of lease for a TTL in ms (rounded up; at least 1). */
int64_t dlock__etcd_ttl_s(int64_t ttl_ms);

/* dlock_client_break() of the lock at key (the client's prefix + the
 * name): delete its holders' keys as dlock__etcd_holding_read() finds
 * them (the oldest key when it is not a reader's; else every reader
 * before the oldest other key, *shared 1), each only if it is still the
 * same key (its create revision), so the next waiter takes the lock.
 * *removed: how many went (0: the name was free); *fence: the newest
 * holder's create revision (status's fence, readers' too: a reader
 * granted after a look is newer). if_fence not 0: only when the newest
 * holder's create revision is if_fence, else DLOCK_ENOTOWNER (*fence: the
 * holders' now) and nothing is deleted. Readers granted after the first
 * read (newer than *fence) are never deleted. DLOCK_EBUSY if the holders
 * changed at every try. */
int dlock__etcd_break(dlock__etcd *e, const char *key, size_t len, uint64_t if_fence,
                      size_t *removed, int *shared, uint64_t *fence, dlock__errbuf *err);

#endif
