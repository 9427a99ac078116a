/* SPDX-License-Identifier: BSD-3-Clause */
/* Several names taken at once (dlock_lock_new_multi()): a composite above
 * single locks. The set's handle owns one handle per name and drives them
 * through the engine (engine.h), in sorted order, all or none
 * (docs/primitives.md). The public verbs hand a set's handle here (lock.c,
 * `if (l->set)`); their arguments are checked already. Same contracts,
 * return codes and messages as the public verbs in dlock.h. */
#ifndef DLOCK_SET_H
#define DLOCK_SET_H

#include <stdint.h>

#include "common.h"
#include "engine.h"

/* The set's names, sorted: the order they are taken in. */
struct dlock__set {
    size_t n;
    dlock_lock *names[];
};

/* A name's watch (handle.h), arg the set: set.c. */
void dlock__set_name_moved(void *arg, int lost);

/* A verb of a set in flight: a chain of its names' engine requests
 * (engine.h) on one loop, one name at a time. The driver fills done, the
 * waits' hooks (acquire.h) and may lend scratch memory (op.h); the rest is
 * the chain's own. A start returns DLOCK_OK and done(r) follows from the
 * loop with r->rc, or returns the answer it gave at once (no done). */
typedef struct dlock__set_req {
    void (*done)(struct dlock__set_req *r);
    int rc;
    dlock__wait_hooks hooks;
    void *scratch;
    size_t scratch_len;

    dlock_lock *set;
    dlock__loop *loop;
    int64_t wait_ms, deadline_ns; /* acquire */
    int64_t ttl_ms, old_end_ns;   /* extend */
    size_t i;                     /* the name in flight (acquire, extend) */
    size_t back;                  /* names left to give back, the last first */
    int back_rc;                  /* the give-back's first failure */
    int answer_rc;                /* the verb's answer once given back */
    enum {
        DLOCK__SET_NAME_SAYS, /* the failed name's message, if any */
        DLOCK__SET_WAS_LOST,
        DLOCK__SET_HAD_ENDED
    } why; /* ... and its message */
    void (*then)(struct dlock__set_req *r); /* after the give-back */
    int acquiring;                /* a name's acquire runs: pokes go to it */
    int in_start, answered;
    dlock__timer defer;
    dlock__engine_acq name; /* a name's acquire */
    dlock__engine_req rel;  /* a name's release or extend */
} dlock__set_req;

int dlock__set_acquire_start(dlock_lock *set, int64_t wait_ms, dlock__loop *loop,
                             dlock__set_req *r);
int dlock__set_release_start(dlock_lock *set, dlock__loop *loop, dlock__set_req *r);
int dlock__set_extend_start(dlock_lock *set, int64_t ttl_ms, dlock__loop *loop,
                            dlock__set_req *r);
/* On r's loop, after the driver's wake(): for the name being waited for. */
void dlock__set_poked(dlock__set_req *r);

/* The blocking verbs: each start on a private loop (call.c). */
int dlock__set_acquire(dlock_lock *set, int64_t wait_ms);
int dlock__set_release(dlock_lock *set);
int dlock__set_extend(dlock_lock *set, int64_t ttl_ms);
int dlock__set_adopt(dlock_lock *set); /* never: a set has no token of its own */
int dlock__set_forget(dlock_lock *set);
void dlock__set_cancel(dlock_lock *set); /* any thread */
/* Every name let go (not in a fork child) and freed, then the set. */
void dlock__set_free(dlock_lock *set);
/* The set's memory, its names' too, with nothing let go (the end of a
 * free that let go of each name itself, async.c). */
void dlock__set_destroy(dlock_lock *set);

#endif
