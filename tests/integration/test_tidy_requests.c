/* SPDX-License-Identifier: BSD-3-Clause */
/* What a handle leaves to settle in Redis is three requests (backend.h:
 * settle_start, release_lost_start, cleanup_start; src/redis/tidy.c),
 * driven here on a loop of the test's with the node stalled (SIGSTOP):
 * the start returns at once, done() never runs inside it, the answer
 * comes from the loop once the node's I/O timeout ran out, and a ticker
 * timer on the same loop keeps ticking meanwhile. A body that waits for
 * the node on the caller's thread, inside the start or behind an answer
 * deferred to the loop, holds the ticker up for the whole timeout: the
 * gap check fails. The blocking verbs (adopt, the lost path, free) run
 * these on the call's private loop (call.c, dlock__call_tidy). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "clock.h"
#include "dlock.h"
#include "handle.h"
#include "loop_poll.h"
#include "op.h"
#include "redis_server.h"

static test_redis srv;

static int setup(void **state)
{
    (void)state;
    return test_redis_start(&srv, NULL);
}

static int teardown(void **state)
{
    (void)state;
    test_redis_stop(&srv);
    return 0;
}

enum {
    IO_TIMEOUT_MS = 500,
    TICK_MS = 10,
    /* Far below the I/O timeout, far above a loaded machine's hiccup. */
    MAX_GAP_MS = 200
};

/* ---- the request on the test's loop, a ticker beside it ------------------ */

typedef struct drive {
    dlock__loop_poll lp;
    dlock__op op;
    int dones;
    dlock__timer tick;
    int64_t last_tick_ns, max_gap_ns;
    int ticks;
} drive;

/* The time since the last tick (or the start), now. */
static int64_t tick_gap(drive *d)
{
    int64_t now = dlock__now_ns();
    if (now - d->last_tick_ns > d->max_gap_ns)
        d->max_gap_ns = now - d->last_tick_ns;
    d->last_tick_ns = now;
    return now;
}

static void ticked(dlock__timer *t)
{
    drive *d = DLOCK__OWNER(t, drive, tick);
    int64_t now = tick_gap(d);
    d->ticks++;
    t->due_ns = now + TICK_MS * DLOCK__NS_PER_MS;
    assert_int_equal(dlock__timer_set(&d->lp.loop, t), DLOCK_OK);
}

static void op_seen(dlock__op *op)
{
    drive *d = DLOCK__OWNER(op, drive, op);
    d->dones++;
    (void)tick_gap(d); /* up to the answer: a body that blocked ends a gap here */
    dlock__timer_clear(&d->lp.loop, &d->tick);
}

static int op_over(void *arg)
{
    return ((drive *)arg)->dones > 0;
}

/* Start the request (start) of l on d's loop with the ticker running,
 * check that it is one, turn the loop until it is answered: the whole
 * request's time in ms. */
static int64_t drive_request(drive *d, dlock_lock *l, int (*start)(dlock_lock *l, dlock__op *op))
{
    memset(d, 0, sizeof *d);
    dlock__loop_poll_init(&d->lp);
    d->op = (dlock__op){.l = l, .loop = &d->lp.loop, .done = op_seen};
    dlock__op_start(&d->op);
    int64_t t0 = dlock__now_ns();
    d->last_tick_ns = t0;
    d->tick.fire = ticked;
    d->tick.due_ns = t0 + TICK_MS * DLOCK__NS_PER_MS;
    assert_int_equal(dlock__timer_set(&d->lp.loop, &d->tick), DLOCK_OK);
    int rc = start(l, &d->op);
    int64_t start_ms = (dlock__now_ns() - t0) / DLOCK__NS_PER_MS;
    assert_int_equal(rc, DLOCK_OK);
    assert_int_equal(d->dones, 0);             /* never inside the start */
    assert_true(start_ms < IO_TIMEOUT_MS / 5); /* waited for nothing */
    dlock__loop_poll_run(&d->lp, op_over, d, INT64_MAX);
    int64_t took_ms = (dlock__now_ns() - t0) / DLOCK__NS_PER_MS;
    assert_int_equal(d->dones, 1);
    assert_int_equal(d->op.state, DLOCK__OP_DONE);
    assert_int_equal(d->op.v.code, DLOCK_OK); /* best effort */
    dlock__loop_poll_close(&d->lp);
    return took_ms;
}

/* The ticker kept ticking while the request waited for the node. */
static void check_ticker(const drive *d, const char *what, int64_t took_ms)
{
    int64_t gap_ms = d->max_gap_ns / DLOCK__NS_PER_MS;
    printf("# %s with the node stalled: answered after %lld ms (io_timeout %d ms); "
           "%d ticks, longest gap %lld ms\n",
           what, (long long)took_ms, IO_TIMEOUT_MS, d->ticks, (long long)gap_ms);
    assert_true(took_ms >= IO_TIMEOUT_MS - 50); /* it did wait for the node */
    if (gap_ms >= MAX_GAP_MS || d->ticks < took_ms / MAX_GAP_MS)
        fail_msg("%s held its loop up for %lld ms", what, (long long)gap_ms);
}

static dlock_client *client_new(void)
{
    test_redis_resume(&srv); /* an earlier test that failed left it stopped */
    const char *u = srv.url;
    dlock_client_options co;
    dlock_client_options_init(&co, DLOCK_CLIENT_OPTIONS_VERSION);
    co.io_timeout_ms = IO_TIMEOUT_MS;
    dlock_client *c;
    assert_int_equal(dlock_client_new(&c, &u, 1, &co, NULL, 0), DLOCK_OK);
    return c;
}

static dlock_lock *lock_new(dlock_client *c, const char *name, unsigned flags)
{
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = 30000;
    lo.flags = flags;
    dlock_lock *l;
    assert_int_equal(dlock_lock_new(&l, c, name, &lo), DLOCK_OK);
    return l;
}

/* The key is gone once the node runs what was written to it. */
static void wait_key_gone(const char *name)
{
    for (int i = 0; i < 200; i++) {
        redisReply *r = test_redis_cmd(&srv, "EXISTS %s", name);
        long long n = r ? r->integer : -1;
        freeReplyObject(r);
        if (n == 0)
            return;
        usleep(10000);
    }
    fail_msg("%s is still there", name);
}

/* ---- the three requests ---------------------------------------------------- */

/* A held handle's free: the release of its hold waits for the node. */
static void cleanup_is_a_request(void **state)
{
    (void)state;
    dlock_client *c = client_new();
    dlock_lock *l = lock_new(c, "tidy-cleanup", 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_redis_pause(&srv);
    drive d;
    int64_t took = drive_request(&d, l, l->backend->cleanup_start);
    check_ticker(&d, "cleanup", took);
    test_redis_resume(&srv);
    wait_key_gone("tidy-cleanup"); /* the release written to it ran */
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Before an adopt changes the token: a release of unknown outcome is
 * resent, and while the node does not answer it is kept under the old
 * token (owed_token) for the next adopt and the free. */
static void settle_is_a_request(void **state)
{
    (void)state;
    dlock_client *c = client_new();
    dlock_lock *l = lock_new(c, "tidy-settle", 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    l->rel_pending = 1; /* as a release no node answered leaves it */
    memset(l->rel_nodes, 1, sizeof l->rel_nodes);
    test_redis_pause(&srv);
    drive d;
    int64_t took = drive_request(&d, l, l->backend->settle_start);
    check_ticker(&d, "settle", took);
    assert_non_null(l->owed_token);
    assert_int_equal(l->rel_pending, 0);
    test_redis_resume(&srv);
    dlock_lock_free(l); /* resends the owed release */
    dlock_client_free(c);
}

/* A lost fair handle leaves the line by its token (fair_leave.lua) and
 * releases: the leave waits for the node. A plain one's release by token
 * listens 50 ms at most (RELEASE_LOST_MS), from the loop too, and the node
 * runs it when it wakes (on a client of its own: its connection was not
 * closed by the fair one's timeout, and a new one's handshake would wait
 * for the node). */
static void release_lost_is_a_request(void **state)
{
    (void)state;
    dlock_client *c = client_new(), *c2 = client_new();
    dlock_lock *f = lock_new(c, "tidy-lost-fair", DLOCK_FAIR);
    dlock_lock *p = lock_new(c2, "tidy-lost-plain", 0);
    assert_int_equal(dlock_lock_acquire(f, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(p, 0), DLOCK_OK);
    test_redis_pause(&srv);
    drive d;
    int64_t took = drive_request(&d, f, f->backend->release_lost_start);
    check_ticker(&d, "release_lost (fair)", took);
    assert_int_equal(f->fair_cleanup_pending, 1); /* not answered: owed still */
    took = drive_request(&d, p, p->backend->release_lost_start);
    printf("# release_lost (plain) with the node stalled: answered after %lld ms\n",
           (long long)took);
    assert_true(took >= 40 && took < IO_TIMEOUT_MS - 50);
    test_redis_resume(&srv);
    wait_key_gone("tidy-lost-plain");
    dlock_lock_free(f); /* its cleanup, owed, is sent again */
    dlock_lock_free(p);
    dlock_client_free(c2);
    dlock_client_free(c);
}

/* Nothing to send: answered from the loop's next turn all the same. */
static void nothing_to_send_answers_from_the_loop(void **state)
{
    (void)state;
    dlock_client *c = client_new();
    dlock_lock *l = lock_new(c, "tidy-nothing", 0);
    drive d;
    (void)drive_request(&d, l, l->backend->settle_start);
    (void)drive_request(&d, l, l->backend->release_lost_start);
    (void)drive_request(&d, l, l->backend->cleanup_start);
    dlock_lock_free(l);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cleanup_is_a_request),
        cmocka_unit_test(settle_is_a_request),
        cmocka_unit_test(release_lost_is_a_request),
        cmocka_unit_test(nothing_to_send_answers_from_the_loop),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
