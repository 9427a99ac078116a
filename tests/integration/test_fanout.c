/* SPDX-License-Identifier: BSD-3-Clause */
/* The Redis fan-out's slots on the run's loop, driven directly
 * (dlock__fanout): a decided run with a grace still hears every node that
 * answers at once, the rest of a decided pipeline included; one without a
 * grace stops at the decision; a silent node ends the grace at its end,
 * not at the I/O timeout. And a run is a request on a loop the caller
 * owns (dlock__fan_start): runs share it, each completes once, from it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "client.h"
#include "dlock.h"
#include "error.h"
#include "fanout.h"
#include "fanout_run.h"
#include "loop_poll.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

#define N3 3
#define PIPE 3 /* requests per node */

typedef struct heard {
    int ok[N3], failed[N3];
    int last_err;
    int decided;
} heard;

/* Decides at the first reply: the run stops there, or starts its grace.
 * (A callback that says "stop" again in the grace cuts a failed node's
 * report short: fail_node stops at the first stop, as it always did.) */
static int decide_at_once(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                          const char *detail, int64_t start_ns)
{
    (void)idx, (void)detail, (void)start_ns;
    heard *h = arg;
    if (err == DLOCK_OK && r && r->type == REDIS_REPLY_STATUS)
        h->ok[node]++;
    else {
        h->failed[node]++;
        h->last_err = err;
    }
    return !h->decided++;
}

static void run_pings(dlock_client *c, int64_t grace_ms, heard *h)
{
    static const char *ping[1] = {"PING"};
    dlock__req reqs[PIPE];
    for (int j = 0; j < PIPE; j++)
        reqs[j] = (dlock__req){NULL, 0, 1, ping, NULL, 0};
    dlock__fanout_opts o = {.io_timeout_ms = 5000, .deadline_ns = INT64_MAX, .grace_ms = grace_ms};
    memset(h, 0, sizeof *h);
    assert_int_equal(dlock__fanout(c, reqs, PIPE, &o, decide_at_once, h), DLOCK_OK);
}

static void decided_run_with_a_grace_hears_every_reply_of_every_pipeline(void **state)
{
    (void)state;
    dlock_client *c = test_client_timeouts(test_nodes, N3, 1000, 5000);
    heard h;
    /* A long grace, so that a loaded machine cannot make this flaky: the
     * run ends as soon as every node answered, not at the grace's end. */
    run_pings(c, 2000, &h); /* connects: the first run of a client */
    run_pings(c, 2000, &h); /* pooled connections */
    for (int i = 0; i < N3; i++) {
        assert_int_equal(h.ok[i], PIPE);
        assert_int_equal(h.failed[i], 0);
    }
    dlock_client_free(c);
}

static void decided_run_without_a_grace_stops_at_the_decision(void **state)
{
    (void)state;
    dlock_client *c = test_client_timeouts(test_nodes, N3, 1000, 5000);
    heard h;
    run_pings(c, 0, &h);
    int total = 0;
    for (int i = 0; i < N3; i++)
        total += h.ok[i] + h.failed[i];
    assert_int_equal(total, 1);
    /* The connections dropped mid-pipeline are usable again. */
    run_pings(c, 2000, &h);
    for (int i = 0; i < N3; i++)
        assert_int_equal(h.ok[i], PIPE);
    dlock_client_free(c);
}

static void silent_node_is_given_up_at_the_end_of_the_grace(void **state)
{
    (void)state;
    dlock_client *c = test_client_timeouts(test_nodes, N3, 1000, 5000);
    heard h;
    run_pings(c, 100, &h); /* every connection open and pooled */
    test_redis_pause(&test_nodes[2]);
    int64_t t0 = test_now_ms();
    run_pings(c, 100, &h);
    int64_t took = test_now_ms() - t0;
    test_redis_resume(&test_nodes[2]);
    print_message("a run with one node stopped took %lld ms (grace 100 ms)\n", (long long)took);
    assert_true(took < 1000);
    assert_int_equal(h.ok[0] + h.ok[1], 2 * PIPE);
    assert_int_equal(h.ok[2], 0);
    assert_int_equal(h.failed[2], PIPE);
    assert_int_equal(h.last_err, DLOCK_EUNKNOWN); /* sent, never answered */
    dlock_client_free(c);
}

/* ---- a run on the caller's loop ------------------------------------------ */

typedef struct on_loop {
    dlock__fan f;
    heard h;
    int done_calls;
} on_loop;

static int starting; /* inside dlock__fan_start: a completion now is a bug */

static void on_loop_done(dlock__fan *f)
{
    on_loop *o = DLOCK__OWNER(f, on_loop, f);
    assert_false(starting);
    o->done_calls++;
}

static int both_done(void *arg)
{
    on_loop *o = arg;
    return o[0].done_calls && o[1].done_calls;
}

static void two_runs_share_the_callers_loop_and_each_completes_once_from_it(void **state)
{
    (void)state;
    dlock_client *c = test_client_timeouts(test_nodes, N3, 1000, 5000);
    static const char *ping[1] = {"PING"};
    dlock__req reqs[PIPE];
    for (int j = 0; j < PIPE; j++)
        reqs[j] = (dlock__req){NULL, 0, 1, ping, NULL, 0};
    dlock__fanout_opts o = {.io_timeout_ms = 5000, .deadline_ns = INT64_MAX, .grace_ms = 2000};
    heard warm;
    run_pings(c, 2000, &warm); /* connected: the runs below take pooled connections */
    uint8_t only[2][N3] = {{1, 1, 0}, {0, 0, 1}}; /* one connection per node and run */
    dlock__fanout_opts oo[2] = {o, o};
    static on_loop runs[2];
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    for (int k = 0; k < 2; k++) {
        memset(&runs[k].h, 0, sizeof runs[k].h);
        runs[k].done_calls = 0;
        oo[k].only = only[k];
        dlock__fan_init(&runs[k].f, c, reqs, PIPE, &oo[k], decide_at_once, &runs[k].h);
        starting = 1;
        dlock__fan_start(&runs[k].f, &lp.loop, on_loop_done);
        starting = 0;
        assert_int_equal(runs[k].done_calls, 0);
    }
    assert_int_equal(dlock__loop_poll_run(&lp, both_done, runs, dlock__now_ns() + 10000 * 1000000LL),
                     1);
    /* Nothing of either run is left on the loop, and nothing completes twice. */
    assert_int_equal(lp.n_ios, 0);
    assert_int_equal(dlock__loop_poll_run(&lp, both_done, runs, dlock__now_ns() + 50 * 1000000LL),
                     1);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(runs[k].done_calls, 1);
        assert_int_equal(runs[k].f.rc, DLOCK_OK);
    }
    for (int i = 0; i < N3; i++) {
        heard *h = &runs[i < 2 ? 0 : 1].h;
        assert_int_equal(h->ok[i], PIPE);
        assert_int_equal(h->failed[i], 0);
    }
    dlock__loop_poll_close(&lp);
    dlock_client_free(c);
}

#define T(f) cmocka_unit_test_setup_teardown(f, test_nodes_revive, test_nodes_revive)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(decided_run_with_a_grace_hears_every_reply_of_every_pipeline),
        T(decided_run_without_a_grace_stops_at_the_decision),
        T(silent_node_is_given_up_at_the_end_of_the_grace),
        T(two_runs_share_the_callers_loop_and_each_completes_once_from_it),
    };
    return cmocka_run_group_tests(tests, test_nodes_setup, test_nodes_teardown);
}
