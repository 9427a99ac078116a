/* SPDX-License-Identifier: BSD-3-Clause */
/* Chaos rows on the etcd backend: the scenario's nodes are members of one
 * etcd cluster started by the harness (tests/support/etcd_server.c), the
 * workers reach it through one etcd:// URL, and faults go to members by
 * pid: the leader killed with SIGKILL and restarted, or a member stopped
 * with SIGSTOP and continued. */
#include <stdio.h>
#include <string.h>

#include "dlock.h"

#include "chaos.h"

#ifdef CHAOS_WITH_ETCD
#include "etcd_server.h"

/* Fault kinds in the history (the numbers inject.c uses for the same). */
#define F_KILL_NODE 3
#define F_STOP_NODE 5

static test_etcd cluster; /* one scenario runs at a time */

static int keep_entry(void *arg, const dlock_list_entry *e)
{
    dlock_list_entry *out = arg;
    out->holders = e->holders;
    out->waiters = e->waiters;
    return 0;
}

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

/* The keys in the contended lock's line, as a listing counts them (the
 * holder's and the waiters'); -1 when the listing failed. */
static long line_keys(dlock_client *c)
{
    dlock_list_entry e;
    memset(&e, 0, sizeof e);
    e.holders = 0;
    if (dlock_client_list(c, "chaos:lock", keep_entry, &e) != DLOCK_OK)
        return -1;
    return (long)(e.holders + e.waiters);
}

/* What the line showed after the leader's stops: the most keys at once,
 * and the samples with more keys than workers. Each worker has one place
 * in line at a time, so a key more is one left to its lease: a cancel's
 * cut revoke, or an attempt whose outcome the stop made unknown. */
static long line_most, line_over, line_samples;

int chaos_inject_etcd_leader_stop(chaos_run *run, int round)
{
    if (round == 0)
        line_most = line_over = line_samples = 0;
    int leader = test_etcd_leader(&cluster, 3000);
    if (leader < 0)
        leader = (int)chaos_rand(run, (unsigned)cluster.n);
    test_etcd_pause(&cluster, leader);
    chaos_fault(run, F_STOP_NODE);
    chaos_sleep_ms(1500);
    test_etcd_resume(&cluster, leader);
    /* A leave cut during the stop (no leader to revoke a lease) leaves
     * the waiter's key in line until its lease ends, one TTL at most
     * from its last renewal: sampled that long. */
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.io_timeout_ms = 500;
    const char *url = run->urls[0];
    dlock_client *c = NULL;
    if (dlock_client_new(&c, &url, 1, &o, NULL, 0) == DLOCK_OK) {
        int64_t until = chaos_now_ns() + run->sc->ttl_ms * 1000000;
        while (chaos_now_ns() < until) {
            long n = line_keys(c);
            if (n >= 0) {
                line_samples++;
                line_most = n > line_most ? n : line_most;
                line_over += n > run->sc->workers;
            }
            chaos_sleep_ms(100);
        }
        dlock_client_free(c);
    }
    if (round == run->sc->faults * run->scale - 1) {
        size_t at = strlen(run->note);
        snprintf(run->note + at, sizeof run->note - at,
                 "%smost keys in line %ld (%d workers), over %d in %ld of %ld samples",
                 at ? "; " : "", line_most, run->sc->workers, run->sc->workers, line_over,
                 line_samples);
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

int chaos_inject_etcd_leader_stop(chaos_run *run, int round)
{
    (void)run;
    (void)round;
    return 0;
}
#endif
