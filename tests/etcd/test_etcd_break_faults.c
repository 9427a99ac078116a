/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_break() on etcd under faults (issue 40), against a real
 * three-member cluster: a holder in another process, stopped (SIGSTOP)
 * while it holds, is broken while the member the clients talk to first is
 * paused too. The waiter in line takes the lock with a larger fence, and
 * the holder, continued, learns its loss at its next extend
 * (DLOCK_ENOTOWNER or DLOCK_EEXPIRED), for the plain and the fair kind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_holder.h"
#include "test_util.h"

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

/* A paused member is given up on after io_timeout_ms 1000. */
static dlock_client *client_new(void)
{
    return test_etcd_client(&cluster, -1, 1000);
}

static dlock_lock *lock_new(dlock_client *c, const char *name, unsigned flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 60000; /* only a break ends it within the test */
    o.flags = flags;
    o.retry_min_ms = 10;
    o.retry_max_ms = 200;
    dlock_lock *l = NULL;
    return dlock_lock_new(&l, c, name, &o) == DLOCK_OK ? l : NULL;
}

/* The holder process (test_holder.h). */
static void holder_main(const char *name, unsigned flags, int wr)
{
    dlock_client *c = client_new();
    test_holder_child(c, c ? lock_new(c, name, flags) : NULL, wr);
}

typedef struct waiter {
    dlock_lock *l;
    int rc;
    int64_t done_ms;
} waiter;

static void *wait_for_it(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, 20000);
    w->done_ms = test_now_ms();
    return NULL;
}

static int transient(int rc)
{
    return rc == DLOCK_EIO || rc == DLOCK_EUNKNOWN || rc == DLOCK_EBUSY ||
           rc == DLOCK_ETIMEDOUT;
}

static void broken_under_a_paused_member(const char *name, unsigned flags)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = test_fork_child();
    if (pid == 0) {
        close(fds[0]);
        holder_main(name, flags, fds[1]);
    }
    close(fds[1]);
    test_hold_report r = test_holder_read(fds[0], 10000);
    if (r.rc != DLOCK_OK)
        fail_msg("%s: the holder's acquire: %s", name, dlock_strerror(r.rc));
    assert_int_equal(test_proc_stop(pid, 2000), 0);

    dlock_client *c = client_new();
    assert_non_null(c);
    waiter w = {lock_new(c, name, flags), -1, 0};
    assert_non_null(w.l);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_it, &w), 0);
    test_sleep_ms(300); /* in line behind the stopped holder */

    /* The member every client asks first goes silent too. */
    test_etcd_pause(&cluster, 0);
    int64_t t0 = test_now_ms();
    dlock_break_result res;
    memset(&res, 0, sizeof res);
    /* A break whose answer was lost may be asked again: the fence makes
     * a second one refuse a newer owner (ENOTOWNER), never break it. */
    int rc, tries = 0, unknown = 0;
    do {
        rc = dlock_client_break(c, name, r.fence, &res);
        unknown |= rc == DLOCK_EUNKNOWN;
        tries++;
    } while (transient(rc) && test_now_ms() - t0 < 15000);
    int64_t broke_ms = test_now_ms();
    assert_int_equal(pthread_join(t, NULL), 0);
    test_etcd_resume(&cluster, 0);
    printf("# %s: broken with member 0 paused in %lld ms (%d tries: %s); the waiter had it "
           "%lld ms later: %s, fence %llu > %llu\n",
           name, (long long)(broke_ms - t0), tries, dlock_errname(rc),
           (long long)(w.done_ms - broke_ms), dlock_errname(w.rc),
           (unsigned long long)dlock_lock_fence(w.l), (unsigned long long)r.fence);
    assert_true(rc == DLOCK_OK || (rc == DLOCK_ENOTOWNER && unknown));
    if (rc == DLOCK_OK)
        assert_int_equal(res.removed, 1);
    assert_int_equal(w.rc, DLOCK_OK); /* long before the 60 s lease */
    assert_true(dlock_lock_fence(w.l) > r.fence);

    /* The holder, continued, learns it at its next extend. */
    assert_int_equal(kill(pid, SIGCONT), 0);
    test_hold_report after = test_holder_read(fds[0], 10000);
    if (after.rc != DLOCK_ENOTOWNER && after.rc != DLOCK_EEXPIRED)
        fail_msg("%s: the broken holder's extend gave %s", name, dlock_errname(after.rc));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(fds[0]);
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_client_free(c);
}

static void a_stopped_holder_is_broken_while_a_member_is_paused(void **state)
{
    (void)state;
    broken_under_a_paused_member("bf:plain", 0);
}

static void a_stopped_fair_holder_is_broken_while_a_member_is_paused(void **state)
{
    (void)state;
    broken_under_a_paused_member("bf:fair", DLOCK_FAIR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_stopped_holder_is_broken_while_a_member_is_paused),
        cmocka_unit_test(a_stopped_fair_holder_is_broken_while_a_member_is_paused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
