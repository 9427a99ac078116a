/* SPDX-License-Identifier: BSD-3-Clause */
/* The client loop thread (src/engine/loop_thread.c): a poll loop turned by
 * a thread of its own, work handed to it by posts, stopped by a join.
 * No server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "common.h"
#include "loop_thread.h"

#define MS DLOCK__NS_PER_MS

/* Wait (at most 5 s) until *v reaches want. */
static int wait_for(atomic_int *v, int want)
{
    int64_t end = dlock__now_ns() + 5000 * MS;
    while (atomic_load(v) < want && dlock__now_ns() < end)
        usleep(1000);
    return atomic_load(v) >= want;
}

/* ---- timers, armed by a post on the thread -------------------------------- */

typedef struct order {
    dlock__loop_thread *lt;
    dlock__post arm;
    struct tick {
        dlock__timer t;
        struct order *o;
        char tag;
        int64_t after_ms;
    } ticks[3];
    char seq[8];
    atomic_int fired;
    atomic_int off_thread; /* callbacks that ran on another thread */
} order;

static void tick_fire(dlock__timer *t)
{
    struct tick *k = DLOCK__OWNER(t, struct tick, t);
    order *o = k->o;
    if (!dlock__loop_thread_on_thread(o->lt))
        atomic_fetch_add(&o->off_thread, 1);
    o->seq[atomic_load(&o->fired)] = k->tag;
    atomic_fetch_add(&o->fired, 1);
}

static void arm_ticks(dlock__post *p)
{
    order *o = DLOCK__OWNER(p, order, arm);
    if (!dlock__loop_thread_on_thread(o->lt))
        atomic_fetch_add(&o->off_thread, 1);
    int64_t now = dlock__now_ns();
    for (int i = 0; i < 3; i++) {
        o->ticks[i].t.due_ns = now + o->ticks[i].after_ms * MS;
        assert_int_equal(dlock__timer_set(dlock__loop_thread_loop(o->lt), &o->ticks[i].t),
                         DLOCK_OK);
    }
}

static void timers_set_on_the_thread_fire_there_in_due_order(void **state)
{
    (void)state;
    dlock__loop_thread lt;
    assert_int_equal(dlock__loop_thread_start(&lt, NULL), DLOCK_OK);
    static order o;
    memset(&o, 0, sizeof o);
    o.lt = &lt;
    o.arm.run = arm_ticks;
    const char tags[3] = {'c', 'a', 'b'};
    const int64_t after[3] = {60, 20, 40};
    for (int i = 0; i < 3; i++)
        o.ticks[i] = (struct tick){.t = {.fire = tick_fire}, .o = &o, .tag = tags[i],
                                   .after_ms = after[i]};
    int64_t t0 = dlock__now_ns();
    dlock__loop_thread_post(&lt, &o.arm);
    assert_true(wait_for(&o.fired, 3));
    assert_true(dlock__now_ns() - t0 >= 60 * MS);
    assert_memory_equal(o.seq, "abc", 3);
    assert_int_equal(atomic_load(&o.off_thread), 0);
    assert_int_equal(dlock__loop_thread_stop(&lt), DLOCK_OK);
    dlock__loop_thread_free(&lt);
}

/* ---- posts ------------------------------------------------------------------- */

typedef struct poster {
    dlock__loop_thread *lt;
    dlock__post hold, counted, stopper;
    atomic_int holding;  /* hold's run is waiting for release */
    atomic_int release;
    atomic_int runs;     /* counted's runs */
    atomic_int on_thread;
    atomic_int stop_rc_set;
    int stop_rc;
} poster;

/* Keeps the loop thread busy until the test releases it. */
static void hold_run(dlock__post *p)
{
    poster *s = DLOCK__OWNER(p, poster, hold);
    atomic_store(&s->holding, 1);
    while (!atomic_load(&s->release))
        usleep(1000);
}

static void counted_run(dlock__post *p)
{
    poster *s = DLOCK__OWNER(p, poster, counted);
    if (dlock__loop_thread_on_thread(s->lt))
        atomic_fetch_add(&s->on_thread, 1);
    atomic_fetch_add(&s->runs, 1);
}

static void stopper_run(dlock__post *p)
{
    poster *s = DLOCK__OWNER(p, poster, stopper);
    s->stop_rc = dlock__loop_thread_stop(s->lt);
    atomic_store(&s->stop_rc_set, 1);
}

static void init_poster(poster *s, dlock__loop_thread *lt)
{
    memset(s, 0, sizeof *s);
    s->lt = lt;
    s->hold.run = hold_run;
    s->counted.run = counted_run;
    s->stopper.run = stopper_run;
}

static void a_post_from_another_thread_runs_on_the_loop_thread_once(void **state)
{
    (void)state;
    dlock__loop_thread lt;
    assert_int_equal(dlock__loop_thread_start(&lt, NULL), DLOCK_OK);
    static poster s;
    init_poster(&s, &lt);
    assert_false(dlock__loop_thread_on_thread(&lt));

    dlock__loop_thread_post(&lt, &s.counted);
    assert_true(wait_for(&s.runs, 1));
    assert_int_equal(atomic_load(&s.on_thread), 1);

    /* Posted twice while the thread is busy: queued once, run once. */
    dlock__loop_thread_post(&lt, &s.hold);
    assert_true(wait_for(&s.holding, 1));
    dlock__loop_thread_post(&lt, &s.counted);
    dlock__loop_thread_post(&lt, &s.counted);
    atomic_store(&s.release, 1);
    assert_true(wait_for(&s.runs, 2));
    usleep(50 * 1000);
    assert_int_equal(atomic_load(&s.runs), 2);
    assert_int_equal(atomic_load(&s.on_thread), 2);
    assert_int_equal(dlock__loop_thread_stop(&lt), DLOCK_OK);
    dlock__loop_thread_free(&lt);
}

static void *release_later(void *arg)
{
    poster *s = arg;
    usleep(50 * 1000);
    atomic_store(&s->release, 1);
    return NULL;
}

static void stop_joins_the_thread_and_drops_what_is_queued(void **state)
{
    (void)state;
    dlock__loop_thread lt;
    assert_int_equal(dlock__loop_thread_start(&lt, NULL), DLOCK_OK);
    static poster s;
    init_poster(&s, &lt);
    /* The thread waits for hold's release while stop is asked: the post
     * queued behind it never runs, and stop returns once the thread
     * ended (the join). */
    dlock__loop_thread_post(&lt, &s.hold);
    assert_true(wait_for(&s.holding, 1));
    dlock__loop_thread_post(&lt, &s.counted);
    pthread_t releaser;
    assert_int_equal(pthread_create(&releaser, NULL, release_later, &s), 0);
    int64_t t0 = dlock__now_ns();
    assert_int_equal(dlock__loop_thread_stop(&lt), DLOCK_OK);
    int64_t took = dlock__now_ns() - t0;
    assert_true(took >= 40 * MS && took < 2000 * MS);
    assert_int_equal(pthread_join(releaser, NULL), 0);
    /* A post after the stop does nothing either. */
    dlock__loop_thread_post(&lt, &s.counted);
    usleep(20 * 1000);
    assert_int_equal(atomic_load(&s.runs), 0);
    dlock__loop_thread_free(&lt);
}

static void stop_from_a_callback_is_refused_and_the_loop_goes_on(void **state)
{
    (void)state;
    dlock__loop_thread lt;
    assert_int_equal(dlock__loop_thread_start(&lt, NULL), DLOCK_OK);
    static poster s;
    init_poster(&s, &lt);
    dlock__loop_thread_post(&lt, &s.stopper);
    assert_true(wait_for(&s.stop_rc_set, 1));
    assert_int_equal(s.stop_rc, DLOCK_EINVAL);
    dlock__loop_thread_post(&lt, &s.counted);
    assert_true(wait_for(&s.runs, 1));
    assert_int_equal(dlock__loop_thread_stop(&lt), DLOCK_OK);
    dlock__loop_thread_free(&lt);
}

static void a_fork_child_forgets_the_thread_without_joining(void **state)
{
    (void)state;
    dlock__loop_thread lt;
    assert_int_equal(dlock__loop_thread_start(&lt, NULL), DLOCK_OK);
    static poster s;
    init_poster(&s, &lt);
    /* Fork while the loop thread sits in hold_run: in the child nothing
     * turns the loop; forget must return without waiting for it. */
    dlock__loop_thread_post(&lt, &s.hold);
    assert_true(wait_for(&s.holding, 1));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dlock__loop_thread_forget(&lt);
        _exit(lt.lp.wake_fd == -1 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* The parent's loop still turns. */
    atomic_store(&s.release, 1);
    dlock__loop_thread_post(&lt, &s.counted);
    assert_true(wait_for(&s.runs, 1));
    assert_int_equal(dlock__loop_thread_stop(&lt), DLOCK_OK);
    dlock__loop_thread_free(&lt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timers_set_on_the_thread_fire_there_in_due_order),
        cmocka_unit_test(a_post_from_another_thread_runs_on_the_loop_thread_once),
        cmocka_unit_test(stop_joins_the_thread_and_drops_what_is_queued),
        cmocka_unit_test(stop_from_a_callback_is_refused_and_the_loop_goes_on),
        cmocka_unit_test(a_fork_child_forgets_the_thread_without_joining),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
