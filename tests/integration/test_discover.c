/* SPDX-License-Identifier: BSD-3-Clause */
/* Discovery (src/redis/discover.h) runs on the request's loop, not inside
 * a blocking exchange: a Sentinel node whose sentinels never answer holds
 * up neither a cancel nor the other nodes of a Redlock. The "sentinel" is
 * a listening socket that nobody accepts from: connections complete in
 * its backlog and the question is never answered, as with a stopped
 * process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "test_util.h"

/* A TCP listener on 127.0.0.1 that never accepts; its port in *port. */
static int silent_listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 64), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* A listener that accepts and counts connections, answering nothing. */
typedef struct counter {
    int fd;
    atomic_int stop;
    atomic_int accepted; /* written by its thread only */
    int held[64];
    pthread_t thread;
} counter;

static void *count_main(void *arg)
{
    counter *k = arg;
    while (!atomic_load(&k->stop)) {
        struct pollfd p = {k->fd, POLLIN, 0};
        if (poll(&p, 1, 20) > 0) {
            int c = accept(k->fd, NULL, NULL);
            int n = atomic_load(&k->accepted);
            if (c >= 0 && n < 64) {
                k->held[n] = c;
                atomic_store(&k->accepted, n + 1);
            } else if (c >= 0) {
                close(c);
            }
        }
    }
    return NULL;
}

static void counter_stop(counter *k)
{
    atomic_store(&k->stop, 1);
    assert_int_equal(pthread_join(k->thread, NULL), 0);
    for (int i = 0; i < k->accepted; i++)
        close(k->held[i]);
    close(k->fd);
}

typedef struct waiter {
    dlock_lock *l;
    int rc;
    int64_t done_ms;
} waiter;

static void *wait_for(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, 20000);
    w->done_ms = test_now_ms();
    return NULL;
}

/* The sentinels are being asked for the primary (each may take the whole
 * connect timeout) when the waiter is cancelled: the cancel ends the wait
 * within milliseconds. Asking the sentinels used to block inside the
 * checkout, deaf to the cancel, for the connect timeout (3 s here). */
static void cancel_stops_asking_silent_sentinels(void **state)
{
    (void)state;
    int port = 0, fd = silent_listener(&port);
    char url[128];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d/mymaster", port);
    const char *urls[1] = {url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = 3000;
    dlock_client *c = test_client_new(urls, 1, &o);
    waiter w = {0};
    assert_int_equal(dlock_lock_new(&w.l, c, "discover-cancel", NULL), DLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for, &w), 0);
    usleep(300 * 1000);
    int64_t t0 = test_now_ms();
    dlock_lock_cancel(w.l);
    assert_int_equal(pthread_join(t, NULL), 0);
    fprintf(stderr, "cancel answered after %lld ms: %s (%s)\n", (long long)(w.done_ms - t0),
            dlock_errname(w.rc), dlock_lock_errmsg(w.l));
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    assert_true(w.done_ms - t0 < 150);
    dlock_lock_free(w.l);
    dlock_client_free(c);
    close(fd);
}

/* Redlock over a Sentinel node whose sentinels are silent and two plain
 * nodes: the plain nodes grant the lock (a majority) while the first node
 * is still being discovered, and the try answers at once. It used to wait
 * for the sentinels' connect timeout before the other nodes were even
 * asked. */
static void silent_sentinels_hold_up_no_other_node(void **state)
{
    (void)state;
    int port = 0, fd = silent_listener(&port);
    char url[128];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d/mymaster", port);
    const char *urls[3] = {url, test_nodes[0].url, test_nodes[1].url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = 3000;
    dlock_client *c = test_client_new(urls, 3, &o);
    dlock_lock *l = test_lock_with(c, "discover-redlock", NULL);
    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(l, 0);
    int64_t took = test_now_ms() - t0;
    fprintf(stderr, "acquire: %s after %lld ms (%s)\n", dlock_errname(rc), (long long)took,
            dlock_lock_errmsg(l));
    assert_int_equal(rc, DLOCK_OK);
    assert_true(took < 1000);
    t0 = test_now_ms();
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    took = test_now_ms() - t0;
    fprintf(stderr, "release after %lld ms\n", (long long)took);
    assert_true(took < 1000);
    assert_int_equal(test_key_exists(&test_nodes[0], "discover-redlock"), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
    close(fd);
}

/* Two threads of one client need the primary while the sentinels are
 * silent: one asks, the other waits for its answer instead of asking too
 * (one connection to the sentinel, not two). When the asking one is
 * cancelled, the other is not stranded: it asks in turn. Both cancels are
 * prompt. */
static void one_question_in_flight_and_no_observer_stranded(void **state)
{
    (void)state;
    counter k = {0};
    int port = 0;
    k.fd = silent_listener(&port);
    assert_int_equal(pthread_create(&k.thread, NULL, count_main, &k), 0);
    char url[128];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d/mymaster", port);
    const char *urls[1] = {url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = 5000;
    dlock_client *c = test_client_new(urls, 1, &o);
    waiter a = {0}, b = {0};
    assert_int_equal(dlock_lock_new(&a.l, c, "discover-flight-a", NULL), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&b.l, c, "discover-flight-b", NULL), DLOCK_OK);
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, wait_for, &a), 0);
    usleep(200 * 1000);
    assert_int_equal(pthread_create(&tb, NULL, wait_for, &b), 0);
    usleep(300 * 1000);
    assert_int_equal(atomic_load(&k.accepted), 1);
    int64_t t0 = test_now_ms();
    dlock_lock_cancel(a.l);
    assert_int_equal(pthread_join(ta, NULL), 0);
    fprintf(stderr, "first cancel after %lld ms: %s\n", (long long)(a.done_ms - t0),
            dlock_errname(a.rc));
    assert_int_equal(a.rc, DLOCK_ECANCELED);
    assert_true(a.done_ms - t0 < 150);
    for (int i = 0; i < 100 && atomic_load(&k.accepted) < 2; i++)
        usleep(10 * 1000);
    assert_int_equal(atomic_load(&k.accepted), 2); /* b asks now */
    t0 = test_now_ms();
    dlock_lock_cancel(b.l);
    assert_int_equal(pthread_join(tb, NULL), 0);
    fprintf(stderr, "second cancel after %lld ms: %s\n", (long long)(b.done_ms - t0),
            dlock_errname(b.rc));
    assert_int_equal(b.rc, DLOCK_ECANCELED);
    assert_true(b.done_ms - t0 < 150);
    dlock_lock_free(a.l);
    dlock_lock_free(b.l);
    dlock_client_free(c);
    counter_stop(&k);
}

typedef struct looker {
    dlock_client *c;
    int rc;
    int64_t done_ms;
} looker;

static void *look(void *arg)
{
    looker *k = arg;
    dlock_node_status st[1];
    dlock_lock_status sum;
    k->rc = dlock_client_status(k->c, "discover-deadline-look", 1, st, &sum);
    k->done_ms = test_now_ms();
    return NULL;
}

/* Review 2: a try's deadline (its lease, 500 ms here) bounds the
 * discovery it needs (discover.h: "The request's deadline bounds the
 * discovery"). Alone it does: the silent sentinel is given up at the
 * lease's end. But when another thread's discovery is in flight (a status,
 * which has no deadline: the sentinel keeps its whole connect timeout,
 * 3 s), the try only observes that flight, and an observing slot has no
 * timer (fanout_run.c slot_arm: only once graced): the try returns when
 * the other thread's flight lands, seconds past its own deadline. */
static void an_observer_keeps_its_own_deadline(void **state)
{
    (void)state;
    int port = 0, fd = silent_listener(&port);
    char url[128];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d/mymaster", port);
    const char *urls[1] = {url};
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = 3000;
    dlock_client *c = test_client_new(urls, 1, &o);
    dlock_lock *l = test_lock_new(c, "discover-deadline", 500, 0, 10, 50);
    /* Alone: the try ends at its lease's end. */
    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(l, 0);
    int64_t alone = test_now_ms() - t0;
    fprintf(stderr, "try alone: %s after %lld ms (%s)\n", dlock_errname(rc), (long long)alone,
            dlock_lock_errmsg(l));
    assert_int_not_equal(rc, DLOCK_OK);
    assert_true(alone < 1500);
    /* Beside a status whose discovery is in flight. */
    looker k = {c, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, look, &k), 0);
    usleep(200 * 1000);
    t0 = test_now_ms();
    rc = dlock_lock_acquire(l, 0);
    int64_t observed = test_now_ms() - t0;
    fprintf(stderr, "try beside a flight: %s after %lld ms (%s)\n", dlock_errname(rc),
            (long long)observed, dlock_lock_errmsg(l));
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_not_equal(rc, DLOCK_OK);
    if (observed >= 1500)
        fail_msg("a try with a 500 ms lease waited %lld ms for another thread's discovery",
                 (long long)observed);
    dlock_lock_free(l);
    dlock_client_free(c);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cancel_stops_asking_silent_sentinels),
        cmocka_unit_test(silent_sentinels_hold_up_no_other_node),
        cmocka_unit_test(one_question_in_flight_and_no_observer_stranded),
        cmocka_unit_test(an_observer_keeps_its_own_deadline),
    };
    return cmocka_run_group_tests(tests, test_nodes_setup, test_nodes_teardown);
}
