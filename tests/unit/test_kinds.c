/* SPDX-License-Identifier: BSD-3-Clause */
/* The kind table (src/engine/kinds.c): which kind each combination of flags,
 * permits and names gets, that combinations no kind serves get none, and
 * what each row says of its kind. Its Redis steps (scripts, arguments,
 * replica acks) are test_kind_steps.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dlock.h"
#include "kinds.h"

static void flags_pick_one_kind(void **state)
{
    (void)state;
    assert_int_equal(dlock__kind_of(0, 0)->id, DLOCK__KIND_PLAIN);
    assert_int_equal(dlock__kind_of(DLOCK_AUTO_RENEW | DLOCK_NO_FENCE, 0)->id,
                     DLOCK__KIND_PLAIN);
    assert_int_equal(dlock__kind_of(DLOCK_REENTRANT, 0)->id, DLOCK__KIND_COUNTED);
    assert_int_equal(dlock__kind_of(DLOCK_FAIR, 0)->id, DLOCK__KIND_FAIR);
    assert_int_equal(dlock__kind_of(DLOCK_SHARED | DLOCK_AUTO_RENEW, 0)->id,
                     DLOCK__KIND_SHARED);
    assert_int_equal(dlock__kind_of(DLOCK_EXCLUSIVE, 0)->id, DLOCK__KIND_EXCLUSIVE);
    assert_int_equal(dlock__kind_of(DLOCK_AUTO_RENEW, 3)->id, DLOCK__KIND_SEMAPHORE);
    assert_int_equal(dlock__kind_of(DLOCK_SHARED | DLOCK_REENTRANT | DLOCK_AUTO_RENEW, 0)->id,
                     DLOCK__KIND_SHARED_COUNTED);
}

static void combinations_no_kind_serves(void **state)
{
    (void)state;
    unsigned modes[] = {DLOCK_FAIR, DLOCK_REENTRANT, DLOCK_SHARED, DLOCK_EXCLUSIVE};
    for (int i = 0; i < 4; i++) {
        assert_null(dlock__kind_of(modes[i], 2)); /* a semaphore takes no mode */
        for (int j = i + 1; j < 4; j++)
            if ((modes[i] | modes[j]) != (DLOCK_SHARED | DLOCK_REENTRANT) &&
                (modes[i] | modes[j]) != (DLOCK_EXCLUSIVE | DLOCK_REENTRANT)) /* reentrant r/w */
                assert_null(dlock__kind_of(modes[i] | modes[j], 0));
    }
}

static void every_kind_row_says_what_it_is(void **state)
{
    (void)state;
    /* Only the fair kind waits in line. */
    assert_int_equal(dlock__kind_of(DLOCK_FAIR, 0)->leave, DLOCK__S_FAIR_LEAVE);
    assert_int_equal(dlock__kind_of(0, 0)->leave, DLOCK__S_NONE);
    /* Readers and permits keep no fencing counter and renew their member;
     * a semaphore refuses several masters, a read-write lock does not. */
    assert_false(dlock__kind_of(DLOCK_SHARED, 0)->fenced);
    assert_false(dlock__kind_of(0, 2)->fenced);
    assert_string_equal(dlock__kind_of(DLOCK_SHARED, 0)->renew_mode, "z");
    assert_string_equal(dlock__kind_of(0, 2)->renew_mode, "z");
    assert_false(dlock__kind_of(0, 2)->multi_node);
    assert_true(dlock__kind_of(DLOCK_SHARED, 0)->multi_node);
    assert_true(dlock__kind_of(DLOCK_EXCLUSIVE, 0)->multi_node);
    /* The reentrant reader: the shared scripts and renewal, re-entry
     * counted in the handle (not the server's counted protocol), several
     * masters, no fencing, no adopt. */
    const dlock__kind *rs = dlock__kind_of(DLOCK_SHARED | DLOCK_REENTRANT, 0);
    assert_true(rs->reenter);
    assert_false(rs->counted);
    assert_string_equal(rs->renew_mode, "z");
    assert_true(rs->multi_node);
    assert_false(rs->fenced);
    assert_false(rs->adopt);
    /* The reentrant writer: the exclusive acquire, plain release, extend,
     * renewal and fencing; re-entry counted in the handle. */
    const dlock__kind *rx = dlock__kind_of(DLOCK_EXCLUSIVE | DLOCK_REENTRANT, 0);
    assert_int_equal(rx->id, DLOCK__KIND_EXCLUSIVE_COUNTED);
    assert_true(rx->reenter);
    assert_false(rx->counted);
    assert_string_equal(rx->renew_mode, "p");
    assert_true(rx->fenced);
    assert_true(rx->multi_node);
    assert_false(rx->adopt);
    assert_null(dlock__kind_of(DLOCK_EXCLUSIVE | DLOCK_REENTRANT | DLOCK_FAIR, 0));
    assert_null(dlock__kind_of(DLOCK_SHARED | DLOCK_REENTRANT | DLOCK_FAIR, 0));
    assert_null(dlock__kind_of(DLOCK_SHARED | DLOCK_REENTRANT, 2));
}

/* Each kind's capabilities are in its row (issue 36: nothing outside the
 * row tests kind ids). These are the decisions the code made before they
 * moved there: the first try tested for the plain kind, and dlock_lock_new() mapped or refused
 * kinds on etcd by their position in the enum (semaphores since served
 * there, and the read-write kinds as themselves: issue 38). */
static void capabilities_in_the_row_are_the_old_decisions(void **state)
{
    (void)state;
    const dlock__kind *k[] = {dlock__kind_of(0, 0),
                              dlock__kind_of(DLOCK_REENTRANT, 0),
                              dlock__kind_of(DLOCK_FAIR, 0),
                              dlock__kind_of(DLOCK_SHARED, 0),
                              dlock__kind_of(DLOCK_EXCLUSIVE, 0),
                              dlock__kind_of(0, 2),
                              dlock__kind_of(DLOCK_SHARED | DLOCK_REENTRANT, 0),
                              dlock__kind_of(DLOCK_EXCLUSIVE | DLOCK_REENTRANT, 0)};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const dlock__kind *x = k[i];
        assert_int_equal(x->raw_first_try, x->id == DLOCK__KIND_PLAIN);
        /* every kind is served in line as itself since issue 38 (the
         * semaphore as the N oldest keys, readers and writers as the
         * recipe RWMutex's keys) */
        assert_ptr_equal(dlock__kind_in_line(x), x);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flags_pick_one_kind),
        cmocka_unit_test(combinations_no_kind_serves),
        cmocka_unit_test(every_kind_row_says_what_it_is),
        cmocka_unit_test(capabilities_in_the_row_are_the_old_decisions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
