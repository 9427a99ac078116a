/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "loop_thread.h"

/* Asked by the loop before each turn and after each callback: run what
 * other threads posted since, then say whether to stop. The posts queued
 * now run now; one posted again by its own run waits for the next ask. */
static int turn_done(void *arg)
{
    dlock__loop_thread *lt = arg;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&lt->mu));
    dlock__post *batch = lt->stop ? NULL : lt->posted;
    if (batch) {
        lt->posted = NULL;
        lt->posted_end = &lt->posted;
    }
    while (batch) {
        /* Under the mutex: a post from another thread may relink p once
         * it is no longer queued (TSan, test_chain_threads). */
        dlock__post *p = batch;
        batch = p->next;
        p->queued = 0;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&lt->mu));
        p->run(p);
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&lt->mu));
    }
    int stop = lt->stop;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&lt->mu));
    return stop;
}

static void *loop_thread_main(void *arg)
{
    dlock__loop_thread *lt = arg;
    /* start() holds mu until pthread_create() stored lt->thread, which
     * dlock__loop_thread_on_thread() reads here. */
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&lt->mu));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&lt->mu));
    dlock__loop_poll_run(&lt->lp, turn_done, lt, INT64_MAX);
    return NULL;
}

/* On the application's loop: the posts queued run now (turn_done's). */
static void app_turn(dlock__timer *t)
{
    (void)turn_done(DLOCK__OWNER(t, dlock__loop_thread, turn));
}

int dlock__loop_thread_start(dlock__loop_thread *lt, dlock__loop *app)
{
    memset(lt, 0, sizeof *lt);
    dlock__loop_poll_init(&lt->lp);
    lt->posted_end = &lt->posted;
    if (app) {
        lt->app = app;
        lt->turn.fire = app_turn;
    } else if (dlock__loop_poll_wakeable(&lt->lp) != DLOCK_OK) {
        return DLOCK_EIO;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&lt->mu, NULL));
    if (app)
        return DLOCK_OK;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&lt->mu));
    int rc = pthread_create(&lt->thread, NULL, loop_thread_main, lt);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&lt->mu));
    if (rc == EAGAIN) {
        /* Out of threads is a resource limit, not a bug. */
        DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&lt->mu));
        dlock__loop_poll_close(&lt->lp);
        return DLOCK_ENOMEM;
    }
    DLOCK__CHECK_PTHREAD(rc);
    return DLOCK_OK;
}

void dlock__loop_thread_post(dlock__loop_thread *lt, dlock__post *p)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&lt->mu));
    if (!p->queued && !lt->stop) {
        p->queued = 1;
        p->next = NULL;
        *lt->posted_end = p;
        lt->posted_end = &p->next;
    }
    int stopped = lt->stop;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&lt->mu));
    if (lt->app) {
        if (!stopped)
            dlock__defer(lt->app, &lt->turn);
        return;
    }
    /* The eventfd outlives the thread until dlock__loop_thread_free(). */
    dlock__wake(&lt->lp.loop);
}

int dlock__loop_thread_on_thread(const dlock__loop_thread *lt)
{
    return lt->app || pthread_equal(pthread_self(), lt->thread);
}

int dlock__loop_thread_stop(dlock__loop_thread *lt)
{
    if (!lt->app && dlock__loop_thread_on_thread(lt))
        return DLOCK_EINVAL;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&lt->mu));
    lt->stop = 1;
    for (dlock__post *p = lt->posted; p; p = p->next)
        p->queued = 0;
    lt->posted = NULL;
    lt->posted_end = &lt->posted;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&lt->mu));
    if (lt->app) {
        dlock__timer_clear(lt->app, &lt->turn);
        return DLOCK_OK;
    }
    dlock__wake(&lt->lp.loop);
    DLOCK__CHECK_PTHREAD(pthread_join(lt->thread, NULL));
    return DLOCK_OK;
}

void dlock__loop_thread_free(dlock__loop_thread *lt)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&lt->mu));
    dlock__loop_poll_close(&lt->lp);
}

void dlock__loop_thread_forget(dlock__loop_thread *lt)
{
    /* A looped client's records are on a loop a fork child does not run. */
    if (lt->lp.wake_fd >= 0)
        close(lt->lp.wake_fd);
    lt->lp.wake_fd = -1;
}
