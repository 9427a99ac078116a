/* SPDX-License-Identifier: BSD-3-Clause */
/* The private poll loop of a blocking call (src/engine/loop_poll.c): the
 * rules of loop.h, each as a behaviour. No server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "common.h"
#include "loop_poll.h"

#define MS DLOCK__NS_PER_MS

/* A timer that writes its tag into a shared log when it fires. */
typedef struct rec_timer {
    dlock__timer t;
    char tag;
    struct tlog *tlog;
    int rearm_left; /* set itself again this many times */
    dlock__timer *clear_me; /* clear this one when firing */
    dlock__loop *loop;
} rec_timer;

typedef struct tlog {
    char seq[64];
    size_t n;
    size_t want; /* done when n reaches it */
} tlog;

static void rec_fire(dlock__timer *t)
{
    rec_timer *r = DLOCK__OWNER(t, rec_timer, t);
    if (r->tlog->n + 1 < sizeof r->tlog->seq)
        r->tlog->seq[r->tlog->n++] = r->tag;
    if (r->clear_me)
        dlock__timer_clear(r->loop, r->clear_me);
    if (r->rearm_left > 0) {
        r->rearm_left--;
        r->t.due_ns = dlock__now_ns();
        assert_int_equal(dlock__timer_set(r->loop, &r->t), DLOCK_OK);
    }
}

static int log_full(void *arg)
{
    tlog *l = arg;
    return l->n >= l->want;
}

static void rec_init(rec_timer *r, dlock__loop_poll *lp, tlog *l, char tag, int64_t due_ns)
{
    memset(r, 0, sizeof *r);
    r->tag = tag;
    r->tlog = l;
    r->loop = &lp->loop;
    r->t.due_ns = due_ns;
    r->t.fire = rec_fire;
}

/* rec_init(), then set it: the order of the calls is the order set. */
static void rec_arm(rec_timer *r, dlock__loop_poll *lp, tlog *l, char tag, int64_t due_ns)
{
    rec_init(r, lp, l, tag, due_ns);
    assert_int_equal(dlock__timer_set(&lp->loop, &r->t), DLOCK_OK);
}

static void timers_fire_in_due_order_whatever_the_order_they_were_set(void **state)
{
    (void)state;
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    tlog l = {.want = 4};
    rec_timer a, b, c, d;
    int64_t now = dlock__now_ns();
    rec_arm(&c, &lp, &l, 'c', now + 30 * MS);
    rec_arm(&a, &lp, &l, 'a', now + 5 * MS);
    rec_arm(&d, &lp, &l, 'd', now + 30 * MS); /* same due as c, set after it */
    rec_arm(&b, &lp, &l, 'b', now + 10 * MS);
    assert_int_equal(dlock__loop_poll_run(&lp, log_full, &l, now + 5000 * MS), 1);
    assert_string_equal(l.seq, "abcd");
    /* none fired early */
    assert_true(dlock__now_ns() >= now + 30 * MS);
    dlock__loop_poll_close(&lp);
}

static void a_timer_set_again_moves_and_one_rearmed_in_its_callback_fires_next_turn(void **state)
{
    (void)state;
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    tlog l = {.want = 5};
    rec_timer a, b;
    int64_t now = dlock__now_ns();
    rec_arm(&a, &lp, &l, 'a', now + 5 * MS);
    rec_arm(&b, &lp, &l, 'b', now + 10 * MS);
    a.t.due_ns = now + 20 * MS; /* re-arm later: b goes first now */
    dlock__timer_set(&lp.loop, &a.t);
    a.rearm_left = 3; /* then due "now" three times from inside its callback */
    assert_int_equal(dlock__loop_poll_run(&lp, log_full, &l, now + 5000 * MS), 1);
    assert_string_equal(l.seq, "baaaa");
    dlock__loop_poll_close(&lp);
}

static void a_callback_may_clear_a_due_timer_and_its_own(void **state)
{
    (void)state;
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    tlog l = {.want = 2};
    rec_timer a, b, c, d;
    int64_t now = dlock__now_ns();
    rec_arm(&a, &lp, &l, 'a', now);
    rec_arm(&b, &lp, &l, 'b', now); /* due with a, cleared by a */
    rec_arm(&c, &lp, &l, 'c', now + 1 * MS);
    rec_arm(&d, &lp, &l, 'd', now + 1 * MS);
    a.clear_me = &b.t;
    c.clear_me = &c.t; /* its own record: already off every list */
    dlock__timer_clear(&lp.loop, &d.t);
    dlock__timer_clear(&lp.loop, &d.t); /* clearing twice is harmless */
    assert_int_equal(dlock__loop_poll_run(&lp, log_full, &l, now + 5000 * MS), 1);
    /* nothing else is left to fire */
    assert_int_equal(dlock__loop_poll_run(&lp, log_full, &l, dlock__now_ns() + 50 * MS), 1);
    l.want = 3;
    assert_int_equal(dlock__loop_poll_run(&lp, log_full, &l, dlock__now_ns() + 50 * MS), 0);
    assert_string_equal(l.seq, "ac");
    assert_null(b.t.link.next);
    assert_null(d.t.link.next);
    dlock__loop_poll_close(&lp);
}

/* ---- defer ---------------------------------------------------------------------- */

typedef struct deferrer {
    dlock__timer t;
    dlock__loop *loop;
    int runs, in_call, ran_inside, again;
} deferrer;

static void deferred_fire(dlock__timer *t)
{
    deferrer *d = DLOCK__OWNER(t, deferrer, t);
    if (d->in_call)
        d->ran_inside = 1;
    d->runs++;
    if (d->again > 0) {
        d->again--;
        d->in_call = 1;
        dlock__defer(d->loop, &d->t); /* again: not now, at the next turn */
        d->in_call = 0;
    }
}

static int deferred_ran(void *arg)
{
    return ((deferrer *)arg)->runs >= 3;
}

static void a_deferred_callback_never_runs_inside_the_call_that_deferred_it(void **state)
{
    (void)state;
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    deferrer d;
    memset(&d, 0, sizeof d);
    d.loop = &lp.loop;
    d.t.fire = deferred_fire;
    d.again = 2;
    d.in_call = 1;
    dlock__defer(&lp.loop, &d.t);
    d.in_call = 0;
    assert_int_equal(d.runs, 0);
    int64_t t0 = dlock__now_ns();
    assert_int_equal(dlock__loop_poll_run(&lp, deferred_ran, &d, t0 + 5000 * MS), 1);
    assert_int_equal(d.runs, 3);
    assert_false(d.ran_inside);
    /* deferred work does not wait for a timer or an fd */
    assert_true(dlock__now_ns() - t0 < 1000 * MS);
    /* a deferred record taken back never runs */
    d.again = 0;
    dlock__defer(&lp.loop, &d.t);
    dlock__timer_clear(&lp.loop, &d.t);
    d.runs = 0;
    assert_int_equal(dlock__loop_poll_run(&lp, deferred_ran, &d, dlock__now_ns() + 30 * MS), 0);
    assert_int_equal(d.runs, 0);
    dlock__loop_poll_close(&lp);
}

/* ---- fds -------------------------------------------------------------------------- */

typedef struct reader {
    dlock__io io;
    dlock__loop *loop;
    char got[16];
    size_t n;
    unsigned events;
    int clear_after; /* clear itself after this many bytes */
    dlock__io *other; /* clear this one too */
} reader;

static void reader_ready(dlock__io *io, unsigned events)
{
    reader *r = DLOCK__OWNER(io, reader, io);
    r->events |= events;
    if (events & DLOCK__IO_READ) {
        ssize_t k = read(io->fd, r->got + r->n, 1);
        if (k > 0)
            r->n += (size_t)k;
    }
    if (events & DLOCK__IO_WRITE) {
        io->want &= ~(unsigned)DLOCK__IO_WRITE; /* written: stop asking */
        assert_int_equal(dlock__io_set(r->loop, io), DLOCK_OK);
    }
    if (r->other)
        dlock__io_clear(r->loop, r->other);
    if (r->clear_after && r->n >= (size_t)r->clear_after)
        dlock__io_clear(r->loop, io);
}

static int reader_has_two(void *arg)
{
    return ((reader *)arg)->n >= 2;
}

static void reader_init(reader *r, dlock__loop_poll *lp, int fd, unsigned want)
{
    memset(r, 0, sizeof *r);
    r->loop = &lp->loop;
    r->io.fd = fd;
    r->io.want = want;
    r->io.ready = reader_ready;
}

static int reader_saw_events(void *arg)
{
    return ((reader *)arg)->events != 0;
}

static void io_readiness_on_a_socketpair_and_clearing_inside_the_callback(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    reader r;
    reader_init(&r, &lp, sv[0], DLOCK__IO_READ | DLOCK__IO_WRITE);
    r.clear_after = 2;
    assert_int_equal(dlock__io_set(&lp.loop, &r.io), DLOCK_OK);
    /* writable at once; nothing to read yet */
    assert_int_equal(dlock__loop_poll_run(&lp, reader_has_two, &r, dlock__now_ns() + 30 * MS), 0);
    assert_int_equal(r.events, DLOCK__IO_WRITE);
    assert_int_equal(r.io.want, DLOCK__IO_READ);
    assert_int_equal(write(sv[1], "xyz", 3), 3);
    assert_int_equal(dlock__loop_poll_run(&lp, reader_has_two, &r, dlock__now_ns() + 5000 * MS), 1);
    assert_memory_equal(r.got, "xy", 2);
    /* it cleared itself after two bytes: the third stays unread */
    assert_null(r.io.link.next);
    assert_int_equal(dlock__loop_poll_run(&lp, reader_has_two, &r, dlock__now_ns() + 20 * MS), 1);
    assert_int_equal(r.n, 2);

    /* Two ready fds in one turn: the first clears the second, which then
     * gets no callback although poll() reported it. */
    int sw[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sw), 0);
    reader first, second;
    reader_init(&first, &lp, sv[0], DLOCK__IO_READ);
    reader_init(&second, &lp, sw[0], DLOCK__IO_READ);
    first.other = &second.io;
    first.clear_after = 1;
    assert_int_equal(dlock__io_set(&lp.loop, &first.io), DLOCK_OK);
    assert_int_equal(dlock__io_set(&lp.loop, &second.io), DLOCK_OK);
    assert_int_equal(write(sw[1], "q", 1), 1); /* sv[0] still holds "z" */
    assert_int_equal(dlock__loop_poll_run(&lp, reader_has_two, &first, dlock__now_ns() + 50 * MS), 0);
    assert_int_equal(first.n, 1);
    assert_int_equal(second.n, 0);
    assert_int_equal(second.events, 0);
    dlock__loop_poll_close(&lp);
    close(sv[0]);
    close(sv[1]);
    close(sw[0]);
    close(sw[1]);
}

/* A reader that offers to wait alone (loop.h): it records what it was
 * offered and, when it accepts, reads its byte with a blocking read. */
typedef struct loner {
    reader r;
    int offers, accept;
    int64_t until_ns;
} loner;

static int loner_alone(dlock__io *io, int64_t until_ns)
{
    loner *o = DLOCK__OWNER(io, loner, r.io);
    o->offers++;
    o->until_ns = until_ns;
    if (!o->accept)
        return 0;
    ssize_t k = read(io->fd, o->r.got + o->r.n, 1); /* blocks: the fd is blocking */
    if (k > 0)
        o->r.n += (size_t)k;
    return 1;
}

static int reader_has_one(void *arg)
{
    return ((reader *)arg)->n >= 1;
}

static void a_lone_record_that_offers_waits_alone_and_only_then(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    loner o;
    memset(&o, 0, sizeof o);
    reader_init(&o.r, &lp, sv[0], DLOCK__IO_READ);
    o.r.io.alone = loner_alone;
    o.accept = 1;
    assert_int_equal(dlock__io_set(&lp.loop, &o.r.io), DLOCK_OK);
    assert_int_equal(write(sv[1], "a", 1), 1);
    /* the only record: offered, with the run's end as the next thing due */
    int64_t end = dlock__now_ns() + 5000 * MS;
    assert_int_equal(dlock__loop_poll_run(&lp, reader_has_one, &o.r, end), 1);
    assert_int_equal(o.offers, 1);
    assert_int_equal(o.until_ns, end);
    assert_int_equal(o.r.events, 0); /* ready() never ran: it read by itself */

    /* A timer due earlier is what until_ns says. */
    rec_timer t;
    tlog tl = {.want = 1};
    rec_arm(&t, &lp, &tl, 'T', dlock__now_ns() + 1000 * MS);
    o.r.n = 0;
    assert_int_equal(write(sv[1], "b", 1), 1);
    assert_int_equal(dlock__loop_poll_run(&lp, reader_has_one, &o.r, INT64_MAX), 1);
    assert_int_equal(o.offers, 2);
    assert_int_equal(o.until_ns, t.t.due_ns);
    dlock__timer_clear(&lp.loop, &t.t);

    /* Declined: polled as usual, ready() runs. */
    o.accept = 0;
    o.r.n = 0;
    assert_int_equal(write(sv[1], "c", 1), 1);
    assert_int_equal(dlock__loop_poll_run(&lp, reader_has_one, &o.r, INT64_MAX), 1);
    assert_int_equal(o.offers, 3);
    assert_int_equal(o.r.events, DLOCK__IO_READ);

    /* With a second record (a cancel fd, say) it is never offered. */
    int sw[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sw), 0);
    reader other;
    reader_init(&other, &lp, sw[0], DLOCK__IO_READ);
    assert_int_equal(dlock__io_set(&lp.loop, &other.io), DLOCK_OK);
    o.accept = 1;
    o.r.n = 0;
    assert_int_equal(write(sv[1], "d", 1), 1);
    assert_int_equal(dlock__loop_poll_run(&lp, reader_has_one, &o.r, INT64_MAX), 1);
    assert_int_equal(o.offers, 3);
    dlock__loop_poll_close(&lp);
    close(sv[0]);
    close(sv[1]);
    close(sw[0]);
    close(sw[1]);
}

static void a_hang_up_is_reported_to_a_reader(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    reader r;
    reader_init(&r, &lp, sv[0], DLOCK__IO_READ);
    r.other = &r.io; /* one event is enough */
    dlock__io_set(&lp.loop, &r.io);
    close(sv[1]);
    dlock__loop_poll_run(&lp, reader_saw_events, &r, dlock__now_ns() + 5000 * MS);
    assert_true(r.events & DLOCK__IO_READ);
    assert_true(r.events & DLOCK__IO_ERROR);
    dlock__loop_poll_close(&lp);
    close(sv[0]);
}

/* ---- wake, deadline, sleep ------------------------------------------------------- */

typedef struct waker {
    dlock__loop *loop;
    atomic_int go; /* read by the loop's thread */
} waker;

static void *wake_later(void *arg)
{
    waker *w = arg;
    usleep(50 * 1000);
    atomic_store(&w->go, 1);
    dlock__wake(w->loop);
    return NULL;
}

static int woken(void *arg)
{
    return atomic_load(&((waker *)arg)->go);
}

/* Another thread's wake, 50 ms from now, ends lp's run (no fd, no timer:
 * only the wake can end it before 20 s). */
static void woken_from_another_thread(dlock__loop_poll *lp)
{
    waker w = {&lp->loop, 0};
    pthread_t th;
    int64_t t0 = dlock__now_ns();
    assert_int_equal(pthread_create(&th, NULL, wake_later, &w), 0);
    assert_int_equal(dlock__loop_poll_run(lp, woken, &w, t0 + 20000 * MS), 1);
    assert_true(dlock__now_ns() - t0 < 10000 * MS);
    pthread_join(th, NULL);
}

static void wake_from_another_thread_ends_the_wait(void **state)
{
    (void)state;
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    dlock__wake(&lp.loop); /* no eventfd yet: nothing happens */
    assert_int_equal(lp.wake_fd, -1);
    assert_int_equal(dlock__loop_poll_wakeable(&lp), DLOCK_OK);
    woken_from_another_thread(&lp);
    dlock__loop_poll_close(&lp);
    assert_int_equal(lp.wake_fd, -1);
}

static int never(void *arg)
{
    (void)arg;
    return 0;
}

/* A lent eventfd (a handle's, kept for all its waits: call.c) wakes each
 * loop it is lent to and outlives them: close leaves it open. A count a
 * late wake left in it does not end the next loop's run. */
static void a_lent_wake_fd_serves_loop_after_loop(void **state)
{
    (void)state;
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    assert_true(fd >= 0);
    for (int i = 0; i < 2; i++) {
        dlock__loop_poll lp;
        dlock__loop_poll_init(&lp);
        dlock__loop_poll_lend_wake(&lp, fd);
        woken_from_another_thread(&lp);
        dlock__loop_poll_close(&lp);
        assert_int_equal(lp.wake_fd, -1);
        assert_true(fcntl(fd, F_GETFD) >= 0); /* still open */
    }
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    dlock__loop_poll_lend_wake(&lp, fd);
    dlock__wake(&lp.loop); /* after the run: the count stays */
    dlock__loop_poll_close(&lp);
    dlock__loop_poll_init(&lp);
    dlock__loop_poll_lend_wake(&lp, fd);
    int64_t t0 = dlock__now_ns();
    assert_int_equal(dlock__loop_poll_run(&lp, never, NULL, t0 + 30 * MS), 0);
    assert_true(dlock__now_ns() - t0 >= 25 * MS);
    dlock__loop_poll_close(&lp);
    close(fd);
}

static void run_until_returns_at_the_deadline(void **state)
{
    (void)state;
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    tlog l = {.want = 1};
    rec_timer late;
    int64_t t0 = dlock__now_ns();
    rec_init(&late, &lp, &l, 'z', t0 + 10000 * MS); /* after the deadline */
    dlock__timer_set(&lp.loop, &late.t);
    assert_int_equal(dlock__loop_poll_run(&lp, never, NULL, t0 + 40 * MS), 0);
    int64_t took = dlock__now_ns() - t0;
    assert_true(took >= 40 * MS);
    assert_true(took < 5000 * MS);
    assert_int_equal(l.n, 0);
    assert_non_null(late.t.link.next); /* still armed */
    /* a deadline already passed returns at once */
    assert_int_equal(dlock__loop_poll_run(&lp, never, NULL, t0), 0);
    dlock__loop_poll_close(&lp);
    assert_null(late.t.link.next); /* close forgets it */
}

static void sleep_ends_at_its_deadline_or_when_cancel_fd_is_readable(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    int64_t t0 = dlock__now_ns();
    assert_int_equal(dlock__loop_poll_sleep(t0 + 30 * MS, p[0]), 0);
    assert_true(dlock__now_ns() - t0 >= 30 * MS);
    assert_int_equal(dlock__loop_poll_sleep(t0 + 30 * MS, -1), 0);
    assert_int_equal(write(p[1], "c", 1), 1);
    t0 = dlock__now_ns();
    assert_int_equal(dlock__loop_poll_sleep(t0 + 20000 * MS, p[0]), 1);
    assert_true(dlock__now_ns() - t0 < 10000 * MS);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timers_fire_in_due_order_whatever_the_order_they_were_set),
        cmocka_unit_test(a_timer_set_again_moves_and_one_rearmed_in_its_callback_fires_next_turn),
        cmocka_unit_test(a_callback_may_clear_a_due_timer_and_its_own),
        cmocka_unit_test(a_deferred_callback_never_runs_inside_the_call_that_deferred_it),
        cmocka_unit_test(io_readiness_on_a_socketpair_and_clearing_inside_the_callback),
        cmocka_unit_test(a_lone_record_that_offers_waits_alone_and_only_then),
        cmocka_unit_test(a_hang_up_is_reported_to_a_reader),
        cmocka_unit_test(wake_from_another_thread_ends_the_wait),
        cmocka_unit_test(a_lent_wake_fd_serves_loop_after_loop),
        cmocka_unit_test(run_until_returns_at_the_deadline),
        cmocka_unit_test(sleep_ends_at_its_deadline_or_when_cancel_fd_is_readable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
