/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd wait's state and the pieces its steps share (etcd_wait.h):
 * etcd_step.c (answering the engine's request, a POST step, the cancel
 * record, leaving the line), etcd_enter.c (getting in line, re-entry,
 * taking the hold) and etcd_wait.c (the backend's operations, the looks
 * and the watch). Private to the etcd backend. */
#ifndef DLOCK_ETCD_STEP_H
#define DLOCK_ETCD_STEP_H

#include <stdint.h>

#include <jansson.h>

#include "etcd_hold.h"
#include "etcd_kv.h"
#include "etcd_renew.h"
#include "etcd_request.h"
#include "etcd_watch.h"
#include "loop_poll.h"
#include "op.h"

typedef struct dlock__etcd_wait dlock__etcd_wait;
typedef void (*dlock__etcd_step_fn)(dlock__etcd_wait *w, int rc, long code, json_t *rep);

struct dlock__etcd_wait {
    dlock_lock *l;
    dlock__op *op; /* the request being answered (begin, try, leave) */
    int trying;    /* op is a try (a look), not a begin */
    int leave_brief; /* the leave's revoke has DLOCK__CANCEL_LEAVE_MS (a cancel's) */
    int in_start;  /* inside the backend's start: an answer waits for the loop */
    /* The step in flight: a POST, whose reply goes to next, or a
     * re-entry's renewal. */
    dlock__etcd_req q;
    dlock__etcd_step_fn next;
    dlock__etcd_renew_req r;
    int in_req, in_renew;
    dlock__fd_flag cancel; /* the acquire's cancel pipe while a step is in flight */
    int cancel_on;
    /* A re-entry: the hold it renews, this handle's own or another's. */
    dlock__etcd_shared_hold *re;
    int re_own;
    int reentered; /* begin re-entered: the try grants */
    int paying_key; /* begin's step in flight pays an owed key (etcd_hold.h) */
    int regranted;  /* this place's session was found gone and replaced */
    /* This place's create may have made its key (sent, and answered, or
     * not answered): only then is its leave owed to the settler. */
    int keyed;
    /* Our place in line (NULL: none) and what we know of it. */
    dlock__etcd_shared_hold *s;
    int owner;           /* ours is the first key */
    /* At the last read the key we watch was the only one before ours (a
     * lock, not a semaphore): its deletion makes ours the first. */
    int last_only;
    int64_t first_lease; /* the first key's lease (0: none) */
    int fresh;           /* just in line: the next try answers from the transaction */
    int64_t sent_ns;     /* the grant's or keep-alive's send */
    int64_t renew_every_ms, next_renew_ns;
    unsigned failures; /* looks that failed in a row */
    int64_t holder_ttl_ms;
    /* An undo's answer, once its revoke is back. */
    int undo_code;
    unsigned undo_flags;
    int undo_brief;
    /* The watch on the key before ours; streams that broke since one
     * lived long or saw a deletion (etcd_wait.c). */
    dlock__etcd_watch watch;
    unsigned breaks;
    /* Lock-delay (etcd_delay_wait.c): the place (its create revision)
     * whose check found no dead holder's companion in its way, a failed
     * companion's code while its lease is revoked, the step that takes
     * the hold once the companion is put, and the watch on the name's
     * companions while one is. */
    int64_t delay_ok_rev;
    int delay_rc;
    void (*delay_then)(dlock__etcd_wait *w);
    dlock__etcd_watch delay_watch;
};

dlock__etcd *dlock__etcd_step_etcd(const dlock__etcd_wait *w);
/* The keys the waiter waits behind (etcd_kv.h): its name's whole range,
 * or a reader's less the readers' keys (etcd_lock.h, gap). */
void dlock__etcd_step_line(const dlock__etcd_wait *w, dlock__etcd_line *line);
/* How many of the first keys in line hold: a semaphore's N, else 1. */
int64_t dlock__etcd_permits(const dlock_lock *l);
/* Revoke lease within budget_ms (0: the client's deadlines), shared by
 * the members; next when it is back, whatever it says. let_go: the same
 * for h's lease, or on a session (h->on_session) for h's key alone. */
int dlock__etcd_step_revoke_lease(dlock__etcd_wait *w, int64_t lease, int64_t budget_ms,
                                  dlock__etcd_step_fn next);
int dlock__etcd_step_let_go(dlock__etcd_wait *w, const dlock__etcd_hold *h, int64_t budget_ms,
                            dlock__etcd_step_fn next);
/* A revoke of our place that answered rc: one that did not make it (not
 * OK, not "not found") leaves the lease owed (etcd_hold.h, owed_lease),
 * or on a session the key (owed_key). */
void dlock__etcd_step_owe(dlock__etcd_wait *w, int rc);
/* A failure another member or a later try may not have: EIO, EUNKNOWN, EBUSY. */
int dlock__etcd_step_transient(int rc);

/* The engine's request (begin, try) answers with the verdict (code,
 * flags, look_ms): from the loop, or at its next turn when inside the
 * start. Nothing of the step is left on the loop after; without
 * V_QUEUED the watch stops too. */
void dlock__etcd_step_answer(dlock__etcd_wait *w, int code, unsigned flags, int64_t look_ms);
/* The backend's start is over with rc (answer's rule, op.h): a step in
 * flight watches the cancel pipe; a refused one leaves nothing behind. */
int dlock__etcd_step_started(dlock__etcd_wait *w, int rc);
void dlock__etcd_step_cancel_watch(dlock__etcd_wait *w);
/* Stop watching the cancel pipe (a step's answer does; the leave, which
 * keeps the engine's code, too). */
void dlock__etcd_step_cancel_unwatch(dlock__etcd_wait *w);
/* Stop the watch on the key before ours, if any. */
void dlock__etcd_step_unwatch(dlock__etcd_wait *w);
/* The cancel that ended a step is used up; the message says so. */
void dlock__etcd_step_cancelled(dlock__etcd_wait *w);

/* A POST step: body (taken) to path, the outcome to next, from the loop;
 * call() with the client's deadlines (an I/O timeout per member) and the
 * handle's message. DLOCK_OK or DLOCK_ENOMEM (next never runs). */
int dlock__etcd_step_post(dlock__etcd_wait *w, const char *path, json_t *body,
                          int64_t deadline_ns, int64_t try_ms, dlock__etcd_step_fn next,
                          dlock__errbuf *err);
int dlock__etcd_step_call(dlock__etcd_wait *w, const char *path, json_t *body,
                          dlock__etcd_step_fn next);

/* A keep-alive of our place's lease (sent at w->sent_ns) answered rc,
 * rep: its outcome; on DLOCK_OK the place's validity moves, and its
 * session's; a session etcd no longer knows leaves the client's table. */
int dlock__etcd_step_kept(dlock__etcd_wait *w, int rc, json_t *rep);

/* Out of line without a word (the lease runs out by itself). */
void dlock__etcd_step_place_free(dlock__etcd_wait *w);
/* Revoke our lease within budget_ms (0: the client's deadlines), no
 * message; next whatever it says. On a session, our key's delete (the
 * lease's revoke when ours is the last use of a tainted session). */
int dlock__etcd_step_revoke(dlock__etcd_wait *w, int64_t budget_ms, dlock__etcd_step_fn next);
/* Leave the line (the revoke, brief after a cancel) and then answer. */
void dlock__etcd_step_undo(dlock__etcd_wait *w, int code, unsigned flags, int brief);
/* A step failed with rc: the answer for it, the place undone unless the
 * engine's leave will (a try's cancel). */
void dlock__etcd_step_failed(dlock__etcd_wait *w, int rc);

/* etcd_enter.c: get in line (the grant, then the create transaction;
 * begin answers, a try goes on to dlock__etcd_after_entry()); re-enter a
 * live hold of the owner (*started 0: none to re-enter); ours is the
 * first key: take the hold (one more keep-alive when renewals failed). */
int dlock__etcd_enter(dlock__etcd_wait *w);
int dlock__etcd_reenter(dlock__etcd_wait *w, int *started);
int dlock__etcd_granted(dlock__etcd_wait *w);
/* etcd_wait.c: the first try after getting in line. */
int dlock__etcd_after_entry(dlock__etcd_wait *w);

#endif
