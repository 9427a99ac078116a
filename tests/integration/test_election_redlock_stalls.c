/* SPDX-License-Identifier: BSD-3-Clause */
/* Elections on a Redlock of three real redis-servers, one of them stalled
 * (SIGSTOP): a leader read, a timed observe and a resign are decided by
 * the two that answer (the fan-out's grace for the third), not held for
 * the client's I/O timeout (2 s here) by the silent one. Each failed on
 * the merge of elections on a Redlock (an adversarial review's tests):
 * the read waited for every node, the resign's word too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "dlock.h"
#include "proc.h"
#include "test_leaders.h"
#include "test_util.h"

#define N 3
#define IO_MS 2000

static test_redis nodes[N];
static dlock_client *cl;

static int group_setup(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++)
        if (test_redis_start(&nodes[i], NULL) != 0)
            return -1;
    const char *urls[N] = {nodes[0].url, nodes[1].url, nodes[2].url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = IO_MS;
    o.io_timeout_ms = IO_MS;
    return dlock_client_new(&cl, urls, N, &o, NULL, 0) == DLOCK_OK ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    dlock_client_free(cl);
    for (int i = 0; i < N; i++)
        test_redis_stop(&nodes[i]);
    return 0;
}

static void a_stalled_node_holds_no_read_nor_observe(void **state)
{
    (void)state;
    dlock_election *a = test_election_new(cl, "stall-read", 10000);
    dlock_election *o = test_election_new(cl, "stall-read", 10000);
    assert_int_equal(dlock_election_campaign(a, "v1", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    test_redis_pause(&nodes[2]);
    int64_t worst = 0;
    for (int k = 0; k < 3; k++) {
        uint64_t f = 0;
        char v[16];
        int64_t t0 = test_now_ms();
        assert_int_equal(dlock_election_leader(o, &f, v, sizeof v, NULL), DLOCK_OK);
        int64_t ms = test_now_ms() - t0;
        assert_int_equal(f, fa);
        assert_string_equal(v, "v1");
        worst = ms > worst ? ms : worst;
    }
    test_leaders s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    int64_t t0 = test_now_ms();
    int rc = dlock_election_observe(o, 100, test_leaders_on_leader, &s);
    int64_t obs = test_now_ms() - t0;
    test_redis_resume(&nodes[2]);
    print_message("# node 2 stalled: leader reads %" PRId64 " ms at most, a 100 ms observe "
                  "returned after %" PRId64 " ms\n",
                  worst, obs);
    pthread_mutex_destroy(&s.mu);
    dlock_election_free(a);
    dlock_election_free(o);
    assert_int_equal(rc, DLOCK_ETIMEDOUT);
    assert_true(worst < IO_MS / 2);
    assert_true(obs < IO_MS / 2);
}

static void a_stalled_node_holds_no_resign(void **state)
{
    (void)state;
    dlock_election *a = test_election_new(cl, "stall-resign", 10000);
    assert_int_equal(dlock_election_campaign(a, "v1", 0), DLOCK_OK);
    test_redis_pause(&nodes[2]);
    int64_t t0 = test_now_ms();
    int rc = dlock_election_resign(a);
    int64_t ms = test_now_ms() - t0;
    test_redis_resume(&nodes[2]);
    print_message("# node 2 stalled: the resign took %" PRId64 " ms\n", ms);
    dlock_election_free(a);
    assert_int_equal(rc, DLOCK_OK);
    assert_true(ms < IO_MS / 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_stalled_node_holds_no_read_nor_observe),
        cmocka_unit_test(a_stalled_node_holds_no_resign),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
