/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>

#include "worker_loop.h"

#ifdef CHAOS_WITH_LIBUV
#include <uv.h>

#include "dlock/libuv.h"

struct chaos_loop {
    uv_loop_t loop;
    dlock_loop hooks;
};

typedef struct answer {
    int rc, calls;
    dlock_lock *lock;
    uv_timer_t cancel;
} answer;

static void answered(dlock_lock *l, int rc, void *arg)
{
    answer *a = arg;
    (void)l;
    a->rc = rc;
    a->calls++;
}

static void cancel_due(uv_timer_t *t)
{
    answer *a = t->data;
    if (!a->calls)
        dlock_lock_cancel(a->lock);
}

chaos_loop *chaos_loop_new(void)
{
    chaos_loop *lp = calloc(1, sizeof *lp);
    if (!lp || uv_loop_init(&lp->loop) != 0) {
        free(lp);
        return NULL;
    }
    lp->hooks = dlock_libuv_loop(&lp->loop);
    return lp;
}

const dlock_loop *chaos_loop_hooks(chaos_loop *lp)
{
    return &lp->hooks;
}

/* Turn the loop until a's callback came. */
static int turn_until(chaos_loop *lp, answer *a)
{
    while (!a->calls)
        uv_run(&lp->loop, UV_RUN_ONCE);
    return a->rc;
}

int chaos_loop_acquire(chaos_loop *lp, dlock_lock *l, int64_t wait_ms, int64_t cancel_after_ms)
{
    answer a = {.lock = l};
    int rc = dlock_lock_acquire_start(l, wait_ms, answered, &a);
    if (rc != DLOCK_OK)
        return rc;
    if (cancel_after_ms < 0)
        return turn_until(lp, &a);
    uv_timer_init(&lp->loop, &a.cancel);
    a.cancel.data = &a;
    uv_timer_start(&a.cancel, cancel_due, (uint64_t)cancel_after_ms, 0);
    rc = turn_until(lp, &a);
    uv_timer_stop(&a.cancel);
    uv_close((uv_handle_t *)&a.cancel, NULL);
    uv_run(&lp->loop, UV_RUN_NOWAIT); /* the close's callback: `a` goes with this frame */
    return rc;
}

int chaos_loop_release(chaos_loop *lp, dlock_lock *l)
{
    answer a = {.lock = l};
    int rc = dlock_lock_release_start(l, answered, &a);
    return rc != DLOCK_OK ? rc : turn_until(lp, &a);
}

void chaos_loop_free(chaos_loop *lp)
{
    if (!lp)
        return;
    uv_run(&lp->loop, UV_RUN_DEFAULT);
    (void)uv_loop_close(&lp->loop);
    free(lp);
}

#else /* no libuv: no looped rows */

chaos_loop *chaos_loop_new(void)
{
    return NULL;
}

const dlock_loop *chaos_loop_hooks(chaos_loop *lp)
{
    (void)lp;
    return NULL;
}

int chaos_loop_acquire(chaos_loop *lp, dlock_lock *l, int64_t wait_ms, int64_t cancel_after_ms)
{
    (void)lp;
    (void)l;
    (void)wait_ms;
    (void)cancel_after_ms;
    return DLOCK_ENOTSUP;
}

int chaos_loop_release(chaos_loop *lp, dlock_lock *l)
{
    (void)lp;
    (void)l;
    return DLOCK_ENOTSUP;
}

void chaos_loop_free(chaos_loop *lp)
{
    (void)lp;
}
#endif
