/* SPDX-License-Identifier: BSD-3-Clause */
/* Locks on a libevent base through <dlock/libevent.h>: the shared body
 * (support/loop_locks.c) on the libevent driver; its close checks that
 * event_base_dispatch() returns 1 (no event left) once the client is
 * freed. */
#include "event_support.h"

int main(void)
{
    return test_loop_locks_run(&test_event_driver);
}
