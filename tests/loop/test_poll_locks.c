/* SPDX-License-Identifier: BSD-3-Clause */
/* Locks in a hand-written poll() loop through <dlock/poll.h>: the shared
 * body (support/loop_locks.c) on the poll driver. */
#include "poll_support.h"

int main(void)
{
    return test_loop_locks_run(&test_poll_driver);
}
