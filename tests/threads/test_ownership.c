/* SPDX-License-Identifier: BSD-3-Clause */
/* Ownership safety under faults (issue 22), against a real redis-server:
 * an undo takes back only what its own attempt added; unknown outcomes are
 * undone exactly once; a handle that holds nothing is never renewed; the
 * watchdog keeps an explicit extend; a script that fails writes nothing; a
 * full server is a refusal, not an unknown outcome; cancel does not wait
 * for an attempt in flight; on_lost may release its own lock; a client
 * inherited across fork() is inert in the child.
 *
 * Faults come from the server itself: CLIENT PAUSE + CLIENT KILL, DEBUG
 * SLEEP, CONFIG SET maxclients / maxmemory, SIGSTOP. Helper threads only
 * run admin commands and record results; the main thread asserts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_delayed.h"
#include "test_util.h"
#include "test_waiter.h"

/* ---- helpers ------------------------------------------------------------ */

static dlock_client *client_io(int io_timeout_ms)
{
    return test_client_timeouts(&test_srv, 1, 0, io_timeout_ms);
}

/* The hold count stored for `owner` in the lock's hash; -1 if absent. */
static long long holds_on(const char *key, const char *owner)
{
    char *v = test_cmd_str_or_nil(&test_srv, "HGET %s %s", key, owner);
    long long n = v ? strtoll(v, NULL, 10) : -1;
    free(v);
    return n;
}

/* PING answers again (after a DEBUG SLEEP or a CLIENT PAUSE). */
static int server_answers(void *arg)
{
    (void)arg;
    redisReply *r = test_redis_cmd(&test_srv, "PING");
    int ok = r != NULL;
    if (r)
        freeReplyObject(r);
    return ok;
}

/* ---- item 6: a script that can fail writes nothing ---------------------- */

static void acquire_with_a_bad_fence_counter(unsigned flags, const char *name)
{
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *l = test_lock_new(c, name, 10000, flags, 5, 20);
    char fence[128];
    size_t fl = test_helper_key(fence, sizeof fence, name, "fence");

    freeReplyObject(test_cmd_bin(&test_srv, "SET %b abc", fence, fl));
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_EWRONGTYPE);
    print_message("%s: %s\n", name, dlock_lock_errmsg(l));
    assert_non_null(strstr(dlock_lock_errmsg(l), "fencing counter"));
    assert_int_equal(test_key_exists(&test_srv, name), 0); /* nothing written */
    redisReply *r = test_cmd_bin(&test_srv, "GET %b", fence, fl);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "abc");
    freeReplyObject(r);

    /* Another type than a string counter. */
    freeReplyObject(test_cmd_bin(&test_srv, "DEL %b", fence, fl));
    freeReplyObject(test_cmd_bin(&test_srv, "HSET %b someone 1", fence, fl));
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_EWRONGTYPE);
    assert_int_equal(test_key_exists(&test_srv, name), 0);

    /* A counter too large to count on exactly. */
    freeReplyObject(test_cmd_bin(&test_srv, "DEL %b", fence, fl));
    freeReplyObject(test_cmd_bin(&test_srv, "SET %b 9223372036854775807", fence, fl));
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_EWRONGTYPE);
    assert_int_equal(test_key_exists(&test_srv, name), 0);

    /* A sound counter works as before. */
    freeReplyObject(test_cmd_bin(&test_srv, "DEL %b", fence, fl));
    freeReplyObject(test_cmd_bin(&test_srv, "SET %b 41", fence, fl));
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_fence(l), 42);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void acquire_with_a_bad_fence_counter_leaves_no_lock_behind(void **state)
{
    (void)state;
    acquire_with_a_bad_fence_counter(0, "own:fence-plain");
    acquire_with_a_bad_fence_counter(DLOCK_REENTRANT, "own:fence-reentrant");
    acquire_with_a_bad_fence_counter(DLOCK_FAIR, "own:fence-fair");
}

static void fair_release_with_a_bad_fence_counter_hands_nothing_over(void **state)
{
    (void)state;
    const char *name = "own:fair-release-fence";
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *a = test_lock_new(c, name, 10000, DLOCK_FAIR, 5, 20);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char *tok = strdup(dlock_lock_token(a));
    /* A waiter in line, by hand: queue entry and liveness key (KEY NUL w
     * NUL token). */
    char q[128], w[128], fence[128];
    size_t ql = test_helper_key(q, sizeof q, name, "q");
    size_t wl = test_helper_key(w, sizeof w, name, "w");
    w[wl++] = '\0';
    memcpy(w + wl, "waiter1", 7);
    wl += 7;
    size_t fl = test_helper_key(fence, sizeof fence, name, "fence");
    freeReplyObject(test_cmd_bin(&test_srv, "RPUSH %b waiter1", q, ql));
    freeReplyObject(test_cmd_bin(&test_srv, "SET %b 10000 PX 10000", w, wl));
    freeReplyObject(test_cmd_bin(&test_srv, "SET %b abc", fence, fl));
    assert_int_equal(dlock_lock_release(a), DLOCK_EWRONGTYPE);
    /* Nothing changed: still our token, the waiter still in line. */
    test_assert_key_value(&test_srv, name, tok);
    redisReply *r = test_cmd_bin(&test_srv, "LLEN %b", q, ql);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    free(tok);
    dlock_lock_free(a);
    dlock_client_free(c);
}

/* ---- item 1: an undo never takes another handle's hold ------------------ */

static void unknown_acquire_of_a_second_handle_leaves_the_first_holding(void **state)
{
    (void)state;
    const char *name = "own:re-undo";
    dlock_client *c = client_io(1000);
    dlock_lock *h1 = test_lock_new(c, name, 30000, DLOCK_REENTRANT, 5, 20);
    dlock_lock *h2 = test_lock_new(c, name, 30000, DLOCK_REENTRANT, 5, 20);
    assert_int_equal(dlock_lock_acquire(h1, 0), DLOCK_OK);
    char owner[DLOCK_TOKEN_MAX + 1];
    snprintf(owner, sizeof owner, "%s", dlock_lock_token(h1));

    /* H2's acquire reaches the server while writes are paused, and its
     * connection is killed before it runs: outcome unknown. The undo that
     * follows waits behind the pause and runs when it ends, within the I/O
     * timeout. */
    test_delayed kill;
    test_cut_off_next_command(&kill, &test_srv);
    int rc = dlock_lock_acquire(h2, 0);
    test_delayed_join(&kill);
    print_message("H2: %s (%s)\n", dlock_errname(rc), dlock_lock_errmsg(h2));
    assert_int_equal(rc, DLOCK_EUNKNOWN);
    assert_int_equal(dlock_lock_state_get(h2), DLOCK_STATE_UNLOCKED);
    test_sleep_ms(300); /* whatever was queued has run */

    /* H1 still holds, alone, and nobody else gets in. */
    assert_int_equal(dlock_lock_state_get(h1), DLOCK_STATE_HELD);
    assert_int_equal(holds_on(name, owner), 1);
    dlock_client *other_c = test_client_for(&test_srv, NULL);
    dlock_lock *other = test_lock_new(other_c, name, 30000, DLOCK_REENTRANT, 5, 20);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_ENOTACQUIRED);

    /* H2 works again once its undo is answered; then both release. */
    assert_int_equal(dlock_lock_acquire(h2, 0), DLOCK_OK);
    assert_int_equal(holds_on(name, owner), 2);
    assert_int_equal(dlock_lock_release(h2), DLOCK_OK);
    assert_int_equal(dlock_lock_release(h1), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    dlock_lock_free(other);
    dlock_client_free(other_c);
    dlock_lock_free(h1);
    dlock_lock_free(h2);
    dlock_client_free(c);
}

/* ---- item 2: an unknown re-entry is undone exactly once ----------------- */

static void reentry_under_debug_sleep_is_counted_once(void **state)
{
    (void)state;
    const char *name = "own:re-sleep";
    dlock_client *c = client_io(400);
    dlock_lock *l = test_lock_new(c, name, 30000, DLOCK_REENTRANT, 5, 20);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    char owner[DLOCK_TOKEN_MAX + 1];
    snprintf(owner, sizeof owner, "%s", dlock_lock_token(l));

    test_delayed sleep;
    test_delayed_start(&sleep, &test_srv, 0, "DEBUG SLEEP 1.5");
    test_sleep_ms(100);
    int rc = dlock_lock_acquire(l, 10000); /* re-entry, waits through the sleep */
    test_delayed_join(&sleep);
    assert_true(test_wait_until(server_answers, NULL, 5000, 20));
    test_sleep_ms(200);
    print_message("re-entry: %s holds %u, server count %lld\n", dlock_errname(rc),
                  dlock_lock_hold_count(l), holds_on(name, owner));
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(dlock_lock_hold_count(l), 2);
    assert_int_equal(holds_on(name, owner), 2);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* The chaos row reentrant_conn_faults once showed two owners in their
 * sections at once, right after a DEBUG SLEEP: a worker held through one
 * handle, re-entered through a second with try-once, and the server slept
 * past the TTL. The re-entry returned only after its reply timeout (and,
 * before issue 20, its undo's), the first handle's lease (and the key: it
 * expired during the sleep) had ended meanwhile, and the worker entered
 * its section anyway.
 * What a caller must be able to see then: no validity left on the first
 * handle (a sibling's attempt with an unknown outcome extends nothing),
 * and another owner may take the lock. */
static void reentry_that_outlasts_the_lease_leaves_no_validity(void **state)
{
    (void)state;
    const char *name = "own:re-outlast";
    /* An I/O timeout longer than the 1 s TTL: the re-entry's one reply
     * timeout outlasts the lease (its undo is queued behind it). */
    dlock_client *c = client_io(1200);
    dlock_lock *h1 = test_lock_new(c, name, 1000, DLOCK_REENTRANT, 5, 20);
    dlock_lock *h2 = test_lock_new(c, name, 1000, DLOCK_REENTRANT, 5, 20);
    assert_int_equal(dlock_lock_acquire(h1, 0), DLOCK_OK);
    uint64_t f1 = dlock_lock_fence(h1);

    test_delayed sleep;
    test_delayed_start(&sleep, &test_srv, 0, "DEBUG SLEEP 2.0");
    test_sleep_ms(100);
    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(h2, 0); /* try-once re-entry into the stall */
    int64_t took = test_now_ms() - t0;
    int64_t left = dlock_lock_validity_ms(h1);
    test_delayed_join(&sleep);
    print_message("re-entry during the sleep: %s after %" PRId64 " ms; first handle: "
                  "%" PRId64 " ms of validity left\n", dlock_errname(rc), took, left);
    assert_int_not_equal(rc, DLOCK_OK);
    assert_true(took >= 1000); /* it outlasted the 1 s lease */
    assert_int_equal(left, 0);

    /* ... and the lock is free for another owner: a caller that entered
     * its section on h1 now would share it. */
    assert_true(test_wait_until(server_answers, NULL, 5000, 20));
    dlock_client *c2 = test_client_for(&test_srv, NULL);
    dlock_lock *other = test_lock_new(c2, name, 1000, DLOCK_REENTRANT, 5, 20);
    assert_int_equal(dlock_lock_acquire(other, 3000), DLOCK_OK);
    assert_true(dlock_lock_fence(other) > f1);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    (void)dlock_lock_release(h1); /* expired: whatever it says, it holds nothing */
    dlock_lock_free(other);
    dlock_client_free(c2);
    dlock_lock_free(h2);
    dlock_lock_free(h1);
    dlock_client_free(c);
}

/* Handles of one owner share one key, so one handle's operations set the
 * TTL the others' leases depend on. A re-entry, release or renewal through
 * a handle with a shorter TTL must never cut the key's TTL below what
 * another handle of the owner counts on: the server would let another
 * owner in while that handle still reports seconds of validity. */
static long long pttl_of(const char *name)
{
    return test_key_pttl(&test_srv, name);
}

static void shorter_ttl_of_a_sibling_handle_never_cuts_the_lease(void **state)
{
    (void)state;
    const char *name = "own:re-short-sibling";
    dlock_client *c = client_io(1000);
    dlock_lock *h1 = test_lock_new(c, name, 5000, DLOCK_REENTRANT, 5, 20);
    dlock_lock *h2 = test_lock_new(c, name, 300, DLOCK_REENTRANT, 5, 20);
    dlock_client *c2 = test_client_for(&test_srv, NULL);
    dlock_lock *other = test_lock_new(c2, name, 5000, DLOCK_REENTRANT, 5, 20);

    assert_int_equal(dlock_lock_acquire(h1, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h2, 0), DLOCK_OK); /* re-entry, TTL 300 */
    long long after_reentry = pttl_of(name);
    int64_t v1 = dlock_lock_validity_ms(h1);
    print_message("after the re-entry: key pttl %lld ms, first handle's validity %" PRId64
                  " ms\n", after_reentry, v1);
    assert_true(after_reentry >= v1);
    assert_int_equal(dlock_lock_release(h2), DLOCK_OK); /* holds remain: TTL refresh */
    long long after_release = pttl_of(name);
    v1 = dlock_lock_validity_ms(h1);
    print_message("after its release: key pttl %lld ms, first handle's validity %" PRId64
                  " ms\n", after_release, v1);
    assert_true(after_release >= v1);
    assert_int_equal(dlock_lock_acquire(h2, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(h2, 300), DLOCK_OK); /* an explicit extend */
    long long after_extend = pttl_of(name);
    v1 = dlock_lock_validity_ms(h1);
    print_message("after its extend(300): key pttl %lld ms, first handle's validity %" PRId64
                  " ms\n", after_extend, v1);
    assert_true(after_extend >= v1);
    assert_int_equal(dlock_lock_release(h2), DLOCK_OK);

    test_sleep_ms(600); /* past the short TTL */
    v1 = dlock_lock_validity_ms(h1);
    int rc = dlock_lock_acquire(other, 0);
    print_message("600 ms later: first handle %" PRId64 " ms of validity; another owner: %s\n",
                  v1, dlock_errname(rc));
    assert_true(v1 > 3000);
    assert_int_equal(rc, DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(h1), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(other);
    dlock_client_free(c2);
    dlock_lock_free(h2);
    dlock_lock_free(h1);
    dlock_client_free(c);
}

/* A release cut off before it ran is sent again, and counted once: the
 * other handle's newer release in between does not make it look stale. */
static void lost_release_of_one_handle_is_sent_again(void **state)
{
    (void)state;
    const char *name = "own:re-lost-release";
    dlock_client *c = client_io(1000);
    dlock_lock *h1 = test_lock_new(c, name, 30000, DLOCK_REENTRANT, 5, 20);
    dlock_lock *h2 = test_lock_new(c, name, 30000, DLOCK_REENTRANT, 5, 20);
    assert_int_equal(dlock_lock_acquire(h1, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h2, 0), DLOCK_OK);
    char owner[DLOCK_TOKEN_MAX + 1];
    snprintf(owner, sizeof owner, "%s", dlock_lock_token(h1));

    test_delayed kill;
    test_cut_off_next_command(&kill, &test_srv);
    int rc = dlock_lock_release(h2);
    test_delayed_join(&kill);
    assert_int_equal(rc, DLOCK_EUNKNOWN);
    test_sleep_ms(700);
    assert_int_equal(holds_on(name, owner), 2); /* it never ran */
    assert_int_equal(dlock_lock_release(h1), DLOCK_OK);
    assert_int_equal(holds_on(name, owner), 1);
    /* H2's next call sends it again first. */
    dlock_lock_free(h2);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(h1);
    dlock_client_free(c);
}

/* A release that ran but whose reply was lost is not applied twice. */
static void release_with_a_lost_reply_is_applied_once(void **state)
{
    (void)state;
    const char *name = "own:re-release-once";
    dlock_client *c = client_io(400);
    dlock_lock *h1 = test_lock_new(c, name, 30000, DLOCK_REENTRANT, 5, 20);
    dlock_lock *h2 = test_lock_new(c, name, 30000, DLOCK_REENTRANT, 5, 20);
    assert_int_equal(dlock_lock_acquire(h1, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(h2, 0), DLOCK_OK);
    char owner[DLOCK_TOKEN_MAX + 1];
    snprintf(owner, sizeof owner, "%s", dlock_lock_token(h1));
    test_delayed sleep;
    test_delayed_start(&sleep, &test_srv, 0, "DEBUG SLEEP 1");
    test_sleep_ms(100);
    assert_int_equal(dlock_lock_release(h2), DLOCK_EUNKNOWN); /* runs after the sleep */
    test_delayed_join(&sleep);
    assert_true(test_wait_until(server_answers, NULL, 5000, 20));
    test_sleep_ms(100);
    assert_int_equal(holds_on(name, owner), 1);
    dlock_lock_free(h2); /* sends it again: a no-op now */
    assert_int_equal(holds_on(name, owner), 1);
    assert_int_equal(dlock_lock_state_get(h1), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_release(h1), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(h1);
    dlock_client_free(c);
}

/* A plain or fair release cut off before it ran is sent again before the
 * handle's next acquire: the key (and the fair line) does not wait for
 * its TTL. */
static void lost_release_cut_off(unsigned flags, const char *name)
{
    dlock_client *c = client_io(1000);
    dlock_lock *l = test_lock_new(c, name, 30000, flags, 5, 20);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_delayed kill;
    test_cut_off_next_command(&kill, &test_srv);
    int rc = dlock_lock_release(l);
    test_delayed_join(&kill);
    assert_int_equal(rc, DLOCK_EUNKNOWN);
    test_sleep_ms(700);
    assert_int_equal(test_key_exists(&test_srv, name), 1); /* it never ran */
    dlock_client *c2 = test_client_for(&test_srv, NULL);
    dlock_lock *other = test_lock_new(c2, name, 30000, flags, 5, 20);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_ENOTACQUIRED);
    /* The handle's next acquire sends the release again first. */
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    dlock_lock_free(other);
    dlock_client_free(c2);
    /* And on free. */
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_cut_off_next_command(&kill, &test_srv);
    rc = dlock_lock_release(l);
    test_delayed_join(&kill);
    assert_int_equal(rc, DLOCK_EUNKNOWN);
    test_sleep_ms(700);
    assert_int_equal(test_key_exists(&test_srv, name), 1);
    dlock_lock_free(l);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_client_free(c);
}

static void plain_and_fair_release_cut_off_is_sent_again(void **state)
{
    (void)state;
    lost_release_cut_off(0, "own:lost-release-plain");
    lost_release_cut_off(DLOCK_FAIR, "own:lost-release-fair");
}

/* ---- item 3: a handle that holds nothing is never renewed -------------- */

static void failed_non_last_release_stops_the_renewal(void **state)
{
    (void)state;
    const char *name = "own:re-renew";
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *l = test_lock_new(c, name, 1500, DLOCK_REENTRANT | DLOCK_AUTO_RENEW, 5, 20);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    /* The server refuses writes (OOM); renewals (PEXPIRE) still pass. */
    test_cmd_status(&test_srv, "CONFIG SET maxmemory 1");
    int rc = dlock_lock_release(l);
    test_cmd_status(&test_srv, "CONFIG SET maxmemory 0");
    print_message("release under OOM: %s (%s)\n", dlock_errname(rc), dlock_lock_errmsg(l));
    assert_int_equal(rc, DLOCK_EREFUSED);
    assert_int_equal(dlock_lock_hold_count(l), 0);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    /* Nobody renews the count left behind: it ends with its TTL. */
    test_sleep_ms(3000);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- item 9 and issue 15 item 11: release and on_lost ------------------- */

typedef struct lost_rec {
    atomic_int calls;
    atomic_int release_rc; /* on_lost's own release, when asked */
    int release_in_cb;
} lost_rec;

static void on_lost_cb(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    lost_rec *r = arg;
    (void)why;
    if (r->release_in_cb)
        atomic_store(&r->release_rc, dlock_lock_release(l));
    atomic_fetch_add(&r->calls, 1);
}

static dlock_lock *lock_with_lost_cb(dlock_client *c, const char *name, int64_t ttl_ms,
                                     lost_rec *rec)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = DLOCK_AUTO_RENEW;
    o.on_lost = on_lost_cb;
    o.on_lost_arg = rec;
    return test_lock_with(c, name, &o);
}

static void release_during_the_round_that_finds_the_loss_returns_elost(void **state)
{
    (void)state;
    const char *name = "own:lost-race";
    dlock_client *c = test_client_for(&test_srv, NULL);
    int mismatches = 0, lost_seen = 0, n = 20;
    for (int i = 0; i < n; i++) {
        lost_rec rec = {0, 0, 0};
        dlock_lock *l = lock_with_lost_cb(c, name, 300, &rec); /* rounds every 100 ms */
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        int64_t t0 = test_now_ms();
        freeReplyObject(test_cmd(&test_srv, "DEL %s", name)); /* lost from now on */
        /* Hold the round that finds it (due ~90-100 ms) on the wire for a
         * while, and release while it is in flight. */
        test_sleep_ms((int)(80 - (test_now_ms() - t0)));
        test_cmd_status(&test_srv, "CLIENT PAUSE 60 WRITE");
        test_sleep_ms(25 + i % 10);
        int rc = dlock_lock_release(l);
        int lost = atomic_load(&rec.calls);
        lost_seen += lost;
        if (lost != (rc == DLOCK_ELOST)) {
            mismatches++;
            print_message("iteration %d: on_lost %d, release %s\n", i, lost, dlock_errname(rc));
        }
        dlock_lock_free(l);
        test_sleep_ms(60);
    }
    print_message("%d iterations: on_lost ran in %d, release disagreed in %d\n", n, lost_seen,
                  mismatches);
    assert_true(lost_seen > 0);
    assert_int_equal(mismatches, 0);
    dlock_client_free(c);
}

static void on_lost_may_release_its_own_lock(void **state)
{
    (void)state;
    const char *name = "own:lost-release";
    dlock_client *c = test_client_for(&test_srv, NULL);
    lost_rec rec = {0, 0, 1};
    dlock_lock *l = lock_with_lost_cb(c, name, 300, &rec);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    freeReplyObject(test_cmd(&test_srv, "DEL %s", name));
    int64_t give_up = test_now_ms() + 3000;
    while (atomic_load(&rec.calls) == 0 && test_now_ms() < give_up)
        test_sleep_ms(5);
    assert_int_equal(atomic_load(&rec.calls), 1);
    assert_int_equal(atomic_load(&rec.release_rc), DLOCK_ELOST);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    /* The handle and the watchdog go on working. */
    assert_int_equal(dlock_lock_release(l), DLOCK_ENOTHELD);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_sleep_ms(400); /* renewed past its TTL */
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- item 4: the watchdog keeps an explicit extend ---------------------- */

static void watchdog_renews_to_the_ttl_of_the_last_extend(void **state)
{
    (void)state;
    const char *name = "own:wd-extend";
    dlock_client *c = test_client_for(&test_srv, NULL);
    lost_rec rec = {0, 0, 0};
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 3000;
    o.flags = DLOCK_AUTO_RENEW;
    o.on_lost = on_lost_cb;
    o.on_lost_arg = &rec;
    dlock_lock *l = test_lock_with(c, name, &o);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);

    /* Longer: rounds keep 600 s, not the lock's 3 s. */
    assert_int_equal(dlock_lock_extend(l, 600000), DLOCK_OK);
    test_sleep_ms(2500); /* two 1 s rounds of the old schedule */
    long long pttl = test_key_pttl(&test_srv, name);
    print_message("after extend(600000) and 2.5 s: pttl %lld ms\n", pttl);
    assert_true(pttl > 590000);
    assert_true(dlock_lock_validity_ms(l) > 590000);

    /* Shorter: renewed to 300 ms every 100 ms, never lost. */
    assert_int_equal(dlock_lock_extend(l, 300), DLOCK_OK);
    test_sleep_ms(2000);
    pttl = test_key_pttl(&test_srv, name);
    print_message("after extend(300) and 2 s: pttl %lld ms, lost %d\n", pttl,
                  atomic_load(&rec.calls));
    assert_int_equal(atomic_load(&rec.calls), 0);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_true(pttl > 0 && pttl <= 300);

    /* extend(0): back to the lock's TTL. */
    assert_int_equal(dlock_lock_extend(l, 0), DLOCK_OK);
    test_sleep_ms(1200);
    pttl = test_key_pttl(&test_srv, name);
    assert_true(pttl > 1500 && pttl <= 3000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);

    /* A new hold starts from the lock's TTL again. */
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_sleep_ms(1200);
    pttl = test_key_pttl(&test_srv, name);
    assert_true(pttl > 1500 && pttl <= 3000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- item 7: a full server is a refusal --------------------------------- */

static void full_server_is_refused_not_unknown(void **state)
{
    (void)state;
    const char *name = "own:maxclients";
    redisContext *admin = test_redis_admin(&test_srv);
    assert_non_null(admin);
    redisReply *r = redisCommand(admin, "INFO clients");
    assert_non_null(r);
    const char *p = strstr(r->str, "connected_clients:");
    assert_non_null(p);
    long n = strtol(p + 18, NULL, 10);
    freeReplyObject(r);
    r = redisCommand(admin, "CONFIG SET maxclients %ld", n);
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);

    int bad = 0;
    for (int i = 0; i < 20; i++) {
        dlock_client *c = test_client_for(&test_srv, NULL); /* no pooled connection */
        dlock_lock *l = test_lock_new(c, name, 10000, i % 2 ? DLOCK_REENTRANT : 0, 5, 20);
        int rc = dlock_lock_acquire(l, 0);
        if (rc != DLOCK_EREFUSED || !strstr(dlock_lock_errmsg(l), "max number of clients")) {
            bad++;
            print_message("run %d: %s (%s)\n", i, dlock_errname(rc), dlock_lock_errmsg(l));
        }
        dlock_lock_free(l);
        dlock_client_free(c);
    }
    r = redisCommand(admin, "CONFIG SET maxclients 10000");
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(admin);
    assert_int_equal(bad, 0);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
}

/* ---- issue 15 item 7: a fair acquire with an unknown outcome ------------ */

static void fair_acquire_with_unknown_outcome_leaves_nothing_behind(void **state)
{
    (void)state;
    const char *name = "own:fair-unknown";
    dlock_client *ca = client_io(1000);
    dlock_lock *a = test_lock_new(ca, name, 30000, DLOCK_FAIR, 5, 20);
    test_delayed sleep;
    test_delayed_start(&sleep, &test_srv, 0, "DEBUG SLEEP 1.5");
    test_sleep_ms(100);
    int rc = dlock_lock_acquire(a, 0); /* runs when the server wakes */
    test_delayed_join(&sleep);
    print_message("fair acquire during DEBUG SLEEP: %s (%s)\n", dlock_errname(rc),
                  dlock_lock_errmsg(a));
    assert_int_equal(rc, DLOCK_EUNKNOWN);

    /* The next fair waiter gets it at once, not after A's 30 s TTL. */
    dlock_client *cb = test_client_for(&test_srv, NULL);
    dlock_lock *b = test_lock_new(cb, name, 30000, DLOCK_FAIR, 5, 20);
    int64_t t0 = test_now_ms();
    rc = dlock_lock_acquire(b, 10000);
    int64_t took = test_now_ms() - t0;
    print_message("next fair waiter: %s after %" PRId64 " ms\n", dlock_errname(rc), took);
    assert_int_equal(rc, DLOCK_OK);
    assert_true(took < 3000);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    dlock_lock_free(b);
    dlock_client_free(cb);
    dlock_lock_free(a);
    dlock_client_free(ca);
}

/* ---- item 5: fork() ------------------------------------------------------ */

/* In the child: every check that fails sets a bit of the exit status. */
static int child_uses_inherited_client(dlock_client *c, dlock_lock *held, dlock_lock *reent,
                                       dlock_lock *other)
{
    int bad = 0;
    alarm(10); /* a hang ends as SIGALRM, which the parent sees */
    if (dlock_lock_acquire(other, 0) != DLOCK_EINVAL || !strstr(dlock_lock_errmsg(other), "fork"))
        bad |= 1;
    if (dlock_lock_acquire(reent, 0) != DLOCK_EINVAL) /* same client id and thread number */
        bad |= 2;
    if (dlock_lock_release(held) != DLOCK_EINVAL || dlock_lock_extend(held, 0) != DLOCK_EINVAL ||
        dlock_lock_state_get(held) != DLOCK_STATE_UNLOCKED || dlock_lock_token(held) != NULL)
        bad |= 4;
    dlock_lock *fresh = NULL;
    if (dlock_lock_new(&fresh, c, "own:fork-new", NULL) != DLOCK_EINVAL)
        bad |= 8;
    /* Free releases nothing and does not hang on the watchdog's teardown. */
    dlock_lock_free(held);
    dlock_lock_free(reent);
    dlock_lock_free(other);
    dlock_client_free(c);
    /* A client made in the child works. */
    dlock_client *mine = NULL;
    const char *url = test_srv.url;
    dlock_lock *l = NULL;
    if (dlock_client_new(&mine, &url, 1, NULL, NULL, 0) != DLOCK_OK ||
        dlock_lock_new(&l, mine, "own:fork-child", NULL) != DLOCK_OK ||
        dlock_lock_acquire(l, 0) != DLOCK_OK || dlock_lock_release(l) != DLOCK_OK)
        bad |= 16;
    dlock_lock_free(l);
    dlock_client_free(mine);
    return bad;
}

static void client_inherited_across_fork_is_inert_in_the_child(void **state)
{
    (void)state;
    dlock_client *c = test_client_for(&test_srv, NULL);
    dlock_lock *held = test_lock_new(c, "own:fork-held", 1500, DLOCK_AUTO_RENEW, 5, 20);
    dlock_lock *reent = test_lock_new(c, "own:fork-re", 30000, DLOCK_REENTRANT, 5, 20);
    dlock_lock *other = test_lock_new(c, "own:fork-other", 30000, 0, 5, 20);
    assert_int_equal(dlock_lock_acquire(held, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(reent, 0), DLOCK_OK);
    char *tok = strdup(dlock_lock_token(held));
    /* A third owner holds "other". */
    dlock_client *third_c = test_client_for(&test_srv, NULL);
    dlock_lock *third = test_lock_new(third_c, "own:fork-other", 30000, 0, 5, 20);
    assert_int_equal(dlock_lock_acquire(third, 0), DLOCK_OK);

    pid_t pid = test_fork_child();
    if (pid == 0)
        _exit(child_uses_inherited_client(c, held, reent, other));
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    print_message("child: %s %d\n", WIFEXITED(st) ? "exit" : "signal",
                  WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);

    /* The parent's locks are untouched and still renewed; it goes on. */
    test_sleep_ms(2000); /* past the 1.5 s TTL */
    test_assert_key_value(&test_srv, "own:fork-held", tok);
    assert_int_equal(dlock_lock_state_get(held), DLOCK_STATE_HELD);
    assert_int_equal(test_key_exists(&test_srv, "own:fork-re"), 1);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(third), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    assert_int_equal(dlock_lock_release(reent), DLOCK_OK);
    assert_int_equal(dlock_lock_release(held), DLOCK_OK);
    free(tok);
    dlock_lock_free(third);
    dlock_client_free(third_c);
    dlock_lock_free(held);
    dlock_lock_free(reent);
    dlock_lock_free(other);
    dlock_client_free(c);
}

/* ---- item 8: cancel does not wait for an attempt in flight -------------- */

static void cancel_with_a_stalled_server(unsigned flags, const char *name)
{
    dlock_client *c = client_io(3000);
    dlock_lock *l = test_lock_new(c, name, 30000, flags, 5, 20);
    test_redis_pause(&test_srv);
    test_waiter w;
    assert_int_equal(test_waiter_start(&w, l, 20000, TEST_WAITER_KEEP), 0);
    test_sleep_ms(300); /* the attempt is on the wire, the server silent */
    int64_t t0 = test_now_ms();
    dlock_lock_cancel(l);
    while (!atomic_load(&w.done) && test_now_ms() - t0 < 10000)
        test_sleep_ms(1);
    int64_t took = test_now_ms() - t0;
    test_redis_resume(&test_srv);
    int wrc = test_waiter_join(&w);
    print_message("%s: cancel with the server stopped: %s after %" PRId64 " ms\n", name,
                  dlock_errname(wrc), took);
    assert_int_equal(wrc, DLOCK_ECANCELED);
    assert_true(took < 200);
    /* The attempt runs when the server resumes, and its undo right after. */
    assert_true(test_wait_until(server_answers, NULL, 5000, 20));
    test_sleep_ms(300);
    assert_int_equal(test_key_exists(&test_srv, name), 0);
    /* The handle goes on: a new wait is not cancelled by the old cancel. */
    assert_int_equal(dlock_lock_acquire(l, 1000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void cancel_ends_the_wait_while_an_attempt_is_in_flight(void **state)
{
    (void)state;
    cancel_with_a_stalled_server(0, "own:cancel-plain");
    cancel_with_a_stalled_server(DLOCK_REENTRANT, "own:cancel-reentrant");
    cancel_with_a_stalled_server(DLOCK_FAIR, "own:cancel-fair");
}

#define T(f) cmocka_unit_test_teardown(f, test_srv_flush)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(acquire_with_a_bad_fence_counter_leaves_no_lock_behind),
        T(fair_release_with_a_bad_fence_counter_hands_nothing_over),
        T(unknown_acquire_of_a_second_handle_leaves_the_first_holding),
        T(reentry_under_debug_sleep_is_counted_once),
        T(reentry_that_outlasts_the_lease_leaves_no_validity),
        T(shorter_ttl_of_a_sibling_handle_never_cuts_the_lease),
        T(lost_release_of_one_handle_is_sent_again),
        T(release_with_a_lost_reply_is_applied_once),
        T(plain_and_fair_release_cut_off_is_sent_again),
        T(failed_non_last_release_stops_the_renewal),
        T(release_during_the_round_that_finds_the_loss_returns_elost),
        T(on_lost_may_release_its_own_lock),
        T(watchdog_renews_to_the_ttl_of_the_last_extend),
        T(full_server_is_refused_not_unknown),
        T(fair_acquire_with_unknown_outcome_leaves_nothing_behind),
        T(client_inherited_across_fork_is_inert_in_the_child),
        T(cancel_ends_the_wait_while_an_attempt_is_in_flight),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
