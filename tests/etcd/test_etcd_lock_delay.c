/* SPDX-License-Identifier: BSD-3-Clause */
/* Lock-delay on etcd (issue 39; docs/lock-delay.md, docs/backends.md
 * "Lock-delay on etcd") against a real etcd member, whose shortest lease
 * is 1 s (tests/support/etcd_server.h): every kind etcd serves runs the
 * store-independent case of test_lock_delay (support/lock_delay_body.c: a
 * SIGKILLed holder in a child keeps the name from a handle with a delay
 * for its lease plus the delay, status shows the time left, a clean
 * release frees it at once), also after renewals longer than the
 * companion's own lease; a semaphore's dead permit counts; a clean end in a child costs nobody a delay;
 * a waiter without a delay is not held back; a lease that ran out and a
 * break are unclean ends; an extend to a new TTL moves the delay with
 * it; an adopted token's release takes its delay out; and an election
 * whose leader is SIGKILLed. Each figure is printed; only lower bounds
 * are tight. */
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
#include "etcd_server.h"
#include "lock_delay_body.h"
#include "proc.h"
#include "test_util.h"

/* etcd's leases count whole seconds: 1 s of lease, 1 s of delay. */
#define TTL_MS 1000
#define DELAY_MS 1000
/* A delay long enough that waiting it out and not waiting differ by far. */
#define LONG_DELAY_MS 5000

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

/* The companion ends the delay (rounded up to whole seconds), plus a
 * third of the TTL on a session (the dying holder's DLOCK_AUTO_RENEW),
 * after the lease; etcd's expiry checks run every 500 ms. */
static test_delay_target target(const char *label)
{
    return (test_delay_target){label, {srv.url}, 1, 0, TTL_MS, DELAY_MS, 700,
                               3 * 1000, DELAY_MS + 1000 + 1500, NULL, NULL, NULL};
}

static void every_kind_etcd_serves(void **state)
{
    (void)state;
    static const test_delay_kind kinds[] = {
        {"plain", 0, 0, 0, 0},
        {"reentrant", DLOCK_REENTRANT, 0, 0, 0},
        {"fair", DLOCK_FAIR, 0, 0, 0},
        {"exclusive", DLOCK_EXCLUSIVE, 0, 0, 0},
        {"semaphore", 0, 1, 0, 0},
        {"several names", 0, 0, 1, 0},
    };
    test_delay_target t = target("etcd");
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        test_delay_killed_holder(&t, &kinds[i]);
}

/* A holder that renews longer than its companion lease's TTL (here 3 s:
 * 1 s of lease, 1 s of delay, a third of a second rounded up on its
 * session) before its death: the renewals kept the companion alive too,
 * so the delay still follows the last lease. */
static void renewals_keep_the_delay_alive(void **state)
{
    (void)state;
    test_delay_target t = target("renewed");
    t.hold_ms = 4000;
    test_delay_kind k = {"plain", 0, 0, 0, 0};
    test_delay_killed_holder(&t, &k);
}

static dlock_lock *plain(const char *name, int64_t ttl_ms, int64_t delay_ms)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.lock_delay_ms = delay_ms;
    o.retry_max_ms = 50;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, cl, name, &o), DLOCK_OK);
    return l;
}

/* A child with LONG_DELAY_MS takes the name and is SIGKILLed; returns
 * when status sees the name free (the lease ended): that time. */
static int64_t killed_with_long_delay(const char *name)
{
    test_delay_target t = target("long");
    t.delay_ms = LONG_DELAY_MS;
    t.hold_ms = 400;
    test_delay_kind k = {"plain", 0, 0, 0, 0};
    pid_t pid = test_delay_dying_holder(&t, &k, name);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    int64_t last_all = 0;
    return test_delay_wait_gone(cl, name, &last_all);
}

/* A semaphore's permit of a dead holder stays taken for the delay: with
 * two permits and one live holder beside it nobody else gets one; with
 * three, the third is free at once (as on Redis). */
static void a_dead_holders_permit_is_counted_for_the_delay(void **state)
{
    (void)state;
    test_delay_target t = target("permits");
    for (unsigned n = 2; n <= 3; n++) {
        char name[64];
        snprintf(name, sizeof name, "ld-permits-%u", n);
        test_delay_kind k = {"semaphore", 0, n, 0, 0};
        pid_t pid = test_delay_dying_holder(&t, &k, name);
        dlock_lock *live = NULL, *next = NULL;
        assert_int_equal(test_delay_lock(&t, cl, &k, name, DLOCK_AUTO_RENEW, DELAY_MS, &live),
                         DLOCK_OK);
        assert_int_equal(test_delay_lock(&t, cl, &k, name, 0, DELAY_MS, &next), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(live, 0), DLOCK_OK);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        /* the dead one's lease ended when its companion is a dead one's */
        int64_t left = 0, until = test_now_ms() + 5000;
        while (left == 0 && test_now_ms() < until) {
            test_sleep_ms(5);
            assert_int_equal(dlock_client_lock_delay(cl, name, 0, &left), DLOCK_OK);
        }
        assert_true(left > 0);
        int64_t t0 = test_now_ms();
        assert_int_equal(dlock_lock_acquire(next, 0), n == 2 ? DLOCK_ENOTACQUIRED : DLOCK_OK);
        if (n == 2) {
            assert_int_equal(dlock_lock_acquire(next, 10000), DLOCK_OK);
            printf("# semaphore of 2 beside a live permit: waited %lld ms (%lld ms of delay "
                   "were left)\n", (long long)(test_now_ms() - t0), (long long)left);
            assert_true(test_now_ms() - t0 >= left - 1000); /* etcd's whole seconds */
        }
        assert_int_equal(dlock_lock_release(next), DLOCK_OK);
        assert_int_equal(dlock_lock_release(live), DLOCK_OK);
        dlock_lock_free(next);
        dlock_lock_free(live);
    }
}

/* A handle without a delay neither leaves nor respects one (as on Redis,
 * docs/lock-delay.md): it gets the name once the dead holder's lease
 * ended, though the delay is pending (status says so). */
static void a_waiter_without_a_delay_is_not_held_back(void **state)
{
    (void)state;
    int64_t gone = killed_with_long_delay("ld-none");
    int64_t left = 0;
    assert_int_equal(dlock_client_lock_delay(cl, "ld-none", 0, &left), DLOCK_OK);
    assert_true(left > 0); /* the delay is there, for handles with one */
    dlock_lock *l = plain("ld-none", TTL_MS, 0);
    assert_int_equal(dlock_lock_acquire(l, 10000), DLOCK_OK);
    int64_t waited = test_now_ms() - gone;
    printf("# without a delay: got it %lld ms after the name was gone (%lld ms of delay "
           "pending)\n", (long long)waited, (long long)left);
    assert_true(waited < LONG_DELAY_MS / 2);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

/* A holder in a child that releases and exits cleanly leaves no delay:
 * the next holder with one gets the name at once. */
static void a_clean_release_in_a_child_costs_no_delay(void **state)
{
    (void)state;
    test_delay_target t = target("clean");
    t.delay_ms = LONG_DELAY_MS;
    t.hold_ms = 500;
    test_delay_kind k = {"plain", 0, 0, 0, 0};
    pid_t pid = test_delay_holder(&t, &k, "ld-clean", 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    int64_t left = -1;
    assert_int_equal(dlock_client_lock_delay(cl, "ld-clean", 0, &left), DLOCK_OK);
    assert_int_equal(left, 0);
    dlock_lock *l = plain("ld-clean", TTL_MS, LONG_DELAY_MS);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(l, 10000), DLOCK_OK);
    int64_t waited = test_now_ms() - t0;
    printf("# after a clean release: got it in %lld ms (delay %d)\n", (long long)waited,
           LONG_DELAY_MS);
    assert_true(waited < LONG_DELAY_MS / 5);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

/* Wait until status sees name free. */
static void wait_free(const char *name)
{
    int64_t last_all = 0;
    (void)test_delay_wait_gone(cl, name, &last_all);
}

/* A lease that ran out under a live process (no renewal) is an unclean
 * end: its late release frees nothing; and a break leaves the delay (the
 * broken holder may still be writing), as on Redis. */
static void a_lease_that_ran_out_and_a_break_are_unclean(void **state)
{
    (void)state;
    dlock_lock *a = plain("ld-ranout", TTL_MS, DELAY_MS);
    dlock_lock *b = plain("ld-ranout", TTL_MS, DELAY_MS);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    wait_free("ld-ranout");
    assert_int_not_equal(dlock_lock_release(a), DLOCK_OK);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    printf("# a lease that ran out: try-once says \"%s\"\n", dlock_lock_errmsg(b));
    assert_non_null(strstr(dlock_lock_errmsg(b), "lock-delay"));
    assert_true(dlock_lock_holder_ttl_ms(b) > 0);
    assert_int_equal(dlock_lock_acquire(b, 10000), DLOCK_OK);
    printf("# a lease that ran out: waited %lld ms for the delay (%d)\n",
           (long long)(test_now_ms() - t0), DELAY_MS);
    /* b's hold broken: the delay stands */
    dlock_break_result br;
    assert_int_equal(dlock_client_break(cl, "ld-ranout", 0, &br), DLOCK_OK);
    int64_t left = 0;
    assert_int_equal(dlock_client_lock_delay(cl, "ld-ranout", 0, &left), DLOCK_OK);
    printf("# a break: %lld ms of delay left\n", (long long)left);
    assert_true(left >= DELAY_MS);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_acquire(a, 10000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* An extend to a longer TTL moves the key to a new lease: the delay
 * moves with it (its companion outlives the new lease by the delay). */
static void an_extend_to_a_new_ttl_moves_the_delay(void **state)
{
    (void)state;
    dlock_lock *a = plain("ld-extend", TTL_MS, DELAY_MS);
    dlock_lock *b = plain("ld-extend", TTL_MS, DELAY_MS);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(a, 3000), DLOCK_OK);
    int64_t t0 = test_now_ms();
    wait_free("ld-extend");
    int64_t gone = test_now_ms();
    assert_true(gone - t0 >= 2500); /* the new lease held it */
    int64_t left = 0;
    assert_int_equal(dlock_client_lock_delay(cl, "ld-extend", 0, &left), DLOCK_OK);
    printf("# an extend to 3 s: the name went after %lld ms, %lld ms of delay left\n",
           (long long)(gone - t0), (long long)left);
    assert_true(left > 0);
    assert_int_equal(dlock_lock_acquire(b, 10000), DLOCK_OK);
    assert_true(test_now_ms() - gone >= DELAY_MS - 500);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* A handle that adopts the token (another process's, `dlock release
 * NAME TOKEN`) gives back the delay with the hold. */
static void an_adopted_release_takes_the_delay_out(void **state)
{
    (void)state;
    dlock_lock *a = plain("ld-adopt", 30000, LONG_DELAY_MS);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char token[DLOCK_TOKEN_MAX + 1];
    snprintf(token, sizeof token, "%s", dlock_lock_token(a));
    dlock_lock *b = plain("ld-adopt", 30000, 1);
    assert_int_equal(dlock_lock_adopt(b, token), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    int64_t left = -1;
    assert_int_equal(dlock_client_lock_delay(cl, "ld-adopt", 0, &left), DLOCK_OK);
    assert_int_equal(left, 0);
    dlock_lock *c = plain("ld-adopt", TTL_MS, LONG_DELAY_MS);
    assert_int_equal(dlock_lock_acquire(c, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(c), DLOCK_OK);
    dlock_lock_forget(a);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(c);
}

/* An election's leader in a child, SIGKILLed after renewals: a standby
 * with the delay leads no sooner than the delay after the leader's lease
 * ended; a resign frees the name at once. */
static void a_killed_leaders_term_is_delayed(void **state)
{
    (void)state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = test_fork_child();
    if (pid == 0) {
        close(ready[0]);
        dlock_client *c = test_etcd_client(&srv, -1, 0);
        dlock_election_options eo = DLOCK_ELECTION_OPTIONS_INIT;
        eo.ttl_ms = TTL_MS;
        eo.lock_delay_ms = DELAY_MS;
        dlock_election *e = NULL;
        if (!c || dlock_election_new(&e, c, "ld-elect", &eo) != DLOCK_OK ||
            dlock_election_campaign(e, "doomed", 0) != DLOCK_OK)
            _exit(1);
        char b = 'L';
        if (write(ready[1], &b, 1) != 1)
            _exit(1);
        test_sleep_ms(700); /* renewed */
        raise(SIGKILL);
        _exit(3);
    }
    close(ready[1]);
    char b;
    assert_int_equal(read(ready[0], &b, 1), 1);
    close(ready[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    int64_t last_all = 0, gone = test_delay_wait_gone(cl, "ld-elect", &last_all);
    dlock_election_options eo = DLOCK_ELECTION_OPTIONS_INIT;
    eo.ttl_ms = TTL_MS;
    eo.lock_delay_ms = DELAY_MS;
    dlock_election *s = NULL, *o = NULL;
    assert_int_equal(dlock_election_new(&s, cl, "ld-elect", &eo), DLOCK_OK);
    assert_int_equal(dlock_election_new(&o, cl, "ld-elect", &eo), DLOCK_OK);
    assert_int_equal(dlock_election_campaign(s, "standby", 10000), DLOCK_OK);
    int64_t got = test_now_ms();
    printf("# election: the standby leads %lld ms after the last look that saw the "
           "leader's lease, %lld ms after it was gone (delay %d)\n",
           (long long)(got - last_all), (long long)(got - gone), DELAY_MS);
    assert_true(got - last_all >= DELAY_MS);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_election_resign(s), DLOCK_OK);
    assert_int_equal(dlock_election_campaign(o, "next", 5000), DLOCK_OK);
    printf("# election: after a resign the next leads in %lld ms\n",
           (long long)(test_now_ms() - t0));
    assert_true(test_now_ms() - t0 < DELAY_MS / 2);
    assert_int_equal(dlock_election_resign(o), DLOCK_OK);
    dlock_election_free(s);
    dlock_election_free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_kind_etcd_serves),
        cmocka_unit_test(renewals_keep_the_delay_alive),
        cmocka_unit_test(a_dead_holders_permit_is_counted_for_the_delay),
        cmocka_unit_test(a_waiter_without_a_delay_is_not_held_back),
        cmocka_unit_test(a_clean_release_in_a_child_costs_no_delay),
        cmocka_unit_test(a_lease_that_ran_out_and_a_break_are_unclean),
        cmocka_unit_test(an_extend_to_a_new_ttl_moves_the_delay),
        cmocka_unit_test(an_adopted_release_takes_the_delay_out),
        cmocka_unit_test(a_killed_leaders_term_is_delayed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
