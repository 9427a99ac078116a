/* SPDX-License-Identifier: BSD-3-Clause */
/* Lease keep-alive for auto-renewed etcd locks: one thread per client,
 * started on first use, renewing each registered lock's lease every
 * renew interval (a third of the lease by default). It plays the
 * watchdog's part for the etcd backend with the watchdog's rules: a
 * renewal confirmed within the lease moves the validity; a lease etcd
 * calls gone, or a key deleted under it, is lost (DLOCK_LOST_NOT_OWNER); a
 * lease that ran out before any renewal was confirmed is lost
 * (DLOCK_LOST_NO_QUORUM: no majority of members answered). on_lost runs on
 * this thread, once, after the handle became DLOCK_STATE_LOST. */
#ifndef DLOCK_ETCD_RENEW_H
#define DLOCK_ETCD_RENEW_H

#include <pthread.h>
#include <stdint.h>

#include "etcd_http.h"
#include "etcd_lock.h"

typedef struct dlock__etcd_renewer dlock__etcd_renewer;

/* One lock's renewal. The owner fills the first part while the record is
 * not registered; the thread reads it while it is. */
typedef struct dlock__etcd_renewal {
    dlock_lock *lock;
    dlock__etcd_hold *hold; /* the lease to keep alive (stable while registered) */
    int64_t interval_ms;
    /* The renewer's, under its mutex. */
    int registered, in_round;
    int64_t next_ns;
    struct dlock__etcd_renewal *prev, *next;
} dlock__etcd_renewal;

int dlock__etcd_renewer_new(dlock__etcd_renewer **out, dlock__etcd *e);
/* Stop and join the thread (if it ran) and free; forked: free only. */
void dlock__etcd_renewer_free(dlock__etcd_renewer *r, int forked);
/* Start the thread if it is not running: DLOCK_OK or DLOCK_ENOMEM. */
int dlock__etcd_renewer_start(dlock__etcd_renewer *r);
void dlock__etcd_renewer_add(dlock__etcd_renewer *r, dlock__etcd_renewal *rec);
/* Unregister; waits for a renewal of it in flight unless called from the
 * renewer's own thread (an on_lost callback releasing its lock). */
void dlock__etcd_renewer_remove(dlock__etcd_renewer *r, dlock__etcd_renewal *rec);

#endif
