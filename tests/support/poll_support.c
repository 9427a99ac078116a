/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>

#include "dlock/poll.h"
#include "poll_support.h"

#define MAX_FDS 256

static dlock_poll dp;

static int poll_open(void)
{
    dlock_poll_init(&dp);
    return 0;
}

static dlock_loop poll_hooks(void)
{
    return dlock_poll_loop(&dp);
}

/* A program's turn: its own timeout (max_ms) lowered to dlock's timers. */
static void poll_turn(int max_ms)
{
    struct pollfd fds[MAX_FDS];
    int timeout_ms = max_ms;
    size_t n = dlock_poll_fill(&dp, fds, MAX_FDS, &timeout_ms);
    if (n > MAX_FDS)
        abort();
    poll(fds, n, timeout_ms);
    dlock_poll_process(&dp, fds, n);
}

static int poll_idle(void)
{
    return dlock_poll_pending(&dp) == 0;
}

static int poll_close(void)
{
    int rc = dlock_poll_pending(&dp) == 0 ? 0 : -1;
    dlock_poll_free(&dp);
    return rc;
}

const test_loop_driver test_poll_driver = {
    .name = "poll",
    .open = poll_open,
    .hooks = poll_hooks,
    .turn = poll_turn,
    .idle = poll_idle,
    .close = poll_close,
};
