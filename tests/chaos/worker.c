/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlock.h"
#include "history.h"
#include "worker.h"
#include "worker_loop.h"

typedef struct worker {
    const chaos_worker_cfg *cfg;
    chaos_shared *sh;
    int slot;
    uint32_t proc;
    uint32_t cs;
    int fd;
    unsigned seed;
    dlock_lock *lock; /* dlock mode */
    /* DLOCK_REENTRANT: more handles of the same name, same client, same
     * thread: one owner, holds counted on the one key. */
    dlock_lock *more[CHAOS_MORE_HANDLES];
    dlock_client *client;
    int kind; /* CHAOS_KIND_*: what its sections hold */
    chaos_loop *lp; /* cfg->looped: the client's loop */
    /* CHAOS_MODE_ELECT: the election whose term lock is `lock`; a section
     * is a term (campaign, lead, resign). */
    dlock_election *elect;
} worker;

/* The blocking verbs, or on a looped client their _start verbs with the
 * worker's loop turned until the answer (worker_loop.h). */
static int acquire(worker *w, dlock_lock *l, int64_t wait_ms)
{
    if (w->elect && l == w->lock)
        return dlock_election_campaign(w->elect, "chaos", wait_ms);
    return w->lp ? chaos_loop_acquire(w->lp, l, wait_ms, -1) : dlock_lock_acquire(l, wait_ms);
}

static int release(worker *w, dlock_lock *l)
{
    if (w->elect && l == w->lock)
        return dlock_election_resign(w->elect);
    return w->lp ? chaos_loop_release(w->lp, l) : dlock_lock_release(l);
}

static void sleep_ns(int64_t ns)
{
    if (ns <= 0)
        return;
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void sleep_ms(int64_t ms)
{
    sleep_ns(ms * 1000000);
}

static int stopping(const worker *w)
{
    return atomic_load(&w->sh->stop) || chaos_now_ns() >= w->cfg->deadline_ns;
}

/* A worker runs its sections, and goes on until the driver has injected
 * every fault of the scenario (so that faults always meet running work). */
static int more_work(const worker *w, long done, long todo)
{
    return !stopping(w) && (done < todo || !atomic_load(&w->sh->faults_done));
}

/* Is there validity left for `ms` more of work? Only asked in
 * check_validity mode; margin covers scheduling delay on a busy host. */
static int time_left_for(const worker *w, int64_t ms)
{
    if (!w->cfg->check_validity || !w->lock)
        return 1;
    int64_t margin = w->cfg->ttl_ms / 4 > 25 ? w->cfg->ttl_ms / 4 : 25;
    return dlock_lock_validity_ms(w->lock) > ms + margin;
}

/* Sleep `ms` in steps, checking validity before each. 0 if cut short. */
static int work_for(const worker *w, int64_t ms)
{
    int64_t step = w->cfg->check_validity ? 10 : ms;
    while (ms > 0) {
        int64_t d = ms < step ? ms : step;
        if (!time_left_for(w, d))
            return 0;
        sleep_ms(d);
        ms -= d;
    }
    return 1;
}

/* Fork row: the holder forks; the child must find the inherited client
 * and handle inert. Exits 0 if so. */
static void fork_child_checks(worker *w)
{
    alarm(5); /* a hang in free ends here, and counts as bad */
    int bad = dlock_lock_acquire(w->lock, 0) != DLOCK_EINVAL ||
              dlock_lock_release(w->lock) != DLOCK_EINVAL ||
              dlock_lock_state_get(w->lock) != DLOCK_STATE_UNLOCKED;
    dlock_lock_free(w->lock); /* must not release the parent's lock */
    dlock_client_free(w->client);
    _exit(bad);
}

static void fork_and_check(worker *w)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        fork_child_checks(w);
    atomic_fetch_add(&w->sh->forks, 1);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        atomic_fetch_add(&w->sh->fork_bad, 1);
}

/* The critical section. The counter is read early and written late so that
 * an overlapping section loses an update; the fenced write comes with it. */
static void critical_section(worker *w, uint64_t fence)
{
    chaos_slot *s = &w->sh->slot[w->slot];
    uint32_t cs = w->cs++;
    int64_t hold = w->cfg->hold_ms;
    chaos_history_note(w->fd, CHAOS_REC_ENTER, w->slot, w->proc, cs, fence, w->kind, 0);
    /* Read before the driver can see us in the section, so that a holder
     * it pauses always has a read in flight. */
    int64_t early = w->sh->counter;
    atomic_store(&s->enter_ns, chaos_now_ns());
    atomic_store(&s->in_cs, 1);
    if (w->cfg->mode == CHAOS_MODE_FORK && cs % 3 == 0)
        /* The child's turn comes inside the section: had it released the
         * inherited lock, another worker could enter while we go on. */
        fork_and_check(w);
    int ok;
    if (w->kind != CHAOS_KIND_EXCLUSIVE) {
        /* Readers and permit holders only stay: the history shows who was
         * in beside whom; the counter and the resource are the writers'. */
        sleep_ms(hold);
        ok = 1;
    } else if (w->cfg->check_validity) {
        /* Careful caller: the read-modify-write is one short step, done
         * only with validity to spare. */
        ok = work_for(w, hold * 3 / 4) && time_left_for(w, 2);
        if (ok) {
            int64_t v = w->sh->counter;
            sleep_ms(1);
            w->sh->counter = v + 1;
            chaos_history_note(w->fd, CHAOS_REC_COUNTER, w->slot, w->proc, cs, fence, v, 0);
            chaos_resource_write(w->sh, w->fd, w->slot, w->proc, cs, fence);
            ok = work_for(w, hold / 4);
        }
    } else {
        /* Jitter (0.5..1.5 x) so that overlapping sections of the controls
         * also write out of token order. */
        int64_t first = hold * 3 / 4, jitter = first > 1 ? rand_r(&w->seed) % first : 0;
        int64_t v = early;
        sleep_ms(first / 2 + jitter);
        w->sh->counter = v + 1;
        chaos_history_note(w->fd, CHAOS_REC_COUNTER, w->slot, w->proc, cs, fence, v, 0);
        chaos_resource_write(w->sh, w->fd, w->slot, w->proc, cs, fence);
        sleep_ms(hold / 4);
        ok = 1;
    }
    if (!ok)
        atomic_fetch_add(&w->sh->aborted, 1);
    chaos_history_note(w->fd, CHAOS_REC_EXIT, w->slot, w->proc, cs, fence, 0, 0);
    atomic_store(&s->in_cs, 0);
    atomic_fetch_add(&s->done, 1);
}

static void note_wait(worker *w, int64_t since_ns)
{
    int64_t waited = chaos_now_ns() - since_ns;
    int64_t max = atomic_load(&w->sh->max_wait_ns);
    while (waited > max && !atomic_compare_exchange_weak(&w->sh->max_wait_ns, &max, waited))
        ;
}

static void backoff(worker *w)
{
    sleep_ms(5 + rand_r(&w->seed) % 20);
}

/* A second thread that cancels the worker's wait after_ms in, unless the
 * wait ended first (a cancel that lands just after it ended cancels the
 * next acquire instead: counted the same). */
typedef struct canceller {
    pthread_t t;
    dlock_lock *lock;
    int64_t after_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int over;
} canceller;

static void *cancel_main(void *arg)
{
    canceller *k = arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += k->after_ms / 1000;
    until.tv_nsec += (k->after_ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&k->mu);
    while (!k->over && pthread_cond_timedwait(&k->cv, &k->mu, &until) != ETIMEDOUT)
        ;
    if (!k->over)
        dlock_lock_cancel(k->lock);
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

/* A waiting acquire, cancelled in cfg->cancel_pct percent of the waits. */
static int wait_acquire(worker *w, int64_t wait_ms)
{
    if (w->cfg->cancel_pct <= 0 || (int)(rand_r(&w->seed) % 100) >= w->cfg->cancel_pct)
        return acquire(w, w->lock, wait_ms);
    canceller k = {.lock = w->lock, .after_ms = 10 + rand_r(&w->seed) % 400};
    if (w->lp) /* a looped client is cancelled from its loop */
        return chaos_loop_acquire(w->lp, w->lock, wait_ms, k.after_ms);
    pthread_mutex_init(&k.mu, NULL);
    pthread_cond_init(&k.cv, NULL);
    int started = pthread_create(&k.t, NULL, cancel_main, &k) == 0;
    int rc = dlock_lock_acquire(w->lock, wait_ms);
    pthread_mutex_lock(&k.mu);
    k.over = 1;
    pthread_cond_signal(&k.cv);
    pthread_mutex_unlock(&k.mu);
    if (started)
        pthread_join(k.t, NULL);
    pthread_cond_destroy(&k.cv);
    pthread_mutex_destroy(&k.mu);
    return rc;
}

/* Liveness mode: one section as `dlock run -w WAIT` runs it. 1 if it ran. */
static int live_section(worker *w, int64_t left_ms)
{
    const chaos_worker_cfg *cfg = w->cfg;
    int64_t wait = cfg->section_wait_ms < left_ms ? cfg->section_wait_ms : left_ms;
    int64_t t0 = chaos_now_ns();
    int rc = acquire(w, w->lock, 0);
    /* As the dlock command does: a node that answered "not now" (a
     * cluster failing over the lock's slot), or that took the attempt and
     * went away before answering, is waited for too. */
    int waited = (rc == DLOCK_ENOTACQUIRED || rc == DLOCK_EBUSY || rc == DLOCK_EUNKNOWN) && wait > 0;
    if (waited)
        rc = wait_acquire(w, wait);
    int64_t took = chaos_now_ns() - t0;
    int64_t max = atomic_load(&w->sh->live_max_wait_ns);
    while (took > max && !atomic_compare_exchange_weak(&w->sh->live_max_wait_ns, &max, took))
        ;
    note_wait(w, t0); /* the note's longest wait too */
    chaos_count_rc(w->sh->acq_rc, rc);
    if (stopping(w) && rc != DLOCK_OK)
        return 0; /* cut short by the run's end: not a verdict */
    if (rc == DLOCK_ECANCELED && w->cfg->cancel_pct) {
        /* given up by the user: not a failed section */
        atomic_fetch_add(&w->sh->live_cancelled, 1);
        backoff(w);
        return 0;
    }
    atomic_fetch_add(&w->sh->live_tried, 1);
    if (rc != DLOCK_OK) {
        atomic_fetch_add(&w->sh->live_failed, 1);
        if (waited)
            atomic_fetch_add(&w->sh->live_wait_failed, 1);
        backoff(w);
        return 0;
    }
    critical_section(w, dlock_lock_fence(w->lock));
    chaos_count_rc(w->sh->rel_rc, release(w, w->lock));
    backoff(w); /* a new `dlock run` takes a moment to start */
    return 1;
}

static void bg_lost(dlock_lock *lock, dlock_lost_reason reason, void *arg)
{
    (void)lock;
    (void)reason;
    _Atomic long *counter = arg;
    atomic_fetch_add(counter, 1);
}

/* Cluster rows: an auto-renewed lock of this worker's own on every master,
 * held for the worker's life (its watchdog renews them beside the
 * contended lock's). */
static void take_background(worker *w, dlock_client *c, dlock_lock **bg)
{
    const chaos_worker_cfg *cfg = w->cfg;
    for (int k = 0; k < cfg->n_bg; k++) {
        char name[96];
        snprintf(name, sizeof name, "{%s}-w%d-p%u", cfg->bg_tags[k], w->slot, w->proc);
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = cfg->ttl_ms;
        o.flags = DLOCK_AUTO_RENEW;
        o.on_lost = bg_lost;
        o.on_lost_arg = &w->sh->bg_lost[k];
        if (dlock_lock_new(&bg[k], c, name, &o) == DLOCK_OK &&
            acquire(w, bg[k], 5000) == DLOCK_OK)
            atomic_fetch_add(&w->sh->bg_held[k], 1);
    }
}

static int run_dlock(worker *w, long todo)
{
    const chaos_worker_cfg *cfg = w->cfg;
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.min_node_uptime_ms = cfg->min_uptime_ms;
    co.cluster = cfg->cluster;
    if (cfg->io_timeout_ms > 0)
        co.io_timeout_ms = cfg->io_timeout_ms;
    if (cfg->looped) {
        if (!(w->lp = chaos_loop_new())) {
            fprintf(stderr, "chaos worker: no loop (built without libuv?)\n");
            return 1;
        }
        co.loop = chaos_loop_hooks(w->lp);
    }
    dlock_client *c = NULL;
    char err[256];
    if (dlock_client_new(&c, cfg->urls, cfg->n_urls, &co, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "chaos worker: client: %s\n", err);
        return 1;
    }
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = cfg->ttl_ms;
    lo.flags = cfg->flags;
    lo.retry_min_ms = 5;
    lo.retry_max_ms = 50;
    int rc0;
    if (cfg->mode == CHAOS_MODE_SEM) {
        w->kind = CHAOS_KIND_PERMIT;
        rc0 = dlock_semaphore_new(&w->lock, c, cfg->lock_name, CHAOS_SEM_PERMITS, &lo);
    } else if (cfg->mode == CHAOS_MODE_SET) {
        char more[2][128];
        snprintf(more[0], sizeof more[0], "%s:set-b", cfg->lock_name);
        snprintf(more[1], sizeof more[1], "%s:set-c", cfg->lock_name);
        const char *names[CHAOS_SET_NAMES] = {more[1], cfg->lock_name, more[0]};
        rc0 = dlock_lock_new_multi(&w->lock, c, names, CHAOS_SET_NAMES, &lo);
    } else if (cfg->mode == CHAOS_MODE_ELECT) {
        dlock_election_options eo = DLOCK_ELECTION_OPTIONS_INIT;
        eo.ttl_ms = cfg->ttl_ms;
        eo.retry_min_ms = lo.retry_min_ms;
        eo.retry_max_ms = lo.retry_max_ms;
        rc0 = dlock_election_new(&w->elect, c, cfg->lock_name, &eo);
        w->lock = rc0 == DLOCK_OK ? dlock_election_lock(w->elect) : NULL;
    } else {
        if (cfg->mode == CHAOS_MODE_RW) {
            w->kind = w->slot % 2 ? CHAOS_KIND_EXCLUSIVE : CHAOS_KIND_SHARED;
            lo.flags |= w->slot % 2 ? DLOCK_EXCLUSIVE : DLOCK_SHARED;
        }
        rc0 = dlock_lock_new(&w->lock, c, cfg->lock_name, &lo);
    }
    if (rc0 != DLOCK_OK) {
        dlock_client_free(c);
        return 1;
    }
    w->client = c;
    int n_more = (cfg->flags & DLOCK_REENTRANT) ? CHAOS_MORE_HANDLES : 0;
    for (int i = 0; i < n_more; i++)
        if (dlock_lock_new(&w->more[i], c, cfg->lock_name, &lo) != DLOCK_OK)
            return 1;
    dlock_lock *bg[3] = {NULL, NULL, NULL};
    take_background(w, c, bg);
    int64_t want_since = chaos_now_ns();
    for (long done = 0; more_work(w, done, todo);) {
        int64_t left_ms = (cfg->deadline_ns - chaos_now_ns()) / 1000000;
        if (cfg->section_wait_ms > 0) {
            if (live_section(w, left_ms))
                done++;
            want_since = chaos_now_ns(); /* live_section noted its own wait */
            continue;
        }
        int rc = acquire(w, w->lock, left_ms < 1000 ? (left_ms > 0 ? left_ms : 1) : 1000);
        chaos_count_rc(w->sh->acq_rc, rc);
        if (rc != DLOCK_OK) {
            if (rc != DLOCK_ETIMEDOUT && rc != DLOCK_ENOTACQUIRED)
                backoff(w);
            continue;
        }
        /* Re-entries through the other handles (the same owner), as nested
         * code would: under connection kills and stalls their outcomes may
         * be unknown, and their undos must never take the first handle's
         * hold. The section runs under the first handle whatever they got:
         * had an undo taken its hold, another worker could enter. */
        int held_more = 0;
        while (held_more < n_more && acquire(w, w->more[held_more], 0) == DLOCK_OK)
            held_more++;
        note_wait(w, want_since);
        /* A try-once re-entry to a stalled node returns only after the
         * reply timeout (io_timeout_ms, its undo queued behind it; more
         * than the TTL here): the first handle's lease may have ended
         * meanwhile, and the key with it (a DEBUG SLEEP longer than the
         * TTL expires it). Entering then is a caller's error, not a
         * second owner: like any careful caller, enter only with validity
         * to spare for the section, else give the holds back ("left
         * early" in the note). */
        int enter = n_more == 0 ||
                    dlock_lock_validity_ms(w->lock) > 2 * cfg->hold_ms + cfg->ttl_ms / 4;
        if (enter)
            critical_section(w, dlock_lock_fence(w->lock));
        else
            atomic_fetch_add(&w->sh->aborted, 1);
        while (held_more > 0)
            chaos_count_rc(w->sh->rel_rc, release(w, w->more[--held_more]));
        chaos_count_rc(w->sh->rel_rc, release(w, w->lock));
        if (enter) {
            want_since = chaos_now_ns();
            done++;
        }
    }
    /* A worker that never got in again until the end waited that long. */
    note_wait(w, want_since);
    for (int i = 0; i < n_more; i++)
        dlock_lock_free(w->more[i]);
    for (int k = 0; k < cfg->n_bg; k++)
        dlock_lock_free(bg[k]);
    if (w->elect)
        dlock_election_free(w->elect); /* and its term lock */
    else
        dlock_lock_free(w->lock);
    dlock_client_free(c);
    chaos_loop_free(w->lp); /* what the frees left on the loop ends */
    return 0;
}

static redisReply *raw_cmd(redisContext **ctx, const chaos_worker_cfg *cfg, const char *fmt, ...)
{
    if (!*ctx) {
        int port = 0;
        struct timeval tv = {1, 0};
        if (sscanf(cfg->urls[0], "redis://127.0.0.1:%d", &port) != 1)
            return NULL;
        *ctx = redisConnectWithTimeout("127.0.0.1", port, tv);
        if (!*ctx || (*ctx)->err) {
            redisFree(*ctx);
            *ctx = NULL;
            return NULL;
        }
        redisSetTimeout(*ctx, tv);
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(*ctx, fmt, ap);
    va_end(ap);
    if (!r) {
        redisFree(*ctx);
        *ctx = NULL;
    }
    return r;
}

/* The broken protocol of the negative control (single node). */
static int run_raw_del(worker *w, long todo)
{
    const chaos_worker_cfg *cfg = w->cfg;
    redisContext *ctx = NULL;
    char token[32];
    snprintf(token, sizeof token, "w%u", w->proc);
    for (long done = 0; more_work(w, done, todo);) {
        redisReply *r = raw_cmd(&ctx, cfg, "SET %s %s NX PX %lld", cfg->lock_name, token,
                                (long long)cfg->ttl_ms);
        int got = r && r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!got) {
            sleep_ms(1);
            continue;
        }
        r = raw_cmd(&ctx, cfg, "INCR %s:fence", cfg->lock_name);
        uint64_t fence = r && r->type == REDIS_REPLY_INTEGER ? (uint64_t)r->integer : 0;
        freeReplyObject(r);
        critical_section(w, fence);
        freeReplyObject(raw_cmd(&ctx, cfg, "DEL %s", cfg->lock_name)); /* the bug */
        done++;
    }
    redisFree(ctx);
    return 0;
}

pid_t chaos_worker_spawn(const chaos_worker_cfg *cfg, chaos_shared *sh, int slot, long todo)
{
    uint32_t proc = atomic_fetch_add(&sh->next_proc, 1);
    pid_t parent = getpid();
    atomic_store(&sh->slot[slot].proc, proc);
    atomic_store(&sh->slot[slot].in_cs, 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) {
        if (pid > 0)
            atomic_store(&sh->slot[slot].pid, pid);
        return pid;
    }
    atomic_store(&sh->slot[slot].pid, getpid());
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    signal(SIGPIPE, SIG_IGN);
    worker w = {cfg, sh, slot, proc, 0, -1, (unsigned)getpid() ^ (unsigned)chaos_now_ns(), NULL,
                {NULL}, NULL, CHAOS_KIND_EXCLUSIVE, NULL, NULL};
    w.fd = chaos_history_open(cfg->history_path);
    if (w.fd < 0)
        _exit(1);
    int rc = cfg->mode == CHAOS_MODE_RAW_DEL ? run_raw_del(&w, todo) : run_dlock(&w, todo);
    close(w.fd);
    _exit(rc);
}
