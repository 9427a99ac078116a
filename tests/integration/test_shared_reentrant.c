/* SPDX-License-Identifier: BSD-3-Clause */
/* Reentrant readers (DLOCK_SHARED | DLOCK_REENTRANT) against real
 * redis-servers: N acquires need N releases and the share (the key) goes
 * with the last; an owner that holds a share re-enters while a writer
 * waits (through the same handle or another handle of the same thread),
 * a new reader (another thread, another client) still respects the
 * writer's mark, and the writer gets in after the last release;
 * auto-renew keeps a re-entered share past its TTL; the same on three
 * nodes (Redlock); combinations still refused. On the old code
 * DLOCK_SHARED | DLOCK_REENTRANT was refused (DLOCK_ENOTSUP): every test
 * here but the last failed at its first dlock_lock_new(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

#define RS (DLOCK_SHARED | DLOCK_REENTRANT)
#define RX (DLOCK_EXCLUSIVE | DLOCK_REENTRANT)

static void n_acquires_need_n_releases(void **state)
{
    (void)state;
    dlock_lock *r = test_lock_new(test_cl, "rr:count", 10000, RS, 1, 20);
    dlock_lock *w = test_lock_new(test_cl, "rr:count", 10000, DLOCK_EXCLUSIVE, 1, 20);
    for (int i = 0; i < 3; i++)
        assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    dlock_holders_info hi;
    assert_int_equal(dlock_client_holders(test_cl, "rr:count", 0, &hi, NULL, 0), DLOCK_OK);
    assert_int_equal(hi.mode, DLOCK_HOLD_SHARED);
    assert_int_equal(hi.count, 1); /* one share, held three times */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(dlock_lock_release(r), DLOCK_OK);
        assert_int_equal(test_key_exists(&test_srv, "rr:count"), 1);
        assert_int_equal(dlock_lock_state_get(r), DLOCK_STATE_HELD);
        assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED);
    }
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "rr:count"), 0);
    assert_int_equal(dlock_lock_release(r), DLOCK_ENOTHELD);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_ENOTACQUIRED); /* beside a writer */
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(w);
}

/* dlock.h, DLOCK_REENTRANT: "A hold whose lease ended is not re-entered:
 * the owner's next acquire gets a new hold". For the reader's and the
 * writer's reentrant kinds too, not DLOCK_EEXPIRED. */
static void a_share_whose_lease_ended_is_taken_anew(void **state)
{
    (void)state;
    const unsigned kinds[] = {RS, RX};
    for (size_t k = 0; k < 2; k++) {
        dlock_lock *r = test_lock_new(test_cl, "rr:ended", 100, kinds[k], 1, 20);
        assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
        uint64_t fence = dlock_lock_fence(r);
        test_sleep_ms(250);
        assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_state_get(r), DLOCK_STATE_HELD);
        if (kinds[k] == RX)
            assert_true(dlock_lock_fence(r) > fence);
        assert_int_equal(dlock_lock_release(r), DLOCK_OK); /* one hold: the new one */
        assert_int_equal(dlock_lock_release(r), DLOCK_ENOTHELD);
        dlock_lock_free(r);
    }
}

typedef struct try_arg {
    dlock_client *c;
    int rc;
} try_arg;

/* Another thread of the same client: another owner. */
static void *try_from_thread(void *p)
{
    try_arg *a = p;
    dlock_lock *l = test_lock_new(a->c, "rr:ww", 10000, RS, 1, 20);
    a->rc = dlock_lock_acquire(l, 0);
    if (a->rc == DLOCK_OK)
        dlock_lock_release(l);
    dlock_lock_free(l);
    return NULL;
}

static void reentry_passes_a_waiting_writer_new_readers_do_not(void **state)
{
    (void)state;
    dlock_lock *r = test_lock_new(test_cl, "rr:ww", 10000, RS, 1, 20);
    dlock_lock *r_same = test_lock_new(test_cl, "rr:ww", 10000, RS, 1, 20);
    dlock_lock *w = test_lock_new(test_cl, "rr:ww", 10000, DLOCK_EXCLUSIVE, 1, 20);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    /* The writer's wait leaves its "writer waiting" mark (~2 s); a try
     * once would leave none. */
    assert_int_equal(dlock_lock_acquire(w, 50), DLOCK_ETIMEDOUT);
    dlock_holders_info hi;
    assert_int_equal(dlock_client_holders(test_cl, "rr:ww", 0, &hi, NULL, 0), DLOCK_OK);
    assert_true(hi.writer_waiting_ms > 0);
    /* Re-entry through the same handle, and a first hold through another
     * handle of the same owner (client x thread): both granted. */
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r_same, 0), DLOCK_OK);
    /* A new reader (another thread; another client) respects the mark. */
    try_arg a = {test_cl, -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, try_from_thread, &a), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(a.rc, DLOCK_ENOTACQUIRED);
    dlock_client *c2 = test_client_for(&test_srv, NULL);
    dlock_lock *other = test_lock_new(c2, "rr:ww", 10000, RS, 1, 20);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_ENOTACQUIRED);
    assert_non_null(strstr(dlock_lock_errmsg(other), "held by another owner"));
    assert_int_equal(dlock_client_holders(test_cl, "rr:ww", 0, &hi, NULL, 0), DLOCK_OK);
    assert_int_equal(hi.count, 2); /* r and r_same: one member per handle */
    /* The writer gets in after the last release, and not before. */
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r_same), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "rr:ww"), 0);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    /* Without a share the owner is a new reader: the mark keeps it out. */
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 50), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_ENOTACQUIRED);
    dlock_lock_free(other);
    dlock_client_free(c2);
    dlock_lock_free(r);
    dlock_lock_free(r_same);
    dlock_lock_free(w);
}

/* A waiting writer (another process) gets in once the re-entered share's
 * last hold is released. */
static void waiting_writer_gets_in_after_the_last_release(void **state)
{
    (void)state;
    dlock_lock *r = test_lock_new(test_cl, "rr:wait", 10000, RS, 1, 20);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    pid_t pid = test_fork_child();
    if (pid == 0) {
        dlock_client *c = NULL;
        dlock_lock *l = NULL;
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.flags = DLOCK_EXCLUSIVE;
        o.retry_max_ms = 50;
        if (dlock_client_new(&c, (const char *[]){test_srv.url}, 1, NULL, NULL, 0) ||
            dlock_lock_new(&l, c, "rr:wait", &o))
            _exit(2);
        _exit(dlock_lock_acquire(l, 20000) == DLOCK_OK ? 0 : 3);
    }
    dlock_holders_info hi;
    int64_t t0 = test_now_ms();
    do {
        test_sleep_ms(10);
        assert_int_equal(dlock_client_holders(test_cl, "rr:wait", 0, &hi, NULL, 0), DLOCK_OK);
    } while (hi.writer_waiting_ms < 0 && test_now_ms() - t0 < 5000);
    assert_true(hi.writer_waiting_ms > 0);
    assert_int_equal(dlock_lock_acquire(r, 1000), DLOCK_OK); /* re-entry while it waits */
    test_sleep_ms(200);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    test_sleep_ms(200);
    assert_int_equal(test_key_exists(&test_srv, "rr:wait"), 1); /* still ours */
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    dlock_lock_free(r);
}

static void auto_renew_keeps_a_reentered_share(void **state)
{
    (void)state;
    dlock_lock *r = test_lock_new(test_cl, "rr:renew", 300, RS | DLOCK_AUTO_RENEW, 1, 20);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    test_sleep_ms(1500); /* five TTLs */
    assert_int_equal(dlock_lock_state_get(r), DLOCK_STATE_HELD);
    assert_int_equal(test_key_exists(&test_srv, "rr:renew"), 1);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    test_sleep_ms(900); /* the last hold is still renewed */
    assert_int_equal(dlock_lock_state_get(r), DLOCK_STATE_HELD);
    assert_int_equal(test_key_exists(&test_srv, "rr:renew"), 1);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "rr:renew"), 0);
    dlock_lock_free(r);
}

static void combinations_still_refused(void **state)
{
    (void)state;
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = DLOCK_EXCLUSIVE | DLOCK_REENTRANT | DLOCK_FAIR;
    assert_int_equal(dlock_lock_new(&l, test_cl, "rr:bad", &o), DLOCK_ENOTSUP);
    o.flags = RS | DLOCK_FAIR;
    assert_int_equal(dlock_lock_new(&l, test_cl, "rr:bad", &o), DLOCK_ENOTSUP);
    o.flags = RS | DLOCK_EXCLUSIVE;
    assert_int_equal(dlock_lock_new(&l, test_cl, "rr:bad", &o), DLOCK_EINVAL);
    assert_null(l);
    /* An adopted token would carry no owner id. */
    dlock_lock *r = test_lock_new(test_cl, "rr:bad", 10000, RS, 1, 20);
    dlock_lock *rw = test_lock_new(test_cl, "rr:bad", 10000, RX, 1, 20);
    assert_int_equal(dlock_lock_adopt(r, "0123456789abcdef"), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_adopt(rw, "0123456789abcdef"), DLOCK_EINVAL);
    /* A non-reentrant writer does not know its owner: an upgrade through
     * it waits for its own share and ends with its deadline (never hangs
     * past it); after the share's release it gets in. */
    dlock_lock *w = test_lock_new(test_cl, "rr:bad", 10000, DLOCK_EXCLUSIVE, 1, 20);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(w, 300), DLOCK_ETIMEDOUT);
    assert_true(test_now_ms() - t0 < 5000);
    /* A reentrant one does: the upgrade is refused at once, not after a
     * wait for itself (8 s here, so that code that waits fails the time
     * bound instead of hanging with DLOCK_WAIT_FOREVER). */
    t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(rw, 8000), DLOCK_EINVAL);
    assert_true(test_now_ms() - t0 < 3000);
    assert_non_null(strstr(dlock_lock_errmsg(rw), "upgrade and downgrade are not offered"));
    assert_int_equal(dlock_lock_state_get(rw), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_ENOTACQUIRED); /* beside a writer */
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    /* Downgrade: the reentrant writer's own reentrant reader, refused. */
    assert_int_equal(dlock_lock_acquire(rw, 0), DLOCK_OK);
    t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(r, 8000), DLOCK_EINVAL);
    assert_true(test_now_ms() - t0 < 3000);
    assert_int_equal(dlock_lock_release(rw), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    dlock_lock_free(w);
    dlock_lock_free(r);
    dlock_lock_free(rw);
}

/* Another thread of the same client: another owner (a writer's try). */
static void *try_writer_from_thread(void *p)
{
    try_arg *a = p;
    dlock_lock *l = test_lock_new(a->c, "rr:x", 10000, RX, 1, 20);
    a->rc = dlock_lock_acquire(l, 0);
    if (a->rc == DLOCK_OK)
        dlock_lock_release(l);
    dlock_lock_free(l);
    return NULL;
}

static void reentrant_writer_counts_and_keeps_its_fence(void **state)
{
    (void)state;
    dlock_lock *w = test_lock_new(test_cl, "rr:x", 10000, RX, 1, 20);
    dlock_lock *w2 = test_lock_new(test_cl, "rr:x", 10000, RX, 1, 20);
    dlock_lock *r = test_lock_new(test_cl, "rr:x", 10000, DLOCK_SHARED, 1, 20);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    uint64_t f = dlock_lock_fence(w);
    assert_true(f > 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_fence(w), f); /* the same hold */
    }
    /* Readers see a writer; so does another thread (another owner). */
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_ENOTACQUIRED);
    try_arg a = {test_cl, -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, try_writer_from_thread, &a), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(a.rc, DLOCK_ENOTACQUIRED);
    /* Another handle of the same owner cannot share the writer's one
     * token: refused at once (EINVAL), not left to wait for itself. */
    assert_int_equal(dlock_lock_acquire(w2, 2000), DLOCK_EINVAL);
    assert_non_null(strstr(dlock_lock_errmsg(w2), "through another handle"));
    dlock_holders_info hi;
    dlock_holder h[2];
    assert_int_equal(dlock_client_holders(test_cl, "rr:x", 0, &hi, h, 2), DLOCK_OK);
    assert_int_equal(hi.mode, DLOCK_HOLD_EXCLUSIVE);
    assert_string_equal(h[0].token, dlock_lock_token(w));
    for (int i = 0; i < 2; i++) {
        assert_int_equal(dlock_lock_release(w), DLOCK_OK);
        assert_int_equal(test_key_exists(&test_srv, "rr:x"), 1);
        assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_ENOTACQUIRED);
    }
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "rr:x"), 0);
    assert_int_equal(dlock_lock_release(w), DLOCK_ENOTHELD);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK); /* a new hold: a new fence */
    /* f + 2: the reader's grant between raised the counter too (the guard
     * of a break, shared_acquire.lua) */
    assert_int_equal(dlock_lock_fence(w), f + 2);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(w);
    dlock_lock_free(w2);
    dlock_lock_free(r);
}

static void auto_renew_keeps_a_reentered_writer(void **state)
{
    (void)state;
    dlock_lock *w = test_lock_new(test_cl, "rr:xrenew", 300, RX | DLOCK_AUTO_RENEW, 1, 20);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    test_sleep_ms(1500); /* five TTLs */
    assert_int_equal(dlock_lock_state_get(w), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    test_sleep_ms(900);
    assert_int_equal(dlock_lock_state_get(w), DLOCK_STATE_HELD);
    assert_int_equal(test_key_exists(&test_srv, "rr:xrenew"), 1);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "rr:xrenew"), 0);
    dlock_lock_free(w);
}

/* ---- three nodes ---------------------------------------------------------- */

#define N 3
static test_redis nodes[N];

static int nodes_setup(void **state)
{
    (void)state;
    return test_redis_start_many(nodes, N, NULL);
}

static int nodes_teardown(void **state)
{
    (void)state;
    test_redis_stop_many(nodes, N);
    return 0;
}

static void redlock_reentrant_readers(void **state)
{
    (void)state;
    const char *urls[N];
    for (int i = 0; i < N; i++)
        urls[i] = nodes[i].url;
    dlock_client *c = test_client_new(urls, N, NULL);
    dlock_lock *r = test_lock_new(c, "rr:red", 10000, RS, 1, 20);
    dlock_lock *w = test_lock_new(c, "rr:red", 10000, DLOCK_EXCLUSIVE, 1, 20);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 50), DLOCK_ETIMEDOUT); /* marks on all three */
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(test_key_exists(&nodes[i], "rr:red"), 0);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    /* A reentrant writer on three nodes: one fence, N releases. */
    dlock_lock *rw = test_lock_new(c, "rr:red", 10000, RX, 1, 20);
    assert_int_equal(dlock_lock_acquire(rw, 0), DLOCK_OK);
    uint64_t f = dlock_lock_fence(rw);
    assert_int_equal(dlock_lock_acquire(rw, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(rw), f);
    assert_int_equal(dlock_lock_release(rw), DLOCK_OK);
    /* Its own reader: a downgrade, refused by every node at once (on
     * several nodes the code is DLOCK_ENOQUORUM, as for any node error;
     * the message says why). */
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(r, 8000), DLOCK_ENOQUORUM);
    assert_true(test_now_ms() - t0 < 3000);
    assert_non_null(strstr(dlock_lock_errmsg(r), "downgrade"));
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED); /* a plain writer: waits */
    assert_int_equal(dlock_lock_release(rw), DLOCK_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(test_key_exists(&nodes[i], "rr:red"), 0);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    dlock_lock_free(rw);
    dlock_lock_free(r);
    dlock_lock_free(w);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest one[] = {
        cmocka_unit_test_teardown(n_acquires_need_n_releases, test_srv_flush),
        cmocka_unit_test_teardown(reentry_passes_a_waiting_writer_new_readers_do_not,
                                  test_srv_flush),
        cmocka_unit_test_teardown(waiting_writer_gets_in_after_the_last_release, test_srv_flush),
        cmocka_unit_test_teardown(auto_renew_keeps_a_reentered_share, test_srv_flush),
        cmocka_unit_test_teardown(combinations_still_refused, test_srv_flush),
        cmocka_unit_test_teardown(a_share_whose_lease_ended_is_taken_anew, test_srv_flush),
        cmocka_unit_test_teardown(reentrant_writer_counts_and_keeps_its_fence, test_srv_flush),
        cmocka_unit_test_teardown(auto_renew_keeps_a_reentered_writer, test_srv_flush),
    };
    const struct CMUnitTest three[] = {
        cmocka_unit_test(redlock_reentrant_readers),
    };
    int failed = cmocka_run_group_tests_name("reentrant shared, one node", one,
                                             test_srv_client_setup, test_srv_client_teardown);
    failed += cmocka_run_group_tests_name("reentrant shared, three nodes", three, nodes_setup,
                                          nodes_teardown);
    return failed;
}
