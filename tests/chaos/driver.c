/* SPDX-License-Identifier: BSD-3-Clause */
/* chaos_driver: runs every scenario, then the refusal checks, prints the
 * summary table and writes it as TSV.
 *
 *   chaos_driver [--scale N] [--only a,b,...] [--tsv FILE] [--list]
 *   chaos_driver --selftest      the history checker on hand-made histories
 *
 * --scale multiplies critical sections and fault rounds (make soak uses it).
 * CHAOS_KEEP=1 keeps every history file (failed ones are always kept). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos.h"
#include "dlock.h"

#define S(...) {__VA_ARGS__}
/* name, fault, nodes, workers, cs/worker, ttl, hold, flags, mode, check
 * validity, proxied, unfenced, min uptime, claim, fault rounds, gap, inject
 * [, no fence claim] */
static const chaos_scenario scenarios[] = {
    S("baseline_1node", "none", 1, 4, 40, 1000, 4, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0,
      CLAIM_SAFE, 0, 0, chaos_inject_none, 0),
    S("baseline_redlock5", "none", 5, 4, 30, 1000, 4, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0,
      CLAIM_SAFE, 0, 0, chaos_inject_none, 0),
    S("holder_kill9", "kill -9 of the holder mid-section", 1, 4, 25, 1000, 20, 0,
      CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 8, 300, chaos_inject_kill_holder, 0),
    S("holder_kill9_redlock3", "kill -9 of the holder mid-section", 3, 4, 25, 1000, 20, 0,
      CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 8, 300, chaos_inject_kill_holder, 0),
    S("holder_stop_0.3ttl", "SIGSTOP of the holder for 0.3 x TTL", 1, 4, 25, 1000, 20, 0,
      CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 10, 200, chaos_inject_stop_holder_short, 0),
    S("holder_stop_2ttl", "SIGSTOP of the holder for 2 x TTL", 1, 4, 25, 500, 20, 0,
      CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_NONE, 8, 200, chaos_inject_stop_holder_long, 0),
    S("holder_stop_2ttl_redlock3", "SIGSTOP of the holder for 2 x TTL", 3, 4, 25, 500, 20, 0,
      CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_NONE, 8, 200, chaos_inject_stop_holder_long, 0),
    S("nodes_kill2of5_restart", "kill -9 of 2 of 5 nodes, restart after 1.5 x TTL", 5, 4, 30,
      1000, 10, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 4, 300, chaos_inject_kill2_restart, 0),
    S("nodes_kill3of5_noquorum", "kill -9 of 3 of 5 nodes, restart after 1.5 x TTL", 5, 4, 20,
      1000, 10, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 3, 300, chaos_inject_kill3_noquorum, 0),
    S("majority_restart_no_rule", "3 of 5 nodes restarted (no persistence) under a holder", 5, 3,
      6, 2000, 400, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_NONE, 4, 500,
      chaos_inject_majority_restart, 0),
    S("majority_restart_rule", "same, with min_node_uptime_ms = TTL", 5, 3, 6, 2000, 400, 0,
      CHAOS_MODE_DLOCK, 0, 0, 0, 2000, CLAIM_SAFE, 3, 500, chaos_inject_majority_restart, 1),
    S("node_stalls_1node", "SIGSTOP / DEBUG SLEEP / CLIENT PAUSE of the node, 1.5 x TTL", 1, 4,
      30, 1000, 10, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 8, 300, chaos_inject_node_stall, 0),
    S("node_stalls_redlock3", "SIGSTOP / DEBUG SLEEP / CLIENT PAUSE of 1-2 of 3 nodes", 3, 4, 30,
      1000, 10, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 8, 300, chaos_inject_node_stall, 0),
#ifdef CHAOS_WITH_LIBUV
    /* Looped clients (issue 37): each worker's client runs on a libuv
     * loop, its requests on one pipelined connection per node
     * (src/redis/pipe.c), a fifth of its waits cancelled from the loop;
     * the node stalled, or its connections killed, under contention. */
    S("loop_node_stalls_1node",
      "looped clients (libuv): SIGSTOP / DEBUG SLEEP / CLIENT PAUSE of the node, 1.5 x TTL", 1, 4,
      20, 1000, 10, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 6, 300, chaos_inject_node_stall,
      0),
    S("loop_conn_faults_redlock3",
      "looped clients over 3 nodes: CLIENT KILL, PAUSE+KILL, DEBUG SLEEP on one", 3, 4, 20, 1000,
      10, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 6, 300, chaos_inject_conn_faults, 0),
#endif
    S("proxy_faults_1node", "proxy: delay / drop / blackhole / reset", 1, 4, 40, 1000, 5, 0,
      CHAOS_MODE_DLOCK, 0, 1, 0, 0, CLAIM_SAFE, 20, 200, chaos_inject_proxy, 0),
    S("proxy_faults_redlock3", "proxy: delay / drop / blackhole / reset, 1-2 nodes", 3, 4, 40,
      1000, 5, 0, CHAOS_MODE_DLOCK, 0, 1, 0, 0, CLAIM_SAFE, 20, 200, chaos_inject_proxy, 0),
    /* DLOCK_NO_FENCE's first try is SET NX PX with GET and PTTL behind
     * it, not a script (issue 20): the same stalls and lost replies. No
     * fencing token, so exclusion is claimed and growing tokens are not. */
    S("unfenced_node_stalls_redlock3",
      "DLOCK_NO_FENCE; SIGSTOP / DEBUG SLEEP / CLIENT PAUSE of 1-2 of 3 nodes", 3, 4, 30, 1000,
      10, DLOCK_NO_FENCE, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 8, 300,
      chaos_inject_node_stall, 1),
    S("unfenced_proxy_faults_1node", "DLOCK_NO_FENCE; proxy: delay / drop / blackhole / reset", 1,
      4, 40, 1000, 5, DLOCK_NO_FENCE, CHAOS_MODE_DLOCK, 0, 1, 0, 0, CLAIM_SAFE, 20, 200,
      chaos_inject_proxy, 1),
    S("script_flush_redlock3", "SCRIPT FLUSH on every node", 3, 4, 40, 1000, 3, 0,
      CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 30, 100, chaos_inject_script_flush, 0),
    S("watchdog_node_stalls", "auto-renew, hold 1.3 x TTL; 1-2 of 3 nodes stalled", 3, 3, 4, 600,
      800, DLOCK_AUTO_RENEW, CHAOS_MODE_DLOCK, 1, 0, 0, 0, CLAIM_SAFE, 6, 300,
      chaos_inject_node_stall, 0),
    /* Liveness rows (issue 15): see `liveness` below. */
    S("contended_redlock3_minority", "6 workers on one name; 1 of 3 nodes killed, stopped, restarted",
      3, 6, 15, 1000, 10, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 3, 300,
      chaos_inject_minority_cycle, 0),
    S("renew_stalled_minority", "auto-renew, 1 s lease, hold 2 s; 1 of 3 nodes SIGSTOPped 2 s",
      3, 3, 3, 1000, 2000, DLOCK_AUTO_RENEW, CHAOS_MODE_DLOCK, 1, 0, 0, 0, CLAIM_SAFE, 3, 300,
      chaos_inject_node_stop_minority, 0),
    /* A set of three names (every worker takes all three, all or none)
     * under the same faults: a name that fails after the first was taken
     * gives the first back; the set's fence is its first name's. */
    S("set_contended_redlock3_minority",
      "sets of 3 names, 6 workers; 1 of 3 nodes killed, stopped, restarted", 3, 6, 10, 1000, 10,
      0, CHAOS_MODE_SET, 0, 0, 0, 0, CLAIM_SAFE, 3, 300, chaos_inject_minority_cycle, 0),
    S("fair_waiters_killed", "fair mode, TTL 12 s; kill -9 of waiting workers", 1, 5, 15, 12000,
      20, DLOCK_FAIR, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 6, 300, chaos_inject_kill_waiter,
      0),
    /* Ownership rows (issue 22): liveness figures are in the note. The
     * reentrant rows claim exclusion between owners, not a new token per
     * section: while an undo of a worker's unknown re-entry is pending,
     * its next section re-enters that same hold, with its token. */
    S("reentrant_conn_faults", "3 handles of one owner per worker; CLIENT KILL, PAUSE+KILL, DEBUG SLEEP",
      1, 4, 25, 1000, 10, DLOCK_REENTRANT, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 9, 300,
      chaos_inject_conn_faults, 1),
    S("reentrant_conn_faults_redlock3", "the same over 3 nodes, faults on one", 3, 4, 20, 1000, 10,
      DLOCK_REENTRANT, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 6, 300, chaos_inject_conn_faults,
      1),
    S("fork_holder", "auto-renew holders fork; children use and free the inherited client", 1, 4,
      18, 1000, 20, DLOCK_AUTO_RENEW, CHAOS_MODE_FORK, 0, 0, 0, 0, CLAIM_SAFE, 3, 300,
      chaos_inject_conn_faults, 0),
    S("fair_lost_replies", "fair mode, TTL 10 s; CLIENT KILL, PAUSE+KILL, DEBUG SLEEP", 1, 4, 12,
      10000, 10, DLOCK_FAIR, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 9, 300,
      chaos_inject_conn_faults, 0),
    S("fair_workers_stopped", "fair mode, TTL 1 s; SIGSTOP of waiters 0.5-1.5 x TTL, holders 0.3 x TTL",
      1, 4, 25, 1000, 20, DLOCK_FAIR, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 10, 200,
      chaos_inject_stop_fair, 0),
    /* Elections (issue 39): five candidates, a section per term; the
     * leader killed mid-term (a standby leads once its lease ends), or
     * the node stalled 1.5 x TTL (terms lost and won again). */
    S("election_leader_kill9", "election, 5 candidates, TTL 1 s; kill -9 of the leader mid-term",
      1, 5, 15, 1000, 20, 0, CHAOS_MODE_ELECT, 0, 0, 0, 0, CLAIM_SAFE, 8, 300,
      chaos_inject_kill_holder, 0),
    S("election_node_stalls", "election, 5 candidates, TTL 1 s; SIGSTOP / DEBUG SLEEP / CLIENT PAUSE of the node, 1.5 x TTL",
      1, 5, 15, 1000, 20, 0, CHAOS_MODE_ELECT, 1, 0, 0, 0, CLAIM_SAFE, 6, 300,
      chaos_inject_node_stall, 0),
    /* The same kill over a Redlock of three: the term a plain lock (no
     * line: the standbys contend), the value counted on a majority. */
    S("election_redlock3", "election over 3 nodes, 5 candidates, TTL 1 s; kill -9 of the leader mid-term",
      3, 5, 15, 1000, 20, 0, CHAOS_MODE_ELECT, 0, 0, 0, 0, CLAIM_SAFE, 8, 300,
      chaos_inject_kill_holder, 0),
    /* Issue 34 items 5 and 6: fair waiters ride out a stalled node (their
     * looks, and the cleanup an unknown one leaves, are retried until the
     * deadline) and the line goes on once it answers. */
    S("fair_node_stalls", "fair mode, TTL 1 s; SIGSTOP / DEBUG SLEEP / CLIENT PAUSE of the node, 1.5 x TTL",
      1, 4, 25, 1000, 10, DLOCK_FAIR, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 8, 300,
      chaos_inject_node_stall, 0),
    /* Redis Cluster (issue 19 items 3, 4): 3 masters + 3 replicas, the
     * workers' client has the six seeds and the cluster option. Stalled:
     * the master of slot 0 (the first a map names) stopped for 2 x TTL
     * while every worker also holds an auto-renewed lock on each master;
     * none on a healthy master may be lost, no section of the contended
     * lock (on a healthy master, held past its TTL) may fail. Failover:
     * the master of the contended lock's slot killed (writes paused until
     * its replica caught up, so the failover keeps every grant). */
    S("cluster_master_stalled",
      "cluster 3+3: master SIGSTOPped 2 x TTL; auto-renewed locks on every master, hold 1.2 x TTL",
      6, 3, 2, 2000, 2400, DLOCK_AUTO_RENEW, CHAOS_MODE_DLOCK, 1, 0, 0, 0, CLAIM_SAFE, 2, 500,
      chaos_inject_cluster_stall, 0),
    S("cluster_master_failover", "cluster 3+3: kill -9 of the contended lock's master, replica takes over",
      6, 6, 15, 1000, 10, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 1, 800,
      chaos_inject_cluster_failover, 0),
#ifdef CHAOS_WITH_ETCD
    /* The etcd backend (issue 21): a 3-member cluster; the leader killed
     * and restarted, or a member stopped, while 4 workers contend. */
    S("etcd3_member_faults", "etcd, 3 members: leader kill -9 + restart / member SIGSTOP 2 s", 3,
      4, 25, 3000, 10, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 4, 600,
      chaos_inject_etcd_member, 0),
    /* The same with DLOCK_AUTO_RENEW (issue 38): every worker's keys go
     * on its client's session, one lease kept alive by the renewals, and
     * a create or delete that a killed leader left unanswered taints the
     * session (docs/backends.md, "Sessions"). */
    S("etcd3_session_faults",
      "etcd sessions (auto-renew), 3 members: leader kill -9 + restart / member SIGSTOP 2 s", 3,
      4, 25, 3000, 10, DLOCK_AUTO_RENEW, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 4, 600,
      chaos_inject_etcd_member, 0),
    /* The same faults while a third of the waits are cancelled from a
     * second thread: a cancelled waiter's revoke gets 100 ms, and one cut
     * off by a stopped member leaves its key in line until its lease (the
     * TTL) ends (docs/backends.md): the line goes on after that. */
    S("etcd3_cancel_faults",
      "etcd, 3 members: the faults above while a third of the waits are cancelled", 3, 5, 20,
      3000, 40, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 4, 600, chaos_inject_etcd_member,
      0),
    /* The cancel-cut leave itself: the leader stopped, so no revoke can
     * commit until a new one is elected (about a second), while half the
     * waits are cancelled. A cancel during the stop cuts its revoke at
     * 100 ms and leaves the key in line until its lease ends; the note
     * counts the keys more than the workers that the line then held. */
    S("etcd3_cancel_leader_stop",
      "etcd, 3 members: the leader SIGSTOPped 1.5 s while half the waits are cancelled", 3, 4,
      20, 3000, 40, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 4, 600,
      chaos_inject_etcd_leader_stop, 0),
    /* Readers and writers of one read-write lock (issue 38: the recipe
     * RWMutex's keys, a reader waiting only for older keys that are not
     * readers'), even workers reading, under the member faults above.
     * Claimed: no writer beside anyone, writers' fences growing; the note
     * shows that readers did share. */
    S("etcd3_rw_member_faults",
      "etcd read-write lock, 3 readers + 3 writers, 3 members: leader kill -9 + restart / member SIGSTOP 2 s",
      3, 6, 20, 3000, 10, 0, CHAOS_MODE_RW, 0, 0, 0, 0, CLAIM_SAFE, 4, 600,
      chaos_inject_etcd_member, 0),
#endif
#ifdef CHAOS_WITH_ZOOKEEPER
    /* The ZooKeeper backend (issue 41): a 3-member ensemble, sessions of
     * 3 s; the leader killed and restarted, or a member stopped 2 s,
     * while 4 workers contend (a session moves to another member). */
    S("zk3_member_faults", "zk, 3 members: leader kill -9 + restart / member SIGSTOP 2 s", 3, 4,
      25, 3000, 10, 0, CHAOS_MODE_DLOCK, 0, 0, 0, 0, CLAIM_SAFE, 4, 600, chaos_inject_zk_member,
      0),
#endif
    /* Issue 17: readers and writers of one read-write lock (even workers
     * read), and a semaphore of 2 permits, under holder kill -9 and
     * SIGSTOP. Claimed: no writer beside anyone, never more than 2 permit
     * holders; the note shows the concurrency the history saw. */
    S("rw_holder_kill9", "read-write lock, 3 readers + 3 writers; kill -9 of a holder", 1, 6,
      20, 1000, 20, 0, CHAOS_MODE_RW, 0, 0, 0, 0, CLAIM_SAFE, 8, 300, chaos_inject_kill_holder,
      0),
    S("rw_holder_kill9_redlock3", "the same over 3 nodes", 3, 6, 15, 1000, 20, 0, CHAOS_MODE_RW,
      0, 0, 0, 0, CLAIM_SAFE, 6, 300, chaos_inject_kill_holder, 0),
    S("rw_holder_stop_0.3ttl", "read-write lock; SIGSTOP of a holder for 0.3 x TTL", 1, 6, 20,
      1000, 20, 0, CHAOS_MODE_RW, 0, 0, 0, 0, CLAIM_SAFE, 8, 200, chaos_inject_stop_holder_short,
      0),
    S("sem_holder_kill9", "semaphore of 2, 5 workers; kill -9 of a holder", 1, 5, 20, 1000, 20,
      0, CHAOS_MODE_SEM, 0, 0, 0, 0, CLAIM_SAFE, 8, 300, chaos_inject_kill_holder, 0),
    S("sem_holder_stop_0.3ttl", "semaphore of 2; SIGSTOP of a holder for 0.3 x TTL", 1, 5, 20,
      1000, 20, 0, CHAOS_MODE_SEM, 0, 0, 0, 0, CLAIM_SAFE, 8, 200, chaos_inject_stop_holder_short,
      0),
    /* 20 sections a worker, not 8: a stale write needs two overlapping
     * sections to write out of token order, a few per 32 sections, and
     * on a loaded machine 32 sections showed none (1 run in about 20). */
    S("control_short_ttl_unfenced", "CONTROL: TTL 30 ms < hold 80 ms, resource not fenced", 1, 4,
      20, 30, 80, 0, CHAOS_MODE_DLOCK, 0, 0, 1, 0, CLAIM_CONTROL, 0, 0, chaos_inject_none, 0),
    S("control_rw_short_ttl", "CONTROL: read-write lock, TTL 30 ms < hold 80 ms", 1, 6, 8, 30,
      80, 0, CHAOS_MODE_RW, 0, 0, 0, 0, CLAIM_CONTROL, 0, 0, chaos_inject_none, 0),
    S("control_sem_short_ttl", "CONTROL: semaphore of 2, TTL 30 ms < hold 80 ms", 1, 5, 8, 30,
      80, 0, CHAOS_MODE_SEM, 0, 0, 0, 0, CLAIM_CONTROL, 0, 0, chaos_inject_none, 0),
    S("control_raw_del", "CONTROL: SET NX PX + plain DEL, TTL 50 ms < hold 60 ms", 1, 4, 10, 50,
      60, 0, CHAOS_MODE_RAW_DEL, 0, 0, 0, 0, CLAIM_CONTROL, 0, 0, chaos_inject_none, 0),
};
#define N_SCENARIOS (sizeof scenarios / sizeof scenarios[0])

/* Bounds are generous (a loaded 2-core VM); what they catch is the storm
 * of DLOCK_ENOQUORUM failures and the TTL-long stalls of issue 15. */
static const chaos_liveness liveness[] = {
    /* scenario, wait per section, max failed %, max wait, strict waits,
     * cancelled waits % */
    {"contended_redlock3_minority", 10000, 5, 8000, 0, 0},
    /* Default mode is not fair: a worker may wait for every section of
     * the other two (2 x 3 x 2 s = 12 s) plus the 2 s stall, with no
     * liveness fault at all (12.3 s was seen once in CI). What this row
     * catches is a lost lease or a wait that never ends, so the bound is
     * that sum plus a second. Failed sections: a holder that got through
     * one stall without its key on the stopped node (expired there) lost
     * the lock when the next stall hit another node; the watchdog now
     * puts such a key back (restore_batch.lua, test_redlock_restore). */
    {"renew_stalled_minority", 15000, 10, 15000, 0, 0},
    /* The row above's bounds: a set's three names are three Redlock
     * acquires, each riding out the same faults. */
    {"set_contended_redlock3_minority", 10000, 5, 8000, 0, 0},
    {"fair_waiters_killed", 9000, 5, 7500, 0, 0},
    /* A stall lasts 1.5 s; a request cut off by it waits its I/O timeout
     * (1 s); a section tries once, then waits, as `dlock run -w` does. */
    {"loop_node_stalls_1node", 8000, 10, 8000, 0, 50},
    {"loop_conn_faults_redlock3", 8000, 10, 8000, 0, 50},
    /* A stopped worker's own wait includes its stop (1.5 s at most); a
     * claim handed to a stopped waiter lapses within 1 s (TTL 1 s). */
    {"fair_workers_stopped", 5000, 5, 4000, 0, 0},
    /* A stall lasts 1.5 s; a look cut off by it, and its cleanup, wait an
     * I/O timeout (1 s) each at most before the line goes on. A section
     * starts with a try-once and waits after "held", "not now" and an
     * unknown outcome, as `dlock run -w` does: no waiting acquire may
     * fail (strict); 5 % for a try-once the node refused outright. */
    {"fair_node_stalls", 8000, 5, 6000, 1, 0},
    /* etcd: an election takes about a second here (500 ms timeout); a
     * killed leader's clients fail over within an I/O timeout. */
    {"etcd3_member_faults", 10000, 10, 10000, 0, 0},
    {"etcd3_session_faults", 10000, 10, 10000, 0, 0},
    /* Six workers, a writer waiting for every reader before it. */
    {"etcd3_rw_member_faults", 10000, 10, 10000, 0, 0},
    /* zk: an election takes about 400 ms here (tickTime 100 ms); a
     * session on a stopped member moves after two thirds of its 3 s, and
     * until then each try-once of its worker fails at once (EIO: the C
     * client has no member), and is made again: 15 % of the sections
     * failed so, none after waiting (0 overlaps in 675). */
    {"zk3_member_faults", 10000, 30, 10000, 0, 0},
    /* The row above with 5 workers, holds of 40 ms and a cancelled head
     * of the line's key left to its lease when its revoke was cut off
     * (one TTL, 3 s, more): 6.9 s and 11.3 s seen (a 10 s wait that
     * timed out, then its leave on a stopped member). */
    {"etcd3_cancel_faults", 10000, 10, 15000, 0, 33},
    /* A key a cut leave left blocks the line until its lease ends: the
     * stop (1.5 s), the election, and one TTL (3 s) from its last
     * renewal, on a loaded machine. */
    {"etcd3_cancel_leader_stop", 10000, 10, 15000, 0, 50},
    /* Cluster (issue 19): no section may fail. Stalled: default mode is
     * not fair, so a worker may wait for every section of the other two
     * (2 x 2 x 2.4 s = 9.6 s; 9.9 s seen) and nothing for the stall (its
     * lock is on a healthy master): that plus a loaded machine (13.8 s
     * seen alone, 15.1 s at a load average of 16). Failover:
     * the failover (about 2-3 s with cluster-node-timeout 1000) plus a
     * loaded machine. */
    {"cluster_master_stalled", 20000, 0, 18000, 0, 0},
    {"cluster_master_failover", 15000, 0, 10000, 0, 0},
};

int chaos_is_looped(const chaos_scenario *sc)
{
    return strncmp(sc->name, "loop_", 5) == 0;
}

int chaos_is_etcd(const chaos_scenario *sc)
{
    return strncmp(sc->name, "etcd", 4) == 0;
}

int chaos_is_zk(const chaos_scenario *sc)
{
    return strncmp(sc->name, "zk", 2) == 0;
}

const chaos_liveness *chaos_liveness_of(const char *scenario)
{
    for (size_t i = 0; i < sizeof liveness / sizeof liveness[0]; i++)
        if (!strcmp(liveness[i].scenario, scenario))
            return &liveness[i];
    return NULL;
}
#define MAX_RESULTS (N_SCENARIOS + 16)

static int selected(const char *only, const char *name)
{
    if (!only)
        return 1;
    size_t n = strlen(name);
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n))
            return 1;
        p += len + (e ? 1 : 0);
    }
    return 0;
}

static void cell(char *buf, size_t len, const chaos_result *r, long v)
{
    if (r->is_check)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%ld", v);
}

static void print_table(FILE *f, const chaos_result *res, int n, int tsv)
{
    const char *cols[] = {"scenario", "nodes", "faults", "cs", "killed", "overlaps",
                          "stale_writes", "lost_updates", "refused", "fence_viol",
                          "claimed", "result", "secs", "failed", "max_wait"};
    if (tsv) {
        for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
            fprintf(f, "%s\t", cols[i]);
        fprintf(f, "fault\tnote\n");
    } else {
        fprintf(f, "%-27s %5s %6s %5s %6s %8s %12s %12s %7s %10s %7s %6s %5s %9s %8s\n",
                cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8],
                cols[9], cols[10], cols[11], cols[12], cols[13], cols[14]);
    }
    for (int i = 0; i < n; i++) {
        const chaos_result *r = &res[i];
        const chaos_verdict *v = &r->v;
        char c[8][24];
        long vals[8] = {r->faults, v->cs, v->cs_killed, v->overlaps, v->stale_writes,
                        v->lost_updates, v->writes_refused, v->fence_violations};
        for (int k = 0; k < 8; k++)
            cell(c[k], sizeof c[k], r, vals[k]);
        snprintf(c[0], sizeof c[0], "%ld", r->faults);
        const char *res_s = r->pass ? "ok" : "FAIL";
        /* Liveness: failed/tried sections and the longest wait (s). */
        char failed[24] = "-", wait[16] = "-";
        if (r->live) {
            snprintf(failed, sizeof failed, "%ld/%ld", r->live_failed, r->live_tried);
            snprintf(wait, sizeof wait, "%.1f", r->live_max_wait_s);
        }
        if (tsv)
            fprintf(f, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\n",
                    r->sc->name, r->sc->nodes, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
                    r->claimed, res_s, r->seconds, failed, wait, r->sc->fault, r->note);
        else
            fprintf(f, "%-27s %5d %6s %5s %6s %8s %12s %12s %7s %10s %7s %6s %5.1f %9s %8s\n",
                    r->sc->name, r->sc->nodes, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
                    r->claimed, res_s, r->seconds, failed, wait);
    }
}

int main(int argc, char **argv)
{
    int scale = 1, list = 0;
    const char *only = NULL, *tsv = NULL;
    signal(SIGPIPE, SIG_IGN);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--selftest")) {
            int failed = chaos_history_selftest();
            printf("history checker selftest: %s\n", failed ? "FAILED" : "ok");
            return failed ? 1 : 0;
        } else if (!strcmp(argv[i], "--scale") && i + 1 < argc) {
            scale = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else if (!strcmp(argv[i], "--tsv") && i + 1 < argc) {
            tsv = argv[++i];
        } else if (!strcmp(argv[i], "--list")) {
            list = 1;
        } else {
            fprintf(stderr, "usage: %s [--scale N] [--only a,b] [--tsv FILE] [--list] | --selftest\n",
                    argv[0]);
            return 2;
        }
    }
    if (scale < 1)
        scale = 1;
    if (list) {
        for (size_t i = 0; i < N_SCENARIOS; i++)
            printf("%-27s %s\n", scenarios[i].name, scenarios[i].fault);
        printf("%-27s %s\n", "checks", "refusals: OOM, READONLY, ACL, no quorum");
        return 0;
    }
    if (chaos_history_selftest() != 0) {
        fprintf(stderr, "chaos: the history checker fails its selftest\n");
        return 1;
    }
    static chaos_result res[MAX_RESULTS];
    int n = 0, failed = 0;
    int64_t t0 = chaos_now_ns();
    for (size_t i = 0; i < N_SCENARIOS; i++) {
        if (!selected(only, scenarios[i].name))
            continue;
        printf("chaos: %-27s ... ", scenarios[i].name);
        fflush(stdout);
        chaos_run_scenario(&scenarios[i], scale, &res[n]);
        printf("%s (%.1f s, %ld faults, %ld sections, %ld overlaps)\n", res[n].pass ? "ok" : "FAIL",
               res[n].seconds, res[n].faults, res[n].v.cs, res[n].v.overlaps);
        fflush(stdout);
        n++;
    }
    if (selected(only, "checks")) {
        printf("chaos: refusal checks ... ");
        fflush(stdout);
        n += chaos_run_checks(res + n, (int)MAX_RESULTS - n);
        printf("done\n");
    }
    for (int i = 0; i < n; i++)
        failed += !res[i].pass;
    double total = (double)(chaos_now_ns() - t0) / 1e9;
    printf("\n");
    print_table(stdout, res, n, 0);
    printf("\nnotes:\n");
    for (int i = 0; i < n; i++)
        printf("  %-27s %s%s%s\n", res[i].sc->name, res[i].sc->fault,
               res[i].note[0] ? " | " : "", res[i].note);
    printf("\nchaos: %d scenario(s), %d failed, total %.1f s (scale %d)\n", n, failed, total, scale);
    if (tsv) {
        FILE *f = fopen(tsv, "w");
        if (!f) {
            perror(tsv);
            return 1;
        }
        print_table(f, res, n, 1);
        fclose(f);
        printf("chaos: table written to %s\n", tsv);
    }
    return failed ? 1 : 0;
}
