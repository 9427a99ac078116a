/* SPDX-License-Identifier: BSD-3-Clause */
/* Locks on a libuv loop through <dlock/libuv.h>: the shared body
 * (support/loop_locks.c) on the libuv driver. */
#include "uv_support.h"

int main(void)
{
    return test_loop_locks_run(&test_uv_driver);
}
