/* SPDX-License-Identifier: BSD-3-Clause */
/* The poll() test driver (tests/loop/): a hand-written poll() loop over
 * <dlock/poll.h>. */
#ifndef TEST_POLL_SUPPORT_H
#define TEST_POLL_SUPPORT_H

#include "loop_driver.h"

extern const test_loop_driver test_poll_driver;

#endif
