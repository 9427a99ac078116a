/* SPDX-License-Identifier: BSD-3-Clause */
/* The engine's wait (acquire.h). */
#include <inttypes.h>
#include <string.h>

#include "acquire.h"
#include "backend.h"
#include "client.h"
#include "clock.h"
#include "handle.h"
#include "kinds.h"
#include "observe.h"
#include "rand.h"

/* A waiter still gets a look at least this often: its subscription may
 * have broken without a message, or the holder is another library's lock
 * on the same key (a plain SET NX PX), which publishes nothing on release.
 * 200 ms: such a release is seen within 250 ms, for 5 looks a second per
 * waiter (issue 20; it was 1 s). */
#define SAFETY_POLL_MS 200

static void try_start(dlock__acq *a);
static void begin_start(dlock__acq *a);
static void sleep_after(dlock__acq *a);

/* A kind that waits in line (kinds.h, DLOCK__WAIT_QUEUE), or any kind on
 * a store where every wait is a place in line (backend.h, in_line: etcd):
 * its wait begins (backend.h, begin) and watches before its first look,
 * and a message may hand it the hold (handed). */
static int queued(const dlock__acq *a)
{
    return a->l->kind->wait == DLOCK__WAIT_QUEUE || a->l->backend->in_line;
}

/* The next step after a sleep or the watch's confirmation: the wait's
 * begin again until it is done, then the next try. */
static void next_step(dlock__acq *a)
{
    if (a->begun)
        try_start(a);
    else
        begin_start(a);
}

static void finish(dlock__acq *a, int rc)
{
    dlock_lock *l = a->l;
    if (a->watching)
        l->backend->unwatch(l);
    a->watching = 0;
    if (a->hooked) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
        l->waiter.wake = NULL;
        l->waiter.wake_arg = NULL;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
        a->hooked = 0;
    }
    a->rc = rc;
    a->done(a);
}

static void left(dlock__op *op)
{
    dlock__acq *a = DLOCK__OWNER(op, dlock__acq, leave_op);
    finish(a, op->v.code);
}

/* A give-up (rc): leave the store's waiter list or line first, a request
 * of its own within timeout_ms (the acquire ends when it answers, with
 * rc, or DLOCK_OK when the leave found the lock handed to us), or at once
 * when there is nothing to leave. */
static void leave_then_finish(dlock__acq *a, int64_t timeout_ms, int rc)
{
    dlock_lock *l = a->l;
    a->rc = rc;
    a->leave_op = (dlock__op){.l = l, .loop = a->loop, .done = left};
    a->leave_op.v = (dlock__verdict){rc, 0, -1, -1, 0, 0};
    dlock__op_start(&a->leave_op);
    if (l->backend->leave(l, timeout_ms, &a->leave_op) != DLOCK_OK) {
        a->leave_op.state = DLOCK__OP_DONE; /* the backend's rule: no done() */
        finish(a, rc);
    }
}

/* A try the backend could not start ends the acquire at the loop's next
 * turn, not inside the call that started it. */
static void finish_deferred(dlock__timer *t)
{
    dlock__acq *a = DLOCK__OWNER(t, dlock__acq, timer);
    finish(a, a->rc);
}

/* The wait's deadline came after a try that may have left a place in
 * line or a listing (rc: its code): leave it, within an I/O timeout (the
 * node answered lately), and end with DLOCK_ETIMEDOUT, or rc if that try
 * failed (a queued kind's leave may find the lock handed to us). */
static void leave_at_deadline(dlock__acq *a, int rc)
{
    dlock_lock *l = a->l;
    dlock__err_append(&l->err, "gave up after %" PRId64 " ms", a->wait_ms);
    leave_then_finish(a, l->client->opts.io_timeout_ms,
                      rc == DLOCK_ENOTACQUIRED ? DLOCK_ETIMEDOUT : rc);
}

/* The sleep ends on the first of: a cancel, a wake-up message since the
 * try began (the waiter record's count moved) or a hand-over, the
 * sleep's end. Asked when the sleep starts, when its timer fires, and
 * whenever the driver is poked. */
static void check_sleep(dlock__acq *a)
{
    dlock_lock *l = a->l;
    if (!a->sleeping)
        return;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    int canceled = l->canceled;
    int pushed = l->waiter.handed_over || l->waiter.woken != a->woken;
    int over = canceled || pushed || dlock__now_ns() >= a->wake_at_ns;
    if (over)
        l->canceled = 0; /* a cancel is used up by the wait it ends */
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    if (!over)
        return;
    a->sleeping = 0;
    dlock__timer_clear(a->loop, &a->timer);
    if (!canceled) {
        a->slept_out = !pushed;
        if (pushed)
            dlock__obs_wakeup(l, 1);
        if (queued(a) && a->begun && l->backend->handed(l)) {
            finish(a, DLOCK_OK); /* the hand-over's message was enough */
            return;
        }
        if (queued(a) && a->tried && dlock__now_ns() >= a->deadline_ns) {
            /* In line at the deadline: the leave takes a lock handed to
             * us meanwhile, so one more look would only cost a round trip
             * (an I/O timeout past the deadline on a stalled node). */
            leave_at_deadline(a, a->op.v.code);
            return;
        }
        next_step(a);
        return;
    }
    if (a->begun)
        dlock__err_set(&l->err, "cancelled while waiting for \"%s\"", l->name);
    else
        dlock__err_set(&l->err, "cancelled while what an earlier acquire of \"%s\" left "
                       "was not settled", l->name);
    /* Leave the list too (a cancel is a give-up), but a cancel must end
     * the wait at once: 100 ms at most, else the entry lapses by itself. */
    leave_then_finish(a, DLOCK__CANCEL_LEAVE_MS, DLOCK_ECANCELED);
}

static void sleep_over(dlock__timer *t)
{
    check_sleep(DLOCK__OWNER(t, dlock__acq, timer));
}

/* Make the loop turn from now on when a wake-up message (wakeup_chan.c),
 * a watch's confirmation or a cancel (dlock__engine_cancel) comes: 1 if
 * it will, 0 if the driver cannot be woken (no wake hook, or no fd to
 * spare for its eventfd). */
static int hook(dlock__acq *a)
{
    dlock_lock *l = a->l;
    if (a->hooked)
        return 1;
    if (!a->hooks.wake || a->hooks.wakeable(a->hooks.wake_arg) != DLOCK_OK)
        return 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    l->waiter.wake = a->hooks.wake;
    l->waiter.wake_arg = a->hooks.wake_arg;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    a->hooked = 1;
    return 1;
}

static void sleep_until(dlock__acq *a, int64_t wake_at_ns)
{
    dlock_lock *l = a->l;
    if (!a->hooked && a->hooks.wake && !hook(a)) {
        if (a->hooks.sleep_blocking) {
            /* No eventfd (no fd to spare): nothing could make the loop
             * turn on a cancel or a wake-up, so the blocking driver sleeps
             * on the handle's condition variable instead, as the wait did
             * before it was the engine's. It returns on one of the ends
             * check_sleep() looks for, which then ends the sleep. */
            a->hooks.sleep_blocking(l, a->woken, wake_at_ns);
            a->wake_at_ns = wake_at_ns;
            a->sleeping = 1;
            check_sleep(a);
            return;
        }
    }
    a->wake_at_ns = wake_at_ns;
    a->sleeping = 1;
    a->timer.due_ns = wake_at_ns;
    a->timer.fire = sleep_over;
    (void)dlock__timer_set(a->loop, &a->timer); /* the poll loop's never fails */
    check_sleep(a);                             /* woken or cancelled during the try */
}

/* How long to sleep after a refused try: a split vote backs off (nobody
 * publishes its end); a watcher sleeps until the holder's expiry at most
 * (a crashed holder never publishes), SAFETY_POLL_MS at most, and until
 * the head of the line's look (releases within a run wake nobody:
 * docs/waiting.md); a lock-delay until its end (nobody publishes it);
 * otherwise a backoff, no longer than the holder's TTL. */
static int64_t sleep_ms_after(dlock__acq *a, const dlock__verdict *v)
{
    const dlock_lock *l = a->l;
    int64_t ms;
    if (v->flags & DLOCK__V_QUEUED) {
        /* In line: the next look keeps our place (look_ms), and comes
         * at the holder's expiry at the latest. */
        ms = v->look_ms;
        if (v->holder_ttl_ms >= 0)
            ms = DLOCK__MIN(ms, v->holder_ttl_ms + 1);
    } else if ((v->flags & DLOCK__V_DELAYED) && v->holder_ttl_ms >= 0) {
        ms = v->holder_ttl_ms + 1; /* nobody publishes a lock-delay's end */
    } else if (v->code == DLOCK_ENOTACQUIRED && (v->flags & DLOCK__V_SPLIT)) {
        ms = dlock__backoff_ms(a->attempts++, l->opts.retry_min_ms, l->opts.retry_max_ms);
    } else if (a->watching && v->holder_ttl_ms >= 0) {
        ms = DLOCK__MIN(v->holder_ttl_ms + 1, SAFETY_POLL_MS);
        if (v->look_ms >= 0)
            ms = DLOCK__MIN(ms, v->look_ms + 1);
    } else {
        ms = dlock__backoff_ms(a->attempts++, l->opts.retry_min_ms, l->opts.retry_max_ms);
        if (v->holder_ttl_ms >= 0 && v->holder_ttl_ms + 1 < ms)
            ms = v->holder_ttl_ms + 1;
    }
    return ms;
}

/* After a refused try: sleep (sleep_ms_after) until the next. */
static void sleep_after(dlock__acq *a)
{
    int64_t sleep_ms = sleep_ms_after(a, &a->op.v);
    sleep_until(a, DLOCK__MIN(a->deadline_ns, dlock__now_ns() + sleep_ms * DLOCK__NS_PER_MS));
}

/* The watch's answer (backend.h, watch_ready): confirmed, the next try
 * goes now; else the wait goes on without it (polling, as a client
 * without wake-ups), by a sleep, which also ends on a cancel. */
static void confirm_over(dlock__acq *a, int ready)
{
    dlock_lock *l = a->l;
    if (ready == 1) {
        next_step(a);
        return;
    }
    l->backend->unwatch(l);
    a->watching = 0;
    if (a->tried) {
        sleep_after(a);
        return;
    }
    /* A queued kind's watch, before its first look: the wait goes on
     * without it at once, unless it was cancelled meanwhile. */
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    int canceled = l->canceled;
    l->canceled = 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    if (!canceled) {
        try_start(a);
        return;
    }
    dlock__err_set(&l->err, "cancelled while waiting for \"%s\"", l->name);
    leave_then_finish(a, DLOCK__CANCEL_LEAVE_MS, DLOCK_ECANCELED);
}

/* Waiting for the watch's confirmation ends on the first of: confirmed or
 * refused (the backend pokes the loop), a cancel, its deadline. Asked
 * when the wait starts, when its timer fires, and whenever the driver is
 * poked. */
static void check_confirm(dlock__acq *a)
{
    dlock_lock *l = a->l;
    if (!a->confirming)
        return;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    int canceled = l->canceled; /* left for the sleep that follows to use */
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    int ready = canceled ? 0 : l->backend->watch_ready(l, 0);
    if (ready == 0 && !canceled && dlock__now_ns() < a->confirm_by_ns)
        return;
    a->confirming = 0;
    dlock__timer_clear(a->loop, &a->timer);
    confirm_over(a, ready);
}

static void confirm_timeout(dlock__timer *t)
{
    check_confirm(DLOCK__OWNER(t, dlock__acq, timer));
}

/* A watch was started: the next try waits until the store confirmed it
 * (subscribe-before-the-next-try), at most a connect and an I/O timeout
 * and never past the wait's deadline, on the loop. A driver that cannot
 * be woken waits for it in the backend (blocking, as the wait did before
 * it was the engine's). */
static void confirm_wait(dlock__acq *a)
{
    dlock_lock *l = a->l;
    const dlock_client_options *o = &l->client->opts;
    int64_t by = dlock__deadline_after_ms(o->connect_timeout_ms + o->io_timeout_ms);
    by = DLOCK__MIN(by, a->deadline_ns);
    if (!hook(a)) {
        confirm_over(a, l->backend->watch_ready(l, by));
        return;
    }
    a->confirming = 1;
    a->confirm_by_ns = by;
    a->timer.due_ns = by;
    a->timer.fire = confirm_timeout;
    (void)dlock__timer_set(a->loop, &a->timer); /* the poll loop's never fails */
    check_confirm(a); /* confirmed already (another waiter's channel) */
}

static void try_done(dlock__op *op)
{
    dlock__acq *a = DLOCK__OWNER(op, dlock__acq, op);
    dlock_lock *l = a->l;
    int rc = op->v.code;
    a->tried = 1;
    if (rc == DLOCK_OK && a->slept_out)
        dlock__obs_wakeup(l, 0); /* no message: this look found it free */
    if (rc == DLOCK_ECANCELED && a->wait_ms != 0) {
        /* A cancel that cut the try short gives up as one during a sleep
         * does: it leaves the waiter list (the try may have listed it). */
        leave_then_finish(a, DLOCK__CANCEL_LEAVE_MS, rc);
        return;
    }
    if (rc == DLOCK_OK || a->wait_ms == 0 || !(op->v.flags & DLOCK__V_RETRY)) {
        finish(a, rc);
        return;
    }
    int64_t now = dlock__now_ns();
    if (now >= a->deadline_ns) {
        if (rc == DLOCK_ENOTACQUIRED || (op->v.flags & DLOCK__V_QUEUED)) {
            /* The node answered just now: worth one ZREM (not after a
             * failure: it could cost an I/O timeout). A place in line is
             * left whatever the look's answer: it may have joined. */
            leave_at_deadline(a, rc);
            return;
        }
        finish(a, rc);
        return;
    }
    /* Subscribe before the next try, so that a release between that try
     * and the sleep still wakes us (a queued kind watched at its begin). */
    if (!a->watching && !queued(a) && l->client->opts.wakeups && rc == DLOCK_ENOTACQUIRED) {
        a->watching = l->backend->watch(l) == DLOCK_OK;
        if (a->watching) {
            confirm_wait(a);
            return;
        }
    }
    sleep_after(a);
}

/* Start the backend's request (its try or begin) as a->op, answered to
 * done. The waiter record's count is read first: a message from then on
 * ends the sleep that may follow. */
static void request(dlock__acq *a, void (*done)(dlock__op *op),
                    int (*start)(dlock_lock *l, dlock__op *op))
{
    dlock_lock *l = a->l;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    a->woken = l->waiter.woken;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    a->op.state = DLOCK__OP_NEW;
    a->op.done = done;
    a->op.deadline_ns = a->deadline_ns;
    a->op.v = (dlock__verdict){DLOCK_OK, 0, -1, -1, 0, 0};
    dlock__op_start(&a->op);
    int rc = start(l, &a->op);
    if (rc != DLOCK_OK) {
        a->op.state = DLOCK__OP_DONE; /* the backend's rule: no done() for a refused start */
        a->rc = rc;
        a->timer.fire = finish_deferred;
        dlock__defer(a->loop, &a->timer);
    }
}

static void try_start(dlock__acq *a)
{
    a->l->obs_attempts++;
    request(a, try_done, a->l->backend->try);
}

/* The wait's begin answered: on to the watch and the first look, or a
 * backoff before the next begin (V_RETRY), or the end. */
static void begin_done(dlock__op *op)
{
    dlock__acq *a = DLOCK__OWNER(op, dlock__acq, op);
    dlock_lock *l = a->l;
    int rc = op->v.code;
    if (rc == DLOCK_OK) {
        a->begun = 1;
        /* Watch before the first look: the release that hands the lock
         * to us may come right after it. */
        if (a->wait_ms != 0 && l->client->opts.wakeups) {
            a->watching = l->backend->watch(l) == DLOCK_OK;
            if (a->watching) {
                confirm_wait(a);
                return;
            }
        }
        try_start(a);
        return;
    }
    if (a->wait_ms == 0 || !(op->v.flags & DLOCK__V_RETRY) || dlock__now_ns() >= a->deadline_ns) {
        finish(a, rc); /* nothing in line yet: nothing to leave */
        return;
    }
    sleep_after(a);
}

static void begin_start(dlock__acq *a)
{
    request(a, begin_done, a->l->backend->begin);
}

void dlock__acq_init(dlock__acq *a, dlock_lock *l, int64_t wait_ms, int64_t deadline_ns,
                     dlock__loop *loop, void (*done)(dlock__acq *a))
{
    memset(a, 0, sizeof *a);
    a->l = l;
    a->wait_ms = wait_ms;
    a->deadline_ns = deadline_ns;
    a->loop = loop;
    a->done = done;
    a->op.l = l;
    a->op.loop = loop;
    a->op.done = try_done;
}

void dlock__acq_start(dlock__acq *a)
{
    a->begun = !queued(a); /* only a queued kind's wait has a begin */
    if (queued(a))
        begin_start(a);
    else
        try_start(a);
}

void dlock__acq_poked(dlock__acq *a)
{
    check_sleep(a);
    check_confirm(a);
}
