/* SPDX-License-Identifier: BSD-3-Clause */
/* Lock-delay (issue 39; dlock_lock_options.lock_delay_ms,
 * docs/lock-delay.md) against real servers: one node, a Redlock of three
 * and a Redis Cluster, every kind. A holder in a child process takes the
 * lock, renews it for a while (so the delay must follow the renewed lease,
 * not the first one) and is SIGKILLed; the next acquire must come at least
 * the delay after the lease's end (the last look that still saw the key on
 * every node is a lower bound of that end), and not much later; a clean
 * release frees the name at once, and a try-once acquire after it gets
 * the lock. A waiter sleeps through the delay instead of polling (script
 * calls counted on one node). Bad values are DLOCK_EINVAL. */
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

#include <hiredis/hiredis.h>

#include "dlock.h"
#include "proc.h"
#include "redis_topology.h"
#include "test_util.h"

#define TTL_MS 600
#define DELAY_MS 800
/* The child holds (renewing every TTL_MS / 3) this long before its death. */
#define HOLD_MS 700
/* How much later than the delay's end the next holder may come: a wait's
 * slack on a loaded machine, generous. */
#define LATE_MS 1500

/* Where the locks live. */
typedef struct target {
    const char *label;
    const char *urls[TEST_CLUSTER_NODES];
    size_t n;
    int cluster;
    const test_redis *one; /* one node: its script calls are counted */
} target;

/* What is locked: a kind of lock, a semaphore or a set of two names. */
typedef struct kind {
    const char *label;
    unsigned flags;
    unsigned permits; /* a semaphore of this many permits (0: none) */
    int multi;        /* the set {NAME:a, NAME:b} */
    int one_node;     /* DLOCK_FAIR: one node only */
} kind;

static const kind kinds[] = {
    {"plain", 0, 0, 0, 0},
    {"reentrant", DLOCK_REENTRANT, 0, 0, 0},
    {"fair", DLOCK_FAIR, 0, 0, 1},
    {"exclusive", DLOCK_EXCLUSIVE, 0, 0, 0},
    {"shared", DLOCK_SHARED, 0, 0, 0},
    {"shared reentrant", DLOCK_SHARED | DLOCK_REENTRANT, 0, 0, 0},
    {"semaphore", 0, 1, 0, 1},
    {"several names", 0, 0, 1, 0},
};

/* No cmocka here: a child uses these too. NULL on failure. */
static dlock_client *client_of(const target *t)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = t->cluster;
    dlock_client *c = NULL;
    if (dlock_client_new(&c, t->urls, t->n, &o, NULL, 0) != DLOCK_OK)
        return NULL;
    return c;
}

static int lock_of(dlock_client *c, const kind *k, const char *name, unsigned flags,
                   int64_t delay_ms, dlock_lock **out)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = TTL_MS;
    o.flags = k->flags | flags;
    o.retry_min_ms = 1;
    o.retry_max_ms = 20; /* a poller would call often: the count below would show it */
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
 * renew for HOLD_MS, and die without a word to the store. */
static void holder_child(const target *t, const kind *k, const char *name, int wr)
{
    dlock_client *c = client_of(t);
    dlock_lock *l = NULL;
    unsigned char rc = 99;
    if (c && lock_of(c, k, name, DLOCK_AUTO_RENEW, DELAY_MS, &l) == DLOCK_OK)
        rc = (unsigned char)dlock_lock_acquire(l, 5000);
    if (write(wr, &rc, 1) != 1 || rc != 0)
        _exit(2);
    test_sleep_ms(HOLD_MS);
    raise(SIGKILL);
    _exit(3);
}

/* Start holder_child() and wait until it holds: its pid. */
static pid_t dying_holder(const target *t, const kind *k, const char *name)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = test_fork_child();
    if (pid == 0) {
        close(fds[0]);
        holder_child(t, k, name, fds[1]);
    }
    close(fds[1]);
    unsigned char rc = 255;
    assert_int_equal(read(fds[0], &rc, 1), 1);
    close(fds[0]);
    assert_int_equal(rc, 0);
    return pid;
}

/* The name the status looks at: a set's first. */
static void status_name(const kind *k, const char *name, char *out, size_t len)
{
    snprintf(out, len, k->multi ? "%s:a" : "%s", name);
}

/* Wait until no node holds the name. *last_all: the start of the last
 * look that saw it on every node (its lease ended after that); returns the
 * end of the first look that saw it nowhere. */
static int64_t wait_gone(dlock_client *c, const char *name, int64_t *last_all)
{
    dlock_node_status st[TEST_CLUSTER_NODES];
    int64_t until = test_now_ms() + 5000;
    for (;;) {
        int64_t t0 = test_now_ms();
        dlock_lock_status s;
        assert_int_equal(dlock_client_status(c, name, TEST_CLUSTER_NODES, st, &s), DLOCK_OK);
        int64_t t1 = test_now_ms();
        if (s.held_on == s.nodes)
            *last_all = t0;
        if (s.held_on == 0)
            return t1;
        assert_true(t1 < until);
        test_sleep_ms(2);
    }
}

static void killed_holder_keeps_the_name_for_the_delay(const target *t, const kind *k)
{
    char name[128], sname[160];
    snprintf(name, sizeof name, "ld:%s:%s", t->label, k->label);
    status_name(k, name, sname, sizeof sname);
    pid_t pid = dying_holder(t, k, name);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    dlock_client *c = client_of(t);
    assert_non_null(c);
    int64_t last_all = 0, gone = wait_gone(c, sname, &last_all);
    assert_true(last_all > 0);
    int64_t left = -1;
    assert_int_equal(dlock_client_lock_delay(c, sname, 0, &left), DLOCK_OK);
    assert_true(left > 0 && left <= DELAY_MS);

    dlock_lock *l = NULL;
    assert_int_equal(lock_of(c, k, name, 0, DELAY_MS, &l), DLOCK_OK);
    long long calls = t->one ? test_script_calls(t->one) : 0;
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED); /* freed, not free */
    assert_int_equal(dlock_lock_acquire(l, 10000), DLOCK_OK);
    int64_t got = test_now_ms();
    calls = t->one ? test_script_calls(t->one) - calls : -1;
    printf("# %s, %s: got it %lld ms after the last look that saw the lease (delay %d), "
           "%lld ms after the name was gone; %lld script calls\n",
           t->label, k->label, (long long)(got - last_all), DELAY_MS,
           (long long)(got - gone), calls);
    assert_true(got - last_all >= DELAY_MS);
    assert_true(got - gone <= DELAY_MS + LATE_MS);
    /* One node: the try-once, the waiting acquire's first try and the one
     * after the delay's sleep, and a release message's look perhaps (a
     * set: per name; a fair waiter looks each refresh, 4 more). Without
     * the sleep until the delay's end the plain case made 7 (a subscribed
     * waiter's 200 ms safety looks). */
    if (t->one)
        assert_true(calls <= (k->flags & DLOCK_FAIR ? 8 : k->multi ? 6 : 4));

    /* A clean release frees it at once, for anyone with the delay. */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_client_lock_delay(c, sname, 0, &left), DLOCK_OK);
    assert_int_equal(left, 0);
    dlock_lock *m = NULL;
    assert_int_equal(lock_of(c, k, name, 0, DELAY_MS, &m), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(m, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(m), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(m);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void every_kind(const target *t)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!(kinds[i].one_node && t->n > 1))
            killed_holder_keeps_the_name_for_the_delay(t, &kinds[i]);
}

/* ---- one node ------------------------------------------------------------ */

static target one_node(void)
{
    return (target){"one", {test_srv.url}, 1, 0, &test_srv};
}

static void one_node_every_kind(void **state)
{
    (void)state;
    target t = one_node();
    every_kind(&t);
}

/* A semaphore's permit of a dead holder stays taken for the delay: with
 * two permits and one live holder beside it nobody else gets one; with
 * three, the third is free at once. */
static void a_dead_holders_permit_is_counted_for_the_delay(void **state)
{
    (void)state;
    target t = one_node();
    for (unsigned n = 2; n <= 3; n++) {
        char name[64];
        snprintf(name, sizeof name, "ld:permits:%u", n);
        kind k = {"semaphore", 0, n, 0, 1};
        pid_t pid = dying_holder(&t, &k, name);
        dlock_client *c = client_of(&t);
        dlock_lock *live = NULL, *next = NULL;
        assert_int_equal(lock_of(c, &k, name, DLOCK_AUTO_RENEW, DELAY_MS, &live), DLOCK_OK);
        assert_int_equal(lock_of(c, &k, name, 0, DELAY_MS, &next), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(live, 0), DLOCK_OK);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        /* Until the dead one's lease ended: our live permit alone. */
        dlock_holders_info hi = {0};
        int64_t until = test_now_ms() + 5000;
        do {
            test_sleep_ms(5);
            assert_int_equal(dlock_client_holders(c, name, 0, &hi, NULL, 0), DLOCK_OK);
        } while (hi.count > 1 && test_now_ms() < until);
        assert_int_equal(hi.count, 1);
        int64_t t0 = test_now_ms();
        int want = n == 2 ? DLOCK_ENOTACQUIRED : DLOCK_OK;
        assert_int_equal(dlock_lock_acquire(next, 0), want);
        if (n == 2) {
            assert_int_equal(dlock_lock_acquire(next, 5000), DLOCK_OK);
            assert_true(test_now_ms() - t0 <= DELAY_MS + LATE_MS);
        }
        assert_int_equal(dlock_lock_release(next), DLOCK_OK);
        assert_int_equal(dlock_lock_release(live), DLOCK_OK);
        dlock_lock_free(next);
        dlock_lock_free(live);
        dlock_client_free(c);
    }
}

/* Without a delay nothing changes: the next holder comes as soon as the
 * lease ends, and nothing is left beside the lock. */
static void without_a_delay_the_lease_end_frees_the_name(void **state)
{
    (void)state;
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *a = test_lock_new(c, "ld:none", 300, 0, 1, 20);
    dlock_lock *b = test_lock_new(c, "ld:none", 300, 0, 1, 20);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char dk[64];
    size_t dkn = test_helper_key(dk, sizeof dk, "ld:none", "delay");
    redisReply *r = test_cmd_bin(&test_srv, "EXISTS %b", dk, dkn); /* no marks */
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(b, 5000), DLOCK_OK);
    assert_true(test_now_ms() - t0 < 300 + 250);
    int64_t left = -1;
    assert_int_equal(dlock_client_lock_delay(c, "ld:none", 0, &left), DLOCK_OK);
    assert_int_equal(left, 0);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_free(c);
}

/* A lease that ran out under a live process (no renewal) counts as an
 * unclean end too: its late release finds nothing and frees nothing. */
static void a_lease_that_ran_out_is_delayed_too(void **state)
{
    (void)state;
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 200;
    o.lock_delay_ms = DELAY_MS;
    dlock_lock *a = test_lock_with(c, "ld:ranout", &o);
    dlock_lock *b = test_lock_with(c, "ld:ranout", &o);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    test_sleep_ms(250);
    assert_int_not_equal(dlock_lock_release(a), DLOCK_OK);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_ENOTACQUIRED);
    assert_non_null(strstr(dlock_lock_errmsg(b), "lock-delay"));
    assert_int_equal(dlock_lock_acquire(b, 5000), DLOCK_OK);
    int64_t waited = test_now_ms() - t0;
    assert_true(waited >= DELAY_MS - 250 && waited <= DELAY_MS + LATE_MS);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_free(c);
}

static void bad_delays_are_refused(void **state)
{
    (void)state;
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *l = NULL;
    const int64_t bad[] = {-1, INT64_MIN, DLOCK_LOCK_DELAY_MAX_MS + 1, INT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.lock_delay_ms = bad[i];
        assert_int_equal(dlock_lock_new(&l, c, "ld:bad", &o), DLOCK_EINVAL);
        assert_null(l);
        assert_int_equal(dlock_semaphore_new(&l, c, "ld:bad", 2, &o), DLOCK_EINVAL);
        assert_int_equal(dlock_lock_new_multi(&l, c, (const char *const[]){"ld:x", "ld:y"}, 2,
                                              &o),
                         DLOCK_EINVAL);
    }
    o.lock_delay_ms = DLOCK_LOCK_DELAY_MAX_MS;
    assert_int_equal(dlock_lock_new(&l, c, "ld:bad", &o), DLOCK_OK);
    dlock_lock_free(l);
    int64_t left = 0;
    assert_int_equal(dlock_client_lock_delay(c, "ld:bad", 0, NULL), DLOCK_EINVAL);
    assert_int_equal(dlock_client_lock_delay(c, "ld:bad", 1, &left), DLOCK_EINVAL);
    assert_int_equal(dlock_client_lock_delay(c, "", 0, &left), DLOCK_EINVAL);
    dlock_client_free(c);
}

/* ---- a Redlock of three -------------------------------------------------- */

static test_redis three[3];

static int three_setup(void **state)
{
    (void)state;
    return test_redis_start_many(three, 3, NULL);
}

static int three_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        test_redis_stop(&three[i]);
    return 0;
}

static void redlock_every_kind(void **state)
{
    (void)state;
    target t = {"redlock", {three[0].url, three[1].url, three[2].url}, 3, 0, NULL};
    every_kind(&t);
}

/* ---- a Redis Cluster ------------------------------------------------------- */

static test_cluster C;

static int cluster_setup(void **state)
{
    (void)state;
    return test_cluster_start(&C) == 0 ? 0 : -1;
}

static int cluster_teardown(void **state)
{
    (void)state;
    test_cluster_stop(&C);
    return 0;
}

/* The marks live in the lock's slot (the scripts name them: CROSSSLOT
 * otherwise), for names on different masters. */
static void cluster_every_kind(void **state)
{
    (void)state;
    target t = {"cluster", {0}, TEST_CLUSTER_NODES, 1, NULL};
    for (size_t i = 0; i < TEST_CLUSTER_NODES; i++)
        t.urls[i] = C.urls[i];
    every_kind(&t);
}

int main(void)
{
    const struct CMUnitTest one[] = {
        cmocka_unit_test_teardown(one_node_every_kind, test_srv_flush),
        cmocka_unit_test_teardown(a_dead_holders_permit_is_counted_for_the_delay,
                                  test_srv_flush),
        cmocka_unit_test_teardown(without_a_delay_the_lease_end_frees_the_name, test_srv_flush),
        cmocka_unit_test_teardown(a_lease_that_ran_out_is_delayed_too, test_srv_flush),
        cmocka_unit_test_teardown(bad_delays_are_refused, test_srv_flush),
    };
    const struct CMUnitTest redlock[] = {cmocka_unit_test(redlock_every_kind)};
    const struct CMUnitTest cluster[] = {cmocka_unit_test(cluster_every_kind)};
    int failed = cmocka_run_group_tests_name("one node", one, test_srv_setup, test_srv_teardown);
    failed += cmocka_run_group_tests_name("redlock", redlock, three_setup, three_teardown);
    failed += cmocka_run_group_tests_name("cluster", cluster, cluster_setup, cluster_teardown);
    return failed;
}
