/* SPDX-License-Identifier: BSD-3-Clause */
/* Renewing a hold (etcd_lock.h): a keep-alive of its lease, then a read
 * of its key (nobody deleted or replaced it), as a request on a loop, each
 * step a POST request (etcd_request.h) started from the one before's
 * done. The watchdog runs it on its own loop (etcd_backend.c's renewal
 * hooks), several at once, and an extend on the engine's (etcd_release.c);
 * dlock__etcd_renew() is the same request on a private loop, for
 * re-entry. */
#ifndef DLOCK_ETCD_RENEW_H
#define DLOCK_ETCD_RENEW_H

#include <stdint.h>

#include "error.h"
#include "etcd_keepalive.h"
#include "etcd_lock.h"
#include "etcd_request.h"

typedef struct dlock__etcd_renew_req {
    /* The caller's, set before the start. */
    dlock__errbuf *err; /* NULL, or what went wrong */
    void (*done)(struct dlock__etcd_renew_req *r); /* once, from the loop */
    /* The outcome, when done() runs: DLOCK_OK (valid_until_ns: from the
     * keep-alive's send), DLOCK_EEXPIRED (the lease is gone),
     * DLOCK_ENOTOWNER (the key was deleted or replaced while the lease
     * lived), DLOCK_ECANCELED, or an error as dlock__etcd_post()'s. */
    int rc;
    int64_t valid_until_ns;
    /* The request's own: a copy of what it renews (the hold may be let go
     * while the request is in flight). */
    dlock__etcd *e;
    dlock__loop *loop;
    int64_t lease, rev;
    int64_t named_rev; /* an adopted hold's fence, from its token (0: unknown) */
    /* The hold's lock-delay companion lease (etcd_delay.h), kept alive
     * last, once the hold's lease and key are confirmed; 0: none. */
    int64_t delay_lease;
    char *key;
    size_t key_len;
    int64_t deadline_ns, sent_ns, ttl_s;
    dlock__etcd_req q; /* the step in flight */
    dlock__etcd_ka_join j; /* or the session's keep-alive, joined */
    int joined;
} dlock__etcd_renew_req;

/* Renew h's lease and check its key on loop, every step by deadline_ns.
 * DLOCK_OK: done(r) follows, from the loop; DLOCK_ENOMEM: it never does.
 * h is copied: the caller may let it go meanwhile. */
int dlock__etcd_renew_start(dlock__etcd_renew_req *r, dlock__etcd *e, const dlock__etcd_hold *h,
                            int64_t deadline_ns, dlock__loop *loop);

/* The same, for a hold on session s (NULL: none) on the watchdog's loop:
 * the hold's lease is s's, whose keep-alive it joins (etcd_keepalive.h)
 * instead of sending one of its own, then reads its key. valid_until_ns
 * is counted from that keep-alive's send, which is never earlier than
 * this start. */
int dlock__etcd_renew_start_shared(dlock__etcd_renew_req *r, dlock__etcd *e,
                                   const dlock__etcd_hold *h, struct dlock__etcd_session *s,
                                   int64_t deadline_ns, dlock__loop *loop);

/* From the loop, while r is in flight: end it now with DLOCK_ECANCELED
 * (done() runs inside this call). */
void dlock__etcd_renew_cancel(dlock__etcd_renew_req *r);

/* The request on a private loop: the same outcomes, DLOCK_ECANCELED when
 * cancel_fd (-1: none) turns readable; on DLOCK_OK h->valid_until_ns
 * moves. */
int dlock__etcd_renew(dlock__etcd *e, dlock__etcd_hold *h, int64_t deadline_ns,
                      int cancel_fd, dlock__errbuf *err);

#endif
