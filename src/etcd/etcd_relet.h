/* SPDX-License-Identifier: BSD-3-Clause */
/* Extending a hold to a new TTL (issue 38), as a request on a loop. An
 * etcd lease keeps the TTL it was granted, so the key moves to a new
 * lease: grant a lease of the new TTL, put the same key with it (a put
 * keeps the key's create revision, so the place in line and the fence
 * stay; a transaction, only while the old lease still holds the key),
 * then revoke the old lease, which no key is attached to any more (unless
 * it is a session's, etcd_session.h, which other keys are on). Each
 * step is a POST request (etcd_request.h) started from the one before's
 * done; the extend (etcd_release.c) runs it on the engine's loop.
 *
 * Failure between the steps: a grant that failed, or a move that did not
 * happen, revokes the new lease; a move whose outcome is unknown (no
 * member answered) reads the key to learn which lease holds it. A lease
 * whose revoke did not go through, and that holds no key of ours, is
 * handed back as owed (etcd_hold.h, owed_lease); one that may hold our
 * key (the read failed too) is left to lapse by its TTL. */
#ifndef DLOCK_ETCD_RELET_H
#define DLOCK_ETCD_RELET_H

#include <stdint.h>

#include "error.h"
#include "etcd_lock.h"
#include "etcd_request.h"

typedef struct dlock__etcd_relet {
    /* The caller's, set before the start. */
    dlock__errbuf *err;                         /* NULL, or what went wrong */
    void (*done)(struct dlock__etcd_relet *r); /* once, from the loop */
    /* The outcome, when done() runs. rc DLOCK_OK: the key is on lease
     * (its granted TTL ttl_s, asked asked_s; valid_until_ns counted from
     * the grant's send). DLOCK_ENOTOWNER: the key was deleted, or is on
     * another lease (the hold ended). Any other error: the key stays on
     * the old lease. owed: a lease holding no key of ours whose revoke did
     * not go through (the old one after a move, else the new one), or 0. */
    int rc;
    int64_t lease, ttl_s, asked_s, valid_until_ns, owed;
    /* The request's own: a copy of what it moves. */
    dlock__etcd *e;
    dlock__loop *loop;
    int64_t old, sent_ns;
    /* The hold's fence (or the one its token named), compared with the
     * key's create revision: a session gives a released key to a later
     * hold, which a move for this one must not take (0: unknown). */
    int64_t rev;
    char *key;
    size_t key_len;
    int end_rc; /* the outcome, kept while a revoke is out */
    int keep_old; /* the old lease is a session's (etcd_session.h): not revoked */
    dlock__etcd_req q; /* the step in flight */
} dlock__etcd_relet;

/* Move h's key to a new lease of ttl_ms on loop. DLOCK_OK: done(r)
 * follows, from the loop; DLOCK_ENOMEM (or the random source's error): it
 * never does. h is copied. */
int dlock__etcd_relet_start(dlock__etcd_relet *r, dlock__etcd *e, const dlock__etcd_hold *h,
                            int64_t ttl_ms, dlock__loop *loop);

#endif
