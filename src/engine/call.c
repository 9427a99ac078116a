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
#include "set.h"

void dlock__call_init(dlock__call *c)
{
    dlock__loop_poll_init(&c->lp);
    c->done = 0;
    atomic_init(&c->poked, 0);
    c->on_poke = NULL;
    c->poke_arg = NULL;
    c->wake_owner = NULL;
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

/* A verb's start answered rc: a started one (DLOCK_OK) is turned until
 * its done, and *answer is what it answered; then the call closes. */
static int turn_until_answered(dlock__call *c, int rc, const int *answer)
{
    if (rc == DLOCK_OK) {
        dlock__call_run(c);
        rc = *answer;
    }
    dlock__call_close(c);
    return rc;
}

/* ---- acquire ---------------------------------------------------------------- */

/* The handle's eventfd, kept for all its waits, not one per wait. */
static int call_wakeable(void *arg)
{
    dlock__call *c = arg;
    int fd = dlock__lock_wake_fd(c->wake_owner);
    if (fd < 0)
        return DLOCK_EIO;
    dlock__loop_poll_lend_wake(&c->lp, fd);
    return DLOCK_OK;
}

void dlock__call_wait_hooks(dlock__call *c, dlock_lock *l, dlock__wait_hooks *h)
{
    c->wake_owner = l;
    h->wakeable = call_wakeable;
    h->wake = dlock__call_poke;
    h->wake_arg = c;
    h->sleep_blocking = dlock__lock_sleep_until; /* when its loop cannot be woken */
}

typedef struct blocking_acquire {
    dlock__call call;
    dlock__engine_acq r; /* the verb's; its acq is the wait */
} blocking_acquire;

static void acquired(dlock__engine_acq *r)
{
    DLOCK__OWNER(r, blocking_acquire, r)->call.done = 1;
}

static void acquire_poked(void *arg)
{
    dlock__engine_acquire_poked(arg);
}

int dlock__engine_acquire(dlock_lock *l, int64_t wait_ms)
{
    /* Lent to the acquire's requests in turn (op.h, scratch): a try's
     * record, a lost hold's let-go. */
    _Alignas(max_align_t) unsigned char mem[DLOCK__OP_SCRATCH];
    blocking_acquire b;
    dlock__call_init(&b.call);
    dlock__call_wait_hooks(&b.call, l, &b.r.hooks);
    b.call.on_poke = acquire_poked;
    b.call.poke_arg = &b.r;
    b.r.done = acquired;
    b.r.scratch = mem;
    b.r.scratch_len = sizeof mem;
    return turn_until_answered(&b.call,
                               dlock__engine_acquire_start(l, wait_ms, &b.call.lp.loop, &b.r),
                               &b.r.rc);
}

typedef struct blocking_wait {
    dlock__call call;
    dlock__acq acq;
} blocking_wait;

static void waited(dlock__acq *a)
{
    DLOCK__OWNER(a, blocking_wait, acq)->call.done = 1;
}

static void wait_poked(void *arg)
{
    dlock__acq_poked(arg);
}

int dlock__call_acquire(dlock_lock *l, int64_t wait_ms, int64_t deadline_ns)
{
    blocking_wait b;
    dlock__call_init(&b.call);
    dlock__acq_init(&b.acq, l, wait_ms, deadline_ns, &b.call.lp.loop, waited);
    dlock__call_wait_hooks(&b.call, l, &b.acq.hooks);
    b.call.on_poke = wait_poked;
    b.call.poke_arg = &b.acq;
    dlock__acq_start(&b.acq);
    dlock__call_run(&b.call);
    dlock__call_close(&b.call);
    return b.acq.rc;
}

/* ---- release and extend ---------------------------------------------------- */

typedef struct blocking_verb {
    dlock__call call;
    dlock__engine_req r;
    dlock_lock *l;
    int64_t ttl_ms;
    const char *token;
} blocking_verb;

static void verb_done(dlock__engine_req *r)
{
    DLOCK__OWNER(r, blocking_verb, r)->call.done = 1;
}

/* A verb's start on a private loop, turned until it is done (never made
 * wakeable: nothing but the request's own replies can end it, so a lone
 * socket still waits alone, loop.h). */
static int run_blocking(dlock_lock *l, int64_t ttl_ms, const char *token,
                        int (*start)(blocking_verb *b))
{
    /* Lent to the verb's request (op.h, scratch): its record needs no
     * allocation, and what a handle leaves is settled without memory. */
    _Alignas(max_align_t) unsigned char mem[DLOCK__OP_SCRATCH];
    /* Not zeroed whole: the call's loop clears what it reads (its turn's
     * arrays are 1 KB), and every release or extend makes one. */
    blocking_verb b;
    dlock__call_init(&b.call);
    b.r = (dlock__engine_req){.done = verb_done, .scratch = mem, .scratch_len = sizeof mem};
    b.l = l;
    b.ttl_ms = ttl_ms;
    b.token = token;
    return turn_until_answered(&b.call, start(&b), &b.r.rc);
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
    return run_blocking(l, ttl_ms, NULL, start_extend);
}

int dlock__engine_release(dlock_lock *l)
{
    return run_blocking(l, 0, NULL, start_release);
}

static int start_adopt(blocking_verb *b)
{
    return dlock__engine_adopt_start(b->l, b->token, &b->call.lp.loop, &b->r);
}

static int start_let_go(blocking_verb *b)
{
    return dlock__engine_let_go_start(b->l, &b->call.lp.loop, &b->r);
}

int dlock__engine_adopt(dlock_lock *l, const char *token)
{
    return run_blocking(l, 0, token, start_adopt);
}

void dlock__engine_let_go(dlock_lock *l)
{
    (void)run_blocking(l, 0, NULL, start_let_go); /* best effort */
}

/* ---- a set of names ---------------------------------------------------------- */

typedef struct blocking_set {
    dlock__call call;
    dlock__set_req r;
    dlock_lock *set;
    int64_t arg; /* wait_ms or ttl_ms */
} blocking_set;

static void set_done(dlock__set_req *r)
{
    DLOCK__OWNER(r, blocking_set, r)->call.done = 1;
}

static void set_poked(void *arg)
{
    dlock__set_poked(arg);
}

/* A set's verb: its start on a private loop, made wakeable (with the
 * set's eventfd) when a name's wait first sleeps. */
static int run_set(dlock_lock *set, int64_t arg, int (*start)(blocking_set *b))
{
    /* Lent to the names' requests in turn (op.h, scratch). */
    _Alignas(max_align_t) unsigned char mem[DLOCK__OP_SCRATCH];
    blocking_set b;
    dlock__call_init(&b.call);
    dlock__call_wait_hooks(&b.call, set, &b.r.hooks);
    b.call.on_poke = set_poked;
    b.call.poke_arg = &b.r;
    b.r.done = set_done;
    b.r.scratch = mem;
    b.r.scratch_len = sizeof mem;
    b.set = set;
    b.arg = arg;
    return turn_until_answered(&b.call, start(&b), &b.r.rc);
}

static int start_set_acquire(blocking_set *b)
{
    return dlock__set_acquire_start(b->set, b->arg, &b->call.lp.loop, &b->r);
}

static int start_set_release(blocking_set *b)
{
    return dlock__set_release_start(b->set, &b->call.lp.loop, &b->r);
}

static int start_set_extend(blocking_set *b)
{
    return dlock__set_extend_start(b->set, b->arg, &b->call.lp.loop, &b->r);
}

int dlock__set_acquire(dlock_lock *set, int64_t wait_ms)
{
    return run_set(set, wait_ms, start_set_acquire);
}

int dlock__set_release(dlock_lock *set)
{
    return run_set(set, 0, start_set_release);
}

int dlock__set_extend(dlock_lock *set, int64_t ttl_ms)
{
    return run_set(set, ttl_ms, start_set_extend);
}
