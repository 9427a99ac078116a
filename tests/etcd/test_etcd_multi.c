/* SPDX-License-Identifier: BSD-3-Clause */
/* Several names at once on etcd (issue 38): the shared body
 * (support/store_multi.c) against one real etcd member. */
#include <stdio.h>

#include "etcd_server.h"
#include "store_multi.h"

int main(void)
{
    test_etcd srv;
    if (test_etcd_start(&srv, 1) != 0)
        return 1;
    int failed = test_store_multi_run(srv.url);
    test_etcd_stop(&srv);
    return failed;
}
