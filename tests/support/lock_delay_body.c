/* SPDX-License-Identifier: BSD-3-Clause */
/* The store-independent body of the lock-delay tests (lock_delay_body.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lock_delay_body.h"
#include "proc.h"
#include "test_util.h"

dlock_client *test_delay_client(const test_delay_target *t)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = t->cluster;
    dlock_client *c = NULL;
    if (dlock_client_new(&c, t->urls, t->n, &o, NULL, 0) != DLOCK_OK)
        return NULL;
    return c;
}

int test_delay_lock(const test_delay_target *t, dlock_client *c, const test_delay_kind *k,
                    const char *name, unsigned flags, int64_t delay_ms, dlock_lock **out)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = t->ttl_ms;
    o.flags = k->flags | flags;
    o.retry_min_ms = 1;
    o.retry_max_ms = 20; /* a poller would call often: the count would show it */
    o.lock_delay_ms = delay_ms;
    if (k->permits)
        return dlock_semaphore_new(out, c, name, k->permits, &o);
    if (k->multi) {
        char a[128], b[128];
        snprintf(a, sizeof a, "%s:a", name);
        snprintf(b, sizeof b, "%s:b", name);
        return dlock_lock_new_multi(out, c, (const char *const[]){a, b}, 2, &o);
    }
    return dlock_lock_new(out, c, name, &o);
}

/* The child: take the lock, say so (one byte: 0 or the failing code),
 * renew for hold_ms, and die without a word to the store (die), or
 * release and exit 0. */
static void holder_child(const test_delay_target *t, const test_delay_kind *k, const char *name,
                         int die, int wr)
{
    dlock_client *c = test_delay_client(t);
    dlock_lock *l = NULL;
    unsigned char rc = 99;
    if (c && test_delay_lock(t, c, k, name, DLOCK_AUTO_RENEW, t->delay_ms, &l) == DLOCK_OK)
        rc = (unsigned char)dlock_lock_acquire(l, 5000);
    if (write(wr, &rc, 1) != 1 || rc != 0)
        _exit(2);
    test_sleep_ms((int)t->hold_ms);
    if (!die)
        _exit(dlock_lock_release(l) == DLOCK_OK ? 0 : 4);
    raise(SIGKILL);
    _exit(3);
}

pid_t test_delay_holder(const test_delay_target *t, const test_delay_kind *k, const char *name,
                        int die)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = test_fork_child();
    if (pid == 0) {
        close(fds[0]);
        holder_child(t, k, name, die, fds[1]);
    }
    close(fds[1]);
    unsigned char rc = 255;
    assert_int_equal(read(fds[0], &rc, 1), 1);
    close(fds[0]);
    assert_int_equal(rc, 0);
    return pid;
}

pid_t test_delay_dying_holder(const test_delay_target *t, const test_delay_kind *k,
                              const char *name)
{
    return test_delay_holder(t, k, name, 1);
}

int64_t test_delay_wait_gone(dlock_client *c, const char *name, int64_t *last_all)
{
    dlock_node_status st[TEST_DELAY_URLS_MAX];
    int64_t until = test_now_ms() + 10000;
    for (;;) {
        int64_t t0 = test_now_ms();
        dlock_lock_status s;
        assert_int_equal(dlock_client_status(c, name, TEST_DELAY_URLS_MAX, st, &s), DLOCK_OK);
        int64_t t1 = test_now_ms();
        if (s.held_on == s.nodes)
            *last_all = t0;
        if (s.held_on == 0)
            return t1;
        assert_true(t1 < until);
        test_sleep_ms(2);
    }
}

/* A clean release frees the name at once, for anyone with the delay. */
static void a_release_frees_it(const test_delay_target *t, const test_delay_kind *k,
                               dlock_client *c, dlock_lock *l, const char *name,
                               const char *sname)
{
    int64_t left = -1;
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_client_lock_delay(c, sname, 0, &left), DLOCK_OK);
    assert_int_equal(left, 0);
    dlock_lock *m = NULL;
    assert_int_equal(test_delay_lock(t, c, k, name, 0, t->delay_ms, &m), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(m, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(m), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(m);
}

void test_delay_killed_holder(const test_delay_target *t, const test_delay_kind *k)
{
    char name[128], sname[160];
    snprintf(name, sizeof name, "ld:%s:%s", t->label, k->label);
    snprintf(sname, sizeof sname, k->multi ? "%s:a" : "%s", name); /* a set's first */
    pid_t pid = test_delay_dying_holder(t, k, name);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    dlock_client *c = test_delay_client(t);
    assert_non_null(c);
    int64_t last_all = 0, gone = test_delay_wait_gone(c, sname, &last_all);
    assert_true(last_all > 0);
    int64_t left = -1;
    assert_int_equal(dlock_client_lock_delay(c, sname, 0, &left), DLOCK_OK);
    printf("# %s, %s: status says %lld ms of lock-delay left once the name was gone\n",
           t->label, k->label, (long long)left);
    assert_true(left > 0 && left <= t->left_max_ms);

    dlock_lock *l = NULL;
    assert_int_equal(test_delay_lock(t, c, k, name, 0, t->delay_ms, &l), DLOCK_OK);
    long long calls = t->calls ? t->calls(t->calls_arg) : 0;
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED); /* freed, not free */
    assert_non_null(strstr(dlock_lock_errmsg(l), "lock-delay"));
    assert_int_equal(dlock_lock_acquire(l, 20000), DLOCK_OK);
    int64_t got = test_now_ms();
    calls = t->calls ? t->calls(t->calls_arg) - calls : -1;
    printf("# %s, %s: got it %lld ms after the last look that saw the lease (delay %lld), "
           "%lld ms after the name was gone; %lld script calls\n",
           t->label, k->label, (long long)(got - last_all), (long long)t->delay_ms,
           (long long)(got - gone), calls);
    assert_true(got - last_all >= t->delay_ms);
    assert_true(got - gone <= t->delay_ms + t->late_ms);
    if (t->calls && t->calls_max)
        assert_true(calls <= t->calls_max(k->flags, k->multi));
    a_release_frees_it(t, k, c, l, name, sname);
    dlock_lock_free(l);
    dlock_client_free(c);
}
