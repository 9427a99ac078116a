/* SPDX-License-Identifier: BSD-3-Clause */
/* One acquire attempt on Redis (every node, decided by majority) and the
 * undo of what a failed or cancelled attempt may have taken. */
#ifndef DLOCK_ATTEMPT_H
#define DLOCK_ATTEMPT_H

#include <stdint.h>

#include "common.h"
#include "fanout_run.h"
#include "first_try.h"
#include "kind_steps.h"
#include "loop.h"
#include "quorum.h"
#include "release.h"

/* One attempt as a request on a loop: a chain of fan-outs on that loop,
 * each step started from the one before's completion:
 *
 *   settle (resend a pending release; counted: send a pending undo)
 *     --> the attempt (the kind's script, or the raw first try)
 *     --> grant: fence sync (Redlock, counters out of step) --> done
 *     --> refused, lost or cancelled: undo (send the undo or release;
 *         queue it behind a timed-out or cancelled node: sent, not
 *         waited for) --> done
 *
 * The verdict is what dlock__attempt() returns (rc, retry), with the
 * handle's holder_ttl_ms, look_ms and split_vote as it leaves them. A
 * waiting acquire's cancel (the handle's cancel pipe, watched by each
 * fan-out on the loop) ends it at once, as there. */
typedef struct dlock__attempt_req {
    dlock_lock *l;
    dlock__loop *loop;
    void (*done)(struct dlock__attempt_req *r); /* once, from the loop */
    int rc, retry;
    /* the chain's own */
    int starting, counted, fresh, behind;
    uint64_t seq_no;
    int64_t lease_end;
    void (*next)(struct dlock__attempt_req *r); /* after an undo's run */
    dlock__timer defer; /* a verdict reached inside the start */
    /* From here on each record is set up by the step that uses it, before
     * its use (the start zeroes only what is above: the records below
     * are 9 KB, sized for DLOCK__MAX_NODES nodes). */
    dlock__tally t;  /* the attempt's votes */
    dlock__tally t2; /* a step's after it: a resend, the fence sync, an undo */
    dlock__step_args a;
    dlock__req req;
    dlock__fanout_opts fo;
    dlock__release_run rel;
    dlock__first_try_reqs raw;
    uint8_t mask[DLOCK__MAX_NODES];
    dlock__conn *kept[DLOCK__MAX_NODES]; /* the try's */
    dlock__fan fan;     /* one step's run at a time */
} dlock__attempt_req;

/* Start an attempt of l on loop; done(r) follows from the loop, exactly
 * once, never inside this call. r must stay put until then. */
void dlock__attempt_start(dlock__attempt_req *r, dlock_lock *l, dlock__loop *loop,
                          void (*done)(dlock__attempt_req *r));

/* One attempt, blocking: dlock__attempt_start on a private loop (the
 * engine's wait runs the chain on its own loop instead, wait.c; this is
 * what tests/unit/test_kind_steps.c drives). *retry is set when waiting
 * longer could help. */
int dlock__attempt(dlock_lock *l, int *retry);

/* Counted kinds: start the undo of the pending attempt (l->undo_seq) to
 * the nodes that have not answered it yet (l->undo_nodes) as fan's run on
 * loop, its parts in r; replies mark l->undo_nodes. A cancel_fd (a waiting
 * acquire's cancel pipe; -1: none) that turns readable leaves it to run
 * unheard. then(fan) follows from the loop, which calls
 * dlock__undo_noted(): 1 while some node still has not answered. */
void dlock__undo_send(dlock_lock *l, dlock__release_run *r, dlock__fan *fan, dlock__loop *loop,
                      int64_t timeout_ms, int cancel_fd, void (*then)(dlock__fan *fan));
int dlock__undo_noted(dlock_lock *l);

/* The chain's steps across files (attempt.c, attempt_settle.c). */
void dlock__attempt_settle(dlock__attempt_req *r);
void dlock__attempt_try(dlock__attempt_req *r);
void dlock__attempt_end(dlock__attempt_req *r, int rc);
/* The undo request of counted attempt seq_no (allocates nothing). */
dlock__req dlock__attempt_undo_req(dlock_lock *l, uint64_t seq_no, dlock__step_args *a);
/* Start an undo of l->undo_seq to the nodes in l->undo_nodes on r's fan;
 * then(r) follows with l->undo_pending updated. */
void dlock__attempt_send_undo(dlock__attempt_req *r, int64_t timeout_ms, int cancel_fd,
                              void (*then)(dlock__attempt_req *r));

#endif
