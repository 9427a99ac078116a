/* SPDX-License-Identifier: BSD-3-Clause */
/* Semaphores on etcd (issue 38), against a real etcd member: the holders
 * of N permits are the N first keys of the name's line (by create
 * revision), each a lease of its own; a waiter is in when fewer than N
 * keys are before its own, and looks again when any key of the line is
 * deleted. Never more than N holders at once (counted in and out by eight
 * threads), everyone gets through, a waiter gets in when a nearer holder
 * goes (not only the oldest), a permit has no fence (as on Redis), and a
 * killed holder's permit comes back with its lease. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "dlock.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_util.h"
#include "test_waiter.h"

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

static dlock_lock *permit_of(const char *name, unsigned permits, int64_t ttl_ms)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.retry_min_ms = 10;
    o.retry_max_ms = 100;
    dlock_lock *l = NULL;
    int rc = dlock_semaphore_new(&l, cl, name, permits, &o);
    if (rc != DLOCK_OK)
        fail_msg("dlock_semaphore_new(%s): %s", name, dlock_errname(rc));
    return l;
}

static void three_permits_then_the_fourth_waits(void **state)
{
    (void)state;
    dlock_lock *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = permit_of("sem-basic", 3, 10000);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dlock_lock_acquire(p[i], 0), DLOCK_OK);
        assert_int_equal(dlock_lock_fence(p[i]), 0); /* a permit has none, as on Redis */
        assert_int_equal(strlen(dlock_lock_token(p[i])), 16);
    }
    assert_int_equal(dlock_lock_acquire(p[3], 0), DLOCK_ENOTACQUIRED);
    assert_string_equal(dlock_lock_errmsg(p[3]), "all 3 permits held");
    assert_true(dlock_lock_holder_ttl_ms(p[3]) > 0);
    assert_int_equal(dlock_lock_release(p[1]), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p[3], 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p[1], 0), DLOCK_ENOTACQUIRED);
    /* a plain lock of the name is a key in the same line: with three
     * permits out it is fourth, and waits */
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *x = test_lock_with(cl, "sem-basic", &o);
    assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_ENOTACQUIRED);
    for (int i = 0; i < 4; i++) {
        if (i != 1)
            assert_int_equal(dlock_lock_release(p[i]), DLOCK_OK);
        dlock_lock_free(p[i]);
    }
    assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(x), DLOCK_OK);
    dlock_lock_free(x);
}

/* The first waiter is in as soon as any holder goes: here the middle one
 * of the three. A waiter that watched only the key just before its own
 * (the newest holder), as a lock's waiter does, or only the key N ahead
 * (the oldest), would wait for its next look, 2 s. */
static void a_waiter_gets_in_when_a_nearer_holder_goes(void **state)
{
    (void)state;
    dlock_lock *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = permit_of("sem-near", 3, 10000);
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_lock_acquire(p[i], 0), DLOCK_OK);
    test_waiter w;
    assert_int_equal(test_waiter_start(&w, p[3], 10000, TEST_WAITER_RELEASE), 0);
    test_sleep_ms(500); /* in line, watching */
    assert_int_equal(atomic_load(&w.done), 0);
    int64_t released_ms = test_now_ms();
    assert_int_equal(dlock_lock_release(p[1]), DLOCK_OK);
    assert_int_equal(test_waiter_join(&w), DLOCK_OK);
    int64_t took_ms = atomic_load(&w.done_ms) - released_ms;
    print_message("in %lld ms after the middle holder's release\n", (long long)took_ms);
    assert_true(took_ms < 1000);
    for (int i = 0; i < 4; i++) {
        if (i == 0 || i == 2)
            assert_int_equal(dlock_lock_release(p[i]), DLOCK_OK);
        dlock_lock_free(p[i]);
    }
}

/* Eight threads, three permits, each in and out 12 times: counted in
 * after its acquire returns and out before its release is sent, so the
 * count is at least the number of holders etcd has at any time. */
#define WORKERS 8
#define ROUNDS 12
#define PERMITS 3

static atomic_int inside, most_inside, sections;

typedef struct worker {
    dlock_lock *l;
    int failed;
} worker;

static void *work(void *arg)
{
    worker *k = arg;
    for (int r = 0; r < ROUNDS; r++) {
        int rc = dlock_lock_acquire(k->l, 30000);
        if (rc != DLOCK_OK) {
            k->failed = rc;
            return NULL;
        }
        int now = atomic_fetch_add(&inside, 1) + 1;
        int most = atomic_load(&most_inside);
        while (now > most && !atomic_compare_exchange_weak(&most_inside, &most, now))
            ;
        test_sleep_ms(20 + (r * 7) % 30);
        atomic_fetch_sub(&inside, 1);
        atomic_fetch_add(&sections, 1);
        if ((rc = dlock_lock_release(k->l)) != DLOCK_OK) {
            k->failed = rc;
            return NULL;
        }
    }
    return NULL;
}

static void never_more_than_n_holders_and_everyone_gets_through(void **state)
{
    (void)state;
    worker k[WORKERS];
    pthread_t t[WORKERS];
    atomic_store(&inside, 0);
    atomic_store(&most_inside, 0);
    atomic_store(&sections, 0);
    int64_t start_ms = test_now_ms();
    for (int i = 0; i < WORKERS; i++) {
        k[i] = (worker){.l = permit_of("sem-contend", PERMITS, 5000)};
        assert_int_equal(pthread_create(&t[i], NULL, work, &k[i]), 0);
    }
    for (int i = 0; i < WORKERS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        if (k[i].failed)
            fail_msg("worker %d: %s", i, dlock_errname(k[i].failed));
        dlock_lock_free(k[i].l);
    }
    print_message("%d sections in %lld ms, at most %d inside\n", atomic_load(&sections),
                  (long long)(test_now_ms() - start_ms), atomic_load(&most_inside));
    assert_int_equal(atomic_load(&sections), WORKERS * ROUNDS);
    assert_true(atomic_load(&most_inside) <= PERMITS);
    assert_int_equal(atomic_load(&most_inside), PERMITS); /* the permits were used */
}

/* A holder that dies gives its permit back when its lease ends (2 s,
 * auto-renewed until the SIGKILL). */
static void a_killed_holders_permit_returns_with_its_lease(void **state)
{
    (void)state;
    dlock_lock *a = permit_of("sem-kill", 2, 10000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = test_fork_child();
    if (pid == 0) {
        const char *url = srv.url;
        dlock_client *c;
        dlock_lock *l;
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 2000;
        o.flags = DLOCK_AUTO_RENEW;
        if (dlock_client_new(&c, &url, 1, NULL, NULL, 0) != DLOCK_OK ||
            dlock_semaphore_new(&l, c, "sem-kill", 2, &o) != DLOCK_OK ||
            dlock_lock_acquire(l, 0) != DLOCK_OK || write(p[1], "x", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]); /* a child that dies before writing ends the read */
    char x;
    assert_int_equal(read(p[0], &x, 1), 1);
    close(p[0]);
    dlock_lock *b = permit_of("sem-kill", 2, 10000);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    test_sleep_ms(2500); /* renewed past its first TTL */
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    int64_t killed_ms = test_now_ms();
    assert_int_equal(dlock_lock_acquire(b, 8000), DLOCK_OK);
    int64_t took_ms = test_now_ms() - killed_ms;
    print_message("the permit came back %lld ms after the kill\n", (long long)took_ms);
    assert_true(took_ms < 4000);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* A permit is a hold like a lock's: auto-renewed, extended to a new TTL
 * (its key moved to a new lease), adopted by its token elsewhere and
 * released there. */
static void a_permit_renews_extends_and_is_adopted(void **state)
{
    (void)state;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 2000;
    o.flags = DLOCK_AUTO_RENEW;
    dlock_lock *a = NULL, *b = permit_of("sem-hold", 1, 2000), *c = permit_of("sem-hold", 1, 2000);
    assert_int_equal(dlock_semaphore_new(&a, cl, "sem-hold", 1, &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(a, 4000), DLOCK_OK);
    assert_true(dlock_lock_validity_ms(a) > 3000);
    test_sleep_ms(5000);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_adopt(c, dlock_lock_token(a)), DLOCK_OK);
    dlock_lock_forget(a);
    assert_int_equal(dlock_lock_release(c), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(three_permits_then_the_fourth_waits),
        cmocka_unit_test(a_waiter_gets_in_when_a_nearer_holder_goes),
        cmocka_unit_test(never_more_than_n_holders_and_everyone_gets_through),
        cmocka_unit_test(a_killed_holders_permit_returns_with_its_lease),
        cmocka_unit_test(a_permit_renews_extends_and_is_adopted),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
