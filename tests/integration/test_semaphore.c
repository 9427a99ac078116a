/* SPDX-License-Identifier: BSD-3-Clause */
/* Semaphores with leased permits (dlock_semaphore_new()) against a real
 * redis-server: never more than N holders (counted by the holder
 * processes), N used at once, a SIGKILLed holder's permit back when its
 * lease ends, release of a permit not ours refused, another N refused,
 * auto-renew and extend, and every bad argument. */
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

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_kinds.h"
#include "test_util.h"

#define PERMITS 3

static dlock_lock *sem(dlock_client *c, const char *name, unsigned n, int64_t ttl_ms, unsigned flags)
{
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = flags;
    o.retry_min_ms = 1;
    o.retry_max_ms = 20;
    assert_int_equal(dlock_semaphore_new(&l, c, name, n, &o), DLOCK_OK);
    return l;
}

typedef struct ctx {
    const char *url;
    test_census *cs;
} ctx;

static int sem_worker(int i, void *arg)
{
    ctx *x = arg;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    (void)i;
    dlock_lock_options o = test_kinds_worker_options(20, 0);
    if (dlock_client_new(&c, &x->url, 1, NULL, NULL, 0) != DLOCK_OK ||
        dlock_semaphore_new(&l, c, "sem:census", PERMITS, &o) != DLOCK_OK)
        return 1;
    return test_census_rounds(x->cs, c, l, 60, 1, PERMITS, 2000);
}

static void never_more_than_n_holders(void **state)
{
    (void)state;
    test_census *cs = test_census_new();
    ctx x = {test_srv.url, cs};
    assert_int_equal(test_run_procs(8, sem_worker, &x), 0);
    printf("# permit sections %d, most holders at once %d (N = %d), violations %d\n",
           atomic_load(&cs->sections), atomic_load(&cs->max_inside), PERMITS,
           atomic_load(&cs->violations));
    assert_int_equal(atomic_load(&cs->violations), 0);
    assert_int_equal(atomic_load(&cs->errors), 0);
    assert_int_equal(atomic_load(&cs->sections), 8 * 60);
    assert_true(atomic_load(&cs->max_inside) <= PERMITS);
    test_census_free(cs);

    /* N at once, try-once; the N+1st waits for a release. */
    dlock_lock *h[PERMITS + 1];
    for (int i = 0; i <= PERMITS; i++)
        h[i] = sem(test_cl, "sem:n", PERMITS, 10000, 0);
    for (int i = 0; i < PERMITS; i++)
        assert_int_equal(dlock_lock_acquire(h[i], 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h[PERMITS], 0), DLOCK_ENOTACQUIRED);
    dlock_holders_info hi;
    dlock_holder hs[8];
    assert_int_equal(dlock_client_holders(test_cl, "sem:n", 0, &hi, hs, 8), DLOCK_OK);
    assert_int_equal(hi.mode, DLOCK_HOLD_SEMAPHORE);
    assert_int_equal(hi.permits, PERMITS);
    assert_int_equal(hi.count, PERMITS);
    for (int i = 0; i < PERMITS; i++)
        assert_true(hs[i].ttl_ms > 0 && hs[i].ttl_ms <= 10000);
    assert_int_equal(dlock_lock_release(h[1]), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h[PERMITS], 0), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(h[PERMITS]), 0);
    for (int i = 0; i <= PERMITS; i++) {
        if (i != 1)
            assert_int_equal(dlock_lock_release(h[i]), DLOCK_OK);
        dlock_lock_free(h[i]);
    }
    assert_int_equal(test_key_exists(&test_srv, "sem:n"), 0); /* N goes with the last */
}

static void killed_holders_permit_returns_when_its_lease_ends(void **state)
{
    (void)state;
    pid_t pid = test_fork_child();
    if (pid == 0) {
        dlock_client *c = NULL;
        dlock_lock *l = NULL;
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 800;
        o.flags = DLOCK_AUTO_RENEW;
        if (dlock_client_new(&c, (const char *[]){test_srv.url}, 1, NULL, NULL, 0) ||
            dlock_semaphore_new(&l, c, "sem:kill", 1, &o) || dlock_lock_acquire(l, 0))
            _exit(1);
        raise(SIGKILL);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    int64_t t0 = test_now_ms();
    dlock_lock *l = sem(test_cl, "sem:kill", 1, 10000, 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_acquire(l, 10000), DLOCK_OK);
    int64_t waited = test_now_ms() - t0;
    printf("# the killed holder's permit came back %lld ms after its death (lease 800 ms)\n",
           (long long)waited);
    assert_true(waited < 3000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

static void release_not_ours_and_another_n_are_refused(void **state)
{
    (void)state;
    dlock_lock *a = sem(test_cl, "sem:own", 2, 10000, 0);
    dlock_lock *b = sem(test_cl, "sem:own", 2, 10000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    /* A token that holds no permit. */
    assert_int_equal(dlock_lock_adopt(b, "not-a-holder"), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_ENOTOWNER);
    /* Our permit taken away (by hand): refused too. */
    test_cmd_int(&test_srv, "ZREM sem:own %s", dlock_lock_token(a));
    test_cmd_int(&test_srv, "ZADD sem:own %lld other", 99999999999999LL);
    assert_int_equal(dlock_lock_release(a), DLOCK_ENOTOWNER);
    test_cmd_int(&test_srv, "DEL sem:own");

    /* Another N while N is stored: refused, clearly, nothing written. */
    dlock_lock *five = sem(test_cl, "sem:own", 5, 10000, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(five, 0), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_lock_errmsg(five), "number of permits differs"));
    assert_int_equal(dlock_lock_acquire(five, 1000), DLOCK_EINVAL); /* no wait for it */
    assert_int_equal(test_cmd_int(&test_srv, "ZCARD sem:own"), 2); /* N and a's */
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(five, 0), DLOCK_OK); /* N went with the last */
    assert_int_equal(dlock_lock_release(five), DLOCK_OK);

    /* Kinds do not mix on one name. */
    dlock_lock *r = test_lock_new(test_cl, "sem:own", 10000, DLOCK_SHARED, 1, 20);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(five);
    dlock_lock_free(r);
}

static void renewed_and_extended_permits(void **state)
{
    (void)state;
    dlock_lock *a = sem(test_cl, "sem:renew", 2, 300, DLOCK_AUTO_RENEW);
    dlock_lock *b = sem(test_cl, "sem:renew", 2, 300, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(b, 5000), DLOCK_OK);
    test_sleep_ms(1200);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    dlock_holders_info hi;
    assert_int_equal(dlock_client_holders(test_cl, "sem:renew", 0, &hi, NULL, 0), DLOCK_OK);
    assert_int_equal(hi.count, 2);
    assert_true(dlock_lock_validity_ms(a) > 0);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    /* An extend after the lease ended is refused and revives nothing. */
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    test_sleep_ms(400);
    assert_int_equal(dlock_lock_extend(b, 5000), DLOCK_EEXPIRED);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void bad_arguments(void **state)
{
    (void)state;
    dlock_lock *l = (dlock_lock *)1;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    assert_int_equal(dlock_semaphore_new(&l, test_cl, "sem:bad", 0, NULL), DLOCK_EINVAL);
    assert_null(l);
    assert_int_equal(dlock_semaphore_new(&l, test_cl, "sem:bad", DLOCK_PERMITS_MAX + 1, NULL),
                     DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_new(NULL, test_cl, "sem:bad", 2, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_new(&l, NULL, "sem:bad", 2, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_new(&l, test_cl, NULL, 2, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_semaphore_new(&l, test_cl, "", 2, NULL), DLOCK_EINVAL);
    unsigned modes[] = {DLOCK_SHARED, DLOCK_EXCLUSIVE, DLOCK_REENTRANT, DLOCK_FAIR};
    for (size_t i = 0; i < 4; i++) {
        o.flags = modes[i];
        assert_int_equal(dlock_semaphore_new(&l, test_cl, "sem:bad", 2, &o), DLOCK_EINVAL);
    }
    o.flags = 0;
    o.ttl_ms = 0;
    assert_int_equal(dlock_semaphore_new(&l, test_cl, "sem:bad", 2, &o), DLOCK_EINVAL);
    /* Several nodes: refused, nothing sent (the nodes need not exist). */
    const char *urls[] = {"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"};
    dlock_client *c = test_client_new(urls, 3, NULL);
    assert_int_equal(dlock_semaphore_new(&l, c, "sem:bad", 2, NULL), DLOCK_ENOTSUP);
    assert_null(l);
    dlock_client_free(c);
    /* etcd:// clients (issue 21) have their own lock, and every kind
     * here in its line (issue 38: the semaphore the N oldest keys,
     * test_etcd_semaphore; readers and writers the recipe RWMutex's
     * keys, test_etcd_rw). Nothing is connected here. */
    const char *etcd[] = {"etcd://127.0.0.1:1"};
    c = NULL;
    if (dlock_client_new(&c, etcd, 1, NULL, NULL, 0) == DLOCK_OK) {
        const char *two[] = {"a", "b"};
        assert_int_equal(dlock_semaphore_new(&l, c, "sem:bad", 2, NULL), DLOCK_OK);
        dlock_lock_free(l);
        o.flags = DLOCK_SHARED;
        o.ttl_ms = 10000;
        assert_int_equal(dlock_lock_new(&l, c, "sem:bad", &o), DLOCK_OK);
        dlock_lock_free(l);
        assert_int_equal(dlock_lock_new_multi(&l, c, two, 2, NULL), DLOCK_OK); /* each etcd's */
        dlock_lock_free(l);
        o.flags = DLOCK_EXCLUSIVE;
        assert_int_equal(dlock_lock_new(&l, c, "sem:bad", &o), DLOCK_OK);
        dlock_lock_free(l);
        dlock_client_free(c);
    }
    /* dlock_client_holders: bad arguments. */
    dlock_holders_info hi;
    assert_int_equal(dlock_client_holders(NULL, "x", 0, &hi, NULL, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_client_holders(test_cl, NULL, 0, &hi, NULL, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_client_holders(test_cl, "", 0, &hi, NULL, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_client_holders(test_cl, "x", 1, &hi, NULL, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_client_holders(test_cl, "x", 0, NULL, NULL, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_client_holders(test_cl, "x", 0, &hi, NULL, 3), DLOCK_EINVAL);
    assert_int_equal(dlock_client_holders(test_cl, "x", 0, &hi, NULL, 0), DLOCK_OK);
    assert_int_equal(hi.mode, DLOCK_HOLD_FREE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(never_more_than_n_holders, test_srv_flush),
        cmocka_unit_test_teardown(killed_holders_permit_returns_when_its_lease_ends,
                                  test_srv_flush),
        cmocka_unit_test_teardown(release_not_ours_and_another_n_are_refused, test_srv_flush),
        cmocka_unit_test_teardown(renewed_and_extended_permits, test_srv_flush),
        cmocka_unit_test_teardown(bad_arguments, test_srv_flush),
    };
    return cmocka_run_group_tests_name("semaphore", tests, test_srv_client_setup,
                                       test_srv_client_teardown);
}
