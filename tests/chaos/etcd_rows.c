/* SPDX-License-Identifier: BSD-3-Clause */
/* Chaos rows on the etcd backend: the scenario's nodes are members of one
 * etcd cluster started by the harness (tests/support/etcd_server.c), the
 * workers reach it through one etcd:// URL, and faults go to members by
 * pid: the leader killed with SIGKILL and restarted, or a member stopped
 * with SIGSTOP and continued. */
#include <stdio.h>

#include "chaos.h"

#ifdef CHAOS_WITH_ETCD
#include "etcd_server.h"

/* Fault kinds in the history (the numbers inject.c uses for the same). */
#define F_KILL_NODE 3
#define F_STOP_NODE 5

static test_etcd cluster; /* one scenario runs at a time */

int chaos_etcd_setup(chaos_run *run)
{
    if (test_etcd_start(&cluster, run->sc->nodes) != 0)
        return -1;
    if ((size_t)snprintf(run->urls[0], sizeof run->urls[0], "%s", cluster.url) >=
        sizeof run->urls[0]) {
        test_etcd_stop(&cluster);
        return -1;
    }
    run->wcfg.urls[0] = run->urls[0];
    return 0;
}

void chaos_etcd_teardown(chaos_run *run)
{
    (void)run;
    test_etcd_stop(&cluster);
}

int chaos_inject_etcd_member(chaos_run *run, int round)
{
    if (round % 2 == 0) {
        int leader = test_etcd_leader(&cluster, 3000);
        if (leader < 0)
            leader = (int)chaos_rand(run, (unsigned)cluster.n);
        test_etcd_kill9(&cluster, leader);
        chaos_fault(run, F_KILL_NODE);
        chaos_sleep_ms(1500);
        if (test_etcd_restart(&cluster, leader) != 0)
            run->probe_failed = 1;
    } else {
        int m = (int)chaos_rand(run, (unsigned)cluster.n);
        test_etcd_pause(&cluster, m);
        chaos_fault(run, F_STOP_NODE);
        chaos_sleep_ms(2000);
        test_etcd_resume(&cluster, m);
    }
    return 1;
}

#else /* a build without the etcd backend has no etcd rows */

int chaos_etcd_setup(chaos_run *run)
{
    (void)run;
    return -1;
}

void chaos_etcd_teardown(chaos_run *run)
{
    (void)run;
}

int chaos_inject_etcd_member(chaos_run *run, int round)
{
    (void)run;
    (void)round;
    return 0;
}
#endif
