/* SPDX-License-Identifier: BSD-3-Clause */
/* A blocking call over the engine (docs/dev/engine-plan.md §4.5): the
 * calling thread makes a private loop (loop_poll.h), starts the engine's
 * request on it and turns the loop until the request is done. Another
 * thread reaches a running call only through dlock__call_poke() (a
 * wake-up message, a cancel): the call's thread then runs the poke
 * callback between two turns, so only the call's side changes its state. */
#ifndef DLOCK_CALL_H
#define DLOCK_CALL_H

#include <stdatomic.h>
#include <stdint.h>

#include "acquire.h"
#include "common.h"
#include "loop_poll.h"
#include "op.h"

typedef struct dlock__call {
    dlock__loop_poll lp;  /* lp.loop: the loop the call's requests run on */
    int done;             /* set by the request's completion: the call returns */
    atomic_int poked;     /* set by dlock__call_poke() from any thread */
    /* Run on the call's thread after a poke (its loop turned). */
    void (*on_poke)(void *arg);
    void *poke_arg;
    dlock_lock *wake_owner; /* whose eventfd a waiting verb's loop borrows */
} dlock__call;

void dlock__call_init(dlock__call *c);
/* Let other threads poke the call (its loop gets a wake-up eventfd: two
 * system calls, so only a call that will wait asks). DLOCK_OK or
 * DLOCK_EIO; without it a poke is seen at the loop's next turn only. */
int dlock__call_wakeable(dlock__call *c);
/* Any thread (arg: the dlock__call): make the call run its on_poke. */
void dlock__call_poke(void *arg);
/* The hooks a verb that may sleep gets from the call (acquire.h): the
 * loop is made wakeable with l's eventfd (made on its first wait, kept
 * until l is freed), wake() is dlock__call_poke(), and with no fd to spare
 * the sleep is on l's condition variable. The verb's own poke handler is
 * the caller's to set (on_poke, poke_arg). */
void dlock__call_wait_hooks(dlock__call *c, dlock_lock *l, dlock__wait_hooks *h);
/* Turn the loop until c->done. */
void dlock__call_run(dlock__call *c);
void dlock__call_close(dlock__call *c);

/* The blocking acquire of a kind the engine waits for (acquire.h):
 * dlock__engine_acquire()'s contract; deadline_ns from wait_ms. */
int dlock__call_acquire(dlock_lock *l, int64_t wait_ms, int64_t deadline_ns);

#endif
