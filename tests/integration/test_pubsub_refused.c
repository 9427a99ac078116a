/* SPDX-License-Identifier: BSD-3-Clause */
/* A Redis 7 ACL user without channel rights (`resetchannels`): PUBLISH and
 * SUBSCRIBE are refused. A release must still report what happened to the
 * key (deleted: DLOCK_OK), and waiters must fall back to polling at once,
 * saying so once through the client's on_log callback (issue 15, item 10). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"
#include "test_waiter.h"

static atomic_int n_logs;
static char last_log[512];

static void on_log(dlock_log_level level, const char *msg, void *arg)
{
    (void)arg;
    if (level == DLOCK_LOG_WARN && atomic_fetch_add(&n_logs, 1) == 0)
        snprintf(last_log, sizeof last_log, "%s", msg);
}

static int setup(void **state)
{
    if (test_srv_setup(state) != 0)
        return -1;
    redisReply *r = test_redis_cmd(&test_srv, "ACL SETUSER nochan on >pw ~* +@all resetchannels");
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

static dlock_client *nochan_client(void)
{
    char url[128];
    snprintf(url, sizeof url, "redis://nochan:pw@127.0.0.1:%d", test_srv.port);
    const char *urls[] = {url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.on_log = on_log;
    return test_client_new(urls, 1, &o);
}

static void release_succeeds_and_waiters_poll_when_pubsub_is_refused(unsigned flags,
                                                                     const char *name)
{
    atomic_store(&n_logs, 0);
    dlock_client *c = nochan_client();
    dlock_lock *holder = test_lock_new(c, name, 10000, flags, 10, 200);
    dlock_lock *l = test_lock_new(c, name, 10000, flags, 10, 200);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);

    for (int round = 0; round < 2; round++) {
        test_waiter w;
        int64_t t0 = test_now_ms();
        assert_int_equal(test_waiter_start(&w, l, 5000, TEST_WAITER_RELEASE), 0);
        test_sleep_ms(300);
        int64_t t_rel = test_now_ms();
        int rrc = dlock_lock_release(holder);
        int wrc = test_waiter_join(&w);
        int64_t done_ms = atomic_load(&w.done_ms);
        print_message("%s round %d: release %s (%s); waiter %s %" PRId64
                      " ms after the release (%" PRId64 " ms after it began waiting)\n",
                      name, round, dlock_errname(rrc), dlock_lock_errmsg(holder),
                      dlock_errname(wrc), done_ms - t_rel, done_ms - t0);
        /* The key was deleted: that is success, whatever PUBLISH said. */
        assert_int_equal(rrc, DLOCK_OK);
        assert_int_equal(test_key_exists(&test_srv, name), 0);
        assert_int_equal(wrc, DLOCK_OK);
        /* Polling with backoff up to 200 ms (fair: every refresh period):
         * well under the 2 s the refused SUBSCRIBE used to cost. */
        assert_true(done_ms - t_rel < 1500);
        assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    }
    print_message("on_log: %d message(s): %s\n", atomic_load(&n_logs), last_log);
    assert_int_equal(atomic_load(&n_logs), 1); /* said once, not per wait */
    assert_non_null(strstr(last_log, "SUBSCRIBE"));
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void plain_release_succeeds_and_waiters_poll_when_pubsub_is_refused(void **state)
{
    (void)state;
    release_succeeds_and_waiters_poll_when_pubsub_is_refused(0, "nochan:plain");
}

static void reentrant_release_succeeds_and_waiters_poll_when_pubsub_is_refused(void **state)
{
    (void)state;
    release_succeeds_and_waiters_poll_when_pubsub_is_refused(DLOCK_REENTRANT, "nochan:counted");
}

static void fair_release_succeeds_and_waiters_poll_when_pubsub_is_refused(void **state)
{
    (void)state;
    release_succeeds_and_waiters_poll_when_pubsub_is_refused(DLOCK_FAIR, "nochan:fair");
}

static void version_1_options_are_still_accepted(void **state)
{
    (void)state;
    /* A caller built against version 1 passes a struct without on_log. */
    dlock_client_options o;
    assert_int_equal(dlock_client_options_init(&o, 1), DLOCK_OK);
    assert_int_equal(o.version, 1u);
    const char *urls[] = {test_srv.url};
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_new(&c, urls, 1, &o, NULL, 0), DLOCK_OK);
    dlock_client_free(c);
    assert_int_equal(dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION + 1), DLOCK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_release_succeeds_and_waiters_poll_when_pubsub_is_refused),
        cmocka_unit_test(reentrant_release_succeeds_and_waiters_poll_when_pubsub_is_refused),
        cmocka_unit_test(fair_release_succeeds_and_waiters_poll_when_pubsub_is_refused),
        cmocka_unit_test(version_1_options_are_still_accepted),
    };
    return cmocka_run_group_tests(tests, setup, test_srv_teardown);
}
