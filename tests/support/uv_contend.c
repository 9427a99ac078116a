/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <stdlib.h>

#include "uv_contend.h"
#include "uv_support.h"

typedef struct worker {
    dlock_lock *l;
    test_uv_board *b;
    int name;   /* index on the board */
    int name2;  /* a set's second name, or -1 */
    int reader; /* a shared lock's reader */
    int left;   /* cycles to go */
    int64_t asked_ms;
    uv_timer_t hold;
} worker;

static void go(worker *w);

static void cycle_over(worker *w)
{
    if (--w->left > 0)
        go(w);
    else
        w->b->done++;
}

static void released(dlock_lock *l, int rc, void *arg)
{
    worker *w = arg;
    (void)l;
    if (rc != DLOCK_OK)
        w->b->failed++;
    cycle_over(w);
}

static void held_long_enough(uv_timer_t *t)
{
    worker *w = t->data;
    test_uv_board *b = w->b;
    if (w->reader)
        b->readers[w->name]--;
    else
        b->writers[w->name]--;
    if (w->name2 >= 0)
        b->writers[w->name2]--;
    if (dlock_lock_release_start(w->l, released, w) != DLOCK_OK) {
        b->starts_refused++;
        cycle_over(w);
    }
}

/* The grant, checked against the board. */
static void mark(test_uv_board *b, worker *w, uint64_t fence)
{
    int n = w->name;
    if (w->reader) {
        if (b->writers[n] > 0)
            b->violations++;
        b->readers[n]++;
        return;
    }
    b->writers[n]++;
    unsigned cap = b->permits ? b->permits : 1;
    if ((unsigned)b->writers[n] > cap || b->readers[n] > 0)
        b->violations++;
    if (b->fenced) {
        if (fence <= b->fence[n])
            b->violations++;
        b->fence[n] = fence;
    }
    if (w->name2 >= 0 && ++b->writers[w->name2] > 1)
        b->violations++;
}

static void granted(dlock_lock *l, int rc, void *arg)
{
    worker *w = arg;
    test_uv_board *b = w->b;
    int64_t waited = test_uv_now_ms() - w->asked_ms;
    if (waited > b->longest_ms)
        b->longest_ms = waited;
    if (rc != DLOCK_OK) {
        b->failed++;
        cycle_over(w);
        return;
    }
    mark(b, w, dlock_lock_fence(l));
    uv_timer_start(&w->hold, held_long_enough, 2 + (uint64_t)(rand() % 3), 0);
}

static void go(worker *w)
{
    w->asked_ms = test_uv_now_ms();
    if (dlock_lock_acquire_start(w->l, 20000, granted, w) != DLOCK_OK) {
        w->b->starts_refused++;
        w->b->done++;
    }
}

static void closed(uv_handle_t *h)
{
    (void)h;
}

void test_uv_contend(uv_loop_t *loop, test_uv_board *b, int n, int n_names, int cycles,
                     int max_ms, test_uv_make_fn make, void *arg)
{
    worker *ws = calloc((size_t)n, sizeof *ws);
    if (!ws) {
        b->starts_refused = n;
        return;
    }
    for (int i = 0; i < n; i++) {
        ws[i].b = b;
        ws[i].name = i % n_names;
        ws[i].name2 = -1;
        ws[i].left = cycles;
        ws[i].l = make(arg, i, ws[i].name, &ws[i].reader, &ws[i].name2);
        uv_timer_init(loop, &ws[i].hold);
        ws[i].hold.data = &ws[i];
    }
    for (int i = 0; i < n; i++)
        go(&ws[i]);
    int64_t end = test_uv_now_ms() + max_ms;
    while (b->done < n && test_uv_now_ms() < end)
        uv_run(loop, UV_RUN_ONCE);
    printf("# %d workers, %d names, %d cycles: done %d, failed %d, violations %d, "
           "longest wait %lld ms\n",
           n, n_names, cycles, b->done, b->failed, b->violations, (long long)b->longest_ms);
    for (int i = 0; i < n; i++) {
        b->still_pending += dlock_lock_pending(ws[i].l);
        uv_close((uv_handle_t *)&ws[i].hold, closed);
        dlock_lock_free(ws[i].l);
    }
    uv_run(loop, UV_RUN_NOWAIT); /* the timers' closes, before ws goes */
    free(ws);
}
