/* SPDX-License-Identifier: BSD-3-Clause */
/* Giving a hold (etcd_lock.h) back and pushing its lease out, as requests
 * on a loop, each step a POST request (etcd_request.h) started from the
 * one before's done: a release revokes the lease; an extend first learns
 * an adopted lease's TTL, then is a renewal (etcd_renew.h: the keep-alive
 * and the read of the key), or to a new TTL a move of the key to a new
 * lease (etcd_relet.h). etcd_backend.c's release_start and
 * extend_start (backend.h) are these on the engine's loop, and a
 * handle's free runs that release on a private loop (call.h);
 * dlock__etcd_release() is the revoke alone on a private loop, for the
 * tests below the handle (test_etcd_lock_core). */
#ifndef DLOCK_ETCD_RELEASE_H
#define DLOCK_ETCD_RELEASE_H

#include <stdint.h>

#include "error.h"
#include "etcd_lock.h"
#include "op.h"

/* The engine's release of h (backend.h, release_start): DLOCK_OK, and
 * op->done() later from op->loop, with op->v.code DLOCK_OK, DLOCK_EEXPIRED
 * (the lease had ended) or an error as dlock__etcd_post()'s (err says
 * why); DLOCK_ENOMEM: done() never comes. h NULL: nothing to send (the
 * owner's lease lives on), answered DLOCK_OK from the loop's next turn.
 * h on a session (h->on_session): its key's delete, not a revoke. What
 * the request needs of h is copied: the caller may free h at once. */
int dlock__etcd_release_op(dlock__op *op, dlock__etcd *e, const dlock__etcd_hold *h,
                           dlock__errbuf *err);

/* What the engine's extend acts on (backend.h, extend_start). */
typedef struct dlock__etcd_extend_args {
    dlock__etcd_hold *h; /* stays put until done; updated on a move */
    int64_t ttl_ms;
    dlock__errbuf *err;
    void (*ended)(void *arg); /* etcd said the hold ended */
    /* The key moved off a session to a lease of its own (NULL: none). */
    void (*off_session)(void *arg);
    void *arg;
    int64_t *owed; /* where a lease owed a revoke goes (etcd_hold.h) */
    int shared;    /* the owner's other handles share h's lease */
    /* A hold with a lock-delay companion (h->delay_lease): the lock's key
     * (prefix_len bytes of it the prefix) and the delay, so that a move to
     * a new lease moves the companion too (etcd_delay.h). */
    const char *key;
    size_t key_len, prefix_len;
    int64_t delay_ms;
} dlock__etcd_extend_args;

/* The engine's extend of a->h: ttl_ms 0 renews the lease to the TTL it
 * was granted, and so does a ttl_ms etcd would grant that TTL for; another
 * moves the key to a new lease of ttl_ms (etcd_relet.h: the fence and the
 * place in line stay, so does the token, which names the key; h->lease
 * becomes the new one), refused (DLOCK_ENOTSUP, err says why, nothing
 * sent) when the owner's other handles share the lease. An adopted hold
 * (h->ttl_s 0) asks etcd for that TTL first and keeps it in h. DLOCK_OK,
 * and op->done() later from op->loop with op->v as backend.h says (the
 * renewal's outcomes, etcd_renew.h, or the move's), ended(arg) called
 * first when etcd said the hold ended (DLOCK_EEXPIRED, DLOCK_ENOTOWNER);
 * or DLOCK_ENOTSUP or DLOCK_ENOMEM, and done() never comes. */
int dlock__etcd_extend_op(dlock__op *op, dlock__etcd *e, const dlock__etcd_extend_args *a);

/* Release: revoke the lease (deleting the key), or on a session
 * (h->on_session) delete the key, on a private loop.
 * DLOCK_OK, DLOCK_EEXPIRED (the lease had ended), or an error. The hold
 * is cleared either way. */
int dlock__etcd_release(dlock__etcd *e, dlock__etcd_hold *h, dlock__errbuf *err);

#endif
