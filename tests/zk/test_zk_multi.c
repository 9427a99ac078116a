/* SPDX-License-Identifier: BSD-3-Clause */
/* Several names at once on ZooKeeper (issue 41): the shared body
 * (support/store_multi.c) against one real member; skipped without java
 * and Debian's zookeeper package. */
#include <stdio.h>

#include "store_multi.h"
#include "zk_server.h"

int main(void)
{
    if (!test_zk_available()) {
        printf("no ZooKeeper (apt-get install zookeeper): skipped\n");
        return 0;
    }
    test_zk srv;
    if (test_zk_start(&srv) != 0)
        return 1;
    int failed = test_store_multi_run(srv.url);
    test_zk_stop(&srv);
    return failed;
}
