/* SPDX-License-Identifier: BSD-3-Clause */
/* Lock-delay on etcd (issue 39; dlock_lock_options.lock_delay_ms,
 * docs/lock-delay.md, docs/backends.md "Lock-delay on etcd").
 *
 * A hold of a handle with a delay has a companion key beside its key in
 * line, on a lease of its own (the companion lease) of the hold's TTL
 * plus the delay (plus a third of the TTL on a session, whose lease other
 * users may have kept alive later than this hold did), kept alive by the
 * hold's renewals right after its own lease's (etcd_renew.c). A holder
 * that dies leaves both: its key goes when its lease ends, the companion
 * one delay later. A clean release revokes the companion lease once the
 * hold's key is gone (etcd_release.c); a release that finds the lease
 * ended frees nothing. A waiter with a delay that finds its turn (no key
 * before its own, or fewer than a semaphore's N) first reads the name's
 * companions and the line in one transaction: a companion whose hold key
 * is no longer in line is a dead holder's, and counts against the
 * permits until etcd deletes it, which a watch on the companions reports
 * (etcd_delay_wait.c).
 *
 * The companion's key is
 *
 *     <key_prefix> NUL "delay" NUL <name> NUL <token>
 *
 * (the token: the hold key's ID in 16 hex digits) and its value the hold
 * key, KEY/<ID>. It lies under no lock's line: a line is [P N/, P N0)
 * for a name N, which holds no NUL, and the companion has a NUL right
 * after the prefix, so neither etcdctl lock, Go's concurrency.Mutex nor
 * dlock counts it as a holder of any name, and `dlock list` skips it.
 * The NUL after the name ends it: a name's companions are the range
 * [P NUL delay NUL N NUL, P NUL delay NUL N \1), which holds no other
 * name's (not those of N/sub either). The companion lease's ID is the
 * hold key's ID mixed with a constant (dlock__etcd_delay_lease()), so a
 * handle that adopts the token knows it without a read. */
#ifndef DLOCK_ETCD_DELAY_H
#define DLOCK_ETCD_DELAY_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common.h"
#include "etcd_lock.h"
#include "etcd_request.h"

/* The companion lease's ID of the hold whose key's ID is id (not 0). */
int64_t dlock__etcd_delay_lease(int64_t id);
/* The same from a token (16 hex digits). */
int64_t dlock__etcd_delay_lease_of_token(const char *token);

/* The companion key of the hold whose token is token, for the lock at
 * key (prefix_len bytes of it the client's key_prefix); token NULL: the
 * start of the name's range, and with end 1 its end. *out is the
 * caller's to free. DLOCK_OK or DLOCK_ENOMEM. */
int dlock__etcd_delay_key(const char *key, size_t klen, size_t prefix_len, const char *token,
                          int end, char **out, size_t *out_len);

/* The companion lease's TTL for hold h and a delay of delay_ms: h's TTL,
 * the delay in whole seconds (etcd's unit, rounded up), and on a session
 * a third of the TTL more. */
int64_t dlock__etcd_delay_ttl_s(const dlock__etcd_hold *h, int64_t delay_ms);

/* The companion's put: ckey with the hold key as value, on lease. */
json_t *dlock__etcd_delay_put_body(const char *ckey, size_t clen, const dlock__etcd_hold *h,
                                   int64_t lease);

/* One transaction reading the name's companions ([cbegin, cend), with
 * values) and its line ([lbegin, lend), keys only). */
json_t *dlock__etcd_delay_check_body(const char *cbegin, const char *cend, size_t clen,
                                     const char *lbegin, const char *lend, size_t llen);

/* What the check says: *ahead the keys in line created before my_rev,
 * *dead the companions whose hold key is no longer in line (a holder
 * that ended without a release), the leases of the first cap of them in
 * dead_leases (which ends later is unknown until their TTLs are read),
 * *rev the read's revision. DLOCK_OK, DLOCK_EPROTO or DLOCK_ENOMEM. */
int dlock__etcd_delay_check_reply(json_t *rep, int64_t my_rev, size_t *ahead, size_t *dead,
                                  int64_t *dead_leases, size_t cap, int64_t *rev);

/* The ms a companion lease whose time-to-live read ttl_ms (-1: gone) may
 * still keep the name: etcd reports whole seconds, rounded down, so up
 * to 999 ms more; 0 when it is gone. */
int64_t dlock__etcd_delay_left_ms(int64_t ttl_ms);

/* An extend to a new TTL moved the hold's key to a lease of that TTL
 * (etcd_relet.h): its companion follows, as a request on a loop. The
 * companion lease (its ID fixed by the token) is revoked, granted again
 * for the new TTL plus the delay, and the companion put on it; a holder
 * that dies between the revoke and the put leaves no delay. done() once,
 * from the loop; rc says whether the companion is on its new lease (a
 * failure leaves it with its old TTL, or none). */
typedef struct dlock__etcd_delay_move {
    void (*done)(struct dlock__etcd_delay_move *m); /* the caller's */
    int rc;
    /* The request's own. */
    dlock__etcd *e;
    dlock__loop *loop;
    int64_t lease, ttl_s;
    dlock__etcd_hold hold; /* a copy of the hold's key, for the value */
    char *ckey;            /* the companion key */
    size_t ckey_len;
    dlock__etcd_req q;
} dlock__etcd_delay_move;

/* Move h's companion (lock at key, prefix_len bytes of it the prefix),
 * for a delay of delay_ms, on loop. DLOCK_OK: done() follows; else
 * DLOCK_ENOMEM and it never does. */
int dlock__etcd_delay_move_start(dlock__etcd_delay_move *m, dlock__etcd *e, dlock__loop *loop,
                                 const char *key, size_t klen, size_t prefix_len,
                                 const dlock__etcd_hold *h, int64_t delay_ms);

/* dlock_client_lock_delay() on etcd (backend.h, lock_delay): the ms left
 * of the longest dead holder's companion (0: none). */
int dlock__etcd_delay_left(dlock_client *c, const char *key, size_t klen, size_t node,
                           int64_t *left_ms);

/* The same for one lock on a client's etcd: the check, then the TTL of
 * each dead companion's lease. */
int dlock__etcd_delay_left_of(dlock__etcd *e, const char *key, size_t klen, size_t prefix_len,
                              int64_t *left_ms, dlock__errbuf *err);

#endif
