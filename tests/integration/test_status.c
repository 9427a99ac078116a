/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_status()'s verdict over all nodes against three real
 * redis-servers: held on a majority, free, held on a minority only
 * (partial), and too few nodes answering to tell (unknown). The majority
 * rule is the library's; the dlock command prints it (cli/status.c). Also
 * dlock_error_is_transient(): which codes a caller may retry as they are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "dlock.h"
#include "redis_server.h"
#include "test_util.h"

#define N 3
static test_redis srv[N];
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    if (test_redis_start_many(srv, N, NULL) != 0)
        return -1;
    cl = test_client_timeouts(srv, N, 300, 300);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_free(cl);
    test_redis_stop_many(srv, N);
    return 0;
}

static dlock_lock_status status_of(const char *name)
{
    dlock_node_status st[N];
    dlock_lock_status s;
    memset(&s, 0xA5, sizeof s);
    assert_int_equal(dlock_client_status(cl, name, N, st, &s), DLOCK_OK);
    assert_int_equal(s.nodes, N);
    assert_int_equal(s.quorum, 2);
    return s;
}

static void held_free_and_partial(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(cl, "st:a", 10000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    dlock_lock_status s = status_of("st:a");
    assert_int_equal(s.state, DLOCK_STATUS_HELD);
    assert_int_equal(s.held_on, N);
    assert_int_equal(s.answered, N);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);

    s = status_of("st:a");
    assert_int_equal(s.state, DLOCK_STATUS_FREE);
    assert_int_equal(s.held_on, 0);

    /* A key on one node of three: a failed or ending Redlock attempt. */
    test_cmd_status(&srv[0], "SET st:a someone PX 10000");
    s = status_of("st:a");
    assert_int_equal(s.state, DLOCK_STATUS_PARTIAL);
    assert_int_equal(s.held_on, 1);
    test_cmd_int(&srv[0], "DEL st:a");

    /* Summary may be NULL. */
    dlock_node_status st[N];
    assert_int_equal(dlock_client_status(cl, "st:a", N, st, NULL), DLOCK_OK);
}

static void unknown_when_a_majority_is_silent(void **state)
{
    (void)state;
    test_redis_pause(&srv[1]);
    test_redis_pause(&srv[2]);
    dlock_lock_status s = status_of("st:b");
    test_redis_resume(&srv[1]);
    test_redis_resume(&srv[2]);
    assert_int_equal(s.state, DLOCK_STATUS_UNKNOWN);
    assert_int_equal(s.answered, 1);
}

static void transient_codes(void **state)
{
    (void)state;
    const int yes[] = {DLOCK_EIO, DLOCK_EUNKNOWN, DLOCK_EBUSY, DLOCK_ENOQUORUM};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        assert_int_equal(dlock_error_is_transient(yes[i]), 1);
    for (int code = 1; code >= DLOCK_ETLS - 1; code--) {
        int t = code == DLOCK_EIO || code == DLOCK_EUNKNOWN || code == DLOCK_EBUSY ||
                code == DLOCK_ENOQUORUM;
        assert_int_equal(dlock_error_is_transient(code), t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(held_free_and_partial),
        cmocka_unit_test(unknown_when_a_majority_is_silent),
        cmocka_unit_test(transient_codes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
