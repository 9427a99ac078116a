/* SPDX-License-Identifier: BSD-3-Clause */
/* A failover under contention (issue 19): worker processes take one lock
 * in a loop, each critical section a non-atomic counter increment and a
 * fenced write, recorded in a chaos history (tests/chaos/history.c) that
 * is checked afterwards. Meanwhile the master holding the lock is killed
 * (kill -9); once its replica has taken over, the old master is restarted
 * and comes back as a replica. With min_replicas 1 a grant counts only
 * once the replica has it, so the promoted replica knows every granted
 * lock and fencing token: no overlap, no lost update, no stale fenced
 * write. Progress is reported: sections done, the share of failed
 * acquires (timeouts, and DLOCK_ENOREPLICAS while the new master has no
 * replica yet), the longest wait. Run on the Cluster and on Sentinel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dlock.h"
#include "history.h"
#include "proc.h"
#include "redis_topology.h"
#include "test_util.h"

#define WORKERS 6
#define RUN_MS 14000
#define KILL_AT_MS 2500
#define AFTER_MS 5000 /* at least, after the failover and the revival */
#define CAP_MS 75000   /* longer than a kill and revival may take (two
                          30 s waits: the failover, the replica's ack) */

typedef struct shared {
    _Atomic int64_t counter;
    _Atomic uint64_t max_fence; /* the fenced resource: highest token accepted */
    _Atomic int64_t seq;
    _Atomic long sections, failed, enoreplicas;
    _Atomic int64_t max_wait_ns;
    _Atomic int64_t end_ns;
} shared;

typedef struct run {
    shared *sh;
    char hist[300];
    const char *const *urls;
    size_t n_urls;
    int cluster;
    void (*report)(void); /* prints how the deployment ended up, or NULL */
} run;

static void note_wait(shared *sh, int64_t waited)
{
    int64_t max = atomic_load(&sh->max_wait_ns);
    while (waited > max && !atomic_compare_exchange_weak(&sh->max_wait_ns, &max, waited))
        ;
}

static int worker(int slot, void *arg)
{
    run *r = arg;
    shared *sh = r->sh;
    int fd = chaos_history_open(r->hist);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = r->cluster;
    o.min_replicas = 1;
    o.min_replicas_timeout_ms = 500;
    o.io_timeout_ms = 500;
    o.connect_timeout_ms = 500;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = 2000;
    lo.retry_max_ms = 100;
    if (fd < 0 || dlock_client_new(&c, r->urls, r->n_urls, &o, NULL, 0) != DLOCK_OK ||
        dlock_lock_new(&l, c, "hot{failover}", &lo) != DLOCK_OK)
        return 2;
    uint32_t proc = (uint32_t)getpid(), cs = 0;
    while (chaos_now_ns() < atomic_load(&sh->end_ns)) {
        int64_t t0 = chaos_now_ns();
        int rc = dlock_lock_acquire(l, 8000);
        note_wait(sh, chaos_now_ns() - t0);
        if (rc != DLOCK_OK) {
            atomic_fetch_add(&sh->failed, 1);
            if (rc == DLOCK_ENOREPLICAS)
                atomic_fetch_add(&sh->enoreplicas, 1);
            usleep(20 * 1000);
            continue;
        }
        uint64_t fence = dlock_lock_fence(l);
        chaos_history_note(fd, CHAOS_REC_ENTER, slot, proc, cs, fence, 0, 0);
        int64_t v = atomic_load(&sh->counter);
        usleep(2000);
        atomic_store(&sh->counter, v + 1);
        chaos_history_note(fd, CHAOS_REC_COUNTER, slot, proc, cs, fence, v, 0);
        /* The fenced resource refuses a token below one it accepted. */
        uint64_t max = atomic_load(&sh->max_fence);
        int accepted = 0;
        while (fence >= max && !(accepted = atomic_compare_exchange_weak(&sh->max_fence, &max, fence)))
            ;
        chaos_history_note(fd, CHAOS_REC_WRITE, slot, proc, cs, fence,
                           atomic_fetch_add(&sh->seq, 1), accepted);
        chaos_history_note(fd, CHAOS_REC_EXIT, slot, proc, cs, fence, 0, 0);
        cs++;
        atomic_fetch_add(&sh->sections, 1);
        dlock_lock_release(l); /* an error here (the master just died) leaves the TTL */
    }
    dlock_lock_free(l);
    dlock_client_free(c);
    return 0;
}

/* Start the workers, kill the master at KILL_AT_MS through kill_and_revive(),
 * wait for them, check the history. */
static void contend_through_failover(run *r, const char *what, void (*kill_and_revive)(void))
{
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    r->sh = sh;
    test_tmp_path(r->hist, sizeof r->hist, "dlock-failover-history");
    unlink(r->hist);
    /* Until the revival says when to stop (below): the workers must
     * still be contending when a slow failover is over (a CI run's took
     * 19 s, and workers that had stopped at RUN_MS made no section after
     * it). The cap stops them should the failover's asserts end the test. */
    int64_t start_ns = chaos_now_ns();
    atomic_store(&sh->end_ns, start_ns + (int64_t)CAP_MS * 1000000);
    pid_t pids[WORKERS];
    assert_int_equal(test_start_procs(pids, WORKERS, worker, r), 0);
    test_sleep_ms(KILL_AT_MS);
    long before = atomic_load(&sh->sections);
    int64_t k0 = test_now_ms();
    kill_and_revive();
    int64_t revived_ms = test_now_ms() - k0;
    long at_revival = atomic_load(&sh->sections);
    /* The contention goes on for AFTER_MS past the revival, however long
     * the failover and the replica's sync took on a loaded machine (once
     * 3.4 s, then no grant in the 8 s left: every one ENOREPLICAS). */
    int64_t end = chaos_now_ns() + (int64_t)AFTER_MS * 1000000;
    if (end < start_ns + (int64_t)RUN_MS * 1000000)
        end = start_ns + (int64_t)RUN_MS * 1000000;
    atomic_store(&sh->end_ns, end);
    int bad = test_wait_procs(pids, WORKERS);
    long after = atomic_load(&sh->sections) - at_revival;
    chaos_verdict v;
    assert_int_equal(chaos_history_check(r->hist, &v), 0);
    long tries = atomic_load(&sh->sections) + atomic_load(&sh->failed);
    print_message("%s failover under contention: %ld sections (%ld before the kill; failover "
                  "and the old master back as a replica after %lld ms; %ld sections after), "
                  "failed acquires %ld of %ld (%.1f%%; %ld DLOCK_ENOREPLICAS), longest wait "
                  "%.0f ms; overlaps %ld, lost updates %ld, stale writes %ld, fence "
                  "violations %ld\n",
                  what, v.cs, before, (long long)revived_ms, after, atomic_load(&sh->failed), tries,
                  tries ? 100.0 * (double)atomic_load(&sh->failed) / (double)tries : 0.0,
                  atomic_load(&sh->enoreplicas), (double)atomic_load(&sh->max_wait_ns) / 1e6,
                  v.overlaps, v.lost_updates, v.stale_writes, v.fence_violations);
    if (r->report)
        r->report();
    assert_int_equal(bad, 0);
    assert_int_equal(v.torn, 0);
    assert_int_equal(v.cs_unclosed, 0);
    assert_int_equal(v.overlaps, 0);
    assert_int_equal(v.lost_updates, 0);
    assert_int_equal(v.stale_writes, 0);
    assert_int_equal(v.fence_violations, 0);
    assert_true(before > 0);
    assert_true(after > 10); /* the lock is usable again after the failover */
    unlink(r->hist);
    munmap(sh, sizeof *sh);
}

/* ---- Cluster -------------------------------------------------------------- */

static test_cluster C;
static int cluster_killed = -1, cluster_promoted = -1;

static void kill_cluster_master(void)
{
    int slot = test_cluster_keyslot(&C, "hot{failover}");
    int m = test_cluster_master_of(&C, slot);
    assert_true(m >= 0);
    test_redis_kill9(&C.node[m]);
    int nm = test_cluster_wait_failover(&C, slot, m, 30000);
    assert_true(nm >= 0);
    /* Back as a replica of the new master (its nodes.conf says it lost
     * the election); without it the new master has no replica to
     * acknowledge. Without persistence it comes back empty, and stays
     * empty until its first sync, which a diskless master puts off for
     * 5 s (repl-diskless-sync-delay). The harness turns the data-age check
     * off (cluster-replica-validity-factor 0), which would otherwise keep
     * a replica that never synced from taking over; so should the new
     * master stall meanwhile (a loaded machine) for longer than
     * cluster-node-timeout, the empty node, its only replica, wins the
     * election: it forgets every lock and starts the fencing counter
     * over, and the stalled master then syncs from it and loses its copy
     * too (a SIGSTOP of the new master for 4 s right after the restart
     * does it every time: 739 and 810 fence violations). So, as
     * docs/deployment.md tells operators, it may not fail over
     * (cluster-replica-no-failover) until it has synced. */
    char conf[400];
    snprintf(conf, sizeof conf, "%s/redis.conf", C.node[m].dir);
    FILE *f = fopen(conf, "a");
    assert_non_null(f);
    fprintf(f, "cluster-replica-no-failover yes\n");
    fclose(f);
    assert_int_equal(test_redis_restart(&C.node[m]), 0);
    cluster_killed = m;
    cluster_promoted = nm;
    /* Revived means a replica acknowledges writes again. The new master
     * is still the one to ask: its only replica cannot take over before
     * it acknowledged. */
    assert_true(test_redis_replica_acks(&C.node[nm], "acked-probe{failover}", 30000));
    /* The acknowledgement came from it, the only replica: it has synced,
     * and may fail over again like any replica. */
    redisReply *rep = test_redis_cmd(&C.node[m], "CONFIG SET cluster-replica-no-failover no");
    assert_true(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

/* How many lines of the file contain needle (0 if it cannot be read). */
static long count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    long n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return n;
}

/* Which node ended up master of the lock's slot, and how many failovers
 * the nodes made (elections won, from their logs, which go with the temp
 * dirs): more than one means a replica took over again after the
 * revival. */
static void report_cluster(void)
{
    int fm = test_cluster_master_of(&C, test_cluster_keyslot(&C, "hot{failover}"));
    long won = 0;
    for (int i = 0; i < TEST_CLUSTER_NODES; i++) {
        char log[400];
        snprintf(log, sizeof log, "%s/redis.log", C.node[i].dir);
        won += count_lines(log, "Failover election won");
    }
    print_message("cluster: master of the lock's slot at the end: node %d (%s); failovers %ld\n",
                  fm, fm == cluster_promoted ? "the promoted replica"
                      : fm == cluster_killed ? "the killed master" : "unknown",
                  won);
}

static void cluster_failover_under_contention_stays_safe(void **state)
{
    (void)state;
    assert_int_equal(test_cluster_start(&C), 0);
    run r = {NULL, "", C.urls, TEST_CLUSTER_NODES, 1, report_cluster};
    contend_through_failover(&r, "cluster", kill_cluster_master);
    test_cluster_stop(&C);
}

/* ---- Sentinel ------------------------------------------------------------- */

static test_sentinel_set S;

static void kill_sentinel_primary(void)
{
    int port = test_sentinel_primary_port(&S);
    test_redis *p = test_sentinel_node(&S, port);
    assert_non_null(p);
    test_redis_kill9(p);
    assert_true(test_sentinel_wait_failover(&S, port, 30000) > 0);
    /* Back as a replica of the new primary, as its operator would start
     * it (the sentinels would convert it too, but only seconds later).
     * Without persistence it comes back empty, and stays empty until its
     * first sync, which a diskless primary puts off for 5 s
     * (repl-diskless-sync-delay). Should the sentinels fail over again
     * meanwhile (the new primary stalled on a loaded machine), it is the
     * only replica they can promote: an empty primary forgets every lock
     * and starts the fencing counter over (a CI run: 885 fence
     * violations). So, as docs/deployment.md tells operators, it is not
     * promotable (replica-priority 0) until it has synced. */
    char conf[400];
    snprintf(conf, sizeof conf, "%s/redis.conf", p->dir);
    FILE *f = fopen(conf, "a");
    assert_non_null(f);
    fprintf(f, "replicaof 127.0.0.1 %d\nreplica-priority 0\n", test_sentinel_primary_port(&S));
    fclose(f);
    assert_int_equal(test_redis_restart(p), 0);
    /* Revived means a replica acknowledges writes again. Asked of the
     * primary the sentinels name now, again each second: on a loaded
     * machine they may fail over a second time meanwhile, and the node
     * first asked is then a replica whose WAIT never counts one (a CI run
     * waited 30 s on it). */
    int acked = 0;
    for (int64_t t0 = test_now_ms(); !acked && test_now_ms() - t0 < 30000;) {
        test_redis *np = test_sentinel_node(&S, test_sentinel_primary_port(&S));
        acked = np && test_redis_replica_acks(np, "acked-probe{failover}", 1000);
        if (!np)
            usleep(100 * 1000);
    }
    if (!acked) {
        test_redis *nodes[2] = {&S.primary, &S.replica};
        for (int i = 0; i < 2; i++) {
            redisReply *info = test_redis_cmd(nodes[i], "INFO replication");
            printf("# data node %d: %s\n", i,
                   info && info->type == REDIS_REPLY_STRING ? info->str : "(no answer)");
            if (info)
                freeReplyObject(info);
        }
    }
    assert_true(acked);
    /* The acknowledgement came from it, the only replica: it has synced,
     * and may be promoted again like any replica. */
    redisReply *rep = test_redis_cmd(p, "CONFIG SET replica-priority 100");
    assert_true(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

/* Print a sentinel's failover events, in the order it logged them. */
static void print_failover_events(int i)
{
    static const char *const events[] = {"+odown", "+elected-leader", "+selected-slave",
                                         "-failover-abort", "+switch-master"};
    char path[400], line[1024];
    snprintf(path, sizeof path, "%s/sentinel.log", S.sentinel[i].dir);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        for (size_t k = 0; k < sizeof events / sizeof events[0]; k++)
            if (strstr(line, events[k])) {
                printf("# sentinel %d: %s", i, line);
                break;
            }
    if (f)
        fclose(f);
}

/* Which node ended up primary and how many failovers the sentinels made
 * (the most +switch-master events one logged): more than one means they
 * failed over again after the revival. Refused ones (no promotable
 * replica) are counted too, and when either happened the sentinels'
 * failover events are printed: their logs go with the temp dirs, and a
 * CI failure would otherwise leave only guesses. */
static void report_sentinel(void)
{
    int port = test_sentinel_primary_port(&S);
    long switches = 0, refused = 0;
    for (int i = 0; i < TEST_SENTINELS; i++) {
        char log[400];
        snprintf(log, sizeof log, "%s/sentinel.log", S.sentinel[i].dir);
        long n = count_lines(log, "+switch-master");
        if (n > switches)
            switches = n;
        refused += count_lines(log, "-failover-abort-no-good-slave");
    }
    print_message("sentinel: primary at the end: port %d (%s); failovers %ld, refused for want "
                  "of a promotable replica %ld\n",
                  port, port == S.primary.port ? "the first primary"
                        : port == S.replica.port ? "the first replica" : "unknown",
                  switches, refused);
    for (int i = 0; (switches > 1 || refused > 0) && i < TEST_SENTINELS; i++)
        print_failover_events(i);
}

static void sentinel_failover_under_contention_stays_safe(void **state)
{
    (void)state;
    assert_int_equal(test_sentinel_start(&S), 0);
    const char *urls[1] = {S.url};
    run r = {NULL, "", urls, 1, 0, report_sentinel};
    contend_through_failover(&r, "sentinel", kill_sentinel_primary);
    test_sentinel_stop(&S);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cluster_failover_under_contention_stays_safe),
        cmocka_unit_test(sentinel_failover_under_contention_stays_safe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
