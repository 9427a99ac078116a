/* SPDX-License-Identifier: BSD-3-Clause */
/* The chaos driver: scenarios of N worker processes x M critical sections
 * against real redis-server processes, with faults injected by pid, and a
 * verdict from the history checker. */
#ifndef DLOCK_CHAOS_H
#define DLOCK_CHAOS_H

#include <hiredis/hiredis.h>
#include <stdint.h>
#include <sys/types.h>

#include "history.h"
#include "proxy.h"
#include "redis_server.h"
#include "shared.h"
#include "worker.h"

#define CHAOS_MAX_NODES 5

/* What a scenario claims. */
typedef enum chaos_claim {
    CLAIM_SAFE,    /* no overlap, no lost update, no stale write, tokens grow */
    CLAIM_NONE,    /* mutual exclusion not claimed; the fenced resource must
                      still refuse every stale write */
    CLAIM_CONTROL  /* negative control: the checker must find violations */
} chaos_claim;

struct chaos_run;

typedef struct chaos_scenario {
    const char *name;
    const char *fault; /* one line: what is done */
    int nodes;         /* 1 (one Redis) or 3/5 (Redlock) */
    int workers;
    int cs_per_worker; /* at scale 1 */
    int64_t ttl_ms, hold_ms;
    unsigned flags; /* lock flags */
    chaos_mode mode;
    int check_validity;
    int proxied;  /* every node behind a fault proxy */
    int unfenced; /* the resource accepts every write (control) */
    int64_t min_uptime_ms;
    chaos_claim claim;
    int faults;   /* fault rounds at scale 1 */
    int gap_ms;   /* between fault rounds */
    /* One fault round; returns the number of faults it injected. */
    int (*inject)(struct chaos_run *run, int round);
    /* Mutual exclusion is claimed, growing tokens are not (a majority of
     * nodes lost its counters: docs/fencing.md). */
    int no_fence_claim;
} chaos_scenario;

/* driver.c: 1 if the scenario's nodes are the members of one etcd cluster
 * (etcd_rows.c) reached through one etcd:// URL; kept apart from the
 * scenario table (by name), as the liveness rows are. */
int chaos_is_etcd(const chaos_scenario *sc);

/* driver.c: 1 if they are the members of one ZooKeeper ensemble
 * (zk_rows.c, the rows named zk*), reached through one zk:// URL. */
int chaos_is_zk(const chaos_scenario *sc);

/* driver.c: 1 if the scenario's workers use a looped client
 * (worker_loop.h): the rows named loop_*, built with libuv only. */
int chaos_is_looped(const chaos_scenario *sc);

typedef struct chaos_run {
    const chaos_scenario *sc;
    int scale;
    test_redis nodes[CHAOS_MAX_NODES];
    chaos_proxy proxies[CHAOS_MAX_NODES];
    char urls[CHAOS_MAX_NODES][128]; /* (a zk:// one names every member) */
    chaos_shared *sh;
    int hist_fd;
    chaos_worker_cfg wcfg;
    pid_t pids[CHAOS_MAX_WORKERS];
    long todo;
    long faults;
    unsigned seed;
    int probe_failed;
    char note[256];
    /* Cluster rows (cluster_rows.c): the contended lock's name, the
     * master faults go to, and the tags of the workers' auto-renewed
     * locks on every master (stalled_bg: the one on the stalled master). */
    char lock_name[64];
    int target;
    char bg_tags[3][32];
    int stalled_bg;
} chaos_run;

/* Liveness rows (issue 15): the workers run each section as `dlock run -w`
 * does (worker.h, section_wait_ms), and the row also fails when too many
 * sections did not get the lock, or someone waited too long. Kept apart
 * from the scenario table (by name) so that its rows stay as they are. */
typedef struct chaos_liveness {
    const char *scenario;
    int64_t section_wait_ms;
    int max_failed_pct;    /* failed sections, left-early ones included */
    int64_t max_wait_ms;   /* longest try-once + wait */
    int strict_waits;      /* 1: no waiting acquire may fail (a try-once may) */
    /* This percent of the waits is cancelled from a second thread
     * (dlock_lock_cancel) 10-410 ms in: counted apart, never a failure. */
    int cancel_pct;
} chaos_liveness;

/* driver.c: the liveness bounds of a scenario, or NULL. */
const chaos_liveness *chaos_liveness_of(const char *scenario);

typedef struct chaos_result {
    const chaos_scenario *sc;
    const chaos_liveness *live; /* NULL: safety only */
    long live_tried, live_failed, live_wait_failed;
    double live_max_wait_s;
    long live_cancelled; /* waits cancelled (chaos_liveness.cancel_pct) */
    chaos_verdict v;
    long faults;
    double seconds;
    int pass;
    const char *claimed; /* "yes", "excl" (not tokens), "no", "control" */
    int is_check;        /* a single-call check: no history columns */
    char note[256];
} chaos_result;

/* run.c */
int chaos_run_scenario(const chaos_scenario *sc, int scale, chaos_result *out);
/* Log one fault to the history and count it. */
void chaos_fault(chaos_run *run, int kind);
/* Worker slot that is in its critical section now (waits up to wait_ms,
 * and only for one that entered at most fresh_ms ago if fresh_ms > 0);
 * -1 if none. */
int chaos_find_holder(chaos_run *run, int wait_ms, int64_t fresh_ms);
/* Kill -9 the worker in `slot`, reap it, log KILLED, start a replacement
 * for its remaining sections. */
void chaos_kill_worker(chaos_run *run, int slot);
void chaos_sleep_ms(int64_t ms);
unsigned chaos_rand(chaos_run *run, unsigned bound);

/* inject.c: fault rounds used by the scenario table */
int chaos_inject_none(chaos_run *run, int round);
int chaos_inject_kill_holder(chaos_run *run, int round);
int chaos_inject_stop_holder_short(chaos_run *run, int round);
int chaos_inject_stop_holder_long(chaos_run *run, int round);
int chaos_inject_kill2_restart(chaos_run *run, int round);
int chaos_inject_kill3_noquorum(chaos_run *run, int round);
int chaos_inject_majority_restart(chaos_run *run, int round);
int chaos_inject_node_stall(chaos_run *run, int round);
int chaos_inject_proxy(chaos_run *run, int round);
int chaos_inject_script_flush(chaos_run *run, int round);
int chaos_inject_minority_cycle(chaos_run *run, int round);
int chaos_inject_node_stop_minority(chaos_run *run, int round);
int chaos_inject_kill_waiter(chaos_run *run, int round);
int chaos_inject_stop_fair(chaos_run *run, int round);
int chaos_inject_conn_faults(chaos_run *run, int round);

/* etcd_rows.c (built with DLOCK_WITH_ETCD): an etcd cluster of
 * sc->nodes members in place of the Redis nodes, and its faults. */
int chaos_etcd_setup(chaos_run *run);
void chaos_etcd_teardown(chaos_run *run);
int chaos_inject_etcd_member(chaos_run *run, int round);
/* The leader SIGSTOPped 1.5 s, then the line sampled for one TTL: the
 * most keys in it, and how often more than the workers (the note). */
int chaos_inject_etcd_leader_stop(chaos_run *run, int round);

/* zk_rows.c (built with DLOCK_WITH_ZOOKEEPER): a ZooKeeper ensemble of
 * sc->nodes members, the workers' session timeout the scenario's TTL, and
 * its faults (the leader killed and restarted, a member SIGSTOPped 2 s). */
int chaos_zk_setup(chaos_run *run);
void chaos_zk_teardown(chaos_run *run);
int chaos_inject_zk_member(chaos_run *run, int round);

/* cluster_rows.c: a 3-master/3-replica Redis Cluster in place of the
 * nodes (scenarios named cluster_*), and its faults. */
int chaos_is_cluster(const chaos_scenario *sc);
int chaos_cluster_setup(chaos_run *run);
void chaos_cluster_teardown(chaos_run *run);
int chaos_inject_cluster_stall(chaos_run *run, int round);
int chaos_inject_cluster_failover(chaos_run *run, int round);

/* checks.c: single-call checks of how refusals surface */
int chaos_run_checks(chaos_result *out, int max);

#endif
