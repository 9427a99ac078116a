/* SPDX-License-Identifier: BSD-3-Clause */
/* Redis requests that act on a hold: release (three kinds), resending a
 * release of unknown outcome, extend, and the counted kind's forget; the
 * steps that make them, for the chains that send them (tidy.c, fair.c,
 * attempt*.c). */
#ifndef DLOCK_RELEASE_H
#define DLOCK_RELEASE_H

#include <stdint.h>

#include "common.h"
#include "fanout.h"
#include "fanout_run.h"
#include "kind_steps.h"
#include "op.h"
#include "quorum.h"

/* A release request's parts (or a forget's, an undo's), for a fan-out
 * with dlock__owner_cb and t (they must outlive the run). */
typedef struct dlock__release_run {
    dlock__step_args a;
    dlock__req req;
    dlock__fanout_opts fo;
    uint8_t mask[DLOCK__MAX_NODES]; /* fo.only, when a mask was given */
} dlock__release_run;

/* Fill r and init t for the kind's release script of the current token
 * to the nodes in `mask` (all if NULL), waiting up to timeout_ms per
 * node. An undo (of an attempt's partial grant) adds nothing to the
 * detail message and publishes no wake-up. */
void dlock__release_prepare(dlock_lock *l, const uint8_t *mask, int64_t timeout_ms, int undo,
                            dlock__release_run *r, dlock__tally *t);
/* Counted kinds: fill r and init t for the forget of the handle's
 * bookkeeping in the key (forget.lua), io_timeout per node. */
void dlock__forget_prepare(dlock_lock *l, dlock__release_run *r, dlock__tally *t);
/* Start r as prepared (above) as fan's run on loop, replies counted in
 * t; then(fan) follows from the loop. */
void dlock__release_send(dlock_lock *l, dlock__release_run *r, dlock__tally *t, dlock__fan *fan,
                         dlock__loop *loop, void (*then)(dlock__fan *fan));

/* Start a resend of the pending release (to the nodes in l->rel_nodes,
 * r->mask) as fan's run on loop, its parts in r and t; a cancel_fd that
 * turns readable leaves it to run unheard. then(fan) follows from the
 * loop, which notes what is still pending with
 * dlock__note_release_pending(l, t, r->mask). */
void dlock__release_resend(dlock_lock *l, dlock__release_run *r, dlock__tally *t,
                           dlock__fan *fan, dlock__loop *loop, int64_t timeout_ms, int cancel_fd,
                           void (*then)(dlock__fan *fan));

/* Note which nodes have not answered the release just sent. */
void dlock__note_release_pending(dlock_lock *l, const dlock__tally *t, const uint8_t *mask);

/* Counted kinds: number the next release, which drops n more holds (1
 * for a release; more for holds dropped without one). While a node owes
 * an earlier release, it continues that one's run and carries it (handle.h,
 * rel_base; reentrant_release.lua); else a run starts. */
void dlock__release_op(dlock_lock *l, unsigned n);

/* Backend operations (backend.h): a release and an extend as requests,
 * each a fan-out on op->loop (a counted kind's release carries an older
 * pending one). */
int dlock__release_start(dlock_lock *l, int last, dlock__op *op);
int dlock__extend_start(dlock_lock *l, int64_t ttl_ms, int64_t deadline_ns, dlock__op *op);

#endif
