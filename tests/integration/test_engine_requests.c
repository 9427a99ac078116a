/* SPDX-License-Identifier: BSD-3-Clause */
/* The engine's verbs as requests on a loop (engine.h). The acquire
 * (dlock__engine_acquire_start): its start only starts, and every answer
 * that needs the store comes from the loop, never inside the start: a
 * fresh acquire, a refused try, a re-entry (an extend), and a lost
 * handle's new acquire (its old token taken out of the store first).
 * Only answers the start can give without the store (a handle that
 * already holds) come at once, with no done. While a re-entry waits for a
 * stopped server, the loop goes on turning (a ticker on it keeps
 * ticking). A lost handle's release takes its token out on the loop
 * too, and answers DLOCK_ELOST from there. A set of names' verbs are
 * chains of its names' requests on one loop. A cancel that comes while a
 * re-entry's extend or a set's give-back is on the loop is that acquire's,
 * used up by it. Against a real redis-server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dlock.h"
#include "engine.h"
#include "fsm.h"
#include "handle.h"
#include "proc.h"
#include "loop_poll.h"
#include "loop_ticker.h"
#include "redis_server.h"
#include "set.h"
#include "test_util.h"

static test_redis srv;
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    return test_srv_client_start(&srv, &cl, 300);
}

static int teardown(void **state)
{
    (void)state;
    test_srv_client_stop(&srv, &cl);
    return 0;
}

/* An acquire driven on a poll loop of the test's own, with a 20 ms
 * ticker beside it. */
typedef struct driven {
    dlock__loop_poll lp;
    dlock__engine_acq r;
    int dones;
    test_ticker tick;
} driven;

static void acquired(dlock__engine_acq *r)
{
    driven *d = DLOCK__OWNER(r, driven, r);
    d->dones++;
    test_ticker_stop(&d->tick);
}

static int is_done(void *arg)
{
    return ((driven *)arg)->dones > 0;
}

/* Start l's acquire on d's loop: what the start answered. */
static int start(driven *d, dlock_lock *l, int64_t wait_ms)
{
    memset(d, 0, sizeof *d);
    dlock__loop_poll_init(&d->lp);
    d->r.done = acquired;
    test_ticker_start(&d->tick, &d->lp.loop);
    int rc = dlock__engine_acquire_start(l, wait_ms, &d->lp.loop, &d->r);
    assert_int_equal(d->dones, 0); /* never inside the start */
    return rc;
}

/* Turn d's loop until the acquire is done: its answer (done once). */
static int turn(driven *d)
{
    assert_int_equal(dlock__loop_poll_run(&d->lp, is_done, d,
                                          dlock__deadline_after_ms(10000)),
                     1);
    assert_int_equal(d->dones, 1);
    dlock__loop_poll_close(&d->lp);
    return d->r.rc;
}

/* A start that answered at once: no done follows. */
static void no_done(driven *d)
{
    test_ticker_stop(&d->tick);
    (void)dlock__loop_poll_run(&d->lp, is_done, d, dlock__deadline_after_ms(50));
    assert_int_equal(d->dones, 0);
    dlock__loop_poll_close(&d->lp);
}

static void a_fresh_acquire_and_a_refused_try_answer_from_the_loop(void **state)
{
    (void)state;
    dlock_lock *a = test_lock_new(cl, "eng-fresh", 30000, 0, 10, 50);
    dlock_lock *b = test_lock_new(cl, "eng-fresh", 30000, 0, 10, 50);
    driven d;
    assert_int_equal(start(&d, a, 0), DLOCK_OK);
    assert_int_equal(turn(&d), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_int_equal(test_key_exists(&srv, "eng-fresh"), 1);
    /* Taken: the try is refused, from the loop too. */
    assert_int_equal(start(&d, b, 0), DLOCK_OK);
    assert_int_equal(turn(&d), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_state_get(b), DLOCK_STATE_UNLOCKED);
    /* A handle that holds a plain lock: refused at once, no done. */
    assert_int_equal(start(&d, a, 0), DLOCK_EINVAL);
    no_done(&d);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

/* A reentrant reader's re-entry (kinds.h, reenter) is an extend on the
 * loop; with the server stopped it waits for its I/O timeout (300 ms)
 * while the loop keeps turning. */
static void a_reentry_extends_on_the_loop_and_never_holds_it_up(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(cl, "eng-reenter", 30000, DLOCK_SHARED | DLOCK_REENTRANT, 10, 50);
    driven d;
    assert_int_equal(start(&d, l, 0), DLOCK_OK);
    assert_int_equal(turn(&d), DLOCK_OK);
    assert_int_equal(start(&d, l, 0), DLOCK_OK);
    assert_int_equal(turn(&d), DLOCK_OK);
    assert_int_equal(l->holds, 2);

    test_redis_pause(&srv);
    int64_t t0 = dlock__now_ns();
    assert_int_equal(start(&d, l, 0), DLOCK_OK);
    assert_true(dlock__now_ns() - t0 < 100 * DLOCK__NS_PER_MS); /* the start only starts */
    int rc = turn(&d);
    test_redis_resume(&srv);
    print_message("re-entry with the server stopped: %s after %lld ms, %d ticks, longest gap "
                  "%lld ms\n",
                  dlock_errname(rc), (long long)((dlock__now_ns() - t0) / DLOCK__NS_PER_MS),
                  d.tick.ticks, (long long)(d.tick.max_gap_ns / DLOCK__NS_PER_MS));
    assert_int_not_equal(rc, DLOCK_OK);
    assert_int_equal(l->holds, 2); /* no hold more */
    /* The loop turned all along: a blocking extend would have held it
     * for the whole I/O timeout. */
    assert_true(d.tick.ticks >= 8);
    assert_true(d.tick.max_gap_ns < 150 * DLOCK__NS_PER_MS);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

/* A lost handle's acquire takes its old token out of the store first,
 * on the loop, then acquires afresh with a new one. */
static void a_lost_handle_lets_go_on_the_loop_then_acquires(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(cl, "eng-lost", 30000, 0, 10, 50);
    driven d;
    assert_int_equal(start(&d, l, 0), DLOCK_OK);
    assert_int_equal(turn(&d), DLOCK_OK);
    char old[DLOCK_TOKEN_MAX + 1];
    strcpy(old, dlock_lock_token(l));
    /* The watchdog's verdict, as a round would give it. */
    dlock__fsm_fire(l, DLOCK__EV_LOST, 0);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_LOST);
    assert_int_equal(start(&d, l, 0), DLOCK_OK);
    assert_int_equal(turn(&d), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_string_not_equal(dlock_lock_token(l), old);
    char *now = test_cmd_str_or_nil(&srv, "GET %s", "eng-lost");
    assert_non_null(now);
    assert_string_equal(now, dlock_lock_token(l));
    free(now);

    /* Lost again, the server stopped: the let-go and the try wait on the
     * loop, which keeps turning. */
    dlock__fsm_fire(l, DLOCK__EV_LOST, 0);
    test_redis_pause(&srv);
    int64_t t0 = dlock__now_ns();
    assert_int_equal(start(&d, l, 0), DLOCK_OK);
    /* The start only starts: the let-go is in flight on the loop. */
    assert_int_equal(d.r.lost.state, DLOCK__OP_STARTED);
    int rc = turn(&d);
    test_redis_resume(&srv);
    print_message("lost handle's acquire with the server stopped: %s after %lld ms, %d ticks, "
                  "longest gap %lld ms\n",
                  dlock_errname(rc), (long long)((dlock__now_ns() - t0) / DLOCK__NS_PER_MS),
                  d.tick.ticks, (long long)(d.tick.max_gap_ns / DLOCK__NS_PER_MS));
    assert_int_not_equal(rc, DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    assert_true(d.tick.ticks >= 8);
    assert_true(d.tick.max_gap_ns < 150 * DLOCK__NS_PER_MS);
    dlock_lock_free(l);
}

typedef struct released {
    dlock__loop_poll lp;
    dlock__engine_req r;
    int dones;
} released;

static void release_done(dlock__engine_req *r)
{
    DLOCK__OWNER(r, released, r)->dones++;
}

static int release_over(void *arg)
{
    return ((released *)arg)->dones > 0;
}

/* A lost handle's release: its token out of the store on the loop, then
 * ELOST from there; the handle holds nothing after. */
static void a_lost_handles_release_lets_go_on_the_loop(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(cl, "eng-lost-rel", 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    dlock__fsm_fire(l, DLOCK__EV_LOST, 0);
    released d = {.r = {.done = release_done}};
    dlock__loop_poll_init(&d.lp);
    assert_int_equal(dlock__engine_release_start(l, &d.lp.loop, &d.r), DLOCK_OK);
    assert_int_equal(d.dones, 0);
    assert_int_equal(d.r.op.state, DLOCK__OP_STARTED); /* in flight on the loop */
    assert_int_equal(dlock__loop_poll_run(&d.lp, release_over, &d, dlock__deadline_after_ms(5000)),
                     1);
    dlock__loop_poll_close(&d.lp);
    assert_int_equal(d.dones, 1);
    assert_int_equal(d.r.rc, DLOCK_ELOST);
    assert_int_equal(test_key_exists(&srv, "eng-lost-rel"), 0);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_UNLOCKED);
    dlock_lock_free(l);
}

typedef struct set_driven {
    dlock__loop_poll lp;
    dlock__set_req r;
    int dones;
    test_ticker tick;
} set_driven;

static void set_over(dlock__set_req *r)
{
    set_driven *d = DLOCK__OWNER(r, set_driven, r);
    d->dones++;
    test_ticker_stop(&d->tick);
}

static int set_done(void *arg)
{
    return ((set_driven *)arg)->dones > 0;
}

static void set_begin(set_driven *d)
{
    memset(d, 0, sizeof *d);
    dlock__loop_poll_init(&d->lp);
    d->r.done = set_over; /* no wait hooks: a sleep ends at its timer */
    test_ticker_start(&d->tick, &d->lp.loop);
}

static int set_turn(set_driven *d, int started)
{
    assert_int_equal(started, DLOCK_OK);
    assert_int_equal(d->dones, 0); /* never inside the start */
    assert_int_equal(
        dlock__loop_poll_run(&d->lp, set_done, d, dlock__deadline_after_ms(10000)), 1);
    assert_int_equal(d->dones, 1);
    dlock__loop_poll_close(&d->lp);
    return d->r.rc;
}

/* A set of two names, 30 s leases. */
static dlock_lock *set_new(const char *a, const char *b)
{
    const char *names[] = {a, b};
    dlock_lock *set = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 30000;
    assert_int_equal(dlock_lock_new_multi(&set, cl, names, 2, &o), DLOCK_OK);
    return set;
}

static void *release_soon(void *arg)
{
    test_sleep_ms(300);
    assert_int_equal(dlock_lock_release(arg), DLOCK_OK);
    return NULL;
}

/* A set's verbs are chains of its names' requests on one loop: a try
 * that finds its second name taken gives the first back, a wait for the
 * second name leaves the loop turning, and extend and release answer
 * from the loop too. */
static void a_sets_verbs_are_chains_on_the_loop(void **state)
{
    (void)state;
    dlock_lock *set = set_new("eng-set-b", "eng-set-a");
    dlock_lock *other = test_lock_new(cl, "eng-set-b", 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);

    set_driven d;
    set_begin(&d);
    assert_int_equal(set_turn(&d, dlock__set_acquire_start(set, 0, &d.lp.loop, &d.r)),
                     DLOCK_ENOTACQUIRED);
    assert_int_equal(test_key_exists(&srv, "eng-set-a"), 0); /* given back */
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_UNLOCKED);

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_soon, other), 0);
    set_begin(&d);
    int rc = set_turn(&d, dlock__set_acquire_start(set, 5000, &d.lp.loop, &d.r));
    pthread_join(t, NULL);
    print_message("set's wait: %d ticks, longest gap %lld ms\n", d.tick.ticks,
                  (long long)(d.tick.max_gap_ns / DLOCK__NS_PER_MS));
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_HELD);
    assert_true(d.tick.ticks >= 10);
    assert_true(d.tick.max_gap_ns < 150 * DLOCK__NS_PER_MS);

    set_begin(&d);
    assert_int_equal(set_turn(&d, dlock__set_extend_start(set, 60000, &d.lp.loop, &d.r)),
                     DLOCK_OK);
    assert_true(test_key_pttl(&srv, "eng-set-a") > 30000);
    assert_true(test_key_pttl(&srv, "eng-set-b") > 30000);
    set_begin(&d);
    assert_int_equal(set_turn(&d, dlock__set_release_start(set, &d.lp.loop, &d.r)), DLOCK_OK);
    assert_int_equal(test_key_exists(&srv, "eng-set-a"), 0);
    assert_int_equal(test_key_exists(&srv, "eng-set-b"), 0);
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_UNLOCKED);
    /* Answered at once, no done: a release of a set that holds nothing. */
    set_begin(&d);
    assert_int_equal(dlock__set_release_start(set, &d.lp.loop, &d.r), DLOCK_ENOTHELD);
    test_ticker_stop(&d.tick);
    (void)dlock__loop_poll_run(&d.lp, set_done, &d, dlock__deadline_after_ms(50));
    assert_int_equal(d.dones, 0);
    dlock__loop_poll_close(&d.lp);
    dlock_lock_free(other);
    dlock_lock_free(set);
}

/* Filled the way call.c fills its request on the stack (done, hooks and
 * scratch; the rest is whatever the stack held, never zeroed: hot path),
 * so a chain that reads a field it never set reads garbage here. */
static void set_begin_unzeroed(set_driven *d)
{
    set_begin(d);
    memset(&d->r, 0xA5, sizeof d->r);
    d->r.done = set_over;
    memset(&d->r.hooks, 0, sizeof d->r.hooks);
    d->r.scratch = NULL;
    d->r.scratch_len = 0;
}

/* A set's verb that needs no word to a store and answers DLOCK_OK inside
 * its start (here a release of a set whose names were already let go)
 * answers from the loop's next turn, from a request nobody zeroed. */
static void a_sets_answer_ok_at_once_comes_from_the_loop(void **state)
{
    (void)state;
    dlock_lock *set = set_new("eng-set-now-a", "eng-set-now-b");
    assert_int_equal(dlock_lock_acquire(set, 0), DLOCK_OK);
    struct dlock__set *s = set->set;
    for (size_t i = 0; i < s->n; i++) /* the names let go, the set still holds */
        assert_int_equal(dlock__engine_forget(s->names[i]), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_HELD);

    set_driven d;
    set_begin_unzeroed(&d);
    assert_int_equal(set_turn(&d, dlock__set_release_start(set, &d.lp.loop, &d.r)), DLOCK_OK);
    assert_int_equal(dlock_lock_state_get(set), DLOCK_STATE_UNLOCKED);
    dlock_lock_free(set);
}

/* A cancel that came during a waiting acquire is used up by it, also when
 * the acquire ended otherwise (dlock.h, dlock_lock_cancel()): here one
 * that came while a re-entry's extend was on the loop. */
static void a_cancel_during_a_reentry_is_used_up(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(cl, "eng-reenter-cx", 30000, DLOCK_SHARED | DLOCK_REENTRANT, 10,
                                  50);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    driven d;
    assert_int_equal(start(&d, l, 1000), DLOCK_OK);
    dlock_lock_cancel(l); /* the extend is in flight */
    assert_int_equal(turn(&d), DLOCK_OK);
    assert_int_equal(l->holds, 2);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 1000), DLOCK_OK); /* not cancelled */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

/* The set's wait for its second name ended (its deadline), and the first
 * name is being given back. */
static int giving_back(void *arg)
{
    set_driven *d = arg;
    return d->dones > 0 || (!d->r.acquiring && d->r.i == 1);
}

/* The same for a set: a cancel that came while a timed-out acquire gave
 * its first name back was that acquire's. */
static void a_cancel_during_a_sets_give_back_is_used_up(void **state)
{
    (void)state;
    dlock_lock *set = set_new("eng-set-cx-a", "eng-set-cx-b");
    dlock_lock *other = test_lock_new(cl, "eng-set-cx-b", 30000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(other, 0), DLOCK_OK);
    set_driven d;
    set_begin(&d);
    assert_int_equal(dlock__set_acquire_start(set, 300, &d.lp.loop, &d.r), DLOCK_OK);
    assert_int_equal(
        dlock__loop_poll_run(&d.lp, giving_back, &d, dlock__deadline_after_ms(10000)), 1);
    assert_int_equal(d.dones, 0); /* the give-back is in flight */
    dlock_lock_cancel(set);
    assert_int_equal(set_turn(&d, DLOCK_OK), DLOCK_ETIMEDOUT);
    assert_int_equal(test_key_exists(&srv, "eng-set-cx-a"), 0);
    assert_int_equal(dlock_lock_release(other), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(set, 2000), DLOCK_OK); /* not cancelled */
    assert_int_equal(dlock_lock_release(set), DLOCK_OK);
    dlock_lock_free(other);
    dlock_lock_free(set);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_fresh_acquire_and_a_refused_try_answer_from_the_loop),
        cmocka_unit_test(a_reentry_extends_on_the_loop_and_never_holds_it_up),
        cmocka_unit_test(a_lost_handle_lets_go_on_the_loop_then_acquires),
        cmocka_unit_test(a_lost_handles_release_lets_go_on_the_loop),
        cmocka_unit_test(a_sets_verbs_are_chains_on_the_loop),
        cmocka_unit_test(a_sets_answer_ok_at_once_comes_from_the_loop),
        cmocka_unit_test(a_cancel_during_a_reentry_is_used_up),
        cmocka_unit_test(a_cancel_during_a_sets_give_back_is_used_up),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
