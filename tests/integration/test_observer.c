/* SPDX-License-Identifier: BSD-3-Clause */
/* The observer hooks (dlock.h, dlock_observer) against a real
 * redis-server: each fires once per event with the right figures, on a
 * granted acquire, a try that finds the lock busy, a wait that takes
 * several tries and is woken by a message or finds the lock free by a
 * look, a release, a forget, a renewal round, a lease lost behind the
 * holder's back, a stalled node, a refused connection and a server out of
 * memory; dlock_client_stats() counts the same events.
 *
 * The events are recorded by tests/support/test_recorder.c (hooks run on
 * the caller's thread and on the watchdog's); cmocka asserts run on the
 * main thread only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_recorder.h"
#include "test_util.h"

#define PREFIX "obs-prefix:"

static dlock_client *obs_client(int io_timeout_ms)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.key_prefix = PREFIX;
    o.observer = &test_rec_observer;
    if (io_timeout_ms)
        o.io_timeout_ms = o.connect_timeout_ms = io_timeout_ms;
    return test_client_for(&test_srv, &o);
}

static int reset(void **state)
{
    (void)state;
    test_rec_reset();
    return test_srv_flush(state);
}

static dlock_stats stats_of(dlock_client *c)
{
    dlock_stats s;
    assert_int_equal(dlock_client_stats(c, &s, sizeof s), DLOCK_OK);
    assert_int_equal(s.size, sizeof s);
    return s;
}

static void granted_acquire_and_release_fire_once_each(void **state)
{
    (void)state;
    dlock_client *c = obs_client(0);
    dlock_lock *l = test_lock_new(c, "obs:a", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_recorder r = test_rec_seen();
    assert_int_equal(r.n_start, 1);
    assert_int_equal(r.n_end, 1);
    assert_string_equal(r.start_name[0], "obs:a"); /* as given: no key_prefix */
    assert_int_equal(r.start[0].wait_ms, 0);
    assert_int_equal(r.start[0].result, 0);
    assert_int_equal(r.start[0].size, sizeof(dlock_acquire_event));
    assert_string_equal(r.end_name[0], "obs:a");
    assert_string_equal(r.end_kind[0], "plain");
    assert_string_equal(r.end_backend[0], "redis");
    assert_int_equal(r.end[0].result, DLOCK_OK);
    assert_int_equal(r.end[0].attempts, 1);
    assert_true(r.end[0].duration_ns > 0 && r.end[0].duration_ns < 1000 * 1000000LL);
    assert_int_equal(r.n_hold, 0);

    usleep(60 * 1000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    r = test_rec_seen();
    assert_int_equal(r.n_hold, 1);
    assert_string_equal(r.hold_name[0], "obs:a");
    assert_int_equal(r.hold[0].how, DLOCK_HOLD_RELEASED);
    assert_int_equal(r.hold[0].reason, 0);
    assert_true(r.hold[0].hold_ns >= 60 * 1000000LL && r.hold[0].hold_ns < 2000 * 1000000LL);
    assert_int_equal(r.n_start, 1);
    assert_int_equal(r.n_node, 0);

    dlock_stats s = stats_of(c);
    assert_int_equal(s.acquires, 1);
    assert_int_equal(s.acquires_granted, 1);
    assert_int_equal(s.acquire_attempts, 1);
    assert_int_equal(s.holds_released, 1);
    assert_int_equal(s.acquire_duration.count, 1);
    assert_int_equal(s.hold_duration.count, 1);
    assert_true(s.hold_duration.sum_us >= 60000);
    /* 60 ms and more: not in the buckets up to 50 ms. */
    for (int i = 0; i < 6; i++)
        assert_int_equal(s.hold_duration.bucket[i], 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void a_busy_try_ends_once_with_its_answer(void **state)
{
    (void)state;
    dlock_client *c = obs_client(0);
    dlock_lock *holder = test_lock_new(c, "obs:busy", 5000, 0, 10, 200);
    dlock_lock *l = test_lock_new(c, "obs:busy", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED);
    test_recorder r = test_rec_seen();
    assert_int_equal(r.n_start, 2);
    assert_int_equal(r.n_end, 2);
    assert_int_equal(r.end[1].result, DLOCK_ENOTACQUIRED);
    assert_int_equal(r.end[1].attempts, 1);
    assert_int_equal(r.n_hold, 0); /* nothing held, nothing ended */
    dlock_stats s = stats_of(c);
    assert_int_equal(s.acquires, 2);
    assert_int_equal(s.acquires_busy, 1);
    assert_int_equal(s.acquires_failed, 0);
    dlock_lock_free(l);
    dlock_lock_free(holder);
    dlock_client_free(c);
}

static void *release_later(void *arg)
{
    usleep(150 * 1000);
    assert_int_equal(dlock_lock_release(arg), DLOCK_OK);
    return NULL;
}

/* A wait (flags: the kind) that a release 150 ms in wakes: the tries
 * are the attempts (at least min_tries: a fair hand-over grants without
 * another look), the release's message one push. */
static void check_woken_by_a_release(int flags, const char *name, const char *kind,
                                     unsigned min_tries)
{
    char pname[64];
    snprintf(pname, sizeof pname, PREFIX "%s", name);
    dlock_client *c = obs_client(0);
    dlock_client *other = test_client_for(&test_srv, NULL);
    dlock_lock *holder = test_lock_new(other, pname, 10000, flags, 10, 200);
    dlock_lock *l = test_lock_new(c, name, 5000, flags, 10, 200);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, holder), 0);
    assert_int_equal(dlock_lock_acquire(l, 3000), DLOCK_OK);
    pthread_join(t, NULL);
    test_recorder r = test_rec_seen();
    assert_int_equal(r.n_start, 1);
    assert_int_equal(r.n_end, 1);
    assert_int_equal(r.start[0].wait_ms, 3000);
    assert_string_equal(r.end_kind[0], kind);
    assert_int_equal(r.end[0].result, DLOCK_OK);
    assert_true(r.end[0].attempts >= min_tries);
    assert_true(r.end[0].duration_ns >= 140 * 1000000LL);
    assert_int_equal(r.n_wake, 1);
    assert_int_equal(r.wake[0].pushed, 1);
    dlock_stats s = stats_of(c);
    assert_int_equal(s.acquire_attempts, r.end[0].attempts);
    assert_int_equal(s.wakeups_pushed, 1);
    assert_int_equal(s.wakeups_looked, 0);
    dlock_lock_free(l);
    dlock_lock_free(holder);
    dlock_client_free(other);
    dlock_client_free(c);
}

/* After a wait on l that no message woke: a wake-up found by a look. */
static void check_found_by_a_look(dlock_client *c, dlock_lock *l)
{
    assert_int_equal(dlock_lock_acquire(l, 3000), DLOCK_OK);
    test_recorder r = test_rec_seen();
    assert_int_equal(r.n_end, 1);
    assert_true(r.end[0].attempts >= 2);
    assert_int_equal(r.n_wake, 1);
    assert_int_equal(r.wake[0].pushed, 0);
    assert_int_equal(stats_of(c).wakeups_looked, 1);
}

static void a_wait_woken_by_a_release_counts_its_tries_and_one_push(void **state)
{
    (void)state;
    check_woken_by_a_release(0, "obs:wait", "plain", 2);
}

static void a_wait_that_finds_the_lock_free_by_a_look_says_so(void **state)
{
    (void)state;
    dlock_client *c = obs_client(0);
    /* Another library's lock: a plain key that expires, publishing nothing. */
    test_cmd_status(&test_srv, "SET %s x PX 150", PREFIX "obs:look");
    dlock_lock *l = test_lock_new(c, "obs:look", 5000, 0, 10, 200);
    check_found_by_a_look(c, l);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Fair mode waits its own way (fair.c) and reports the same figures: its
 * looks are the attempts, a hand-over's message is a push. */
static void a_fair_wait_counts_its_looks_and_the_hand_over(void **state)
{
    (void)state;
    check_woken_by_a_release(DLOCK_FAIR, "obs:fair", "fair", 1);
}

/* A fair holder that goes silent (its key expires, no hand-over): the
 * waiter's next look finds the lock free, a wake-up found by a look. */
static void a_fair_wait_that_finds_the_lock_free_by_a_look_says_so(void **state)
{
    (void)state;
    dlock_client *c = obs_client(0);
    dlock_client *other = test_client_for(&test_srv, NULL);
    dlock_lock *holder = test_lock_new(other, PREFIX "obs:fairlook", 300, DLOCK_FAIR, 10, 200);
    dlock_lock *l = test_lock_new(c, "obs:fairlook", 5000, DLOCK_FAIR, 10, 200);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_forget(holder), DLOCK_OK); /* no release, no message */
    check_found_by_a_look(c, l);
    dlock_lock_free(l);
    dlock_lock_free(holder);
    dlock_client_free(other);
    dlock_client_free(c);
}

static void forget_ends_the_hold_once(void **state)
{
    (void)state;
    dlock_client *c = obs_client(0);
    dlock_lock *l = test_lock_new(c, "obs:forget", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_forget(l), DLOCK_OK);
    assert_int_equal(dlock_lock_forget(l), DLOCK_ENOTHELD);
    test_recorder r = test_rec_seen();
    assert_int_equal(r.n_hold, 1);
    assert_int_equal(r.hold[0].how, DLOCK_HOLD_FORGOTTEN);
    assert_int_equal(stats_of(c).holds_forgotten, 1);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static int rounds_seen(void *arg)
{
    (void)arg;
    return test_rec_seen().n_round >= 2;
}

static void a_renewal_round_reports_its_locks_and_the_lease_left(void **state)
{
    (void)state;
    dlock_client *c = obs_client(0);
    dlock_lock *l = test_lock_new(c, "obs:renew", 600, DLOCK_AUTO_RENEW, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_true(test_wait_until(rounds_seen, NULL, 3000, 10));
    test_recorder r = test_rec_seen();
    for (int i = 0; i < 2; i++) {
        assert_int_equal(r.round[i].size, sizeof(dlock_renewal_event));
        assert_int_equal(r.round[i].locks, 1);
        assert_int_equal(r.round[i].renewed, 1);
        assert_int_equal(r.round[i].failed, 0);
        assert_int_equal(r.round[i].lost, 0);
        assert_true(r.round[i].duration_ns > 0);
        /* Sent a third of the TTL (200 ms) into a 600 ms lease, less drift. */
        assert_true(r.round[i].lease_left_ns > 200 * 1000000LL);
        assert_true(r.round[i].lease_left_ns < 600 * 1000000LL);
    }
    dlock_stats s = stats_of(c);
    assert_true(s.renewal_rounds >= 2);
    assert_int_equal(s.renewal_rounds, s.renewal_duration.count);
    assert_int_equal(s.renewals, s.renewal_rounds);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static int hold_seen(void *arg)
{
    (void)arg;
    return test_rec_seen().n_hold >= 1;
}

static void a_lease_lost_behind_the_holders_back_ends_its_hold_once(void **state)
{
    (void)state;
    dlock_client *c = obs_client(0);
    dlock_lock *l = test_lock_new(c, "obs:lost", 600, DLOCK_AUTO_RENEW, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    (void)test_cmd_int(&test_srv, "DEL %s", PREFIX "obs:lost");
    assert_true(test_wait_until(hold_seen, NULL, 3000, 10));
    assert_true(test_wait_for_state(l, DLOCK_STATE_LOST, 1000));
    test_recorder r = test_rec_seen();
    assert_int_equal(r.n_hold, 1);
    assert_int_equal(r.hold[0].how, DLOCK_HOLD_LOST);
    assert_int_equal(r.hold[0].reason, DLOCK_LOST_NOT_OWNER);
    assert_true(r.n_round >= 1);
    assert_int_equal(r.round[r.n_round - 1].lost, 1);
    assert_int_equal(r.round[r.n_round - 1].failed, 1);
    /* The release that learns of the loss ends no second hold. */
    assert_int_equal(dlock_lock_release(l), DLOCK_ELOST);
    assert_int_equal(test_rec_seen().n_hold, 1);
    dlock_stats s = stats_of(c);
    assert_int_equal(s.holds_lost, 1);
    assert_int_equal(s.holds_released, 0);
    assert_int_equal(s.renewal_failures, 1);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* A set is its names: the lost name ends its hold, the set adds none (a
 * second end, with a hold time its handle never started, counted twice). */
static void a_lost_name_of_a_set_ends_one_hold(void **state)
{
    (void)state;
    dlock_client *c = obs_client(0);
    const char *names[] = {"obs:set1", "obs:set2"};
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 600;
    o.flags = DLOCK_AUTO_RENEW;
    dlock_lock *set = NULL;
    assert_int_equal(dlock_lock_new_multi(&set, c, names, 2, &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    (void)test_cmd_int(&test_srv, "DEL %s", PREFIX "obs:set1");
    assert_true(test_wait_for_state(set, DLOCK_STATE_LOST, 3000));
    usleep(100 * 1000); /* the set's state moves before its hooks would run */
    test_recorder r = test_rec_seen();
    assert_int_equal(r.n_hold, 1);
    assert_string_equal(r.hold_name[0], "obs:set1");
    assert_int_equal(r.hold[0].how, DLOCK_HOLD_LOST);
    assert_true(r.hold[0].hold_ns < 10 * 1000000000LL);
    assert_int_equal(stats_of(c).holds_lost, 1);
    dlock_lock_free(set);
    dlock_client_free(c);
}

/* dlock_lock_free() of a held handle releases it: that hold ends too. */
static void freeing_a_held_handle_ends_its_hold(void **state)
{
    (void)state;
    dlock_client *c = obs_client(0);
    dlock_lock *l = test_lock_new(c, "obs:free", 5000, DLOCK_AUTO_RENEW, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    dlock_lock_free(l);
    test_recorder r = test_rec_seen();
    assert_int_equal(r.n_hold, 1);
    assert_int_equal(r.hold[0].how, DLOCK_HOLD_RELEASED);
    assert_int_equal(stats_of(c).holds_released, 1);
    dlock_client_free(c);
}

static void a_stalled_node_is_one_timeout_event(void **state)
{
    (void)state;
    dlock_client *c = obs_client(200);
    dlock_lock *l = test_lock_new(c, "obs:stall", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* a pooled connection */
    test_redis_pause(&test_srv);
    int rc = dlock_lock_release(l);
    test_redis_resume(&test_srv);
    assert_int_equal(rc, DLOCK_EUNKNOWN);
    test_recorder r = test_rec_seen();
    assert_int_equal(r.n_node, 1);
    assert_int_equal(r.node[0].what, DLOCK_NODE_TIMEOUT);
    assert_int_equal(r.node[0].error, DLOCK_EUNKNOWN);
    char want[300];
    snprintf(want, sizeof want, "127.0.0.1:%d", test_srv.port);
    assert_string_equal(r.node_name[0], want);
    /* The release's answer never came: its hold ended with that code. */
    assert_int_equal(r.n_hold, 1);
    assert_int_equal(r.hold[0].how, DLOCK_HOLD_ENDED);
    assert_int_equal(r.hold[0].reason, DLOCK_EUNKNOWN);
    dlock_stats s = stats_of(c);
    assert_int_equal(s.node_errors, 1);
    assert_int_equal(s.holds_ended, 1);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static int failed_round_seen(void *arg)
{
    (void)arg;
    test_recorder r = test_rec_seen();
    for (int i = 0; i < r.n_round; i++)
        if (r.round[i].failed == 1)
            return 1;
    return 0;
}

static void a_round_on_a_stalled_node_reports_its_failure_and_the_timeout(void **state)
{
    (void)state;
    dlock_client *c = obs_client(100);
    dlock_lock *l = test_lock_new(c, "obs:stalled-round", 1500, DLOCK_AUTO_RENEW, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_redis_pause(&test_srv);
    int seen_failure = test_wait_until(failed_round_seen, NULL, 1200, 5);
    test_redis_resume(&test_srv);
    assert_true(seen_failure);
    test_recorder r = test_rec_seen();
    int i = 0;
    while (r.round[i].failed != 1)
        i++;
    assert_int_equal(r.round[i].locks, 1);
    assert_int_equal(r.round[i].renewed, 0);
    assert_int_equal(r.round[i].lost, 0); /* the lease still runs */
    assert_true(r.round[i].duration_ns >= 90 * 1000000LL); /* waited its I/O timeout */
    /* Every node error the stall caused is a timeout of this node. */
    assert_true(r.n_node >= 1);
    for (int k = 0; k < r.n_node; k++) {
        assert_int_equal(r.node[k].what, DLOCK_NODE_TIMEOUT);
        assert_int_equal(r.node[k].error, DLOCK_EUNKNOWN);
    }
    dlock_stats s = stats_of(c);
    assert_int_equal(s.node_errors, (uint64_t)r.n_node);
    assert_true(s.renewal_failures >= 1);
    /* Renewed again once the node answers: still held. */
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void *acquire_on(void *arg)
{
    static int rc;
    rc = dlock_lock_acquire(arg, 10000);
    return &rc;
}

/* A cancel ends the requests in flight: the caller's doing, not the
 * node's, so no node error (its I/O timeout, 5 s, never came). */
static void a_cancel_is_no_node_error(void **state)
{
    (void)state;
    dlock_client *c = obs_client(5000);
    dlock_lock *l = test_lock_new(c, "obs:cancel", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* a pooled connection */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    test_redis_pause(&test_srv);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, acquire_on, l), 0);
    usleep(300 * 1000);
    dlock_lock_cancel(l);
    void *rc;
    assert_int_equal(pthread_join(t, &rc), 0);
    test_redis_resume(&test_srv);
    assert_int_equal(*(int *)rc, DLOCK_ECANCELED);
    assert_int_equal(test_rec_seen().n_node, 0);
    assert_int_equal(stats_of(c).node_errors, 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* The wake-up thread's subscriber is a connection to the node like any
 * other: killed by the server, it is one node event (on that thread), and
 * the waiter still gets the lock when the holder lets go. */
static void a_killed_subscriber_is_one_node_event(void **state)
{
    (void)state;
    dlock_client *c = obs_client(0);
    dlock_lock *holder = test_lock_new(c, "obs:sub", 5000, 0, 10, 200);
    dlock_lock *waiter = test_lock_new(c, "obs:sub", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, acquire_on, waiter), 0);
    usleep(300 * 1000); /* the waiter subscribed */
    assert_true(test_cmd_int(&test_srv, "CLIENT KILL TYPE pubsub") >= 1);
    usleep(300 * 1000);
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    void *rc;
    assert_int_equal(pthread_join(t, &rc), 0);
    assert_int_equal(*(int *)rc, DLOCK_OK);
    test_recorder r = test_rec_seen();
    assert_int_equal(r.n_node, 1);
    assert_int_equal(r.node[0].what, DLOCK_NODE_CONNECT_FAILED);
    assert_int_equal(r.node[0].error, DLOCK_EIO);
    char want[300];
    snprintf(want, sizeof want, "127.0.0.1:%d", test_srv.port);
    assert_string_equal(r.node_name[0], want);
    assert_int_equal(stats_of(c).node_errors, 1);
    assert_int_equal(dlock_lock_release(waiter), DLOCK_OK);
    dlock_lock_free(waiter);
    dlock_lock_free(holder);
    dlock_client_free(c);
}

static void a_node_that_refuses_the_connection_is_one_connect_failure(void **state)
{
    (void)state;
    /* Port 1 on loopback: nothing listens, the connect is refused. */
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.observer = &test_rec_observer;
    const char *urls[] = {"redis://127.0.0.1:1"};
    dlock_client *c = test_client_new(urls, 1, &o);
    dlock_lock *l = test_lock_new(c, "obs:refused", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_EIO);
    test_recorder r = test_rec_seen();
    assert_int_equal(r.n_node, 1);
    assert_int_equal(r.node[0].what, DLOCK_NODE_CONNECT_FAILED);
    assert_int_equal(r.node[0].error, DLOCK_EIO);
    assert_string_equal(r.node_name[0], "127.0.0.1:1");
    assert_int_equal(r.n_end, 1);
    assert_int_equal(r.end[0].result, DLOCK_EIO);
    dlock_stats s = stats_of(c);
    assert_int_equal(s.node_errors, 1);
    assert_int_equal(s.acquires_failed, 1);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void a_server_out_of_memory_is_one_refusal(void **state)
{
    (void)state;
    dlock_client *c = obs_client(0);
    dlock_lock *l = test_lock_new(c, "obs:oom", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* scripts loaded */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    test_cmd_status(&test_srv, "CONFIG SET maxmemory-policy noeviction");
    test_cmd_status(&test_srv, "CONFIG SET maxmemory 1");
    int rc = dlock_lock_acquire(l, 0);
    test_cmd_status(&test_srv, "CONFIG SET maxmemory 0");
    assert_int_equal(rc, DLOCK_EREFUSED);
    test_recorder r = test_rec_seen();
    assert_int_equal(r.n_node, 1);
    assert_int_equal(r.node[0].what, DLOCK_NODE_REFUSED);
    assert_int_equal(r.node[0].error, DLOCK_EREFUSED);
    assert_int_equal(stats_of(c).node_errors, 1);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void an_unknown_observer_version_is_refused(void **state)
{
    (void)state;
    dlock_observer bad = test_rec_observer;
    bad.version = DLOCK_OBSERVER_VERSION + 1;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.observer = &bad;
    const char *urls[] = {test_srv.url};
    dlock_client *c = NULL;
    char err[256] = "";
    assert_int_equal(dlock_client_new(&c, urls, 1, &o, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "dlock_observer version"));
    assert_null(c);
}

static void stats_refuse_a_short_struct(void **state)
{
    (void)state;
    dlock_client *c = obs_client(0);
    dlock_stats s;
    assert_int_equal(dlock_client_stats(c, &s, sizeof s - 1), DLOCK_EINVAL);
    assert_int_equal(dlock_client_stats(NULL, &s, sizeof s), DLOCK_EINVAL);
    assert_int_equal(dlock_client_stats(c, NULL, sizeof s), DLOCK_EINVAL);
    /* A caller built against a newer header (a larger struct) gets this
     * library's fields, out->size says so, and its own tail is untouched. */
    struct {
        dlock_stats s;
        unsigned char newer[32];
    } big;
    memset(&big, 0xA5, sizeof big);
    assert_int_equal(dlock_client_stats(c, &big.s, sizeof big), DLOCK_OK);
    assert_int_equal(big.s.size, sizeof(dlock_stats));
    for (size_t i = 0; i < sizeof big.newer; i++)
        assert_int_equal(big.newer[i], 0xA5);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(granted_acquire_and_release_fire_once_each, reset),
        cmocka_unit_test_teardown(a_busy_try_ends_once_with_its_answer, reset),
        cmocka_unit_test_teardown(a_wait_woken_by_a_release_counts_its_tries_and_one_push,
                                  reset),
        cmocka_unit_test_teardown(a_wait_that_finds_the_lock_free_by_a_look_says_so, reset),
        cmocka_unit_test_teardown(a_fair_wait_counts_its_looks_and_the_hand_over, reset),
        cmocka_unit_test_teardown(a_fair_wait_that_finds_the_lock_free_by_a_look_says_so,
                                  reset),
        cmocka_unit_test_teardown(forget_ends_the_hold_once, reset),
        cmocka_unit_test_teardown(a_renewal_round_reports_its_locks_and_the_lease_left, reset),
        cmocka_unit_test_teardown(a_lease_lost_behind_the_holders_back_ends_its_hold_once,
                                  reset),
        cmocka_unit_test_teardown(a_lost_name_of_a_set_ends_one_hold, reset),
        cmocka_unit_test_teardown(freeing_a_held_handle_ends_its_hold, reset),
        cmocka_unit_test_teardown(a_stalled_node_is_one_timeout_event, reset),
        cmocka_unit_test_teardown(a_round_on_a_stalled_node_reports_its_failure_and_the_timeout,
                                  reset),
        cmocka_unit_test_teardown(a_cancel_is_no_node_error, reset),
        cmocka_unit_test_teardown(a_killed_subscriber_is_one_node_event, reset),
        cmocka_unit_test_teardown(a_node_that_refuses_the_connection_is_one_connect_failure,
                                  reset),
        cmocka_unit_test_teardown(a_server_out_of_memory_is_one_refusal, reset),
        cmocka_unit_test_teardown(an_unknown_observer_version_is_refused, reset),
        cmocka_unit_test_teardown(stats_refuse_a_short_struct, reset),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
