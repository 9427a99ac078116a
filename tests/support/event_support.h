/* SPDX-License-Identifier: BSD-3-Clause */
/* The libevent test driver (tests/loop/): one event_base at a time. */
#ifndef TEST_EVENT_SUPPORT_H
#define TEST_EVENT_SUPPORT_H

#include "loop_driver.h"

extern const test_loop_driver test_event_driver;

#endif
