/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_break() on an etcd:// client against a real etcd member:
 * the owner's key goes, the next waiter in line takes the lock with a
 * larger fence, the broken holder is told at its next renewal (on_lost,
 * DLOCK_LOST_NOT_OWNER), and a free name is left as it is. A name its
 * readers hold loses every reader at once, and the guard status shows
 * for it (what `dlock break` passes on) spares a writer that came
 * later. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "dlock.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_util.h"

static test_etcd srv;
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    return test_etcd_setup(&srv, 1, NULL, &cl);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_teardown(&srv, cl);
    return 0;
}

static atomic_int lost_calls, lost_reason;

static void on_lost(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)l;
    (void)arg;
    atomic_store(&lost_reason, (int)why);
    atomic_fetch_add(&lost_calls, 1);
}

typedef struct waiter {
    dlock_lock *l;
    int rc;
} waiter;

static void *wait_for_it(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, 20000);
    return NULL;
}

static void the_next_in_line_takes_the_broken_lock(void **state)
{
    (void)state;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 30000;
    o.flags = DLOCK_AUTO_RENEW;
    o.renew_interval_ms = 100;
    o.on_lost = on_lost;
    dlock_lock *holder = test_lock_with(cl, "stuck", &o);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    waiter w = {test_lock_new(cl, "stuck", 30000, 0, 10, 50), -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_it, &w), 0);
    test_sleep_ms(300); /* in line behind the holder */
    dlock_break_result res;
    assert_int_equal(dlock_client_break(cl, "stuck", 0, &res), DLOCK_OK);
    assert_int_equal(res.removed, 1);
    assert_int_equal(res.mode, DLOCK_HOLD_EXCLUSIVE);
    assert_int_equal(res.fence, dlock_lock_fence(holder));
    assert_int_equal(res.answered, 1);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK); /* long before the 30 s lease ended */
    assert_true(dlock_lock_fence(w.l) > res.fence);
    assert_true(test_wait_for_state(holder, DLOCK_STATE_LOST, 3000));
    assert_int_equal(atomic_load(&lost_calls), 1);
    assert_int_equal(atomic_load(&lost_reason), DLOCK_LOST_NOT_OWNER);
    assert_int_equal(dlock_lock_release(holder), DLOCK_ELOST);
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(holder);
}

/* With the fence the caller looked at, a newer owner is not broken. */
static void a_fence_guards_a_newer_owner(void **state)
{
    (void)state;
    dlock_lock *old = test_lock_new(cl, "guarded", 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(old, 0), DLOCK_OK);
    uint64_t seen = dlock_lock_fence(old);
    assert_int_equal(dlock_lock_release(old), DLOCK_OK);
    dlock_lock *newer = test_lock_new(cl, "guarded", 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(newer, 0), DLOCK_OK);
    dlock_break_result res;
    assert_int_equal(dlock_client_break(cl, "guarded", seen, &res), DLOCK_ENOTOWNER);
    assert_int_equal(res.removed, 0);
    assert_int_equal(res.fence, dlock_lock_fence(newer));
    assert_int_equal(dlock_client_break(cl, "guarded", dlock_lock_fence(newer), &res), DLOCK_OK);
    assert_int_equal(res.removed, 1);
    dlock_lock_free(newer);
    dlock_lock_free(old);
}

static dlock_lock *rw_lock(const char *name, unsigned flags)
{
    return test_lock_new(cl, name, 10000, flags, 10, 100);
}

/* dlock.h: a break removes every hold, and removed counts a shared lock's
 * live holders. Two readers hold, a writer waits behind them: both
 * readers go in one break (DLOCK_HOLD_SHARED, 2), and the writer gets in
 * long before their leases end. */
static void a_break_removes_every_reader(void **state)
{
    (void)state;
    const char *name = "brk-readers";
    dlock_lock *r1 = rw_lock(name, DLOCK_SHARED), *r2 = rw_lock(name, DLOCK_SHARED);
    waiter w = {rw_lock(name, DLOCK_EXCLUSIVE), -1};
    assert_int_equal(dlock_lock_acquire(r1, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r2, 0), DLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_it, &w), 0);
    test_sleep_ms(300); /* in line behind both readers */
    dlock_break_result res;
    assert_int_equal(dlock_client_break(cl, name, 0, &res), DLOCK_OK);
    assert_int_equal(res.mode, DLOCK_HOLD_SHARED);
    assert_int_equal(res.removed, 2);
    int64_t t0 = test_now_ms();
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(test_now_ms() - t0 < 3000); /* not the readers' 10 s leases */
    assert_true(dlock_lock_fence(w.l) > res.fence);
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    (void)dlock_lock_release(r1); /* its lease, without the key */
    (void)dlock_lock_release(r2);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w.l);
}

/* `dlock break` shows status's fence and passes it on as the guard
 * (cli/break.c): for a name its readers hold that is the newest reader's
 * key's create revision (not 0, which would break whoever holds it). The
 * readers leave and a writer takes the lock before the answer: the
 * writer is not broken. With the guard of the readers still there, they
 * are. */
static void a_guarded_break_of_readers_spares_a_later_writer(void **state)
{
    (void)state;
    const char *name = "brk-guard";
    dlock_lock *r = rw_lock(name, DLOCK_SHARED), *w = rw_lock(name, DLOCK_EXCLUSIVE);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(r), 0); /* a reader holds no fence */
    dlock_lock_status st;
    dlock_node_status ns;
    assert_int_equal(dlock_client_status(cl, name, 1, &ns, &st), DLOCK_OK);
    uint64_t seen = ns.fence;
    assert_true(seen > 0);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    dlock_break_result res;
    assert_int_equal(dlock_client_break(cl, name, seen, &res), DLOCK_ENOTOWNER);
    assert_int_equal(res.removed, 0);
    assert_int_equal(res.fence, dlock_lock_fence(w));
    assert_int_equal(dlock_lock_release(w), DLOCK_OK); /* still its */
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_client_status(cl, name, 1, &ns, &st), DLOCK_OK);
    assert_int_equal(dlock_client_break(cl, name, ns.fence, &res), DLOCK_OK);
    assert_int_equal(res.removed, 1);
    assert_int_equal(res.mode, DLOCK_HOLD_SHARED);
    assert_int_equal(res.fence, ns.fence);
    (void)dlock_lock_release(r);
    dlock_lock_free(r);
    dlock_lock_free(w);
}

/* Review (rev-ops): a reader that joins after the look leaves the oldest
 * reader's create revision as it was, so a break guarded by status's
 * fence removes that later reader too (dlock.h: a guarded break spares a
 * holder that came since; Redis refuses here since 9418f39). */
static void a_guarded_break_of_readers_spares_a_later_reader(void **state)
{
    (void)state;
    const char *name = "brk-later-reader";
    dlock_lock *r1 = rw_lock(name, DLOCK_SHARED), *r2 = rw_lock(name, DLOCK_SHARED);
    assert_int_equal(dlock_lock_acquire(r1, 0), DLOCK_OK);
    dlock_node_status ns;
    assert_int_equal(dlock_client_status(cl, name, 1, &ns, NULL), DLOCK_OK);
    assert_true(ns.fence > 0);
    assert_int_equal(dlock_lock_acquire(r2, 0), DLOCK_OK); /* after the look */
    dlock_break_result res;
    int rc = dlock_client_break(cl, name, ns.fence, &res);
    int kept = dlock_lock_extend(r2, 0) == DLOCK_OK;
    if (rc != DLOCK_ENOTOWNER || !kept)
        fail_msg("a break guarded by %llu (shown before the second reader) gave %s, removed "
                 "%zu; the later reader %s", (unsigned long long)ns.fence, dlock_errname(rc),
                 res.removed, kept ? "kept" : "was broken");
    (void)dlock_lock_release(r1);
    (void)dlock_lock_release(r2);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
}

static void a_free_name_is_left_alone(void **state)
{
    (void)state;
    dlock_break_result res;
    assert_int_equal(dlock_client_break(cl, "nobody", 0, &res), DLOCK_OK);
    assert_int_equal(res.removed, 0);
    assert_int_equal(res.mode, DLOCK_HOLD_FREE);
    assert_int_equal(res.fence, 0);
    assert_int_equal(dlock_client_break(cl, "", 0, &res), DLOCK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_next_in_line_takes_the_broken_lock),
        cmocka_unit_test(a_fence_guards_a_newer_owner),
        cmocka_unit_test(a_free_name_is_left_alone),
        cmocka_unit_test(a_break_removes_every_reader),
        cmocka_unit_test(a_guarded_break_of_readers_spares_a_later_writer),
        cmocka_unit_test(a_guarded_break_of_readers_spares_a_later_reader),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
