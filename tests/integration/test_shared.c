/* SPDX-License-Identifier: BSD-3-Clause */
/* Read-write locks (DLOCK_SHARED / DLOCK_EXCLUSIVE) against real
 * redis-servers: readers share and writers exclude (census kept by the
 * processes), a crashed reader's share ends with its own lease, writer
 * preference (a stream of readers does not starve a writer), fencing for
 * writers, auto-renew, wake-up on release, adopt of a share or of the
 * write hold, kinds that do not mix on one name, bad arguments, and the same on three nodes (Redlock). */
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

typedef struct ctx {
    const char *url;
    const char *name;
    test_census *cs;
    int rounds;
} ctx;

static dlock_lock *rw_lock(dlock_client *c, const char *name, unsigned flags, int64_t ttl_ms)
{
    return test_lock_new(c, name, ttl_ms, flags, 1, 20);
}

/* A worker process: even i read, odd i write, x->rounds sections. */
static int rw_worker(int i, void *arg)
{
    ctx *x = arg;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    int shared = i % 2 == 0;
    dlock_lock_options o = test_kinds_worker_options(20, shared ? DLOCK_SHARED : DLOCK_EXCLUSIVE);
    if (dlock_client_new(&c, &x->url, 1, NULL, NULL, 0) != DLOCK_OK ||
        dlock_lock_new(&l, c, x->name, &o) != DLOCK_OK)
        return 1;
    /* 2000 yields: stay a little, readers overlap */
    return test_census_rounds(x->cs, c, l, x->rounds, shared, 0, 2000);
}

static void readers_share_and_writers_exclude(void **state)
{
    (void)state;
    test_census *cs = test_census_new();
    assert_non_null(cs);
    ctx x = {test_srv.url, "rw:census", cs, 60};
    assert_int_equal(test_run_procs(6, rw_worker, &x), 0);
    printf("# sections %d, most readers at once %d, violations %d, errors %d\n",
           atomic_load(&cs->sections), atomic_load(&cs->max_readers),
           atomic_load(&cs->violations), atomic_load(&cs->errors));
    assert_int_equal(atomic_load(&cs->violations), 0);
    assert_int_equal(atomic_load(&cs->errors), 0);
    assert_int_equal(atomic_load(&cs->sections), 6 * 60);
    test_census_free(cs);

    /* Two readers hold at once, try-once; a writer is kept out. */
    dlock_lock *r1 = rw_lock(test_cl, "rw:two", DLOCK_SHARED, 10000);
    dlock_lock *r2 = rw_lock(test_cl, "rw:two", DLOCK_SHARED, 10000);
    dlock_lock *w = rw_lock(test_cl, "rw:two", DLOCK_EXCLUSIVE, 10000);
    assert_int_equal(dlock_lock_acquire(r1, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r2, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(r1), 0); /* readers hold no fencing token */
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED);
    dlock_holders_info hi;
    dlock_holder h[4];
    assert_int_equal(dlock_client_holders(test_cl, "rw:two", 0, &hi, h, 4), DLOCK_OK);
    assert_int_equal(hi.mode, DLOCK_HOLD_SHARED);
    assert_int_equal(hi.count, 2);
    /* A writer that tries once does not wait: it leaves no mark (dlock(1);
     * before the fix readers were kept out 2.4 s by it). */
    assert_int_equal(hi.writer_waiting_ms, -1);
    dlock_lock *r3 = rw_lock(test_cl, "rw:two", DLOCK_SHARED, 10000);
    assert_int_equal(dlock_lock_acquire(r3, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r3), DLOCK_OK);
    /* A writer that waits leaves it, and keeps new readers back. */
    assert_int_equal(dlock_lock_acquire(w, 50), DLOCK_ETIMEDOUT);
    assert_int_equal(dlock_client_holders(test_cl, "rw:two", 0, &hi, h, 4), DLOCK_OK);
    assert_true(hi.writer_waiting_ms > 0);
    assert_int_equal(dlock_lock_acquire(r3, 0), DLOCK_ENOTACQUIRED);
    dlock_lock_free(r3);
    assert_true(h[0].ttl_ms > 0 && h[0].ttl_ms <= 10000);
    assert_true(!strcmp(h[0].token, dlock_lock_token(r1)) || !strcmp(h[0].token, dlock_lock_token(r2)));
    assert_int_equal(dlock_lock_release(r1), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r1), DLOCK_ENOTHELD);
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r1, 0), DLOCK_ENOTACQUIRED); /* beside a writer: no */
    assert_int_equal(dlock_client_holders(test_cl, "rw:two", 0, &hi, h, 4), DLOCK_OK);
    assert_int_equal(hi.mode, DLOCK_HOLD_EXCLUSIVE);
    assert_int_equal(hi.count, 1);
    assert_string_equal(h[0].token, dlock_lock_token(w));
    assert_int_equal(hi.writer_waiting_ms, -1); /* the grant took its mark away */
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
}

/* A reader that dies holding a short lease: its share ends with that lease
 * while another reader (long lease) stays. */
static void crashed_reader_share_ends_with_its_own_lease(void **state)
{
    (void)state;
    dlock_lock *keep = rw_lock(test_cl, "rw:crash", DLOCK_SHARED, 30000);
    assert_int_equal(dlock_lock_acquire(keep, 0), DLOCK_OK);
    pid_t pid = test_fork_child();
    if (pid == 0) {
        dlock_client *c = NULL;
        dlock_lock *l = NULL;
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 700;
        o.flags = DLOCK_SHARED | DLOCK_AUTO_RENEW;
        if (dlock_client_new(&c, (const char *[]){test_srv.url}, 1, NULL, NULL, 0) ||
            dlock_lock_new(&l, c, "rw:crash", &o) || dlock_lock_acquire(l, 0))
            _exit(1);
        raise(SIGKILL); /* no release, no more renewals */
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    dlock_holders_info hi;
    assert_int_equal(dlock_client_holders(test_cl, "rw:crash", 0, &hi, NULL, 0), DLOCK_OK);
    assert_int_equal(hi.count, 2);
    int64_t t0 = test_now_ms();
    while (hi.count == 2 && test_now_ms() - t0 < 5000) {
        test_sleep_ms(20);
        assert_int_equal(dlock_client_holders(test_cl, "rw:crash", 0, &hi, NULL, 0), DLOCK_OK);
    }
    printf("# the dead reader's share ended %lld ms after its death (lease 700 ms)\n",
           (long long)(test_now_ms() - t0));
    assert_int_equal(hi.count, 1);
    assert_true(test_now_ms() - t0 < 2000);
    /* The key lives with the long lease, and goes with its release. */
    assert_true(test_key_pttl(&test_srv, "rw:crash") > 20000);
    assert_int_equal(dlock_lock_release(keep), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "rw:crash"), 0);
    dlock_lock_free(keep);
}

/* Three reader processes keep the lock read-held at all times: each leaves
 * only once another reader is in (a relay), or after 300 ms if none can
 * come in. A writer that waits must still get in. Without the
 * writer-waiting mark a new reader always joins before the last one
 * leaves, the lock is never free, and the writer waits out its whole
 * deadline: this test then fails (checked by disabling the mark check in
 * shared_acquire.lua). */
static int stream_reader(int i, void *arg)
{
    ctx *x = arg;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    (void)i;
    dlock_lock_options o = test_kinds_worker_options(5, DLOCK_SHARED);
    if (dlock_client_new(&c, &x->url, 1, NULL, NULL, 0) != DLOCK_OK ||
        dlock_lock_new(&l, c, x->name, &o) != DLOCK_OK)
        return 1;
    int64_t end = test_now_ms() + 20000;
    while (!atomic_load(&x->cs->stop) && test_now_ms() < end) {
        if (dlock_lock_acquire(l, 100) != DLOCK_OK)
            continue; /* kept out by the waiting writer: expected */
        test_census_enter(x->cs, 1, 0);
        /* A relay: leave only once another reader is in (or after 300 ms
         * at most), so the lock is never free while readers can come in. */
        int64_t in = test_now_ms();
        while (!atomic_load(&x->cs->stop) && test_now_ms() - in < 300 &&
               (atomic_load(&x->cs->readers) < 2 || test_now_ms() - in < 10))
            test_sleep_ms(1);
        test_census_leave(x->cs, 1);
        dlock_lock_release(l);
    }
    dlock_lock_free(l);
    dlock_client_free(c);
    return 0;
}

static void a_stream_of_readers_does_not_starve_a_writer(void **state)
{
    (void)state;
    test_census *cs = test_census_new();
    ctx x = {test_srv.url, "rw:stream", cs, 0};
    pid_t pids[3];
    assert_int_equal(test_start_procs(pids, 3, stream_reader, &x), 0);
    /* Wait until readers are in, as the readers themselves count. */
    int64_t t0 = test_now_ms();
    while (atomic_load(&cs->max_readers) < 2 && test_now_ms() - t0 < 10000)
        test_sleep_ms(5);
    assert_true(atomic_load(&cs->max_readers) >= 2);
    dlock_lock *w = rw_lock(test_cl, "rw:stream", DLOCK_EXCLUSIVE, 10000);
    int64_t t1 = test_now_ms();
    int rc = dlock_lock_acquire(w, 8000);
    int64_t waited = test_now_ms() - t1;
    if (rc == DLOCK_OK) {
        test_census_enter(cs, 0, 0);
        test_census_leave(cs, 0);
        dlock_lock_release(w);
    }
    atomic_store(&cs->stop, 1);
    assert_int_equal(test_wait_procs(pids, 3), 0);
    printf("# writer waited %lld ms behind a stream of readers; reader sections %d\n",
           (long long)waited, atomic_load(&cs->sections));
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(atomic_load(&cs->violations), 0);
    dlock_lock_free(w);
    test_census_free(cs);
}

static void writer_fence_renewal_and_wakeup(void **state)
{
    (void)state;
    dlock_lock *w = test_lock_new(test_cl, "rw:fence", 10000, DLOCK_EXCLUSIVE, 1, 20);
    dlock_lock *p = test_lock_new(test_cl, "rw:fence", 10000, 0, 1, 20);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    uint64_t f1 = dlock_lock_fence(w);
    assert_true(f1 > 0);
    assert_int_equal(dlock_lock_acquire(p, 0), DLOCK_ENOTACQUIRED); /* a plain lock: same key */
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(p), f1 + 1); /* one counter for both */
    assert_int_equal(dlock_lock_release(p), DLOCK_OK);

    /* Auto-renew: a reader with a 300 ms lease is still there after 1.5 s. */
    dlock_lock *r = test_lock_new(test_cl, "rw:renew", 300, DLOCK_SHARED | DLOCK_AUTO_RENEW, 1, 20);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    test_sleep_ms(1500);
    assert_int_equal(dlock_lock_state_get(r), DLOCK_STATE_HELD);
    dlock_holders_info hi;
    assert_int_equal(dlock_client_holders(test_cl, "rw:renew", 0, &hi, NULL, 0), DLOCK_OK);
    assert_int_equal(hi.count, 1);
    /* Wake-up: a writer waits behind the reader (its sleep without a
     * message would be the 1 s safety poll or the reader's TTL); the
     * release message lets it in at once. */
    pid_t pid = test_fork_child();
    if (pid == 0) {
        dlock_client *c = NULL;
        dlock_lock *l = NULL;
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.flags = DLOCK_EXCLUSIVE;
        o.retry_min_ms = 5000;
        o.retry_max_ms = 5000;
        if (dlock_client_new(&c, (const char *[]){test_srv.url}, 1, NULL, NULL, 0) ||
            dlock_lock_new(&l, c, "rw:renew", &o))
            _exit(2);
        int64_t t = test_now_ms();
        if (dlock_lock_acquire(l, 20000) != DLOCK_OK)
            _exit(3);
        int64_t got = test_now_ms() - t;
        dlock_lock_release(l);
        _exit(got < 5000 ? 0 : 4);
    }
    /* Release once the writer waits (its mark is there). */
    int64_t t0 = test_now_ms();
    do {
        test_sleep_ms(10);
        assert_int_equal(dlock_client_holders(test_cl, "rw:renew", 0, &hi, NULL, 0), DLOCK_OK);
    } while (hi.writer_waiting_ms < 0 && test_now_ms() - t0 < 5000);
    assert_true(hi.writer_waiting_ms > 0);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    dlock_lock_free(w);
    dlock_lock_free(p);
    dlock_lock_free(r);
}

/* dlock_lock_adopt() on a read-write lock: a reader's token is one share
 * (extend and release act on that share alone, not on the others), a
 * writer's token is the write hold. Reentrant handles refuse adopt
 * (test_shared_reentrant). */
static void adopt_acts_on_one_share_or_on_the_write_hold(void **state)
{
    (void)state;
    char tok[DLOCK_TOKEN_MAX + 1];
    dlock_lock *a = rw_lock(test_cl, "rw:adopt", DLOCK_SHARED, 15000);
    dlock_lock *b = rw_lock(test_cl, "rw:adopt", DLOCK_SHARED, 15000);
    dlock_lock *c = rw_lock(test_cl, "rw:adopt", DLOCK_SHARED, 120000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    snprintf(tok, sizeof tok, "%s", dlock_lock_token(a));
    assert_int_equal(dlock_lock_adopt(c, tok), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(c), DLOCK_STATE_HELD);
    /* a's share now ends in 120 s: the key lives that long (b's: 15 s). */
    assert_int_equal(dlock_lock_extend(c, 0), DLOCK_OK);
    assert_true(test_key_pttl(&test_srv, "rw:adopt") > 60000);
    assert_int_equal(dlock_lock_release(c), DLOCK_OK);
    assert_int_equal(test_cmd_int(&test_srv, "ZCARD rw:adopt"), 1); /* b's share */
    assert_int_equal(dlock_lock_release(a), DLOCK_ENOTOWNER);        /* released by c */
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "rw:adopt"), 0);

    dlock_lock *w = rw_lock(test_cl, "rw:adopt", DLOCK_EXCLUSIVE, 60000);
    dlock_lock *v = rw_lock(test_cl, "rw:adopt", DLOCK_EXCLUSIVE, 60000);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    snprintf(tok, sizeof tok, "%s", dlock_lock_token(w));
    assert_int_equal(dlock_lock_adopt(v, tok), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_ENOTACQUIRED); /* a writer holds it */
    assert_int_equal(dlock_lock_release(v), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, "rw:adopt"), 0);
    assert_int_equal(dlock_lock_release(w), DLOCK_EEXPIRED); /* gone, released by v */
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(c);
    dlock_lock_free(w);
    dlock_lock_free(v);
}

static void kinds_that_do_not_mix_and_bad_arguments(void **state)
{
    (void)state;
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = DLOCK_SHARED | DLOCK_EXCLUSIVE;
    assert_int_equal(dlock_lock_new(&l, test_cl, "rw:bad", &o), DLOCK_EINVAL);
    assert_null(l);
    o.flags = DLOCK_EXCLUSIVE | DLOCK_REENTRANT | DLOCK_FAIR; /* reentrant: test_shared_reentrant */
    assert_int_equal(dlock_lock_new(&l, test_cl, "rw:bad", &o), DLOCK_ENOTSUP);
    o.flags = DLOCK_SHARED | DLOCK_FAIR;
    assert_int_equal(dlock_lock_new(&l, test_cl, "rw:bad", &o), DLOCK_ENOTSUP);
    o.flags = DLOCK_EXCLUSIVE | DLOCK_FAIR;
    assert_int_equal(dlock_lock_new(&l, test_cl, "rw:bad", &o), DLOCK_ENOTSUP);
    o.flags = DLOCK_SHARED;
    assert_int_equal(dlock_lock_new(&l, test_cl, "", &o), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new(&l, test_cl, NULL, &o), DLOCK_EINVAL);
    assert_int_equal(dlock_lock_new(NULL, test_cl, "rw:bad", &o), DLOCK_EINVAL);

    /* A plain lock where readers are: a clear WRONGTYPE, nothing written;
     * a reader where a plain lock is: held by another owner. */
    dlock_lock *r = rw_lock(test_cl, "rw:mix", DLOCK_SHARED, 10000);
    dlock_lock *p = rw_lock(test_cl, "rw:mix", 0, 10000);
    dlock_lock *re = rw_lock(test_cl, "rw:mix", DLOCK_REENTRANT, 10000);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p, 0), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_acquire(re, 0), DLOCK_EWRONGTYPE);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_ENOTACQUIRED);
    assert_non_null(strstr(dlock_lock_errmsg(r), "held by another owner"));
    assert_int_equal(dlock_lock_release(p), DLOCK_OK);
    /* A reader whose share was taken away: its release is refused. */
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    test_cmd_int(&test_srv, "ZREM rw:mix %s", dlock_lock_token(r));
    test_cmd_int(&test_srv, "ZADD rw:mix %lld someone-else", 99999999999999LL);
    assert_int_equal(dlock_lock_release(r), DLOCK_ENOTOWNER);
    test_cmd_int(&test_srv, "DEL rw:mix");
    dlock_lock_free(r);
    dlock_lock_free(p);
    dlock_lock_free(re);
}

/* ---- three nodes ---------------------------------------------------------- */


static void redlock_readers_and_writers(void **state)
{
    (void)state;
    dlock_client *c = test_kinds_nodes_client();
    dlock_lock *r1 = rw_lock(c, "rw:red", DLOCK_SHARED, 10000);
    dlock_lock *r2 = rw_lock(c, "rw:red", DLOCK_SHARED | DLOCK_AUTO_RENEW, 500);
    dlock_lock *w = rw_lock(c, "rw:red", DLOCK_EXCLUSIVE, 10000);
    assert_int_equal(dlock_lock_acquire(r1, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r2, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED);
    /* A reader on a minority only does not keep a writer out... */
    test_cmd_int(&test_kinds_nodes[1], "DEL rw:red");
    test_cmd_int(&test_kinds_nodes[2], "DEL rw:red");
    test_sleep_ms(800); /* r2 renews across it: its renewals fail on two nodes */
    assert_int_equal(dlock_lock_state_get(r2), DLOCK_STATE_LOST);
    assert_int_equal(dlock_lock_release(r1), DLOCK_EEXPIRED); /* gone on a majority */
    assert_int_equal(dlock_lock_acquire(w, 2000), DLOCK_OK);
    assert_true(dlock_lock_fence(w) > 0);
    assert_int_equal(dlock_lock_acquire(r1, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(r1);
    dlock_lock_free(r2);
    dlock_lock_free(w);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest one[] = {
        cmocka_unit_test_teardown(readers_share_and_writers_exclude, test_srv_flush),
        cmocka_unit_test_teardown(crashed_reader_share_ends_with_its_own_lease, test_srv_flush),
        cmocka_unit_test_teardown(a_stream_of_readers_does_not_starve_a_writer, test_srv_flush),
        cmocka_unit_test_teardown(writer_fence_renewal_and_wakeup, test_srv_flush),
        cmocka_unit_test_teardown(adopt_acts_on_one_share_or_on_the_write_hold, test_srv_flush),
        cmocka_unit_test_teardown(kinds_that_do_not_mix_and_bad_arguments, test_srv_flush),
    };
    const struct CMUnitTest three[] = {
        cmocka_unit_test(redlock_readers_and_writers),
    };
    int failed = cmocka_run_group_tests_name("shared, one node", one, test_srv_client_setup,
                                             test_srv_client_teardown);
    failed += cmocka_run_group_tests_name("shared, three nodes", three, test_kinds_nodes_setup,
                                          test_kinds_nodes_teardown);
    return failed;
}
