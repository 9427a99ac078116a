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

#include "common.h"
#include "loop.h"
#include "op.h"
#include "watchdog.h"

/* A verb of the engine in flight (docs/dev/async-plan.md, Stage A): its
 * start runs on the caller's thread and hands the backend a request on
 * loop; done(r) runs once from loop with r->rc (the verb's code), never
 * inside the start. A start that returns other than DLOCK_OK answered at
 * once with that code and runs no done. So far release and extend are
 * such verbs; the blocking dlock__engine_release() and _extend() are their
 * starts on a private loop (call.h). */
typedef struct dlock__engine_req {
    dlock__op op; /* the backend's request */
    void (*done)(struct dlock__engine_req *r);
    int rc;
    int last_hold; /* the release's: the handle's last hold goes */
    /* The extend's, from its start to its completion. */
    int renewed;         /* it took the hold out of the watchdog */
    int64_t due_ns;      /* when that renewal was due */
    int64_t deadline_ns; /* the lease's end: a later answer proves nothing */
} dlock__engine_req;

int dlock__engine_acquire(dlock_lock *l, int64_t wait_ms);
int dlock__engine_release(dlock_lock *l);
/* A lost handle's release still lets go of its token in the store on a
 * private loop inside the start (let_go_of_lost), then answers ELOST. */
int dlock__engine_release_start(dlock_lock *l, dlock__loop *loop, dlock__engine_req *r);
/* ttl_ms: 1..DLOCK_TTL_MAX_MS, or 0 for the lock's TTL. */
int dlock__engine_extend(dlock_lock *l, int64_t ttl_ms);
int dlock__engine_extend_start(dlock_lock *l, int64_t ttl_ms, dlock__loop *loop,
                               dlock__engine_req *r);
int dlock__engine_adopt(dlock_lock *l, const char *token);
int dlock__engine_forget(dlock_lock *l);
/* Any thread. */
void dlock__engine_cancel(dlock_lock *l);
/* dlock_lock_free()'s store side: out of the watchdog, then everything
 * the handle owes or holds in the store let go, best effort. Not in a fork
 * child. The memory is the caller's. */
void dlock__engine_let_go(dlock_lock *l);

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
