/* SPDX-License-Identifier: BSD-3-Clause */
/* The watchdog on a Redis Cluster runs each master's round on a thread of
 * its own (src/engine/watchdog.c). An on_lost called by one master's round
 * may release a lock whose renewal is in another master's round still in
 * flight (a multi-name set over several masters releasing itself): that
 * release must wait until the other round has settled the lock, as a
 * release from any other thread does (review 34 item 5). The rounds here
 * are of records that renew themselves (the etcd backend's kind of
 * record), so the test decides when each answers; the cluster is real, and
 * gives the two records' keys their masters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_topology.h"
#include "test_util.h"
#include "watchdog.h"

static test_cluster C;

static int group_setup(void **state)
{
    (void)state;
    return test_cluster_start(&C);
}

static int group_teardown(void **state)
{
    (void)state;
    test_cluster_stop(&C);
    return 0;
}

static dlock_client *client;
static dlock__renewal rec_a, rec_b;
static atomic_int b_started, b_go, b_renewed, a_in_lost, a_done, b_renewed_at_remove;

static int64_t lease_end(void *owner)
{
    (void)owner;
    return test_now_ms() * 1000000 + 60 * INT64_C(1000000000);
}

static int settle(void *owner, const dlock__renew_votes *v)
{
    (void)owner;
    return v->no ? DLOCK_LOST_NOT_OWNER : 0;
}

/* A's round found A gone; its on_lost releases B, whose round is still
 * on the wire. */
static void a_lost(void *owner, int reason)
{
    (void)owner;
    (void)reason;
    atomic_store(&a_in_lost, 1);
    dlock__watchdog_remove(client, &rec_b);
    atomic_store(&b_renewed_at_remove, atomic_load(&b_renewed));
    atomic_store(&a_done, 1);
}

static void b_lost(void *owner, int reason)
{
    (void)owner;
    (void)reason;
}

/* A answers "gone", once B's renewal is in flight. */
static int a_renew(void *owner, int64_t deadline_ns)
{
    (void)owner;
    (void)deadline_ns;
    for (int i = 0; i < 1000 && !atomic_load(&b_started); i++)
        usleep(5000);
    return 0;
}

/* B answers when the test says so. */
static int b_renew(void *owner, int64_t deadline_ns)
{
    (void)owner;
    (void)deadline_ns;
    atomic_store(&b_started, 1);
    for (int i = 0; i < 1000 && !atomic_load(&b_go); i++)
        usleep(5000);
    atomic_store(&b_renewed, 1);
    return 1;
}

static const dlock__renewal_ops ops_a = {lease_end, settle, a_lost, a_renew};
static const dlock__renewal_ops ops_b = {lease_end, settle, b_lost, b_renew};

/* A name whose key's master is not `other`'s (-1: any), by the client's
 * own slot map. */
static void pick_name(char *out, size_t len, int not_master)
{
    for (int k = 0; k < 1000; k++) {
        snprintf(out, len, "wd-%d", k);
        int m = test_cluster_master_of(&C, test_cluster_keyslot(&C, out));
        if (m >= 0 && m != not_master)
            return;
    }
    fail();
}

static void release_on_another_masters_lost_waits_for_that_round(void **state)
{
    (void)state;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = 1;
    client = test_client_new(C.urls, TEST_CLUSTER_NODES, &o);
    /* Learn the slot map: the watchdog groups its rounds by it. */
    dlock_lock *warm = NULL;
    assert_int_equal(dlock_lock_new(&warm, client, "warm", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(warm, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(warm), DLOCK_OK);
    dlock_lock_free(warm);

    static char name_a[32], name_b[32];
    pick_name(name_a, sizeof name_a, -1);
    pick_name(name_b, sizeof name_b,
              test_cluster_master_of(&C, test_cluster_keyslot(&C, name_a)));
    rec_a = (dlock__renewal){.ops = &ops_a, .key = name_a, .key_len = strlen(name_a),
                             .token = "t", .token_len = 1, .ttl_ms = 30000, .interval_ms = 10000};
    rec_b = (dlock__renewal){.ops = &ops_b, .key = name_b, .key_len = strlen(name_b),
                             .token = "t", .token_len = 1, .ttl_ms = 30000, .interval_ms = 10000};
    assert_int_equal(dlock__watchdog_start(client), DLOCK_OK);
    /* Due together: one pick, two masters, two rounds. */
    dlock__watchdog_add(client, &rec_b, 100);
    dlock__watchdog_add(client, &rec_a, 100);
    for (int i = 0; i < 1000 && !atomic_load(&a_in_lost); i++)
        usleep(5000);
    assert_true(atomic_load(&a_in_lost));
    usleep(300 * 1000); /* A's release has had time to go ahead */
    atomic_store(&b_go, 1);
    for (int i = 0; i < 1000 && !atomic_load(&a_done); i++)
        usleep(5000);
    assert_true(atomic_load(&a_done));
    /* The release in A's on_lost returned only once B's round was done
     * with B (it returned at once, B's renewal still in flight). */
    assert_int_equal(atomic_load(&b_renewed_at_remove), 1);
    dlock__watchdog_remove(client, &rec_a);
    dlock__watchdog_remove(client, &rec_b);
    dlock_client_free(client);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(release_on_another_masters_lost_waits_for_that_round),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
