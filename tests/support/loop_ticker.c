/* SPDX-License-Identifier: BSD-3-Clause */
#include "loop_ticker.h"
#include "clock.h"

#define TICK_MS 20

static void ticked(dlock__timer *timer)
{
    test_ticker *t = DLOCK__OWNER(timer, test_ticker, timer);
    int64_t now = dlock__now_ns();
    if (now - t->last_ns > t->max_gap_ns)
        t->max_gap_ns = now - t->last_ns;
    t->last_ns = now;
    t->ticks++;
    timer->due_ns = now + TICK_MS * DLOCK__NS_PER_MS;
    (void)dlock__timer_set(t->loop, timer);
}

void test_ticker_start(test_ticker *t, dlock__loop *loop)
{
    *t = (test_ticker){.loop = loop};
    t->timer.fire = ticked;
    t->last_ns = dlock__now_ns();
    t->timer.due_ns = t->last_ns + TICK_MS * DLOCK__NS_PER_MS;
    (void)dlock__timer_set(loop, &t->timer);
}

void test_ticker_stop(test_ticker *t)
{
    dlock__timer_clear(t->loop, &t->timer);
}
