/* SPDX-License-Identifier: BSD-3-Clause */
/* Single flight of a discovery (src/redis/flight.c): an observer waits on
 * its own loop and is called back from it when the flight lands, from
 * whichever thread lands it; one that stops observing first is never
 * called and never written to. No server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <unistd.h>

#include "clock.h"
#include "common.h"
#include "flight.h"
#include "loop_poll.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct watcher {
    dlock__flight_obs obs;
    int called;
} watcher;

static void landed(dlock__io *io, unsigned events)
{
    (void)events;
    watcher *w = DLOCK__OWNER(io, watcher, obs.io);
    dlock__flight_unobserve(&w->obs, &mu);
    w->called++;
}

static int both_called(void *arg)
{
    watcher *w = arg;
    return w[0].called && w[1].called;
}

typedef struct lander {
    dlock__flight *f;
    int delay_ms;
} lander;

static void *land_later(void *arg)
{
    lander *ld = arg;
    usleep((useconds_t)ld->delay_ms * 1000);
    pthread_mutex_lock(&mu);
    dlock__flight_land(ld->f);
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* Two observers on one loop: both are called back once the flight lands
 * on another thread, not before, and the flight is free again. */
static void observers_are_called_back_when_the_flight_lands(void **state)
{
    (void)state;
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    dlock__flight f = {1, NULL};
    watcher w[2] = {{{0}, 0}, {{0}, 0}};
    pthread_mutex_lock(&mu);
    for (int i = 0; i < 2; i++)
        assert_int_equal(dlock__flight_observe(&f, &w[i].obs, &lp.loop, landed), DLOCK_OK);
    pthread_mutex_unlock(&mu);
    lander ld = {&f, 50};
    pthread_t t;
    int64_t t0 = dlock__now_ns();
    assert_int_equal(pthread_create(&t, NULL, land_later, &ld), 0);
    assert_int_equal(dlock__loop_poll_run(&lp, both_called, w, t0 + 5000 * DLOCK__NS_PER_MS), 1);
    assert_true(dlock__now_ns() - t0 >= 40 * DLOCK__NS_PER_MS);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w[0].called, 1);
    assert_int_equal(w[1].called, 1);
    assert_int_equal(f.busy, 0);
    assert_null(f.obs);
    assert_int_equal(w[0].obs.efd, -1);
    dlock__loop_poll_close(&lp);
}

/* An observer that stops (its request was cancelled) leaves the list: the
 * landing tells only the one still waiting. */
static void an_observer_that_stops_is_not_told(void **state)
{
    (void)state;
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    dlock__flight f = {1, NULL};
    watcher w[2] = {{{0}, 0}, {{0}, 0}};
    pthread_mutex_lock(&mu);
    for (int i = 0; i < 2; i++)
        assert_int_equal(dlock__flight_observe(&f, &w[i].obs, &lp.loop, landed), DLOCK_OK);
    pthread_mutex_unlock(&mu);
    dlock__flight_unobserve(&w[0].obs, &mu);
    assert_int_equal(w[0].obs.efd, -1);
    pthread_mutex_lock(&mu);
    dlock__flight_land(&f);
    pthread_mutex_unlock(&mu);
    w[0].called = 1; /* so that both_called waits for w[1] alone */
    assert_int_equal(dlock__loop_poll_run(&lp, both_called, w,
                                          dlock__now_ns() + 5000 * DLOCK__NS_PER_MS),
                     1);
    assert_int_equal(w[0].called, 1);
    assert_int_equal(w[1].called, 1);
    dlock__loop_poll_close(&lp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(observers_are_called_back_when_the_flight_lands),
        cmocka_unit_test(an_observer_that_stops_is_not_told),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
