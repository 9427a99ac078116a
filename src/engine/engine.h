/* SPDX-License-Identifier: BSD-3-Clause */
/* One lock's state machine, below the public verbs (engine.c). lock.c
 * checks a verb's arguments and that the process is the client's own (not
 * a fork child), then calls the verb here; a set of names calls these for
 * each of its names, never the public verbs. Same contracts, return codes
 * and handle messages as the public verbs in dlock.h. */
#ifndef DLOCK_ENGINE_H
#define DLOCK_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "acquire.h"
#include "common.h"
#include "loop.h"
#include "op.h"
#include "watchdog.h"

/* A verb of the engine in flight (docs/dev/async-plan.md, Stage A): its
 * start runs on the caller's thread and hands the backend a request on
 * loop; done(r) runs once from loop with r->rc (the verb's code), never
 * inside the start. A start that returns other than DLOCK_OK answered at
 * once with that code and runs no done. Acquire (dlock__engine_acq, below),
 * release and extend are such verbs; the blocking dlock__engine_acquire(),
 * _release() and _extend() are their starts on a private loop (call.c). */
typedef struct dlock__engine_req {
    dlock__op op; /* the backend's request */
    void (*done)(struct dlock__engine_req *r);
    int rc;
    int (*finish)(struct dlock__engine_req *r, int rc); /* the engine's completion */
    /* The driver's loan for a lost hold's let-go (op.h, scratch), or NULL. */
    void *scratch;
    size_t scratch_len;
    int last_hold; /* the release's: the handle's last hold goes; the
                    * free's: the handle held */
    /* The adopt's: the caller's token, kept until done. */
    const char *token;
    size_t token_len;
    /* The extend's, from its start to its completion. */
    int renewed;         /* it took the hold out of the watchdog */
    int64_t due_ns;      /* when that renewal was due */
    int64_t deadline_ns; /* the lease's end: a later answer proves nothing */
} dlock__engine_req;

/* An acquire in flight: the verb's prologue (a lost hold let go, or a
 * re-entry's extend), the wait (acquire.c), the grant. The driver fills
 * done and the wait's hooks (acquire.h; all may be NULL) and may lend
 * scratch memory for the lost hold's let-go (op.h); the rest is the
 * machine's own. */
typedef struct dlock__engine_acq {
    void (*done)(struct dlock__engine_acq *r); /* once, from loop */
    int rc;
    dlock__wait_hooks hooks;
    void *scratch;
    size_t scratch_len;

    dlock_lock *l;
    dlock__loop *loop;
    int64_t wait_ms;
    int waiting;           /* the wait (acq) runs: pokes go to it */
    dlock__engine_req ext; /* a re-entry's extend */
    dlock__op lost;        /* a lost hold's token taken out of the store */
    dlock__acq acq;        /* the wait */
} dlock__engine_acq;

/* Start an acquire of l on loop (dlock_lock_acquire()'s contract):
 * DLOCK_OK, and r->done(r) follows from loop with r->rc; any other code
 * was answered at once (no done). r stays put until then. */
int dlock__engine_acquire_start(dlock_lock *l, int64_t wait_ms, dlock__loop *loop,
                                dlock__engine_acq *r);
/* On r's loop, after its driver's wake(): a wake-up or a cancel may have
 * come for the wait. */
void dlock__engine_acquire_poked(dlock__engine_acq *r);
/* The blocking verbs: each start on a private loop (call.c). */
int dlock__engine_acquire(dlock_lock *l, int64_t wait_ms);
int dlock__engine_release(dlock_lock *l);
/* A lost handle's release lets go of its token in the store (backend.h,
 * release_lost_start), then answers ELOST. */
int dlock__engine_release_start(dlock_lock *l, dlock__loop *loop, dlock__engine_req *r);
/* ttl_ms: 1..DLOCK_TTL_MAX_MS, or 0 for the lock's TTL. */
int dlock__engine_extend(dlock_lock *l, int64_t ttl_ms);
int dlock__engine_extend_start(dlock_lock *l, int64_t ttl_ms, dlock__loop *loop,
                               dlock__engine_req *r);
int dlock__engine_adopt(dlock_lock *l, const char *token);
/* The settle of what is owed under the old token (backend.h,
 * settle_start), then the token is the handle's; token stays put until
 * done. */
int dlock__engine_adopt_start(dlock_lock *l, const char *token, dlock__loop *loop,
                              dlock__engine_req *r);
int dlock__engine_forget(dlock_lock *l);
/* Any thread. */
void dlock__engine_cancel(dlock_lock *l);
/* dlock_lock_free()'s store side: out of the watchdog, then everything
 * the handle owes or holds in the store let go, best effort. Not in a fork
 * child. The memory is the caller's. */
void dlock__engine_let_go(dlock_lock *l);
/* Its start (backend.h, cleanup_start): done follows with DLOCK_OK (best
 * effort); another code: nothing was sent, no done. */
int dlock__engine_let_go_start(dlock_lock *l, dlock__loop *loop, dlock__engine_req *r);

/* A backend found, inside an operation, that the handle's hold ended (or
 * was reported lost): renewal off, the backend's record dropped (its
 * drop()), holds 0, UNLOCKED; why (the code the store answered) is the
 * observer's hold_end reason. The handle's thread. */
void dlock__engine_ended(dlock_lock *l, int why);

/* The lost hook of every backend's renewal records (renewal.h): the
 * watchdog's verdict that a held lock is gone. The state becomes LOST and
 * on_lost is called once, outside the handle's mutex. `owner` is the
 * dlock_lock. */
void dlock__engine_renew_lost(void *owner, int reason);

/* dlock_lock_forget()'s end, once the backend (or a set's names) let go of
 * its record: no holds, UNLOCKED; DLOCK_ENOTHELD with the handle's message
 * if prior_state was UNLOCKED, else DLOCK_OK. */
int dlock__engine_forget_local(dlock_lock *l, dlock_lock_state prior_state);

/* The settle hook of every backend's renewal records (renewal.h): a
 * round's votes judged, the same way for every store. */
int dlock__engine_renew_settle(void *owner, const dlock__renew_votes *v);

#endif
