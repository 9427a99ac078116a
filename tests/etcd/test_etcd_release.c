/* SPDX-License-Identifier: BSD-3-Clause */
/* An etcd release and extend are requests (backend.h: release_start,
 * extend_start; src/etcd/etcd_release.c): driven on a loop of the test's
 * with the member that answered the acquire stalled (SIGSTOP), the start
 * returns at once, done() never runs inside it, and the answer comes from
 * the loop once the request failed over to a live member. The blocking
 * release and extend (the engine's call.c) are these on a private loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "clock.h"
#include "dlock.h"
#include "etcd_server.h"
#include "handle.h"
#include "loop_poll.h"
#include "op.h"

static test_etcd cluster;

static int setup(void **state)
{
    (void)state;
    return test_etcd_start(&cluster, 3);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_stop(&cluster);
    return 0;
}

enum { IO_TIMEOUT_MS = 500 };

/* A client whose first endpoint is a follower, *f: the acquire is
 * answered there, and so would the next call be. */
static dlock_client *client_follower_first(int *f)
{
    *f = test_etcd_follower(&cluster, 10000);
    assert_true(*f >= 0);
    dlock_client *c = test_etcd_client(&cluster, *f, IO_TIMEOUT_MS);
    assert_non_null(c);
    return c;
}

static int op_dones;

static void op_seen(dlock__op *op)
{
    (void)op;
    op_dones++;
}

static int op_over(void *arg)
{
    (void)arg;
    return op_dones > 0;
}

static void start_op(dlock__op *op, dlock__loop_poll *lp, dlock_lock *l)
{
    dlock__loop_poll_init(lp);
    *op = (dlock__op){.l = l, .loop = &lp->loop, .done = op_seen};
    op_dones = 0;
    dlock__op_start(op);
}

/* The start returned rc after start_ms: a request started at once, not
 * completed inside its start; completed once from the loop. The whole
 * request's time in ms. */
static int64_t turn_until_done(dlock__op *op, dlock__loop_poll *lp, int rc, int64_t t0)
{
    int64_t start_ms = (dlock__now_ns() - t0) / DLOCK__NS_PER_MS;
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(op_dones, 0); /* never inside the start */
    assert_true(start_ms < IO_TIMEOUT_MS / 5); /* sent nothing it waited for */
    dlock__loop_poll_run(lp, op_over, NULL, INT64_MAX);
    assert_int_equal(op_dones, 1);
    assert_int_equal(op->state, DLOCK__OP_DONE);
    dlock__loop_poll_close(lp);
    return (dlock__now_ns() - t0) / DLOCK__NS_PER_MS;
}

/* Each of the extend and the release meets m[f] stalled first (each on a
 * client of its own: a client's next call starts where its last one
 * ended). */
static void an_extend_and_a_release_fail_over_as_requests_on_a_loop(void **state)
{
    (void)state;
    int f, f2;
    dlock_client *c = client_follower_first(&f), *c2 = client_follower_first(&f2);
    assert_int_equal(f, f2);
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = 10000;
    dlock_lock *l, *r;
    assert_int_equal(dlock_lock_new(&l, c, "etcd-extend-op", &lo), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&r, c2, "etcd-release-op", &lo), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* answered by m[f] */
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_non_null(l->backend->extend_start);
    assert_non_null(l->backend->release_start);
    test_etcd_pause(&cluster, f);

    dlock__loop_poll lp;
    dlock__op op;
    start_op(&op, &lp, l);
    int64_t t0 = dlock__now_ns();
    int64_t took = turn_until_done(&op, &lp, l->backend->extend_start(l, 0, INT64_MAX, &op), t0);
    printf("# extend with m%d stalled: %s after %lld ms (io_timeout %d ms)\n", f,
           dlock_errname(op.v.code), (long long)took, IO_TIMEOUT_MS);
    if (op.v.code != DLOCK_OK)
        fail_msg("extend: %s (%s)", dlock_errname(op.v.code), dlock_lock_errmsg(l));
    assert_true(took >= IO_TIMEOUT_MS - 50); /* it failed over past m[f] */
    assert_true(op.v.until_ns > dlock__now_ns());
    assert_int_equal(op.v.renew_ttl_ms, 10000);

    start_op(&op, &lp, r);
    t0 = dlock__now_ns();
    took = turn_until_done(&op, &lp, r->backend->release_start(r, 1, &op), t0);
    printf("# release with m%d stalled: %s after %lld ms\n", f, dlock_errname(op.v.code),
           (long long)took);
    if (op.v.code != DLOCK_OK)
        fail_msg("release: %s (%s)", dlock_errname(op.v.code), dlock_lock_errmsg(r));
    assert_true(took >= IO_TIMEOUT_MS - 50);
    test_etcd_resume(&cluster, f);

    /* The lease was revoked: another client takes the lock at once. */
    dlock_lock *o;
    assert_int_equal(dlock_lock_new(&o, c, "etcd-release-op", &lo), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(o, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(o), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK); /* the extended hold */
    dlock_lock_free(o);
    dlock_lock_free(r); /* its hold was given back above: nothing left */
    dlock_lock_free(l);
    dlock_client_free(c2);
    dlock_client_free(c);
}

/* An adopted hold's extend learns the lease's TTL first: one more step of
 * the same chain on the loop. A counted hold that is not the last sends
 * nothing, and is still answered from the loop, not inside its start; so
 * are settle_start and release_lost_start (nothing owed), and
 * cleanup_start, the release of the free. */
static void an_adopted_extend_and_a_counted_release_answer_from_the_loop(void **state)
{
    (void)state;
    int f;
    dlock_client *c = client_follower_first(&f);
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = 10000;
    dlock_lock *l, *a;
    assert_int_equal(dlock_lock_new(&a, c, "etcd-release-adopt", &lo), DLOCK_OK);
    lo.flags = DLOCK_REENTRANT; /* a counted kind: no adopt */
    assert_int_equal(dlock_lock_new(&l, c, "etcd-release-adopt", &lo), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* two holds */
    assert_int_equal(dlock_lock_adopt(a, dlock_lock_token(l)), DLOCK_OK);

    dlock__loop_poll lp;
    dlock__op op;
    start_op(&op, &lp, a);
    int64_t t0 = dlock__now_ns();
    (void)turn_until_done(&op, &lp, a->backend->extend_start(a, 0, INT64_MAX, &op), t0);
    if (op.v.code != DLOCK_OK)
        fail_msg("adopted extend: %s (%s)", dlock_errname(op.v.code), dlock_lock_errmsg(a));
    assert_int_equal(op.v.renew_ttl_ms, 10000); /* learned from etcd */

    start_op(&op, &lp, l);
    t0 = dlock__now_ns();
    (void)turn_until_done(&op, &lp, l->backend->release_start(l, 0, &op), t0);
    assert_int_equal(op.v.code, DLOCK_OK);

    /* Nothing is owed to etcd before an adopt or after a loss: answered
     * from the loop all the same. The free's cleanup is the release. */
    start_op(&op, &lp, a);
    (void)turn_until_done(&op, &lp, a->backend->settle_start(a, &op), dlock__now_ns());
    start_op(&op, &lp, a);
    (void)turn_until_done(&op, &lp, a->backend->release_lost_start(a, &op), dlock__now_ns());
    start_op(&op, &lp, a);
    (void)turn_until_done(&op, &lp, a->backend->cleanup_start(a, &op), dlock__now_ns());
    assert_int_equal(op.v.code, DLOCK_OK); /* the lease was revoked */

    dlock_lock_free(a); /* the adopted handle's free: nothing left */
    dlock_lock_free(l);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_extend_and_a_release_fail_over_as_requests_on_a_loop),
        cmocka_unit_test(an_adopted_extend_and_a_counted_release_answer_from_the_loop),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
