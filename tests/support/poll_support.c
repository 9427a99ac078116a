/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>

#include "dlock/poll.h"
#include "poll_support.h"

#define MAX_FDS 256
#define MAX_LATER 8

static dlock_poll dp;

/* The test's own timers (after()): what a program's loop has beside dlock. */
static struct {
    int64_t due_ms;
    void (*fn)(void *);
    void *arg;
} later[MAX_LATER];
static int n_later;

static int poll_open(void)
{
    dlock_poll_init(&dp);
    n_later = 0;
    return 0;
}

static dlock_loop poll_hooks(void)
{
    return dlock_poll_loop(&dp);
}

static void run_later(void)
{
    int64_t now = test_loop_now_ms();
    for (int i = 0; i < n_later; i++)
        if (later[i].due_ms <= now) {
            void (*fn)(void *) = later[i].fn;
            void *arg = later[i].arg;
            later[i] = later[--n_later];
            fn(arg);
            i = -1; /* fn may have added one */
            now = test_loop_now_ms();
        }
}

static void poll_turn(int max_ms)
{
    struct pollfd fds[MAX_FDS];
    int timeout_ms = max_ms;
    int64_t now = test_loop_now_ms();
    for (int i = 0; i < n_later; i++)
        if (later[i].due_ms - now < timeout_ms)
            timeout_ms = later[i].due_ms > now ? (int)(later[i].due_ms - now) : 0;
    size_t n = dlock_poll_fill(&dp, fds, MAX_FDS, &timeout_ms);
    if (n > MAX_FDS)
        abort();
    poll(fds, n, timeout_ms);
    dlock_poll_process(&dp, fds, n);
    run_later();
}

static int poll_idle(void)
{
    return dlock_poll_pending(&dp) == 0 && n_later == 0;
}

static int poll_close(void)
{
    int rc = dlock_poll_pending(&dp) == 0 ? 0 : -1;
    dlock_poll_free(&dp);
    return rc;
}

static void poll_after(int ms, void (*fn)(void *), void *arg)
{
    if (n_later == MAX_LATER)
        abort();
    later[n_later].due_ms = test_loop_now_ms() + ms;
    later[n_later].fn = fn;
    later[n_later].arg = arg;
    n_later++;
}

const test_loop_driver test_poll_driver = {
    .name = "poll",
    .open = poll_open,
    .hooks = poll_hooks,
    .turn = poll_turn,
    .idle = poll_idle,
    .close = poll_close,
    .after = poll_after,
};
