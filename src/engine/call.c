/* SPDX-License-Identifier: BSD-3-Clause */
/* The blocking call over the engine (call.h). */
#include <stddef.h>
#include <string.h>

#include "acquire.h"
#include "backend.h"
#include "call.h"
#include "handle.h"

void dlock__call_init(dlock__call *c)
{
    dlock__loop_poll_init(&c->lp);
    c->done = 0;
    atomic_init(&c->poked, 0);
    c->on_poke = NULL;
    c->poke_arg = NULL;
}

int dlock__call_wakeable(dlock__call *c)
{
    return dlock__loop_poll_wakeable(&c->lp);
}

void dlock__call_poke(void *arg)
{
    dlock__call *c = arg;
    atomic_store(&c->poked, 1);
    dlock__wake(&c->lp.loop);
}

static int call_turned(void *arg)
{
    dlock__call *c = arg;
    return c->done || atomic_load(&c->poked);
}

void dlock__call_run(dlock__call *c)
{
    while (!c->done) {
        dlock__loop_poll_run(&c->lp, call_turned, c, INT64_MAX);
        if (!c->done && atomic_exchange(&c->poked, 0) && c->on_poke)
            c->on_poke(c->poke_arg);
    }
}

void dlock__call_close(dlock__call *c)
{
    dlock__loop_poll_close(&c->lp);
}

typedef struct blocking_acquire {
    dlock__call call;
    dlock__acq acq;
} blocking_acquire;

static void acquired(dlock__acq *a)
{
    DLOCK__OWNER(a, blocking_acquire, acq)->call.done = 1;
}

/* The handle's eventfd, kept for all its waits, not one per wait. */
static int call_wakeable(void *arg)
{
    dlock__call *c = arg;
    int fd = dlock__lock_wake_fd(DLOCK__OWNER(c, blocking_acquire, call)->acq.l);
    if (fd < 0)
        return DLOCK_EIO;
    dlock__loop_poll_lend_wake(&c->lp, fd);
    return DLOCK_OK;
}

static void acq_poked(void *arg)
{
    dlock__acq_poked(arg);
}

int dlock__call_acquire(dlock_lock *l, int64_t wait_ms, int64_t deadline_ns)
{
    blocking_acquire b;
    dlock__call_init(&b.call);
    dlock__acq_init(&b.acq, l, wait_ms, deadline_ns, &b.call.lp.loop, acquired);
    b.acq.wakeable = call_wakeable;
    b.acq.wake = dlock__call_poke;
    b.acq.wake_arg = &b.call;
    b.acq.sleep_blocking = dlock__lock_sleep_until; /* when its loop cannot be woken */
    b.call.on_poke = acq_poked;
    b.call.poke_arg = &b.acq;
    dlock__acq_start(&b.acq);
    dlock__call_run(&b.call);
    dlock__call_close(&b.call);
    return b.acq.rc;
}

typedef struct blocking_op {
    dlock__call call;
    dlock__op op;
} blocking_op;

static void op_done(dlock__op *op)
{
    DLOCK__OWNER(op, blocking_op, op)->call.done = 1;
}

/* Before the backend's start: the request is the call's, on its loop. */
static void op_begin(blocking_op *b, dlock_lock *l)
{
    dlock__call_init(&b->call);
    dlock__op_begin(&b->op, l, &b->call.lp.loop, op_done);
}

/* The backend's start returned rc: a started request is waited for, a
 * refused one has no done() (its message is the handle's already). */
static int op_end(blocking_op *b, int rc)
{
    if (rc == DLOCK_OK) {
        dlock__call_run(&b->call);
        rc = b->op.v.code;
    }
    dlock__call_close(&b->call);
    return rc;
}

int dlock__call_tidy(dlock_lock *l, int (*start)(dlock_lock *l, dlock__op *op))
{
    /* Lent to the request: free and adopt must not lose what is owed for
     * want of memory (op.h, scratch). */
    _Alignas(max_align_t) unsigned char mem[DLOCK__OP_SCRATCH];
    blocking_op b;
    op_begin(&b, l);
    b.op.scratch = mem;
    b.op.scratch_len = sizeof mem;
    return op_end(&b, start(l, &b.op));
}
