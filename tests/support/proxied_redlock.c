/* SPDX-License-Identifier: BSD-3-Clause */
#include "proxied_redlock.h"

test_redis test_pnodes[TEST_PROXIED_N];
chaos_proxy test_proxy;

int test_proxied_setup(void **state)
{
    (void)state;
    if (test_redis_start_many(test_pnodes, TEST_PROXIED_N, NULL) != 0)
        return -1;
    if (chaos_proxy_start(&test_proxy, test_pnodes[TEST_PROXIED_N - 1].port) != 0) {
        test_redis_stop_many(test_pnodes, TEST_PROXIED_N);
        return -1;
    }
    return 0;
}

int test_proxied_teardown(void **state)
{
    (void)state;
    chaos_proxy_stop(&test_proxy);
    test_redis_stop_many(test_pnodes, TEST_PROXIED_N);
    return 0;
}
