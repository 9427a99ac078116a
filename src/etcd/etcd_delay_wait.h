/* SPDX-License-Identifier: BSD-3-Clause */
/* Lock-delay in the etcd wait (etcd_delay.h says what is kept where):
 * two hooks on the way to a grant (etcd_enter.c), each a chain of the
 * wait's POST steps (etcd_step.h), so a cancel ends them as it ends a
 * look. Both do nothing for a handle without a delay. */
#ifndef DLOCK_ETCD_DELAY_WAIT_H
#define DLOCK_ETCD_DELAY_WAIT_H

#include "etcd_step.h"

/* Ours is among the first keys (dlock__etcd_granted): unless this place
 * was checked already, read the name's companions and the line. With no
 * dead holder's companion in the way (a lock: none at all; a semaphore:
 * fewer than its N with the keys ahead of ours) the grant goes on
 * (dlock__etcd_granted again);
 * else a try-once is refused ("free but under a lock-delay", the delay's
 * time left as the holder's TTL) and leaves the line, and a waiter keeps
 * its place, watches the companions and answers V_QUEUED, to look again
 * when one is deleted (RECHECK_MS at most, and its own lease kept alive
 * every third of its TTL). *started 1: a step is out (DLOCK_OK), or the
 * start failed (the error); 0: nothing to do, go on. */
int dlock__etcd_delay_before_grant(dlock__etcd_wait *w, int *started);

/* The hold is about to be taken (etcd_enter.c's take, the last step of a
 * grant: nothing can fail after it): a handle with a delay first grants
 * its hold's companion lease and puts the companion, then runs then(w)
 * again, which takes the hold (with h->delay_lease set). A companion
 * that could not be put is revoked, best effort, and the grant fails as
 * a step does. 1: started (the caller returns); 0: nothing to do (no
 * delay, or made already). */
int dlock__etcd_delay_mark(dlock__etcd_wait *w, void (*then)(dlock__etcd_wait *w));

#endif
