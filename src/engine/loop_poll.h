/* SPDX-License-Identifier: BSD-3-Clause */
/* The private loop of a blocking call: poll() over the fds of its io
 * records, a sorted timer list, a deferred queue, and a wake-up eventfd
 * made only for a call that another thread may need to wake (a waiting
 * call that can be cancelled). It lives on the caller's stack and
 * allocates nothing; it is driven by one thread, the caller's, through
 * dlock__loop_poll_run(), which a callback must not call again for the
 * loop it runs on (a nested blocking call makes a loop of its own). Its
 * hooks (loop.h) are lp->loop. */
#ifndef DLOCK_LOOP_POLL_H
#define DLOCK_LOOP_POLL_H

#include <poll.h>
#include <stdint.h>

#include "common.h"
#include "loop.h"

/* fds one private loop watches at most: a call watches its cancel fd and
 * the sockets of one request (curl opens one or two per transfer, a Redis
 * fan-out one per node, DLOCK__MAX_NODES at most). */
#define DLOCK__LOOP_POLL_FDS (DLOCK__MAX_NODES + 2)

typedef struct dlock__loop_poll {
    dlock__loop loop; /* the hooks, with data = this */
    dlock__loop_link ios, timers, deferred; /* list heads; timers sorted by due_ns */
    unsigned n_ios;
    int wake_fd;   /* -1 until dlock__loop_poll_wakeable() (or a lent one) */
    int wake_lent; /* wake_fd is the lender's: close leaves it open */
    /* The turn in progress: io_clear() forgets a record here, so that a
     * callback may clear (and free) a record whose events are pending. */
    dlock__io *turn[DLOCK__LOOP_POLL_FDS];
    struct pollfd pfd[DLOCK__LOOP_POLL_FDS + 1];
    unsigned n_turn;
} dlock__loop_poll;

void dlock__loop_poll_init(dlock__loop_poll *lp);
/* Make the eventfd that wake() writes. Before any other thread may call
 * wake(): without it, wake() does nothing (nothing can wait on a thread
 * of a loop that has none). DLOCK_OK or DLOCK_EIO. */
int dlock__loop_poll_wakeable(dlock__loop_poll *lp);
/* The same with an eventfd the caller keeps (a handle's, made once for
 * all its waits, which saves its making and closing per wait): close
 * leaves it open. A count left in it by a wake() after the last loop it
 * was lent to ended costs the next one a turn at most. */
void dlock__loop_poll_lend_wake(dlock__loop_poll *lp, int fd);
/* Forget every record still set (their links are zeroed, no callback
 * runs) and close the eventfd (unless lent). */
void dlock__loop_poll_close(dlock__loop_poll *lp);

/* Turn the loop until done(arg) returns non-zero (1) or deadline_ns
 * passes first (0). done is asked before the first turn and after every
 * callback. INT64_MAX: no deadline. A turn runs the callbacks deferred
 * before it, waits in poll() until an fd is ready, the first timer is due
 * or the deadline, then runs the ready fds' callbacks and the due timers'
 * in due order. The poll() is left to a lone io record that offers to
 * wait by itself (loop.h, `alone`). */
int dlock__loop_poll_run(dlock__loop_poll *lp, int (*done)(void *arg), void *arg,
                         int64_t deadline_ns);

/* 1 if l is a private loop of this kind (whose poll() it leaves to a
 * lone record that offers `alone`, and tells one that does not wait
 * alone: loop.h, `polled`), 0 for an application's or another loop. */
int dlock__loop_is_poll(const dlock__loop *l);

/* A flag raised when an fd turns readable: the cancel eventfd of a waiting
 * call, as an io record. Once raised it stops watching, then calls
 * on_raise if set (a request on a loop it does not turn learns of the
 * cancel that way). */
typedef struct dlock__fd_flag {
    dlock__io io;
    dlock__loop *loop;
    int raised;
    void (*on_raise)(struct dlock__fd_flag *f);
} dlock__fd_flag;

/* Watch fd (< 0: never raised); on_raise starts NULL. Returns as io_set
 * does. */
int dlock__fd_flag_watch(dlock__loop *l, dlock__fd_flag *f, int fd);
void dlock__fd_flag_clear(dlock__loop *l, dlock__fd_flag *f);

/* Sleep until deadline_ns on a private loop, or until cancel_fd (or -1)
 * turns readable: then 1, else 0. */
int dlock__loop_poll_sleep(int64_t deadline_ns, int cancel_fd);

#endif
