/* SPDX-License-Identifier: BSD-3-Clause */
/* Loop hooks (docs/dev/engine-plan.md §4.1). The library never owns the
 * loop it runs on: it asks for an fd to be watched or a timer to be set,
 * through six hooks, and is called back. A blocking call fills them with
 * its private poll() loop (loop_poll.h); an application's libuv or
 * libevent loop can fill the same six later. The shape is hiredis's `ev`
 * hooks plus a timer, which is also what libcurl's multi_socket interface
 * (CURLMOPT_SOCKETFUNCTION / TIMERFUNCTION) and ZooKeeper's
 * zookeeper_interest() ask of a loop.
 *
 * Records are embedded in their owners (a connection embeds its dlock__io,
 * a request its timers), so a loop allocates nothing per request. An owner
 * finds itself from the record it is called with (offsetof).
 *
 * Rules every loop keeps:
 *   - Callbacks run on the loop's thread, from the loop, never inside the
 *     hook call that set the record up.
 *   - A callback may set, change or clear any record, its own included,
 *     and may free the owner of a record after clearing it: the loop
 *     touches no record after a callback cleared it.
 *   - A record is registered with one loop at a time; clear it before
 *     handing it to another. Clearing a record that is not set does
 *     nothing.
 *   - Only wake() may be called from another thread.
 *
 * One optional capability, on the record's side: an io record may offer
 * `alone`, a way to wait for its fd without the loop's poll(). A loop
 * that can (the poll loop) calls it instead of poll() when that record
 * is the only one it watches, nothing is deferred, no other thread can
 * wake it, and until_ns is when the loop next has to run something else
 * (its first timer, or its run's end). The owner then either declines
 * (0: the loop polls as usual) or waits itself, in one blocking system
 * call that ends by until_ns, runs what its ready() would have run, and
 * returns 1. A loop that cannot (an application's libuv or libevent
 * adapter) never calls it: leaving it NULL, or ignoring it, changes no
 * outcome, only the number of system calls. The Redis fan-out offers it
 * for one plain socket awaiting one reply: one recv() with the socket's
 * receive timeout instead of poll() + recv() (S1's 5 system calls,
 * docs/design.md).
 *
 * Its companion, `polled`: a loop that offers `alone` calls it for each
 * record that has it before every poll() that watches the record (it
 * was not alone, or declined), so that an owner whose fd becomes ready
 * only by another thread's work, which its `alone` would have done
 * itself, hands that work back in time (the etcd backend's gRPC calls:
 * etcd_grpc.c). It runs on the loop's thread and changes no record. */
#ifndef DLOCK_LOOP_H
#define DLOCK_LOOP_H

#include <stddef.h>
#include <stdint.h>

enum {
    DLOCK__IO_READ = 1,
    DLOCK__IO_WRITE = 2,
    /* In `events` only: the fd failed or hung up (a reader still sees
     * READ, and reads the end of the stream). */
    DLOCK__IO_ERROR = 4
};

/* Belongs to the loop a record is registered with: the poll loop links
 * its lists through it; an adapter may keep its own watcher's address in
 * `next`. All zero while the record is not registered (set it so with
 * memset or a `{0}` initializer before first use). */
typedef struct dlock__loop_link {
    struct dlock__loop_link *next, *prev;
} dlock__loop_link;

/* The public dlock_io and dlock_timer (dlock.h) are these records: an
 * application's adapter gets them through loop_app.c's hooks and reads
 * them through dlock_io_fd() and the like. */
typedef struct dlock_io {
    int fd;
    unsigned want; /* DLOCK__IO_READ | DLOCK__IO_WRITE: what the owner waits for now */
    /* events: the wanted ones that happened, and DLOCK__IO_ERROR */
    void (*ready)(struct dlock_io *io, unsigned events);
    /* Optional (above): 1 if it waited and ran its step itself, 0 to be
     * polled. NULL: never. */
    int (*alone)(struct dlock_io *io, int64_t until_ns);
    /* Optional (above): the loop polls the fd now. NULL: nothing to do. */
    void (*polled)(struct dlock_io *io);
    dlock__loop_link link;
    void *slot; /* an application's adapter's (dlock_io_slot()) */
    void *app;  /* the application's loop it is set on, or NULL (loop_app.c) */
} dlock__io;

typedef struct dlock_timer {
    int64_t due_ns; /* clock.h: the monotonic clock */
    void (*fire)(struct dlock_timer *t);
    dlock__loop_link link;
    void *slot; /* an application's adapter's (dlock_timer_slot()) */
    void *app;  /* the application's loop it is set on, or NULL (loop_app.c) */
} dlock__timer;

/* Every hook takes dlock__loop.data first. io_set and timer_set return
 * DLOCK_OK or a negative dlock_error (an adapter may have to allocate a
 * watcher; the poll loop has a fixed number of fd slots). */
typedef struct dlock__loop_ops {
    int (*io_set)(void *loop, dlock__io *io);      /* start, or io->fd/want changed */
    void (*io_clear)(void *loop, dlock__io *io);
    int (*timer_set)(void *loop, dlock__timer *t); /* arm or re-arm at t->due_ns */
    void (*timer_clear)(void *loop, dlock__timer *t);
    /* Run t->fire at the loop's next turn (t->due_ns is not read): never
     * inside the call that deferred it. timer_clear() takes it back. */
    void (*defer)(void *loop, dlock__timer *t);
    /* Any thread: make the loop turn now (its wait ends). */
    void (*wake)(void *loop);
} dlock__loop_ops;

typedef struct dlock__loop {
    const dlock__loop_ops *ops;
    void *data;
} dlock__loop;

/* The owner of an embedded record: DLOCK__OWNER(io, struct conn, io). */
#define DLOCK__OWNER(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

static inline int dlock__io_set(dlock__loop *l, dlock__io *io)
{
    return l->ops->io_set(l->data, io);
}

static inline void dlock__io_clear(dlock__loop *l, dlock__io *io)
{
    l->ops->io_clear(l->data, io);
}

static inline int dlock__timer_set(dlock__loop *l, dlock__timer *t)
{
    return l->ops->timer_set(l->data, t);
}

static inline void dlock__timer_clear(dlock__loop *l, dlock__timer *t)
{
    l->ops->timer_clear(l->data, t);
}

static inline void dlock__defer(dlock__loop *l, dlock__timer *t)
{
    l->ops->defer(l->data, t);
}

static inline void dlock__wake(dlock__loop *l)
{
    l->ops->wake(l->data);
}

#endif
