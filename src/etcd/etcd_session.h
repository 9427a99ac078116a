/* SPDX-License-Identifier: BSD-3-Clause */
/* A client's etcd sessions (issue 38): one lease per lease TTL in whole
 * seconds, shared by the client's DLOCK_AUTO_RENEW holds and places in
 * line, as Go's concurrency.Session. An acquire on a session sends one
 * write (the create transaction) and a release one more (the key's
 * delete), where a lease of its own costs a grant, the create and a
 * revoke. Plain locks keep a lease per acquire: their contract is to
 * lapse ttl_ms after the acquire or last extend, which a lease that the
 * client keeps alive would not do.
 *
 * A session is made on first use (the grant of an ID of ours, as a
 * lease per acquire is), kept alive by its users' renewals (the
 * watchdog's, whose renewals of the holds on one session share one
 * keep-alive: etcd_keepalive.h; a waiter's looks, each its own) and by an
 * acquire that finds it past a third of its TTL, and never revoked while
 * it is in use: an
 * idle one lapses one TTL after its last keep-alive. One that etcd no
 * longer knows leaves the table at once, so no new key goes on it; the
 * keys on it are gone with it, and each hold finds its own loss at its
 * next renewal (on_lost, DLOCK_LOST_NOT_OWNER).
 *
 * The late duplicate (plan decision 7): a create whose outcome is
 * unknown (no member answered, or a copy went unanswered before the one
 * that did) may still be applied after the key's release, and on a
 * session, unlike a lease of its own that the release revoked, it would
 * create the key again and block the name while the session lives. Such
 * a session is tainted: it leaves the table (no new key goes on it), and
 * the user that lets go of it last revokes it, deleting any key a late
 * copy made; a user that lets go without a word leaves it to lapse, as
 * nobody keeps it alive any more.
 *
 * Its keys' names: a session keeps the keys its holds gave back cleanly
 * (their own delete removed them, the hold's create was answered the first
 * time, the session is still listed), a few per session, and the next
 * hold on the session of the same name and role takes one of them again,
 * as Go's Mutex takes the key of its session's lease each time. etcd keeps
 * every deleted key's history in its index until a compaction, and a
 * read of the line walks it: with a new key per hold, the cost of each
 * acquire grew with the holds the name had seen (docs/backends.md). A
 * late copy of such a key's create cannot exist: its create was answered
 * the first time, and a session that had any create of unknown outcome is
 * tainted, unlisted, and keeps no spares.
 *
 * The table and the counts are under the client's mu (etcd_client.h). */
#ifndef DLOCK_ETCD_SESSION_H
#define DLOCK_ETCD_SESSION_H

#include <stdint.h>

#include "etcd_client.h"

/* Keys a session keeps for reuse (its spares): enough for a few names or
 * handles cycling on one session. */
#define DLOCK__ETCD_SPARES 8

typedef struct dlock__etcd_session {
    struct dlock__etcd_client *ec;
    int64_t lease;
    int64_t asked_s; /* the TTL asked for: the table's key */
    int64_t ttl_s;   /* the TTL etcd granted */
    /* From the send of the last grant or keep-alive that etcd confirmed. */
    int64_t valid_until_ns;
    unsigned refs; /* holds and places in line on it */
    int tainted;
    int listed; /* in the client's table: new keys may go on it */
    /* The watchdog's renewals' shared keep-alive (etcd_keepalive.h), or
     * NULL when none waits for one. */
    struct dlock__etcd_keeper *keeper;
    /* Keys given back cleanly, for the next holds to take again: their
     * IDs and names (owned), oldest first; n_spares in use. */
    struct dlock__etcd_spare {
        int64_t id;
        char *key;
        size_t key_len;
    } spares[DLOCK__ETCD_SPARES];
    unsigned n_spares;
    struct dlock__etcd_session *next;
} dlock__etcd_session;

/* The listed session of asked_s, one more user counted, if it lives long
 * enough to be worth a key: *stale 1 when a third of its TTL has passed
 * since its last keep-alive (the caller keeps it alive first). A session
 * past two thirds of its TTL may have lapsed (nobody kept it alive): it
 * leaves the table, and NULL asks for a new one. */
dlock__etcd_session *dlock__etcd_session_find(struct dlock__etcd_client *ec, int64_t asked_s,
                                              int *stale);

/* A session just granted (lease, ttl_s, valid_until_ns), listed in place
 * of any earlier one of asked_s (which lives on for its users), with one
 * user; NULL out of memory. */
dlock__etcd_session *dlock__etcd_session_new(struct dlock__etcd_client *ec, int64_t asked_s,
                                             int64_t lease, int64_t ttl_s,
                                             int64_t valid_until_ns);

/* A keep-alive of s's lease was confirmed: valid until until_ns. until:
 * the end of its lease as the last confirmation says. get: one more user
 * (a renewal in flight). */
void dlock__etcd_session_kept(dlock__etcd_session *s, int64_t until_ns);
int64_t dlock__etcd_session_until(dlock__etcd_session *s);
void dlock__etcd_session_get(dlock__etcd_session *s);
/* etcd said the lease is gone, or a create on it has an unknown outcome
 * (taint): no new key goes on it. */
void dlock__etcd_session_gone(dlock__etcd_session *s);
void dlock__etcd_session_taint(dlock__etcd_session *s);
/* 1 if s is tainted and its caller is its last user: the caller's leave
 * revokes it (deleting any late copy's key) instead of deleting its key. */
int dlock__etcd_session_last_tainted(dlock__etcd_session *s);

/* A hold's key on the session of lease was deleted by the hold's own
 * release (the key it removed was made at the hold's fence): keep its ID
 * for the next hold of that key's name and role, if the session is still
 * listed. The oldest spare makes room when the session has
 * DLOCK__ETCD_SPARES. Out of memory, nothing is kept. */
void dlock__etcd_session_spare_put(struct dlock__etcd_client *ec, int64_t lease,
                                   const char *key, size_t key_len, int64_t id);

/* A spare of s whose key is prefix (the name and the role) and an ID,
 * taken out of s; 0 if none. */
int64_t dlock__etcd_session_spare_take(dlock__etcd_session *s, const char *prefix,
                                       size_t prefix_len);

/* One user less (s may be freed): 1 when that was the last user of a
 * tainted session, whose lease the caller then revokes. */
int dlock__etcd_session_put(dlock__etcd_session *s);

/* The client's close: free the table (memory only: idle sessions lapse),
 * and with keeper_free a keeper still in one (etcd_keepalive.h: a forked
 * child's copy of one in flight in the parent). */
void dlock__etcd_sessions_free(struct dlock__etcd_client *ec,
                               void (*keeper_free)(struct dlock__etcd_keeper *k));

#endif
