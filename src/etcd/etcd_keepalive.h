/* SPDX-License-Identifier: BSD-3-Clause */
/* One keep-alive of a session's lease (etcd_session.h) for all the
 * watchdog's renewals of holds on it that are due together (issue 38:
 * Go's concurrency.Session keeps one keep-alive stream per session, not
 * one per lock). A renewal joins the session's keeper on the watchdog's
 * loop instead of sending a keep-alive of its own; the keeper sends one
 * from the loop's next turn, once every renewal of that look has joined,
 * and hands its outcome to each, which then reads its own key
 * (etcd_renew.c). A renewal that joins while a keep-alive is in flight
 * waits for the next one, sent when that one is back: the send of the
 * keep-alive a renewal takes is never earlier than the renewal's start,
 * so a lease end counted from the renewal's start (the watchdog's round,
 * engine.c's settle) is never later than the one etcd confirmed.
 *
 * The keeper lives while it has renewals to serve, holding one user of
 * the session; it is the loop's (one loop per session: the client's
 * watchdog), and only its pointer in the session is under the client's
 * mu. */
#ifndef DLOCK_ETCD_KEEPALIVE_H
#define DLOCK_ETCD_KEEPALIVE_H

#include <stdint.h>

#include "error.h"
#include "etcd_client.h"
#include "loop.h"

struct dlock__etcd_session;
struct dlock__etcd_keeper;

/* A renewal's place on a keeper. */
typedef struct dlock__etcd_ka_join {
    /* The caller's, set before the join. */
    dlock__errbuf *err;  /* NULL, or what went wrong */
    int64_t deadline_ns; /* the keep-alive's answer is wanted by then */
    void (*done)(struct dlock__etcd_ka_join *j); /* once, from the loop */
    /* The outcome, when done() runs: rc as the keep-alive's reply says
     * (DLOCK_OK, DLOCK_EEXPIRED: the lease is gone, or the request's
     * error), ttl_s its TTL, sent_ns when it was sent. */
    int rc;
    int64_t ttl_s, sent_ns;
    /* The keeper's. */
    struct dlock__etcd_keeper *k;
    struct dlock__etcd_ka_join *next;
} dlock__etcd_ka_join;

/* Join s's keep-alive on loop. DLOCK_OK: done(j) follows, from the loop,
 * never inside this call; DLOCK_ENOMEM, or DLOCK_EINVAL when s's keeper
 * is on another loop: it never does (the caller keeps the lease alive
 * itself). */
int dlock__etcd_keepalive_join(dlock__etcd_ka_join *j, struct dlock__etcd_session *s,
                               dlock__etcd *e, dlock__loop *loop);

/* From the loop, while j is joined: leave without done(). */
void dlock__etcd_keepalive_leave(dlock__etcd_ka_join *j);

/* The client's close (etcd_session.c): free a keeper left in a session
 * (memory only: in a forked child, whose copy of the watchdog's loop
 * never turns, a keep-alive of the parent's may have been in flight). */
void dlock__etcd_keeper_forget(struct dlock__etcd_keeper *k);

#endif
