/* SPDX-License-Identifier: BSD-3-Clause */
/* A request cancelled while its member does not answer (SIGSTOP), and the
 * client freed at once: the request's transport must let go of it
 * without touching the freed request or client. Over the gateway the
 * transfer is cut; over gRPC (the _grpc row, etcd_grpc.c) the call is
 * cancelled in the C core and its completion comes after the cancel, to
 * a record the completion-queue thread frees, before the client's free
 * returns. Run under ASan, a completion that touched the request would
 * be a use after free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>

#include "dlock.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_util.h"

static test_etcd srv;

static int setup(void **state)
{
    (void)state;
    return test_etcd_start(&srv, 1);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_stop(&srv);
    return 0;
}

typedef struct waiter {
    dlock_lock *l;
    int rc;
} waiter;

static void *acquire_thread(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, 10000);
    return NULL;
}

static void a_cancel_while_the_member_is_stopped_then_a_free_is_clean(void **state)
{
    (void)state;
    for (int round = 0; round < 3; round++) {
        dlock_client *c = test_etcd_client(&srv, 0, 1000);
        assert_non_null(c);
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 5000;
        dlock_lock *l = test_lock_with(c, "cancel-free", &o);
        /* a first request, so that the connection is up and the next one
         * is surely sent, then the member stops answering */
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        test_etcd_pause(&srv, 0);
        waiter w = {l, -99};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, acquire_thread, &w), 0);
        test_sleep_ms(300 + 100 * round);
        dlock_lock_cancel(l);
        pthread_join(t, NULL);
        assert_int_equal(w.rc, DLOCK_ECANCELED);
        dlock_lock_free(l);
        /* the cancelled call may not be over yet (the free also tidies
         * up on the stopped member: an io_timeout_ms) */
        dlock_client_free(c);
        test_etcd_resume(&srv, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_cancel_while_the_member_is_stopped_then_a_free_is_clean),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
