/* SPDX-License-Identifier: BSD-3-Clause */
/* A client loop thread (docs/dev/engine-plan.md §4.1): a thread of its own
 * that turns a poll loop (loop_poll.h) until it is stopped. Its records
 * (io, timers, deferred) are set and cleared on that thread only, by the
 * callbacks that run there; another thread hands work over with
 * dlock__loop_thread_post(), which queues a post under a mutex and wakes
 * the loop. The watchdog (watchdog.c) and the wake-ups (wakeup.c) each run
 * on one.
 *
 * On a looped client (dlock.h, dlock_client_options.loop) the same record
 * runs on the application's loop instead, with no thread: started with
 * that loop, it hands out its hooks; a post (made on the loop's thread,
 * as every call of a looped client is) runs from the loop's next turn;
 * every caller is "on the thread"; stop only drops the posts. The owner
 * clears its own records there before it frees them (the application's
 * loop outlives it).
 *
 * Fork: a child of fork() has none of the parent's threads and may have
 * inherited the mutex locked; dlock__loop_thread_forget() closes the
 * child's copy of the wake-up eventfd without locking, joining or
 * writing. */
#ifndef DLOCK_LOOP_THREAD_H
#define DLOCK_LOOP_THREAD_H

#include <pthread.h>

#include "loop_poll.h"

/* Work handed to the loop thread: run(p) runs there, at its next turn.
 * Embedded in its owner, like the loop's records. */
typedef struct dlock__post {
    void (*run)(struct dlock__post *p);
    struct dlock__post *next; /* the loop thread's, under its mutex */
    int queued;               /* the same */
} dlock__post;

typedef struct dlock__loop_thread {
    dlock__loop_poll lp; /* touched by the thread only */
    dlock__loop *app;    /* the application's loop, or NULL: a thread */
    dlock__timer turn;   /* app: the posts' run at the loop's next turn */
    pthread_t thread;
    pthread_mutex_t mu;
    int stop;                          /* under mu */
    dlock__post *posted, **posted_end; /* under mu: a FIFO */
} dlock__loop_thread;

/* Make the loop and its wake-up eventfd, and start the thread; with app
 * (the client's application loop, or NULL), neither. On failure nothing
 * is left to free: DLOCK_EIO (no eventfd), DLOCK_ENOMEM (no thread:
 * EAGAIN, a resource limit). */
int dlock__loop_thread_start(dlock__loop_thread *lt, dlock__loop *app);

/* The hooks: for the loop thread's own callbacks only (loop.h: only wake()
 * may be called from another thread). */
static inline dlock__loop *dlock__loop_thread_loop(dlock__loop_thread *lt)
{
    return lt->app ? lt->app : &lt->lp.loop;
}

/* Any thread, the loop's own included: run p->run on the loop thread at
 * its next turn (never inside this call). A post still queued is not
 * queued twice: it runs once. Once dlock__loop_thread_stop() began a post
 * is never run (posting then does nothing, until _free()). */
void dlock__loop_thread_post(dlock__loop_thread *lt, dlock__post *p);

/* Whether the caller is the loop thread. */
int dlock__loop_thread_on_thread(const dlock__loop_thread *lt);

/* Stop the loop at its next turn (after the callback running now) and
 * join the thread; queued posts are dropped, records still set stay until
 * _free(), and no callback runs any more. From the loop thread itself (a
 * callback) it is refused, DLOCK_EINVAL and nothing done: a thread cannot
 * join itself. Else DLOCK_OK. */
int dlock__loop_thread_stop(dlock__loop_thread *lt);

/* After dlock__loop_thread_stop(), once no other thread may post: forget
 * the records still set, close the eventfd, destroy the mutex. */
void dlock__loop_thread_free(dlock__loop_thread *lt);

/* In a child of fork(): close the eventfd; no lock, join or write. The
 * memory is the owner's to free. */
void dlock__loop_thread_forget(dlock__loop_thread *lt);

#endif
