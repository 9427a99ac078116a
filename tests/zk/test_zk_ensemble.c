/* SPDX-License-Identifier: BSD-3-Clause */
/* The ZooKeeper backend on a 3-member ensemble (support/zk_ensemble.c)
 * whose leader is SIGKILLed: a holder whose own connection was to the
 * leader keeps its hold (its session moves to a follower within its
 * timeout: no on_lost, extend says the node is still ours), its waiters
 * stay in line and are served in turn after its release, never two
 * holders at once (the chaos history's checker), and fences (czxids) only
 * grow: the new leader's epoch is in their high bits. Then contenders in
 * a loop while the leader is killed under them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "dlock.h"
#include "history.h"
#include "proc.h"
#include "test_util.h"
#include "zk_contend.h"
#include "zk_ensemble.h"
#include "zk_session.h"

/* Long enough for an election and a reconnect on a loaded machine, short
 * enough for a test. */
#define SESSION_MS 8000

static test_zk_ensemble ens;
static char url[400]; /* every member, and SESSION_MS */

static int setup(void **state)
{
    (void)state;
    if (test_zk_ensemble_start(&ens, 3) != 0)
        return -1;
    snprintf(url, sizeof url, "%s?session_timeout_ms=%d", ens.url, SESSION_MS);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_zk_ensemble_stop(&ens);
    return 0;
}

static dlock_client *client_new(void)
{
    const char *u = url;
    return test_client_new(&u, 1, NULL);
}

/* 1 if member i lists c's session among its connections ("cons"). */
static int connected_to(dlock_client *c, int i)
{
    clientid_t id;
    dlock__zk_session_id(c->store, &id);
    char cons[8192], sid[40];
    snprintf(sid, sizeof sid, "sid=0x%llx", (unsigned long long)id.client_id);
    return test_zk_four_letters(ens.m[i].port, "cons", cons, sizeof cons) == 0 &&
           strstr(cons, sid) != NULL;
}

/* A client whose connection is to member i (the C client picks a member
 * at random: clients are opened until one lands there). */
static dlock_client *client_on(int i)
{
    for (int attempt = 0; attempt < 40; attempt++) {
        dlock_client *c = client_new();
        if (connected_to(c, i))
            return c;
        dlock_client_free(c);
    }
    fail_msg("no client landed on member %d", i);
    return NULL;
}

static atomic_int lost_calls;

static void on_lost(dlock_lock *l, dlock_lost_reason reason, void *arg)
{
    (void)l, (void)reason, (void)arg;
    atomic_fetch_add(&lost_calls, 1);
}

/* ---- contenders that note their sections ------------------------------------ */

static void check_history(const char *hist, long sections)
{
    chaos_verdict v;
    assert_int_equal(zk_history_verdict(hist, &v), 0);
    assert_int_equal(v.cs, sections);
    assert_int_equal(v.torn, 0);
    assert_int_equal(v.cs_unclosed, 0);
    assert_int_equal(v.overlaps, 0);
    assert_int_equal(v.max_concurrent, 1);
    assert_int_equal(v.fence_violations, 0);
}

/* ---- the holder on the leader ------------------------------------------------ */

#define WAITERS 2

static void a_hold_on_the_leader_survives_its_death_and_the_line_holds(void **state)
{
    (void)state;
    const char *name = "/failover/held";
    char hist[300];
    int fd = zk_history_new(hist, sizeof hist, "dlock-zk-ensemble-history");
    assert_true(fd >= 0);
    int leader = test_zk_ensemble_leader(&ens);
    assert_true(leader >= 0);
    dlock_client *a = client_on(leader);
    dlock_lock *la = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = DLOCK_AUTO_RENEW;
    o.renew_interval_ms = 300;
    o.on_lost = on_lost;
    atomic_store(&lost_calls, 0);
    assert_int_equal(dlock_lock_new(&la, a, name, &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(la, 0), DLOCK_OK);
    uint64_t f1 = dlock_lock_fence(la);
    chaos_history_note(fd, CHAOS_REC_ENTER, 9, 10, 0, f1, CHAOS_KIND_EXCLUSIVE, 0);
    static zk_contender k[WAITERS]; /* a failed assert leaves the threads running */
    for (int i = 0; i < WAITERS; i++)
        k[i] = (zk_contender){.url = url, .name = name, .rounds = 1, .hold_ms = 20};
    assert_int_equal(zk_contend_start(k, WAITERS, fd), 0);
    test_sleep_ms(500); /* the waiters are in line, watching */
    int64_t killed = test_now_ms();
    test_zk_ensemble_kill(&ens, leader);
    int next = test_zk_ensemble_wait(&ens, 30000);
    int64_t elected = test_now_ms();
    assert_true(next >= 0 && next != leader);
    /* The session lives on: the node is still ours once a follower has
     * a's connection (an extend before that cannot reach the ensemble). */
    int rc;
    while ((rc = dlock_lock_extend(la, 0)) != DLOCK_OK && test_now_ms() - killed < SESSION_MS)
        test_sleep_ms(50);
    int64_t extended = test_now_ms();
    assert_int_equal(rc, DLOCK_OK);
    assert_true(connected_to(a, 0) || connected_to(a, 1) || connected_to(a, 2));
    printf("leader %d killed: member %d leads %lld ms later; the holder's extend "
           "succeeded %lld ms after the kill\n",
           leader, next, (long long)(elected - killed), (long long)(extended - killed));
    test_sleep_ms(1000); /* the renewals that the failover cut have come back */
    assert_int_equal(atomic_load(&lost_calls), 0);
    assert_int_equal(dlock_lock_state_get(la), DLOCK_STATE_HELD);
    for (int i = 0; i < WAITERS; i++)
        assert_int_equal(atomic_load(&k[i].entered), 0);
    chaos_history_note(fd, CHAOS_REC_EXIT, 9, 10, 0, f1, 0, 0);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    assert_int_equal(zk_contend_join(k, WAITERS), 0);
    /* A hold taken under the new leader: its czxid's epoch (high 32
     * bits) is the new one's, larger. */
    assert_int_equal(dlock_lock_acquire(la, 0), DLOCK_OK);
    uint64_t f2 = dlock_lock_fence(la);
    printf("fences: %#" PRIx64 " before the failover, %#" PRIx64 " after\n", f1, f2);
    assert_true(f2 >> 32 > f1 >> 32);
    assert_int_equal(dlock_lock_release(la), DLOCK_OK);
    close(fd);
    check_history(hist, 1 + WAITERS);
    dlock_lock_free(la);
    dlock_client_free(a);
    assert_int_equal(test_zk_ensemble_restart(&ens, leader), 0);
    assert_true(test_zk_ensemble_wait(&ens, 60000) >= 0);
}

/* ---- contenders under a failover ---------------------------------------------- */

#define CONTENDERS 3
#define ROUNDS 15

static void contenders_never_overlap_while_the_leader_dies(void **state)
{
    (void)state;
    char hist[300];
    int fd = zk_history_new(hist, sizeof hist, "dlock-zk-ensemble-loop");
    assert_true(fd >= 0);
    int leader = test_zk_ensemble_leader(&ens);
    assert_true(leader >= 0);
    static zk_contender k[CONTENDERS];
    for (int i = 0; i < CONTENDERS; i++)
        k[i] = (zk_contender){.url = url, .name = "/failover/loop", .rounds = ROUNDS,
                              .hold_ms = 20};
    assert_int_equal(zk_contend_start(k, CONTENDERS, fd), 0);
    /* Kill the leader once a third of the sections are done. */
    int64_t end = test_now_ms() + 30000;
    for (;;) {
        int done = 0;
        for (int i = 0; i < CONTENDERS; i++)
            done += atomic_load(&k[i].entered);
        if (done >= CONTENDERS * ROUNDS / 3 || test_now_ms() > end)
            break;
        test_sleep_ms(5);
    }
    int64_t killed = test_now_ms();
    test_zk_ensemble_kill(&ens, leader);
    int next = test_zk_ensemble_wait(&ens, 30000);
    printf("leader %d killed: member %d leads %lld ms later\n", leader, next,
           (long long)(test_now_ms() - killed));
    assert_int_equal(zk_contend_join(k, CONTENDERS), 0); /* every acquire and release */
    close(fd);
    check_history(hist, CONTENDERS * ROUNDS);
    assert_int_equal(test_zk_ensemble_restart(&ens, leader), 0);
    assert_true(test_zk_ensemble_wait(&ens, 60000) >= 0);
}

int main(void)
{
    if (!test_zk_available()) {
        printf("no ZooKeeper (apt-get install zookeeper): skipped\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_hold_on_the_leader_survives_its_death_and_the_line_holds),
        cmocka_unit_test(contenders_never_overlap_while_the_leader_dies),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
