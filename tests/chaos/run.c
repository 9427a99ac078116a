/* SPDX-License-Identifier: BSD-3-Clause */
/* Running one scenario: servers (and proxies), workers, fault rounds, then
 * the history check and the verdict against what the scenario claims. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chaos.h"
#include "dlock.h"

void chaos_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

unsigned chaos_rand(chaos_run *run, unsigned bound)
{
    return bound ? (unsigned)rand_r(&run->seed) % bound : 0;
}

void chaos_fault(chaos_run *run, int kind)
{
    chaos_history_note(run->hist_fd, CHAOS_REC_FAULT, 0, 0, 0, 0, kind, 0);
    run->faults++;
}

int chaos_find_holder(chaos_run *run, int wait_ms, int64_t fresh_ms)
{
    int64_t until = chaos_now_ns() + (int64_t)wait_ms * 1000000;
    do {
        int64_t now = chaos_now_ns();
        for (int i = 0; i < run->sc->workers; i++) {
            chaos_slot *s = &run->sh->slot[i];
            if (run->pids[i] > 0 && atomic_load(&s->in_cs) &&
                (fresh_ms <= 0 || now - atomic_load(&s->enter_ns) <= fresh_ms * 1000000))
                return i;
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    } while (chaos_now_ns() < until);
    return -1;
}

static void spawn_slot(chaos_run *run, int slot)
{
    long left = run->todo - atomic_load(&run->sh->slot[slot].done);
    run->pids[slot] = chaos_worker_spawn(&run->wcfg, run->sh, slot, left > 0 ? left : 0);
}

/* kill -9 by pid, reap, and only then log: from the KILLED record on, the
 * process can do nothing more. */
static void kill_and_log(chaos_run *run, int slot)
{
    pid_t pid = run->pids[slot];
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    run->pids[slot] = 0;
    chaos_history_note(run->hist_fd, CHAOS_REC_KILLED, slot,
                       atomic_load(&run->sh->slot[slot].proc), 0, 0, pid, 0);
    atomic_store(&run->sh->slot[slot].in_cs, 0);
}

void chaos_kill_worker(chaos_run *run, int slot)
{
    kill_and_log(run, slot);
    if (!atomic_load(&run->sh->stop))
        spawn_slot(run, slot);
}

static int reap_workers(chaos_run *run)
{
    int alive = 0;
    for (int i = 0; i < run->sc->workers; i++) {
        int st;
        if (run->pids[i] <= 0)
            continue;
        if (waitpid(run->pids[i], &st, WNOHANG) == run->pids[i]) {
            run->pids[i] = 0;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                snprintf(run->note + strlen(run->note), sizeof run->note - strlen(run->note),
                         "worker %d failed; ", i);
        } else {
            alive++;
        }
    }
    return alive;
}

static int setup(chaos_run *run, const chaos_scenario *sc, int scale, char *hist, size_t hist_len)
{
    const char *tmp = getenv("TMPDIR");
    run->sc = sc;
    run->scale = scale;
    run->seed = (unsigned)getpid() ^ (unsigned)chaos_now_ns();
    /* nodes of their own */
    int own = chaos_is_etcd(sc) || chaos_is_zk(sc) || chaos_is_cluster(sc);
    if (chaos_is_etcd(sc)           ? chaos_etcd_setup(run) != 0
        : chaos_is_zk(sc)           ? chaos_zk_setup(run) != 0
        : chaos_is_cluster(sc)      ? chaos_cluster_setup(run) != 0
                                    : test_redis_start_many(run->nodes, sc->nodes, NULL) != 0)
        return -1;
    for (int i = 0; i < sc->nodes && !own; i++) {
        run->proxies[i].pid = -1;
        int port = run->nodes[i].port;
        if (sc->proxied) {
            if (chaos_proxy_start(&run->proxies[i], port) != 0)
                return -1;
            port = run->proxies[i].port;
        }
        snprintf(run->urls[i], sizeof run->urls[i], "redis://127.0.0.1:%d", port);
        run->wcfg.urls[i] = run->urls[i];
    }
    run->sh = chaos_shared_new(sc->unfenced);
    snprintf(hist, hist_len, "%s/dlock-chaos-%d-%s.hist", tmp && *tmp ? tmp : "/tmp",
             (int)getpid(), sc->name);
    unlink(hist);
    run->hist_fd = chaos_history_open(hist);
    if (!run->sh || run->hist_fd < 0)
        return -1;
    chaos_worker_cfg *w = &run->wcfg;
    if (!chaos_is_cluster(sc))
        w->n_urls = chaos_is_etcd(sc) || chaos_is_zk(sc) ? 1 : (size_t)sc->nodes;
    w->lock_name = chaos_is_cluster(sc) ? run->lock_name : "chaos:lock";
    w->ttl_ms = sc->ttl_ms;
    w->hold_ms = sc->hold_ms;
    w->flags = sc->flags;
    w->mode = sc->mode;
    w->looped = chaos_is_looped(sc);
    w->check_validity = sc->check_validity;
    w->min_uptime_ms = sc->min_uptime_ms;
    w->deadline_ns = chaos_now_ns() + (int64_t)(90 + 60 * scale) * 1000000000;
    const chaos_liveness *live = chaos_liveness_of(sc->name);
    w->section_wait_ms = live ? live->section_wait_ms : 0;
    w->cancel_pct = live ? live->cancel_pct : 0;
    snprintf(w->history_path, sizeof w->history_path, "%s", hist);
    run->todo = (long)sc->cs_per_worker * scale;
    return 0;
}

static void teardown(chaos_run *run)
{
    for (int i = 0; i < run->sc->nodes && i < CHAOS_MAX_NODES; i++)
        if (run->proxies[i].pid > 0)
            chaos_proxy_stop(&run->proxies[i]);
    if (chaos_is_etcd(run->sc))
        chaos_etcd_teardown(run);
    else if (chaos_is_zk(run->sc))
        chaos_zk_teardown(run);
    else if (chaos_is_cluster(run->sc))
        chaos_cluster_teardown(run);
    else
        test_redis_stop_many(run->nodes, run->sc->nodes);
    if (run->hist_fd >= 0)
        close(run->hist_fd);
    chaos_shared_free(run->sh);
}

/* Append the acquire outcomes other than OK and ETIMEDOUT. */
static void rc_summary(chaos_run *run, char *out, size_t len)
{
    size_t o = strlen(out);
    while (o >= 2 && !strcmp(out + o - 2, "; "))
        out[o -= 2] = '\0';
    for (int i = 1; i < CHAOS_ERR_CODES; i++) {
        long n = atomic_load(&run->sh->acq_rc[i]);
        if (n > 0 && i != -DLOCK_ETIMEDOUT && o < len)
            o += (size_t)snprintf(out + o, len - o, "%s%s x%ld", o ? "; " : "",
                                  dlock_errname(-i) + 6, n);
    }
    long ab = atomic_load(&run->sh->aborted);
    if (ab > 0 && o < len)
        snprintf(out + o, len - o, "%sleft early x%ld", o ? "; " : "", ab);
}

static int judge(const chaos_scenario *sc, const chaos_verdict *v, int clean_run)
{
    int sound = v->torn == 0 && v->cs_unclosed == 0 && v->cs > 0 && clean_run;
    switch (sc->claim) {
    case CLAIM_SAFE:
        /* A semaphore's bound: never more than N permit holders inside. */
        return sound && v->overlaps == 0 && v->lost_updates == 0 && v->stale_writes == 0 &&
               (v->fence_violations == 0 || sc->no_fence_claim) &&
               (sc->mode != CHAOS_MODE_SEM || v->max_permits <= CHAOS_SEM_PERMITS);
    case CLAIM_NONE:
        return sound && v->stale_writes == 0;
    case CLAIM_CONTROL:
        return v->cs > 0 &&
               (v->overlaps > 0 || v->lost_updates > 0 ||
                (sc->mode == CHAOS_MODE_SEM && v->max_permits > CHAOS_SEM_PERMITS)) &&
               (!sc->unfenced || v->stale_writes > 0);
    }
    return 0;
}

int chaos_run_scenario(const chaos_scenario *sc, int scale, chaos_result *out)
{
    static chaos_run run;
    char hist[512];
    int64_t t0 = chaos_now_ns();
    memset(&run, 0, sizeof run);
    memset(out, 0, sizeof *out);
    out->sc = sc;
    out->claimed = sc->claim == CLAIM_NONE      ? "no"
                   : sc->claim == CLAIM_CONTROL ? "control"
                   : sc->no_fence_claim         ? "excl"
                                                : "yes";
    run.hist_fd = -1;
    if (setup(&run, sc, scale, hist, sizeof hist) != 0) {
        snprintf(out->note, sizeof out->note, "setup failed");
        teardown(&run);
        return -1;
    }
    for (int i = 0; i < sc->workers; i++)
        spawn_slot(&run, i);

    int rounds = sc->faults * scale, round = 0, timed_out = 0;
    int64_t next_fault = chaos_now_ns() + (int64_t)sc->gap_ms * 1000000;
    if (rounds == 0)
        atomic_store(&run.sh->faults_done, 1);
    while (reap_workers(&run) > 0) {
        int64_t now = chaos_now_ns();
        if (now >= run.wcfg.deadline_ns) {
            timed_out = 1;
            break;
        }
        if (round < rounds && now >= next_fault) {
            sc->inject(&run, round++);
            next_fault = chaos_now_ns() + (int64_t)sc->gap_ms * 1000000;
            if (round == rounds)
                atomic_store(&run.sh->faults_done, 1);
        }
        chaos_sleep_ms(5);
    }
    atomic_store(&run.sh->stop, 1);
    for (int i = 0; i < 500 && reap_workers(&run) > 0; i++)
        chaos_sleep_ms(10);
    for (int i = 0; i < sc->workers; i++)
        kill_and_log(&run, i); /* stragglers: a hang is a failure below */

    for (int i = 0; i < sc->nodes && !chaos_is_etcd(sc) && !chaos_is_zk(sc) &&
                    !chaos_is_cluster(sc);
         i++)
        test_redis_resume(&run.nodes[i]);
    int checked = chaos_history_check(hist, &out->v);
    out->faults = run.faults;
    if (timed_out)
        snprintf(run.note + strlen(run.note), sizeof run.note - strlen(run.note),
                 "DEADLINE: workers did not finish; ");
    /* The history must agree with what the driver did. */
    int clean = !timed_out && !run.probe_failed && checked == 0 && round == rounds &&
                out->v.faults == run.faults;
    if (checked == 0 && out->v.faults != run.faults)
        snprintf(run.note + strlen(run.note), sizeof run.note - strlen(run.note),
                 "FAULT RECORDS %ld != %ld injected; ", out->v.faults, run.faults);
    rc_summary(&run, run.note, sizeof run.note);
    long forks = atomic_load(&run.sh->forks), fork_bad = atomic_load(&run.sh->fork_bad);
    if (sc->mode == CHAOS_MODE_FORK || (sc->flags & (DLOCK_REENTRANT | DLOCK_FAIR))) {
        /* Liveness of the ownership rows: acquires that failed (all codes
         * but OK) and the longest wait for a section. */
        long tried = 0, failed = 0;
        for (int i = 0; i < CHAOS_ERR_CODES; i++) {
            long k = atomic_load(&run.sh->acq_rc[i]);
            tried += k;
            failed += i ? k : 0;
        }
        size_t o = strlen(run.note);
        snprintf(run.note + o, sizeof run.note - o, "%sacquires failed %ld/%ld; longest wait %.2f s",
                 o ? "; " : "", failed, tried, (double)atomic_load(&run.sh->max_wait_ns) / 1e9);
    }
    if (sc->mode == CHAOS_MODE_RW || sc->mode == CHAOS_MODE_SEM) {
        /* Concurrency as the history shows it: readers did share, permits
         * were used together (and never more than N). */
        size_t o = strlen(run.note);
        if (sc->mode == CHAOS_MODE_RW)
            snprintf(run.note + o, sizeof run.note - o, "%smost readers at once %ld", o ? "; " : "",
                     out->v.max_readers);
        else
            snprintf(run.note + o, sizeof run.note - o, "%smost permit holders at once %ld of %d",
                     o ? "; " : "", out->v.max_permits, CHAOS_SEM_PERMITS);
    }
    if (sc->mode == CHAOS_MODE_FORK) {
        size_t o = strlen(run.note);
        snprintf(run.note + o, sizeof run.note - o, "; forks %ld, child misbehaved %ld", forks,
                 fork_bad);
    }
    /* Cluster stall row: each worker's auto-renewed lock on every master;
     * none on a healthy master may be lost (the stalled one's may). */
    int bg_ok = 1;
    if (run.wcfg.n_bg > 0) {
        long held = 0, lost_healthy = 0;
        for (int k = 0; k < run.wcfg.n_bg; k++) {
            held += atomic_load(&run.sh->bg_held[k]);
            if (k != run.stalled_bg)
                lost_healthy += atomic_load(&run.sh->bg_lost[k]);
        }
        bg_ok = lost_healthy == 0 && held == (long)run.wcfg.n_bg * sc->workers;
        size_t o = strlen(run.note);
        snprintf(run.note + o, sizeof run.note - o,
                 "%sbackground locks held %ld, lost on healthy masters %ld, on the stalled one %ld%s",
                 o ? "; " : "", held, lost_healthy,
                 atomic_load(&run.sh->bg_lost[run.stalled_bg]), bg_ok ? "" : " (FAIL)");
    }
    snprintf(out->note, sizeof out->note, "%s", run.note);
    /* Fair mode under lost replies: a lost acquire or release must not
     * keep the line waiting for the 10 s TTL. The faults stall the node
     * for 1.2 s at most; 3.5 s leaves room for a loaded machine. */
    int own_live_ok = strcmp(sc->name, "fair_lost_replies") != 0 || atomic_load(&run.sh->max_wait_ns) < 3500000000LL;
    if (!own_live_ok) {
        size_t o = strlen(run.note);
        snprintf(run.note + o, sizeof run.note - o, "; LIVENESS: longest wait over 3.5 s");
    }
    out->pass = checked == 0 && judge(sc, &out->v, clean || sc->claim == CLAIM_CONTROL) &&
                fork_bad == 0 && (sc->mode != CHAOS_MODE_FORK || forks > 0) && own_live_ok &&
                bg_ok;
    out->live = chaos_liveness_of(sc->name);
    if (out->live) {
        /* Sections left early (validity ran short) failed too. */
        out->live_tried = atomic_load(&run.sh->live_tried);
        out->live_failed = atomic_load(&run.sh->live_failed) + atomic_load(&run.sh->aborted);
        out->live_wait_failed = atomic_load(&run.sh->live_wait_failed);
        out->live_max_wait_s = (double)atomic_load(&run.sh->live_max_wait_ns) / 1e9;
        out->live_cancelled = atomic_load(&run.sh->live_cancelled);
        if (out->live->cancel_pct)
            snprintf(out->note + strlen(out->note), sizeof out->note - strlen(out->note),
                     "%swaits cancelled %ld", out->note[0] ? "; " : "", out->live_cancelled);
        int live_ok = out->live_tried > 0 &&
                      out->live_failed * 100 <= (long)out->live->max_failed_pct * out->live_tried &&
                      out->live_max_wait_s * 1000 <= (double)out->live->max_wait_ms &&
                      (!out->live->strict_waits || out->live_wait_failed == 0) &&
                      (!out->live->cancel_pct || out->live_cancelled > 0); /* cancels ran */
        if (out->live->strict_waits)
            snprintf(out->note + strlen(out->note), sizeof out->note - strlen(out->note),
                     "%swaiting acquires failed %ld", out->note[0] ? "; " : "",
                     out->live_wait_failed);
        if (!live_ok)
            snprintf(out->note + strlen(out->note), sizeof out->note - strlen(out->note),
                     "%sLIVENESS: %ld of %ld sections failed (bound %d%%; %ld after waiting%s), "
                     "longest wait %.1f s (bound %.1f s)", out->note[0] ? "; " : "",
                     out->live_failed, out->live_tried, out->live->max_failed_pct,
                     out->live_wait_failed, out->live->strict_waits ? ", bound 0" : "",
                     out->live_max_wait_s, (double)out->live->max_wait_ms / 1000.0);
        out->pass = out->pass && live_ok;
    }
    out->seconds = (double)(chaos_now_ns() - t0) / 1e9;
    teardown(&run);
    if (out->pass && !getenv("CHAOS_KEEP"))
        unlink(hist);
    else
        fprintf(stderr, "chaos: %s: history kept in %s\n", sc->name, hist);
    return 0;
}
