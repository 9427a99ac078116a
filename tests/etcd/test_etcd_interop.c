/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock on etcd against etcd's own lock (`etcdctl lock`, Go's
 * concurrency.Mutex), one real etcd member: they exclude each other in
 * both directions, wait in one line, list and break see an etcdctl holder,
 * and a plain lock's key is Mutex's NAME/<lease in %x>; an auto-renewed
 * lock's key on the client's session (NAME/<ID of its own>) excludes
 * etcdctl both ways too. etcdctl is Debian's etcd-client, started as a child
 * process (fork and exec, dying with this process) and stopped by its pid;
 * every test is skipped when it is not installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "etcd_ctl.h"
#include "etcd_keys.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_util.h"

static test_etcd srv;
static dlock_client *cl;
static int have_etcdctl;

static int setup(void **state)
{
    (void)state;
    return test_etcdctl_setup(&srv, &cl, &have_etcdctl);
}

static int teardown(void **state)
{
    (void)state;
    test_etcdctl_teardown(&srv, cl, have_etcdctl);
    return 0;
}

/* The flags of the interop tests' locks: 0, or DLOCK_AUTO_RENEW for the
 * same tests on the client's session (keys NAME/<ID of their own>). */
static unsigned lock_flags;

static dlock_lock *lock_of(const char *name)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    o.flags = lock_flags;
    o.retry_min_ms = 10;
    o.retry_max_ms = 100;
    return test_lock_with(cl, name, &o);
}

/* ---- etcdctl holds, dlock waits ---------------------------------------- */

/* etcdctl takes a free lock and runs a command that prints the lock's key
 * and revision, sleeps, then prints "done"; etcdctl unlocks only after its
 * command exits. dlock's try-once is refused and its waiter gets the lock
 * only after "done", with a fence above etcdctl's key's create revision.
 * (Fails with the KEY NUL <lease> layout: dlock takes the lock at once.) */
static void waits_for_etcdctls_hold(const char *name, unsigned flags)
{
    if (!have_etcdctl)
        skip();
    lock_flags = flags;
    ctl c;
    const char *args[] = {"lock", name, "--", "sh", "-c",
                          "echo \"held $ETCD_LOCK_KEY $ETCD_LOCK_REV\"; sleep 2; echo done",
                          NULL};
    ctl_start(&c, args);
    assert_true(ctl_wait_for(&c, "\n", 10000)); /* etcdctl holds it */
    char key[256] = "";
    long long rev = 0;
    assert_int_equal(sscanf(c.buf, "held %255s %lld", key, &rev), 2);
    assert_true(strncmp(key, name, strlen(name)) == 0 && key[strlen(name)] == '/');
    assert_true(rev > 0);

    /* status sees etcdctl's key as the holder, its create revision the
     * fence (etcdctl took a free lock: ETCD_LOCK_REV is that revision) */
    dlock_node_status ns[1];
    dlock_lock_status st;
    assert_int_equal(dlock_client_status(cl, name, 1, ns, &st), DLOCK_OK);
    assert_int_equal(ns[0].held, 1);
    assert_int_equal(ns[0].fence, (uint64_t)rev);

    dlock_lock *l = lock_of(name);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_acquire(l, 15000), DLOCK_OK);
    /* etcdctl printed "done" before it unlocked: it is in the pipe now */
    assert_true(ctl_wait_for(&c, "done", 100));
    assert_true(dlock_lock_fence(l) > (uint64_t)rev);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    assert_true(WIFEXITED(ctl_stop(&c)));
    lock_flags = 0;
}

static void dlock_waits_for_etcdctls_hold(void **state)
{
    (void)state;
    waits_for_etcdctls_hold("iop-a", 0);
}

/* The same with an auto-renewed waiter, whose key is on the session. */
static void a_session_waiter_waits_for_etcdctls_hold(void **state)
{
    (void)state;
    waits_for_etcdctls_hold("iop-sa", DLOCK_AUTO_RENEW);
}

/* A semaphore of three permits on a name etcdctl holds: etcdctl's key is
 * one of the line's first three, so it takes a permit; two dlock holders
 * get in beside it, the third waits for etcdctl's unlock. (So etcdctl's
 * hold is not exclusive against permit holders behind it; an etcdctl
 * that comes after them waits for all of them: docs/primitives.md.) */
static void etcdctls_hold_takes_a_permit(void **state)
{
    (void)state;
    if (!have_etcdctl)
        skip();
    ctl c;
    const char *args[] = {"lock", "iop-sem", "--", "sh", "-c",
                          "echo \"held $ETCD_LOCK_KEY\"; sleep 2; echo done", NULL};
    ctl_start(&c, args);
    assert_true(ctl_wait_for(&c, "\n", 10000)); /* etcdctl holds it */
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    o.retry_min_ms = 10;
    o.retry_max_ms = 100;
    dlock_lock *p[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_semaphore_new(&p[i], cl, "iop-sem", 3, &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p[0], 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p[1], 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p[2], 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_acquire(p[2], 15000), DLOCK_OK);
    /* etcdctl printed "done" before it unlocked: it is in the pipe now */
    assert_true(ctl_wait_for(&c, "done", 100));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dlock_lock_release(p[i]), DLOCK_OK);
        dlock_lock_free(p[i]);
    }
    assert_true(WIFEXITED(ctl_stop(&c)));
}

/* ---- dlock holds, etcdctl waits ---------------------------------------- */

typedef struct waiter {
    dlock_lock *l;
    int rc;
    atomic_llong done_ms; /* when its acquire returned */
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, 15000);
    atomic_store(&w->done_ms, test_now_ms());
    return NULL;
}

/* `etcdctl lock NAME` prints its key when it has the lock: not while
 * dlock holds it, at once after dlock's release. A dlock waiter that came
 * after etcdctl waits behind it (one first-come line): it gets the lock
 * only after etcdctl's unlock, its fence above etcdctl's. */
static void etcdctl_waits_for(const char *name, unsigned flags)
{
    if (!have_etcdctl)
        skip();
    lock_flags = flags;
    dlock_lock *l = lock_of(name);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    uint64_t first = dlock_lock_fence(l);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s/", name);
    ctl c;
    const char *args[] = {"lock", name, NULL};
    ctl_start(&c, args);
    assert_false(ctl_wait_for(&c, prefix, 1500)); /* waits behind dlock */
    waiter w = {lock_of(name), -1, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    test_sleep_ms(300); /* in line behind etcdctl */
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_true(ctl_wait_for(&c, prefix, 5000));
    print_message("etcdctl took the lock %" PRId64 " ms after dlock's release\n",
                  test_now_ms() - t0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED);
    test_sleep_ms(500);
    assert_int_equal(atomic_load(&w.done_ms), 0); /* still behind etcdctl */
    /* etcdctl's key's create revision, read back with dlock's status */
    dlock_node_status ns[1];
    assert_int_equal(dlock_client_status(cl, name, 1, ns, NULL), DLOCK_OK);
    uint64_t etcdctls = ns[0].fence;
    assert_true(etcdctls > first);
    int64_t stopped = test_now_ms();
    (void)ctl_stop(&c); /* SIGTERM: etcdctl unlocks */
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true(atomic_load(&w.done_ms) >= stopped);
    assert_true(dlock_lock_fence(w.l) > etcdctls);
    assert_int_equal(dlock_lock_release(w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(l);
    lock_flags = 0;
}

static void etcdctl_waits_for_dlocks_hold(void **state)
{
    (void)state;
    etcdctl_waits_for("iop-b", 0);
}

/* The same with auto-renewed holder and waiter, their keys on the
 * session: etcdctl's lowest-create-revision rule sees them whatever
 * their suffix. */
static void etcdctl_waits_for_a_session_hold(void **state)
{
    (void)state;
    etcdctl_waits_for("iop-sb", DLOCK_AUTO_RENEW);
}

/* The kinds etcd offers besides the plain lock keep the exclusion: a
 * reentrant owner's two holds are one key, so etcdctl waits until the
 * last hold goes; reentrant, fair and exclusive try-onces are refused
 * while etcdctl holds. */
static void reentrant_holds_exclude_etcdctl(void **state)
{
    (void)state;
    if (!have_etcdctl)
        skip();
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    o.flags = DLOCK_REENTRANT;
    dlock_lock *a = test_lock_with(cl, "iop-e", &o), *b = test_lock_with(cl, "iop-e", &o);
    o.flags = DLOCK_FAIR;
    dlock_lock *f = test_lock_with(cl, "iop-e", &o);
    o.flags = DLOCK_EXCLUSIVE;
    dlock_lock *x = test_lock_with(cl, "iop-e", &o);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK); /* a re-entry */
    ctl c;
    const char *args[] = {"lock", "iop-e", NULL};
    ctl_start(&c, args);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_false(ctl_wait_for(&c, "iop-e/", 1000)); /* b still holds */
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_true(ctl_wait_for(&c, "iop-e/", 5000));
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_acquire(f, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_ENOTACQUIRED);
    (void)ctl_stop(&c);
    assert_int_equal(dlock_lock_acquire(f, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(f), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(f);
    dlock_lock_free(x);
}

/* ---- an etcdctl holder seen by dlock's tools -------------------------- */

static int on_entry(void *arg, const dlock_list_entry *e)
{
    dlock_list_entry *out = arg;
    if (strcmp(e->name, "iop-d") == 0)
        *out = *e;
    return 0;
}

/* etcdctl's key (its lease etcd's, not one dlock drew) is a holder for
 * list and break: listed with its create revision as the fence, and break
 * with that fence deletes it, so dlock takes the name. */
static void list_and_break_see_an_etcdctl_holder(void **state)
{
    (void)state;
    if (!have_etcdctl)
        skip();
    ctl c;
    const char *args[] = {"lock", "iop-d", NULL};
    ctl_start(&c, args);
    assert_true(ctl_wait_for(&c, "iop-d/", 10000));
    dlock_list_entry en;
    memset(&en, 0, sizeof en);
    assert_int_equal(dlock_client_list(cl, "iop-*", on_entry, &en), DLOCK_OK);
    assert_int_equal(en.state, DLOCK_STATUS_HELD);
    assert_int_equal(en.waiters, 0);
    assert_true(en.fence > 0);
    assert_true(en.ttl_ms > 0);
    dlock_break_result res;
    assert_int_equal(dlock_client_break(cl, "iop-d", en.fence, &res), DLOCK_OK);
    assert_int_equal(res.removed, 1);
    assert_int_equal(res.fence, en.fence);
    dlock_lock *l = lock_of("iop-d");
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_true(dlock_lock_fence(l) > en.fence);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    (void)ctl_stop(&c);
}

/* ---- the key's form --------------------------------------------------- */

/* The key dlock writes is Mutex's: NAME/ and the lease ID in lowercase hex
 * without padding (the token is the same ID in 16 digits). */
static void dlocks_key_is_name_slash_lease_in_hex(void **state)
{
    (void)state;
    if (!have_etcdctl)
        skip();
    dlock_lock *l = lock_of("iop-c");
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    const char *token = dlock_lock_token(l);
    assert_int_equal(strlen(token), 16);
    char want[64];
    snprintf(want, sizeof want, "iop-c/%llx\n\n", test_etcd_token_id(token));
    ctl c;
    const char *args[] = {"get", "--prefix", "--keys-only", "iop-c", NULL};
    ctl_run(&c, args);
    /* --keys-only prints each key and a blank line: one key, ours */
    assert_string_equal(c.buf, want);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    ctl_run(&c, args);
    assert_string_equal(c.buf, "");
    dlock_lock_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dlock_waits_for_etcdctls_hold),
        cmocka_unit_test(etcdctl_waits_for_dlocks_hold),
        cmocka_unit_test(a_session_waiter_waits_for_etcdctls_hold),
        cmocka_unit_test(etcdctl_waits_for_a_session_hold),
        cmocka_unit_test(etcdctls_hold_takes_a_permit),
        cmocka_unit_test(reentrant_holds_exclude_etcdctl),
        cmocka_unit_test(list_and_break_see_an_etcdctl_holder),
        cmocka_unit_test(dlocks_key_is_name_slash_lease_in_hex),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
