/* SPDX-License-Identifier: BSD-3-Clause */
/* Chaos rows on the ZooKeeper backend: the scenario's nodes are the
 * members of one ensemble started by the harness
 * (tests/support/zk_ensemble.c), the workers reach it through one zk://
 * URL naming them all, with a session timeout of the scenario's TTL, and
 * faults go to members by pid: the leader killed with SIGKILL and started
 * again, or a member stopped with SIGSTOP and continued. */
#include <signal.h>
#include <stdio.h>

#include "dlock.h"

#include "chaos.h"

#ifdef CHAOS_WITH_ZOOKEEPER
#include "proc.h"
#include "zk_ensemble.h"

/* Fault kinds in the history (the numbers inject.c uses for the same). */
#define F_KILL_NODE 3
#define F_STOP_NODE 5

static test_zk_ensemble ensemble; /* one scenario runs at a time */

int chaos_zk_setup(chaos_run *run)
{
    if (test_zk_ensemble_start(&ensemble, run->sc->nodes) != 0)
        return -1;
    if ((size_t)snprintf(run->urls[0], sizeof run->urls[0], "%s?session_timeout_ms=%lld",
                         ensemble.url, (long long)run->sc->ttl_ms) >= sizeof run->urls[0]) {
        test_zk_ensemble_stop(&ensemble);
        return -1;
    }
    run->wcfg.urls[0] = run->urls[0];
    return 0;
}

void chaos_zk_teardown(chaos_run *run)
{
    (void)run;
    test_zk_ensemble_stop(&ensemble);
}

int chaos_inject_zk_member(chaos_run *run, int round)
{
    if (round % 2 == 0) {
        int leader = test_zk_ensemble_leader(&ensemble);
        if (leader < 0)
            leader = (int)chaos_rand(run, (unsigned)ensemble.n);
        test_zk_ensemble_kill(&ensemble, leader);
        chaos_fault(run, F_KILL_NODE);
        chaos_sleep_ms(1500);
        if (test_zk_ensemble_restart(&ensemble, leader) != 0 ||
            test_zk_ensemble_wait(&ensemble, 30000) < 0)
            run->probe_failed = 1;
    } else {
        int m = (int)chaos_rand(run, (unsigned)ensemble.n);
        if (test_proc_stop(ensemble.m[m].pid, 2000) != 0)
            run->probe_failed = 1;
        chaos_fault(run, F_STOP_NODE);
        chaos_sleep_ms(2000);
        kill(ensemble.m[m].pid, SIGCONT);
    }
    return 1;
}

#else /* a build without the ZooKeeper backend has no zk rows */

int chaos_zk_setup(chaos_run *run)
{
    (void)run;
    return -1;
}

void chaos_zk_teardown(chaos_run *run)
{
    (void)run;
}

int chaos_inject_zk_member(chaos_run *run, int round)
{
    (void)run;
    (void)round;
    return 0;
}
#endif
