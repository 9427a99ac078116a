/* SPDX-License-Identifier: BSD-3-Clause */
/* Issue 17's kinds on a real Redis Cluster (3 masters, 3 replicas): the
 * writer-waiting mark lives in its lock key's slot (the scripts take both
 * keys, so a mark elsewhere would be refused with CROSSSLOT), readers
 * share and keep a writer out, a semaphore counts its permits, and a set
 * takes names that live on different masters. The holder identity (KEY
 * NUL "id") lives in its lock's slot too, and the watchdog's renewal
 * keeps it there (renew_batch.lua names it in its mode argument), for
 * every kind: a reader's and a fair holder's too, and one holder's read by
 * its token (dlock_client_holder_identity(): a bare HGET, routed to the
 * lock's slot). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "dlock.h"
#include "redis_topology.h"
#include "test_util.h"

static test_cluster C;
static dlock_client *cl;

static int group_setup(void **state)
{
    (void)state;
    if (test_cluster_start(&C) != 0)
        return -1;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = 1;
    cl = test_client_new(C.urls, TEST_CLUSTER_NODES, &o);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    dlock_client_free(cl);
    test_cluster_stop(&C);
    return 0;
}

static void readers_writers_permits_and_sets_on_a_cluster(void **state)
{
    (void)state;
    /* Names without a {tag}: the mark must still land in their slot. */
    const char *const rw_names[] = {"a", "orders:1", "with space"};
    for (size_t i = 0; i < 3; i++) {
        dlock_lock *r1 = test_lock_new(cl, rw_names[i], 10000, DLOCK_SHARED, 1, 20);
        dlock_lock *r2 = test_lock_new(cl, rw_names[i], 10000, DLOCK_SHARED, 1, 20);
        dlock_lock *w = test_lock_new(cl, rw_names[i], 10000, DLOCK_EXCLUSIVE, 1, 20);
        assert_int_equal(dlock_lock_acquire(r1, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(r2, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(w, 50), DLOCK_ETIMEDOUT); /* waits: its mark */
        dlock_holders_info hi;
        assert_int_equal(dlock_client_holders(cl, rw_names[i], 0, &hi, NULL, 0), DLOCK_OK);
        assert_int_equal(hi.count, 2);
        assert_true(hi.writer_waiting_ms > 0);
        dlock_lock *r3 = test_lock_new(cl, rw_names[i], 10000, DLOCK_SHARED, 1, 20);
        assert_int_equal(dlock_lock_acquire(r3, 0), DLOCK_ENOTACQUIRED); /* the mark holds */
        assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
        assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_release(w), DLOCK_OK);
        dlock_lock_free(r1);
        dlock_lock_free(r2);
        dlock_lock_free(r3);
        dlock_lock_free(w);
    }
    dlock_lock *p[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dlock_semaphore_new(&p[i], cl, "gpu", 2, NULL), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(p[i], 0), i < 2 ? DLOCK_OK : DLOCK_ENOTACQUIRED);
    }
    for (int i = 0; i < 3; i++)
        dlock_lock_free(p[i]);
    const char *const set_names[] = {"a", "b", "c", "orders:1"};
    dlock_lock *set = NULL;
    assert_int_equal(dlock_lock_new_multi(&set, cl, set_names, 4, NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    dlock_lock *b = test_lock_new(cl, "b", 10000, 0, 1, 20);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    dlock_lock_free(b);
    dlock_lock_free(set);
}

static void the_identity_lives_and_is_renewed_in_its_locks_slot(void **state)
{
    (void)state;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = 1;
    o.identity = 1;
    o.identity_text = "on-a-cluster";
    dlock_client *with_id = test_client_new(C.urls, TEST_CLUSTER_NODES, &o);
    const char *const names[] = {"id:a", "id:{t}b", "id:c", "id:s", "id:{u}f", "id:f"};
    static const unsigned flags[] = {0, DLOCK_EXCLUSIVE, DLOCK_EXCLUSIVE, DLOCK_SHARED,
                                     DLOCK_FAIR, DLOCK_FAIR};
    enum { N_NAMES = sizeof names / sizeof names[0] };
    dlock_lock *l[N_NAMES];
    for (int i = 0; i < N_NAMES; i++) {
        l[i] = test_lock_new(with_id, names[i], 300, DLOCK_AUTO_RENEW | flags[i], 1, 20);
        assert_int_equal(dlock_lock_acquire(l[i], 0), DLOCK_OK);
    }
    usleep(1000 * 1000); /* more than three TTLs: renewed, identity and all */
    char buf[DLOCK_IDENTITY_READ_MAX + 1];
    for (int i = 0; i < N_NAMES; i++) {
        assert_int_equal(dlock_lock_state_get(l[i]), DLOCK_STATE_HELD);
        assert_int_equal(dlock_client_identity(cl, names[i], 0, buf, sizeof buf), DLOCK_OK);
        assert_true(strncmp(buf, "on-a-cluster since=", 19) == 0);
        assert_int_equal(dlock_client_holder_identity(cl, names[i], 0, dlock_lock_token(l[i]),
                                                      buf, sizeof buf),
                         DLOCK_OK);
        assert_true(strncmp(buf, "on-a-cluster since=", 19) == 0);
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        assert_int_equal(dlock_client_identity(cl, names[i], 0, buf, sizeof buf), DLOCK_OK);
        assert_string_equal(buf, "");
        dlock_lock_free(l[i]);
    }
    dlock_client_free(with_id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(readers_writers_permits_and_sets_on_a_cluster),
        cmocka_unit_test(the_identity_lives_and_is_renewed_in_its_locks_slot),
    };
    return cmocka_run_group_tests_name("kinds on a cluster", tests, group_setup, group_teardown);
}
