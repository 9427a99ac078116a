/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_list() on a Cluster whose master loses the slot its walk is
 * routed by, mid-walk: DLOCK_EBUSY (dlock.h), for a SCAN cursor means
 * nothing on another node; listing again gives every name.
 *
 * The move is made deterministic here: the fan-out is wrapped
 * (-Wl,--wrap=dlock__fanout) and, once armed, after the first batch's
 * reads on a master the client's slot map is told that the walk's slot
 * moved to another master, as a MOVED seen during those reads tells it
 * (dlock__cluster_moved). The servers' map is not changed: the client
 * relearns the true one at its next request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "client.h"
#include "cluster.h"
#include "dlock.h"
#include "fanout.h"
#include "test_util.h"

int __real_dlock__fanout(struct dlock_client *client, const dlock__req *reqs, uint32_t nreqs,
                         const dlock__fanout_opts *opts, dlock__on_reply cb, void *arg);
int __wrap_dlock__fanout(struct dlock_client *client, const dlock__req *reqs, uint32_t nreqs,
                         const dlock__fanout_opts *opts, dlock__on_reply cb, void *arg);

static int armed;     /* move the walk's slot after the next batch's reads */
static int moved_at = -1; /* the slot moved (-1: none yet) */

/* The walk's slot to another master the client knows. */
static void move_slot(dlock__cluster *cl, unsigned slot)
{
    int from = dlock__cluster_master_of(cl, slot);
    for (size_t j = 0; j < cl->n_masters; j++) {
        if ((int)j == from || !cl->master[j].host[0])
            continue;
        dlock__cluster_moved(cl, slot, cl->master[j].host, cl->master[j].port);
        moved_at = (int)slot;
        return;
    }
    fail_msg("no other master to move slot %u to", slot);
}

int __wrap_dlock__fanout(struct dlock_client *client, const dlock__req *reqs, uint32_t nreqs,
                         const dlock__fanout_opts *opts, dlock__on_reply cb, void *arg)
{
    int rc = __real_dlock__fanout(client, reqs, nreqs, opts, cb, arg);
    /* A listing's reads: scripts routed by the walk's slot (its SCAN has
     * no script). */
    if (armed && opts->cluster_slot && nreqs > 0 && reqs[0].script) {
        armed = 0;
        move_slot(dlock__client_cluster(client), opts->cluster_slot - 1);
    }
    return rc;
}

static int count(void *arg, const dlock_list_entry *e)
{
    (void)e;
    ++*(size_t *)arg;
    return 0;
}

static void a_walk_whose_slot_moves_is_ebusy_and_a_new_list_sees_all(void **state)
{
    (void)state;
    static test_cluster cluster;
    dlock_client *c = test_cluster_client(&cluster, NULL);
    enum { NAMES = 12 }; /* on every master, by their slots */
    dlock_lock *h[NAMES];
    for (int i = 0; i < NAMES; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%02d", i);
        h[i] = test_lock_new(c, name, 60000, 0, 10, 50);
        assert_int_equal(dlock_lock_acquire(h[i], 0), DLOCK_OK);
    }
    size_t n = 0;
    assert_int_equal(dlock_client_list(c, NULL, count, &n), DLOCK_OK);
    assert_int_equal(n, NAMES);
    armed = 1;
    n = 0;
    int rc = dlock_client_list(c, NULL, count, &n);
    if (moved_at < 0)
        fail_msg("no batch was read on a master: nothing moved");
    if (rc != DLOCK_EBUSY)
        fail_msg("the walk's slot %d moved mid-walk, and the list gave %s (%zu names), not "
                 "DLOCK_EBUSY", moved_at, dlock_errname(rc), n);
    /* The map is relearned (the move marked it stale): a new list sees
     * every name. */
    n = 0;
    assert_int_equal(dlock_client_list(c, NULL, count, &n), DLOCK_OK);
    assert_int_equal(n, NAMES);
    for (int i = 0; i < NAMES; i++) {
        assert_int_equal(dlock_lock_release(h[i]), DLOCK_OK);
        dlock_lock_free(h[i]);
    }
    dlock_client_free(c);
    test_cluster_stop(&cluster);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_walk_whose_slot_moves_is_ebusy_and_a_new_list_sees_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
