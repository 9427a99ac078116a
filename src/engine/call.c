/* SPDX-License-Identifier: BSD-3-Clause */
/* The blocking call over the engine (call.h): the blocking verbs are
 * the engine's starts (engine.h) on a private loop, turned until done. */
#include <stddef.h>
#include <string.h>

#include "acquire.h"
#include "backend.h"
#include "call.h"
#include "engine.h"
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

/* ---- acquire ---------------------------------------------------------------- */

/* A blocking wait: the engine's acquire (or, for tests, its wait alone)
 * on the call's loop, reached by other threads through the call's poke. */
typedef struct blocking_acquire {
    dlock__call call;
    dlock_lock *l;
    dlock__engine_acq r; /* the verb's; its acq is the wait */
    dlock__acq *acq;     /* the wait alone (dlock__call_acquire) */
} blocking_acquire;

/* The handle's eventfd, kept for all its waits, not one per wait. */
static int call_wakeable(void *arg)
{
    dlock__call *c = arg;
    int fd = dlock__lock_wake_fd(DLOCK__OWNER(c, blocking_acquire, call)->l);
    if (fd < 0)
        return DLOCK_EIO;
    dlock__loop_poll_lend_wake(&c->lp, fd);
    return DLOCK_OK;
}

static void acquired(dlock__engine_acq *r)
{
    DLOCK__OWNER(r, blocking_acquire, r)->call.done = 1;
}

static void acq_poked(void *arg)
{
    blocking_acquire *b = arg;
    if (b->acq)
        dlock__acq_poked(b->acq);
    else
        dlock__engine_acquire_poked(&b->r);
}

static void blocking_acquire_init(blocking_acquire *b, dlock_lock *l)
{
    dlock__call_init(&b->call);
    b->l = l;
    b->acq = NULL;
    b->call.on_poke = acq_poked;
    b->call.poke_arg = b;
}

int dlock__engine_acquire(dlock_lock *l, int64_t wait_ms)
{
    /* Lent to a lost hold's let-go (op.h, scratch). */
    _Alignas(max_align_t) unsigned char mem[DLOCK__OP_SCRATCH];
    blocking_acquire b;
    blocking_acquire_init(&b, l);
    b.r.done = acquired;
    b.r.wakeable = call_wakeable;
    b.r.wake = dlock__call_poke;
    b.r.wake_arg = &b.call;
    b.r.sleep_blocking = dlock__lock_sleep_until; /* when its loop cannot be woken */
    b.r.scratch = mem;
    b.r.scratch_len = sizeof mem;
    int rc = dlock__engine_acquire_start(l, wait_ms, &b.call.lp.loop, &b.r);
    if (rc == DLOCK_OK) {
        dlock__call_run(&b.call);
        rc = b.r.rc;
    }
    dlock__call_close(&b.call);
    return rc;
}

static void waited(dlock__acq *a)
{
    DLOCK__OWNER(a, blocking_acquire, r.acq)->call.done = 1;
}

int dlock__call_acquire(dlock_lock *l, int64_t wait_ms, int64_t deadline_ns)
{
    blocking_acquire b;
    blocking_acquire_init(&b, l);
    b.acq = &b.r.acq;
    dlock__acq_init(b.acq, l, wait_ms, deadline_ns, &b.call.lp.loop, waited);
    b.acq->wakeable = call_wakeable;
    b.acq->wake = dlock__call_poke;
    b.acq->wake_arg = &b.call;
    b.acq->sleep_blocking = dlock__lock_sleep_until;
    dlock__acq_start(b.acq);
    dlock__call_run(&b.call);
    dlock__call_close(&b.call);
    return b.acq->rc;
}

/* ---- release and extend ---------------------------------------------------- */

typedef struct blocking_verb {
    dlock__call call;
    dlock__engine_req r;
    dlock_lock *l;
    int64_t ttl_ms;
} blocking_verb;

static void verb_done(dlock__engine_req *r)
{
    DLOCK__OWNER(r, blocking_verb, r)->call.done = 1;
}

/* A verb's start on a private loop, turned until it is done (never made
 * wakeable: nothing but the request's own replies can end it, so a lone
 * socket still waits alone, loop.h). */
static int run_blocking(blocking_verb *b, int (*start)(blocking_verb *b))
{
    dlock__call_init(&b->call);
    b->r.done = verb_done;
    int rc = start(b);
    if (rc == DLOCK_OK) {
        dlock__call_run(&b->call);
        rc = b->r.rc;
    }
    dlock__call_close(&b->call);
    return rc;
}

static int start_extend(blocking_verb *b)
{
    return dlock__engine_extend_start(b->l, b->ttl_ms, &b->call.lp.loop, &b->r);
}

static int start_release(blocking_verb *b)
{
    return dlock__engine_release_start(b->l, &b->call.lp.loop, &b->r);
}

int dlock__engine_extend(dlock_lock *l, int64_t ttl_ms)
{
    blocking_verb b = {.l = l, .ttl_ms = ttl_ms};
    return run_blocking(&b, start_extend);
}

int dlock__engine_release(dlock_lock *l)
{
    /* Lent to a lost hold's let-go (op.h, scratch). */
    _Alignas(max_align_t) unsigned char mem[DLOCK__OP_SCRATCH];
    blocking_verb b = {.l = l, .r = {.scratch = mem, .scratch_len = sizeof mem}};
    return run_blocking(&b, start_release);
}

/* ---- what a handle leaves ------------------------------------------------- */

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
