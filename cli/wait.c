/* SPDX-License-Identifier: BSD-3-Clause */
/* Waiting for a lock so that a signal can interrupt it cleanly.
 *
 * A signal handler may not call dlock_lock_cancel() (it takes a mutex), and
 * an acquire that a signal merely interrupts would leave its Redis round
 * trip half done. So SIGINT, SIGTERM, SIGHUP and SIGCHLD are blocked in
 * every thread (the library's threads inherit the mask, being created
 * later), and one small thread takes them with sigwait(). What it does with
 * a signal depends on the phase the main thread has reached:
 *
 *   CLI_PHASE_WAIT  cancel the acquire: it returns DLOCK_ECANCELED after
 *                   undoing whatever its last attempt may have taken;
 *   CLI_PHASE_RUN   forward the signal to the program's process group;
 *   CLI_PHASE_DONE  note it and do nothing (the lock is being released).
 *
 * Every signal taken, SIGCHLD included, also pokes wake_fd: the self-pipe
 * that `run`'s main thread sleeps on. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* Progress is reported between slices of the wait when -v is given. */
#define PROGRESS_SLICE_MS 1000

static void watched_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGCHLD);
}

/* A blocked signal whose action is "ignore" may be discarded instead of
 * queued on some systems; SIGCHLD's default action is that. */
static void on_sigchld(int sig)
{
    (void)sig;
}

void cli_block_signals(sigset_t *old)
{
    sigset_t set;
    struct sigaction sa;
    watched_set(&set);
    /* SIGTTOU too: taking the terminal back from the program's group with
     * tcsetpgrp() must not stop us. */
    sigaddset(&set, SIGTTOU);
    CLI_CHECK(pthread_sigmask(SIG_BLOCK, &set, old));
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigchld;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
}

static void *sigwatch_main(void *arg)
{
    cli_sigwatch *sw = arg;
    sigset_t set;
    watched_set(&set);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        CLI_CHECK(pthread_mutex_lock(&sw->mu));
        if (sw->stopping) {
            CLI_CHECK(pthread_mutex_unlock(&sw->mu));
            return NULL;
        }
        if (sig != SIGCHLD) {
            if (!sw->signo)
                sw->signo = sig;
            if (sw->phase == CLI_PHASE_WAIT)
                dlock_lock_cancel(sw->lock);
            else if (sw->phase == CLI_PHASE_RUN)
                kill(-sw->pgid, sig);
        }
        if (sw->wake_fd >= 0) {
            char b = (char)sig;
            ssize_t n = write(sw->wake_fd, &b, 1); /* a full pipe wakes anyway */
            (void)n;
        }
        CLI_CHECK(pthread_mutex_unlock(&sw->mu));
    }
}

int cli_sigwatch_start(cli_sigwatch *sw, dlock_lock *lock, int wake_fd)
{
    CLI_CHECK(pthread_mutex_init(&sw->mu, NULL));
    sw->phase = CLI_PHASE_WAIT;
    sw->lock = lock;
    sw->pgid = 0;
    sw->signo = 0;
    sw->stopping = 0;
    sw->wake_fd = wake_fd;
    int rc = pthread_create(&sw->thread, NULL, sigwatch_main, sw);
    if (rc != 0) {
        cli_msg("cannot start a thread: %s", strerror(rc));
        CLI_CHECK(pthread_mutex_destroy(&sw->mu));
        return CLI_EXIT_OSERR;
    }
    return 0;
}

int cli_sigwatch_finish(cli_sigwatch *sw)
{
    CLI_CHECK(pthread_mutex_lock(&sw->mu));
    sw->phase = CLI_PHASE_DONE;
    int sig = sw->signo;
    CLI_CHECK(pthread_mutex_unlock(&sw->mu));
    return sig;
}

void cli_sigwatch_stop(cli_sigwatch *sw)
{
    CLI_CHECK(pthread_mutex_lock(&sw->mu));
    sw->phase = CLI_PHASE_DONE;
    sw->stopping = 1;
    CLI_CHECK(pthread_mutex_unlock(&sw->mu));
    /* Any watched signal wakes the thread; SIGCHLD has no other effect. */
    CLI_CHECK(pthread_kill(sw->thread, SIGCHLD));
    CLI_CHECK(pthread_join(sw->thread, NULL));
    CLI_CHECK(pthread_mutex_destroy(&sw->mu));
}

/* A lock-delay on node i keeps `name` (esc: escaped) out: 1 and the
 * text in buf. */
static int delayed_on(dlock_client *c, const char *name, size_t i, const char *esc,
                      const char *on, char *buf, size_t len)
{
    int64_t delay_ms = 0;
    if (dlock_client_lock_delay(c, name, i, &delay_ms) != DLOCK_OK || delay_ms <= 0)
        return 0;
    snprintf(buf, len, "\"%s\" is free but under a lock-delay on %s (%.1fs left: "
             "a hold ended without a release)", esc, on, (double)delay_ms / 1000.0);
    return 1;
}

/* Why `name` keeps us out, from the first node that shows a holder:
 * another owner (with its lease), shared holders (an exclusive request),
 * a waiting writer's mark (a shared request), every permit taken, or a
 * lock-delay (a hold that ended without a release). 1 and
 * the text in buf if the name keeps us out; 0 if no node shows that (free
 * by now; a node whose holders cannot be listed is asked for a
 * lock-delay only). */
static int blocker(dlock_client *c, const char *name, const cli_lock_opts *o, const char *on,
                   char *buf, size_t len)
{
    char esc[600];
    cli_escape(name, esc, sizeof esc);
    for (size_t i = 0; i < dlock_client_node_count(c); i++) {
        dlock_holders_info h;
        dlock_holder first[64];
        if (dlock_client_holders(c, name, i, &h, first, 64) != DLOCK_OK) {
            if (delayed_on(c, name, i, esc, on, buf, len))
                return 1;
            continue;
        }
        int64_t soonest = -1, last = -1;
        for (size_t k = 0; k < h.count && k < 64; k++) {
            if (soonest < 0 || first[k].ttl_ms < soonest)
                soonest = first[k].ttl_ms;
            if (first[k].ttl_ms > last)
                last = first[k].ttl_ms;
        }
        switch (h.mode) {
        case DLOCK_HOLD_EXCLUSIVE:
        case DLOCK_HOLD_OTHER:
            if (h.count > 0 && first[0].ttl_ms >= 0)
                snprintf(buf, len, "\"%s\" is held by another owner on %s (ttl %.1fs)", esc,
                         on, (double)first[0].ttl_ms / 1000.0);
            else if (h.count > 0 && h.mode == DLOCK_HOLD_EXCLUSIVE)
                /* On Redis not a key dlock wrote (every dlock lock has a
                 * lease there); on ZooKeeper every hold: its owner's
                 * session is its lease, which the server times. */
                snprintf(buf, len, "\"%s\" is held by another owner on %s, with no TTL of its "
                         "own: it lasts until its owner lets go (on ZooKeeper, or its "
                         "session ends; on Redis, or DEL frees it)", esc, on);
            else
                snprintf(buf, len, "\"%s\" is held by another owner on %s", esc, on);
            return 1;
        case DLOCK_HOLD_SHARED:
            if (o->shared && h.writer_waiting_ms >= 0) {
                snprintf(buf, len, "a writer waits for \"%s\" on %s: new shared holders are "
                         "held back while it waits (its mark lasts %.1fs more, "
                         "renewed while it waits)",
                         esc, on, (double)h.writer_waiting_ms / 1000.0);
                return 1;
            }
            if (!o->shared && h.count > 0) {
                snprintf(buf, len, "\"%s\" is held shared by %zu holder%s on %s (the last "
                         "lease ends in %.1fs)", esc, h.count, h.count == 1 ? "" : "s", on,
                         (double)last / 1000.0);
                return 1;
            }
            break;
        case DLOCK_HOLD_SEMAPHORE:
            if (o->permits && h.count >= h.permits) {
                snprintf(buf, len, "every permit of \"%s\" is in use (%zu of %u) on %s (the "
                         "first lease ends in %.1fs)", esc, h.count, h.permits, on, (double)soonest / 1000.0);
                return 1;
            }
            if (!o->permits && h.count > 0) {
                snprintf(buf, len, "\"%s\" is a semaphore on %s (%zu of %u permits in "
                         "use), not a lock", esc, on, h.count, h.permits);
                return 1;
            }
            break;
        default: /* free on this node, unless a lock-delay keeps it */
            if (delayed_on(c, name, i, esc, on, buf, len))
                return 1;
            break;
        }
    }
    return 0;
}

static void report_busy(dlock_client *c, dlock_lock *lock, const cli_lock_opts *o,
                        const char *tail)
{
    char nodes[512], ttl[48] = "", why[1024];
    /* Several names: say which one keeps us out. */
    cli_nodes(c, nodes, sizeof nodes);
    for (size_t i = 0; o->n_names > 1 && i < o->n_names; i++) {
        if (blocker(c, o->names[i], o, nodes, why, sizeof why)) {
            cli_msg("\"%s\": %s%s", dlock_lock_name(lock), why, tail);
            return;
        }
    }
    if (o->n_names <= 1 && blocker(c, dlock_lock_name(lock), o, nodes, why, sizeof why)) {
        cli_msg("%s%s", why, tail);
        return;
    }
    int64_t holder = dlock_lock_holder_ttl_ms(lock);
    if (holder >= 0)
        snprintf(ttl, sizeof ttl, " (ttl %.1fs)", (double)holder / 1000.0);
    cli_msg("\"%s\" is held by another owner on %s%s%s", dlock_lock_name(lock), nodes, ttl,
            tail);
}

/* -v progress: a thread prints a line every PROGRESS_SLICE_MS while the
 * main thread waits in ONE dlock_lock_acquire() call. Waiting in slices
 * instead made a fair waiter leave the line and join it again at the back
 * every second (issue 15): progress output must never change the order. */
typedef struct progress {
    pthread_mutex_t mu;
    pthread_cond_t cond; /* on CLOCK_MONOTONIC */
    int done;
    dlock_lock *lock;
    int64_t start_ms;
    /* A shared or permit request is kept out by a writer's mark or by the
     * first lease to end as often as by a holder: not "holder's ttl". */
    int not_a_holder;
} progress;

static void *progress_main(void *arg)
{
    progress *p = arg;
    int64_t next = p->start_ms + PROGRESS_SLICE_MS;
    CLI_CHECK(pthread_mutex_lock(&p->mu));
    while (!p->done) {
        struct timespec ts = {(time_t)(next / 1000), (long)(next % 1000) * 1000000L};
        int w = pthread_cond_timedwait(&p->cond, &p->mu, &ts);
        if (w != 0 && w != ETIMEDOUT)
            CLI_CHECK(w);
        int64_t now = cli_now_ms();
        if (p->done || now < next)
            continue;
        next += PROGRESS_SLICE_MS;
        int64_t holder = dlock_lock_holder_ttl_ms(p->lock); /* thread-safe */
        char note[64] = "";
        if (holder >= 0)
            snprintf(note, sizeof note, p->not_a_holder ? "; next change in %.1fs at most"
                                                        : "; holder's ttl %.1fs",
                     (double)holder / 1000.0);
        cli_msg("waiting for \"%s\" (%.1fs elapsed%s)", dlock_lock_name(p->lock),
                (double)(now - p->start_ms) / 1000.0, note);
    }
    CLI_CHECK(pthread_mutex_unlock(&p->mu));
    return NULL;
}

/* dlock_lock_acquire(lock, wait_ms), with progress lines if verbose. */
static int acquire_reporting(const cli_global *g, dlock_lock *lock, const cli_lock_opts *o,
                             int64_t wait_ms, int64_t start_ms)
{
    if (!g->verbose)
        return dlock_lock_acquire(lock, wait_ms);
    progress p = {.done = 0, .lock = lock, .start_ms = start_ms,
                  .not_a_holder = o->shared || o->permits};
    pthread_condattr_t ca;
    pthread_t th;
    CLI_CHECK(pthread_mutex_init(&p.mu, NULL));
    CLI_CHECK(pthread_condattr_init(&ca));
    CLI_CHECK(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC));
    CLI_CHECK(pthread_cond_init(&p.cond, &ca));
    CLI_CHECK(pthread_condattr_destroy(&ca));
    int started = pthread_create(&th, NULL, progress_main, &p) == 0; /* else: no progress */
    int rc = dlock_lock_acquire(lock, wait_ms);
    CLI_CHECK(pthread_mutex_lock(&p.mu));
    p.done = 1;
    CLI_CHECK(pthread_cond_signal(&p.cond));
    CLI_CHECK(pthread_mutex_unlock(&p.mu));
    if (started)
        CLI_CHECK(pthread_join(th, NULL));
    CLI_CHECK(pthread_cond_destroy(&p.cond));
    CLI_CHECK(pthread_mutex_destroy(&p.mu));
    return rc;
}

int cli_acquire(const cli_global *g, dlock_client *c, dlock_lock *lock, const cli_lock_opts *o)
{
    int64_t start = cli_now_ms();
    char nodes[512], tail[64];

    /* Try once first: a node that is down or refuses us now is reported at
     * once (exit 69) instead of being waited out. Once the lock was seen
     * held, waiting rides out node outages until WAIT ends. A node that
     * answered "not now" (DLOCK_EBUSY: loading after a restart, a Redis
     * Cluster failing over the lock's slot, whose other nodes answer) is
     * up: that is waited for as a held lock is; so is a node that took
     * the attempt and failed before it answered (DLOCK_EUNKNOWN: it was
     * reached a moment ago, and went away mid-command, as a master killed
     * with the attempt in flight does; dlock has sent the undo). */
    int rc = dlock_lock_acquire(lock, 0);
    if ((rc == DLOCK_ENOTACQUIRED || rc == DLOCK_EBUSY || rc == DLOCK_EUNKNOWN) &&
        o->wait_ms != 0) {
        int64_t wait = o->wait_ms;
        if (wait > 0) {
            wait -= cli_now_ms() - start;
            if (wait <= 0)
                wait = 1;
        }
        rc = acquire_reporting(g, lock, o, wait, start);
    }

    double took = (double)(cli_now_ms() - start) / 1000.0;
    switch (rc) {
    case DLOCK_OK:
        if (g->verbose)
            cli_msg("acquired \"%s\" on %s after %.1fs (fence %" PRIu64 ", ttl %.1fs)",
                    dlock_lock_name(lock), cli_nodes(c, nodes, sizeof nodes), took,
                    dlock_lock_fence(lock), (double)o->ttl_ms / 1000.0);
        break;
    case DLOCK_ENOTACQUIRED: /* expected with -n: silent under -q, as flock -n */
        if (!g->quiet && !o->quiet)
            report_busy(c, lock, o, "");
        break;
    case DLOCK_ETIMEDOUT:
        snprintf(tail, sizeof tail, "; gave up after %.1fs", took);
        if (!g->quiet && !o->quiet)
            report_busy(c, lock, o, tail);
        break;
    case DLOCK_ECANCELED:
        if (g->verbose)
            cli_msg("interrupted while waiting for \"%s\"", dlock_lock_name(lock));
        break;
    default:
        cli_report(c, lock, rc, "acquire");
    }
    return rc;
}
