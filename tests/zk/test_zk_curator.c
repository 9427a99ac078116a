/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock and Apache Curator on one ZooKeeper path exclude each other, both
 * ways: Curator's InterProcessMutex (Debian's libcurator-recipes-java, in
 * a Java worker of the test's: support/curator_worker.c) waits while dlock
 * holds and gets the lock at dlock's release; dlock waits while Curator
 * holds and gets it at Curator's; and both contend in a loop, their
 * sections in one chaos history (the JVM's monotonic clock is the C
 * side's) that must show no overlap and fences (each node's czxid, on
 * both sides) that only grow. Every timing is taken after the JVM said
 * "ready": its start is in none. Skipped, with the reason, without java,
 * javac or the jars (failed instead under DLOCK_TEST_REQUIRE_CURATOR=1,
 * as scripts/check.sh runs the suite). InterProcessReadWriteLock too
 * (readers of both share, writers of both exclude them), and
 * InterProcessSemaphoreV2 (both sides' leases count against one N).
 * Elections with LeaderSelector, both ways: Curator leads and
 * dlock_election_leader() shows its participant id while dlock's campaign
 * waits, and takes over at its abdication; dlock leads and Curator's
 * getLeader() shows dlock's value while its selector waits, and leads at
 * dlock's resign. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "curator_worker.h"
#include "dlock.h"
#include "history.h"
#include "proc.h"
#include "test_leaders.h"
#include "test_util.h"
#include "test_waiter.h"
#include "zk_contend.h"
#include "zk_server.h"

static test_zk srv;
static char classes[256]; /* the worker's compiled classes */
static curator_worker java;

static int setup(void **state)
{
    (void)state;
    if (test_zk_start(&srv) != 0 || test_make_dir(classes, sizeof classes, "curator") != 0 ||
        curator_compile(classes) != 0)
        return -1;
    return curator_start(&java, classes, srv.url + strlen("zk://"), 60000);
}

static int teardown(void **state)
{
    (void)state;
    curator_stop(&java);
    test_zk_stop(&srv);
    if (classes[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", classes);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", classes);
    }
    return 0;
}

/* dlock's clients keep identities: their nodes carry the text as data
 * where Curator's carry their client's address, and Curator's recipes
 * must not mind. */
static dlock_client *client_new(void)
{
    const char *u = srv.url;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.identity = 1;
    o.identity_text = "dlock-interop";
    return test_client_new(&u, 1, &o);
}

static dlock_lock *lock_new(dlock_client *c, const char *name, unsigned flags)
{
    dlock_lock *l = zk_test_lock(c, name, flags, 0);
    assert_non_null(l);
    return l;
}

/* Curator's answer "got T_NS CZXID": when it held, and its node's czxid. */
static void curator_got(const char *line, int64_t *t_ns, int64_t *czxid)
{
    long long t = 0, z = 0;
    if (sscanf(line, "got %lld %lld", &t, &z) != 2)
        fail_msg("Curator answered \"%s\", not \"got ...\"", line);
    *t_ns = t;
    *czxid = z;
}

static int children(const char *path)
{
    char line[128];
    int n = -1;
    if (curator_ask(&java, line, sizeof line, 10000, "children %s", path) != 0 ||
        sscanf(line, "children %d", &n) != 1)
        fail_msg("children %s: \"%s\"", path, line);
    return n;
}

static void curator_waits_while_dlock_holds_and_gets_it_at_the_release(void **state)
{
    (void)state;
    const char *path = "/curator/dlock-holds";
    dlock_client *c = client_new();
    dlock_lock *l = lock_new(c, path, 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(l);
    char line[256];
    /* Curator's try while dlock holds: refused. */
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "acquire %s 0", path), 0);
    assert_int_equal(strncmp(line, "timeout", 7), 0);
    /* Its wait: in line behind dlock's node, and not let in. */
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "queue %s 20000 2", path), 0);
    assert_string_equal(line, "queued");
    assert_int_equal(curator_read(&java, line, sizeof line, 500), -1);
    int64_t released_ns = chaos_now_ns();
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(curator_read(&java, line, sizeof line, 10000), 0);
    int64_t got_ns, czxid;
    curator_got(line, &got_ns, &czxid);
    assert_true(got_ns > released_ns);
    printf("Curator got the lock %.1f ms after dlock's release\n",
           (double)(got_ns - released_ns) / 1e6);
    /* woken by its watch on dlock's node, not a poll */
    if (got_ns - released_ns > 1000 * 1000000LL)
        fail_msg("Curator got the lock %" PRId64 " ms after dlock's release",
                 (got_ns - released_ns) / 1000000);
    assert_true((uint64_t)czxid > fence);
    /* While Curator holds, dlock's try is refused, and status names
     * Curator's node as the holder, with its czxid as the fence. */
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED);
    dlock_node_status st;
    assert_int_equal(dlock_client_status(c, path, strlen(path), &st, NULL), DLOCK_OK);
    assert_int_equal(st.held, 1);
    assert_int_equal(st.fence, (uint64_t)czxid);
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "release %s", path), 0);
    assert_int_equal(strncmp(line, "released", 8), 0);
    assert_int_equal(children(path), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void dlock_waits_while_curator_holds_and_gets_it_at_the_release(void **state)
{
    (void)state;
    const char *path = "/curator/curator-holds";
    char line[256];
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "acquire %s 10000", path), 0);
    int64_t held_ns, czxid;
    curator_got(line, &held_ns, &czxid);
    dlock_client *c = client_new();
    dlock_lock *l = lock_new(c, path, 0);
    /* dlock's try while Curator holds: refused, and it left no node. */
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(children(path), 1);
    dlock_holders_info hi;
    dlock_holder h[1];
    assert_int_equal(dlock_client_holders(c, path, 0, &hi, h, 1), DLOCK_OK);
    assert_int_equal(hi.count, 1);
    assert_int_equal(strncmp(h[0].token, "_c_", 3), 0); /* Curator's protected node */
    /* Curator's node's data (its client's address) reads as the identity */
    char id[DLOCK_IDENTITY_READ_MAX + 1];
    assert_int_equal(dlock_client_identity(c, path, 0, id, sizeof id), DLOCK_OK);
    assert_non_null(strstr(id, " since="));
    assert_int_not_equal(strncmp(id, "dlock-interop", 13), 0);
    printf("Curator's holder's identity: %s\n", id);
    test_waiter w;
    assert_int_equal(test_waiter_start(&w, l, 20000, TEST_WAITER_KEEP), 0);
    int64_t end = test_now_ms() + 10000;
    while (children(path) < 2 && test_now_ms() < end)
        test_sleep_ms(10);
    assert_int_equal(children(path), 2); /* dlock's node in line behind Curator's */
    test_sleep_ms(300);
    assert_int_equal(atomic_load(&w.done), 0);
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "release %s", path), 0);
    long long released_ns = 0;
    assert_int_equal(sscanf(line, "released %lld", &released_ns), 1);
    assert_int_equal(test_waiter_join(&w), DLOCK_OK);
    /* (test_now_ms() and the JVM's nanoTime are one clock) */
    int64_t after_ms = atomic_load(&w.done_ms) - released_ns / 1000000;
    assert_true(after_ms >= 0);
    printf("dlock got the lock %lld ms after Curator's release\n", (long long)after_ms);
    if (after_ms > 1000)
        fail_msg("dlock got the lock %lld ms after Curator's release", (long long)after_ms);
    assert_true(dlock_lock_fence(l) > (uint64_t)czxid);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- InterProcessReadWriteLock ---------------------------------------------- */

static void dlock_and_curator_read_write_locks_share_and_exclude(void **state)
{
    (void)state;
    const char *path = "/curator/rw";
    char line[256];
    dlock_client *c = client_new();
    dlock_lock *r = lock_new(c, path, DLOCK_SHARED), *late = lock_new(c, path, DLOCK_SHARED);
    dlock_lock *w = lock_new(c, path, DLOCK_EXCLUSIVE);
    /* Curator's reader and dlock's share; dlock's writer is kept out. */
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "rw read acquire %s 0", path),
                     0);
    assert_int_equal(strncmp(line, "got", 3), 0);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED);
    /* Curator's writer waits behind both readers; a reader of dlock's that
     * comes after it waits for it (Curator's readers do the same). */
    assert_int_equal(
        curator_ask(&java, line, sizeof line, 10000, "rw write queue %s 20000 3", path), 0);
    assert_string_equal(line, "queued");
    assert_int_equal(dlock_lock_acquire(late, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(curator_read(&java, line, sizeof line, 300), -1);
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "rw read release %s", path),
                     0);
    assert_int_equal(curator_read(&java, line, sizeof line, 300), -1); /* dlock's reads */
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(curator_read(&java, line, sizeof line, 10000), 0);
    assert_int_equal(strncmp(line, "got", 3), 0); /* Curator writes */
    /* dlock's writer waits for Curator's, and gets it at its release. */
    test_waiter ww;
    assert_int_equal(test_waiter_start(&ww, w, 20000, TEST_WAITER_KEEP), 0);
    test_sleep_ms(300);
    assert_int_equal(atomic_load(&ww.done), 0);
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "rw write release %s", path),
                     0);
    assert_int_equal(test_waiter_join(&ww), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_lock_free(late);
    dlock_client_free(c);
}

/* ---- both contend ------------------------------------------------------------ */

#define DLOCK_WORKERS 2
#define JAVA_THREADS 2
#define ROUNDS 12

/* Curator's threads (java_kind: "" its mutex, "sem N " a semaphore's
 * lease) and dlock's contend on path; the history's verdict. */
static chaos_verdict contend_both(const char *path, const char *java_kind, unsigned permits)
{
    char hist[300], line[256];
    int fd = zk_history_new(hist, sizeof hist, "dlock-zk-curator-history");
    assert_true(fd >= 0);
    /* Curator's threads first (slots 100 and up), then dlock's. */
    assert_int_equal(curator_send(&java, "%scontend %s %d %d %s 100 %d", java_kind, path, ROUNDS,
                                  permits ? 20 : 5, hist, JAVA_THREADS),
                     0);
    static zk_contender k[DLOCK_WORKERS]; /* a failed assert leaves the threads running */
    for (int i = 0; i < DLOCK_WORKERS; i++)
        k[i] = (zk_contender){.url = srv.url, .name = path, .permits = permits,
                              .rounds = ROUNDS, .hold_ms = permits ? 20 : 5};
    assert_int_equal(zk_contend_start(k, DLOCK_WORKERS, fd), 0);
    assert_int_equal(zk_contend_join(k, DLOCK_WORKERS), 0);
    assert_int_equal(curator_read(&java, line, sizeof line, 60000), 0);
    assert_string_equal(line, "contended 0");
    close(fd);
    chaos_verdict v;
    assert_int_equal(zk_history_verdict(hist, &v), 0);
    assert_int_equal(v.cs, (DLOCK_WORKERS + JAVA_THREADS) * ROUNDS);
    assert_int_equal(v.torn, 0);
    assert_int_equal(v.cs_unclosed, 0);
    assert_int_equal(v.overlaps, 0);
    assert_int_equal(v.fence_violations, 0);
    return v;
}

static void dlock_and_curator_contend_without_overlap_and_fences_only_grow(void **state)
{
    (void)state;
    chaos_verdict v = contend_both("/curator/contended", "", 0);
    assert_int_equal(v.max_concurrent, 1);
}

/* ---- InterProcessSemaphoreV2 ------------------------------------------------- */

static void dlock_and_curator_semaphores_share_the_permits(void **state)
{
    (void)state;
    const char *path = "/curator/sem";
    char line[256];
    dlock_client *c = client_new();
    dlock_lock *s1 = NULL, *s2 = NULL;
    assert_int_equal(dlock_semaphore_new(&s1, c, path, 2, NULL), DLOCK_OK);
    assert_int_equal(dlock_semaphore_new(&s2, c, path, 2, NULL), DLOCK_OK);
    /* Curator's lease and dlock's fill the two permits. */
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "sem 2 acquire %s 0", path), 0);
    assert_int_equal(strncmp(line, "got", 3), 0);
    assert_int_equal(dlock_lock_acquire(s1, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(s2, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "sem 2 release %s", path), 0);
    assert_int_equal(strncmp(line, "released", 8), 0);
    assert_int_equal(dlock_lock_acquire(s2, 0), DLOCK_OK);
    /* dlock's two: Curator's try finds none left */
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "sem 2 acquire %s 0", path), 0);
    assert_int_equal(strncmp(line, "timeout", 7), 0);
    assert_int_equal(dlock_lock_release(s1), DLOCK_OK);
    assert_int_equal(dlock_lock_release(s2), DLOCK_OK);
    dlock_lock_free(s1);
    dlock_lock_free(s2);
    dlock_client_free(c);
    chaos_verdict v = contend_both("/curator/sem-loop", "sem 2 ", 2);
    printf("at most %ld permits at once\n", v.max_permits);
    assert_int_equal(v.max_permits, 2);
}

/* ---- LeaderSelector ----------------------------------------------------------- */

static void expect_leader(dlock_election *e, uint64_t fence, const char *value)
{
    test_expect_leader(e, fence, value, fence == 0);
}

/* Curator's "leading T_NS CZXID". */
static void curator_leads(const char *line, int64_t *t_ns, int64_t *czxid)
{
    long long t = 0, z = 0;
    if (sscanf(line, "leading %lld %lld", &t, &z) != 2)
        fail_msg("Curator answered \"%s\", not \"leading ...\"", line);
    *t_ns = t;
    *czxid = z;
}

static void curator_leads_and_dlock_waits_then_takes_over(void **state)
{
    (void)state;
    const char *path = "/curator/elect-curator";
    char line[256];
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "select %s curator-1 1", path),
                     0);
    assert_string_equal(line, "selecting");
    assert_int_equal(curator_read(&java, line, sizeof line, 10000), 0);
    int64_t led_ns, czxid;
    curator_leads(line, &led_ns, &czxid);
    dlock_client *c = client_new();
    dlock_election *e = NULL, *o = NULL;
    assert_int_equal(dlock_election_new(&e, c, path, NULL), DLOCK_OK);
    assert_int_equal(dlock_election_new(&o, c, path, NULL), DLOCK_OK);
    /* Curator's participant id, and its node's czxid as the fence */
    expect_leader(o, (uint64_t)czxid, "curator-1");
    assert_int_equal(dlock_election_campaign(e, "dlock-b", 0), DLOCK_ENOTACQUIRED);
    test_campaigner cb = {e, "dlock-b", 1, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, test_campaign_thread, &cb), 0);
    int64_t end = test_now_ms() + 10000;
    while (children(path) < 2 && test_now_ms() < end)
        test_sleep_ms(10);
    assert_int_equal(children(path), 2); /* dlock's node in line behind Curator's */
    test_sleep_ms(300);
    assert_int_equal(atomic_load(&cb.done_ms), 0);
    /* Curator sees itself lead, dlock's candidate among the participants */
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "leader %s", path), 0);
    assert_string_equal(line, "leader [curator-1] true");
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "abdicate %s", path), 0);
    long long abdicated_ns = 0;
    assert_int_equal(sscanf(line, "abdicated %lld", &abdicated_ns), 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(cb.rc, DLOCK_OK);
    int64_t after_ms = atomic_load(&cb.done_ms) - abdicated_ns / 1000000;
    printf("dlock led %lld ms after Curator's abdication\n", (long long)after_ms);
    if (after_ms > 1000)
        fail_msg("dlock led %lld ms after Curator's abdication", (long long)after_ms);
    assert_true(dlock_election_fence(e) > (uint64_t)czxid);
    expect_leader(o, dlock_election_fence(e), "dlock-b");
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "leader %s", path), 0);
    assert_string_equal(line, "leader [dlock-b] true");
    assert_int_equal(dlock_election_resign(e), DLOCK_OK);
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "leader %s", path), 0);
    assert_string_equal(line, "leader [] false"); /* nobody */
    dlock_election_free(e);
    dlock_election_free(o);
    dlock_client_free(c);
}

static void dlock_leads_and_curator_waits_then_takes_over(void **state)
{
    (void)state;
    const char *path = "/curator/elect-dlock";
    char line[256];
    dlock_client *c = client_new();
    dlock_election *e = NULL;
    assert_int_equal(dlock_election_new(&e, c, path, NULL), DLOCK_OK);
    assert_int_equal(dlock_election_campaign(e, "dlock-a", 0), DLOCK_OK);
    uint64_t fence = dlock_election_fence(e);
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "leader %s", path), 0);
    assert_string_equal(line, "leader [dlock-a] true");
    /* a proclaim is the id Curator reads */
    assert_int_equal(dlock_election_proclaim(e, "dlock-a:8080"), DLOCK_OK);
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "leader %s", path), 0);
    assert_string_equal(line, "leader [dlock-a:8080] true");
    /* Curator's selector waits in line behind dlock's node */
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "select %s curator-2 2", path),
                     0);
    assert_string_equal(line, "selecting");
    assert_int_equal(curator_read(&java, line, sizeof line, 500), -1);
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "leader %s", path), 0);
    assert_string_equal(line, "leader [dlock-a:8080] true");
    int64_t resigned_ns = chaos_now_ns();
    assert_int_equal(dlock_election_resign(e), DLOCK_OK);
    assert_int_equal(curator_read(&java, line, sizeof line, 10000), 0);
    int64_t led_ns, czxid;
    curator_leads(line, &led_ns, &czxid);
    assert_true(led_ns > resigned_ns);
    printf("Curator led %.1f ms after dlock's resign\n", (double)(led_ns - resigned_ns) / 1e6);
    if (led_ns - resigned_ns > 1000 * 1000000LL)
        fail_msg("Curator led %" PRId64 " ms after dlock's resign",
                 (led_ns - resigned_ns) / 1000000);
    assert_true((uint64_t)czxid > fence);
    expect_leader(e, (uint64_t)czxid, "curator-2");
    assert_int_equal(dlock_election_campaign(e, "dlock-a", 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(curator_ask(&java, line, sizeof line, 10000, "abdicate %s", path), 0);
    assert_int_equal(strncmp(line, "abdicated", 9), 0);
    assert_int_equal(children(path), 0);
    dlock_election_free(e);
    dlock_client_free(c);
}

int main(void)
{
    const char *missing = curator_missing();
    if (!test_zk_available() || missing) {
        const char *why = missing ? missing : "/usr/share/java/zookeeper.jar";
        const char *need = getenv("DLOCK_TEST_REQUIRE_CURATOR");
        printf("no %s (apt-get install default-jdk-headless libcurator-recipes-java "
               "zookeeper): %s\n",
               why, need && strcmp(need, "1") == 0 ? "FAILED (required)" : "skipped");
        return need && strcmp(need, "1") == 0 ? 1 : 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(curator_waits_while_dlock_holds_and_gets_it_at_the_release),
        cmocka_unit_test(dlock_waits_while_curator_holds_and_gets_it_at_the_release),
        cmocka_unit_test(dlock_and_curator_read_write_locks_share_and_exclude),
        cmocka_unit_test(dlock_and_curator_contend_without_overlap_and_fences_only_grow),
        cmocka_unit_test(dlock_and_curator_semaphores_share_the_permits),
        cmocka_unit_test(curator_leads_and_dlock_waits_then_takes_over),
        cmocka_unit_test(dlock_leads_and_curator_waits_then_takes_over),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
