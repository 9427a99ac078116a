/* SPDX-License-Identifier: BSD-3-Clause */
/* A cmocka fixture: three redis-servers for a Redlock, the last behind the
 * chaos suite's fault proxy (tests/chaos/proxy.h), whose mode a test sets
 * to make that one node bad. Not in dlock_test_support: a test file that
 * uses it is built with this file and chaos/proxy.c (tests/CMakeLists.txt). */
#ifndef DLOCK_TEST_PROXIED_REDLOCK_H
#define DLOCK_TEST_PROXIED_REDLOCK_H

#include "proxy.h"
#include "redis_server.h"

#define TEST_PROXIED_N 3
extern test_redis test_pnodes[TEST_PROXIED_N];
extern chaos_proxy test_proxy; /* in front of test_pnodes[TEST_PROXIED_N - 1] */

/* Group setup/teardown: start the servers and the proxy (-1, nothing left
 * running, if one does not start) / stop them. */
int test_proxied_setup(void **state);
int test_proxied_teardown(void **state);

#endif
