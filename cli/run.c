/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock run: hold a lock while a program runs.
 *
 * Threads: the main thread acquires, starts the program and supervises it;
 * the signal thread (wait.c) cancels the acquire or forwards signals; the
 * library's watchdog renews the lease and calls on_lost(). The main thread
 * sleeps in poll() on one self-pipe that the signal thread (on SIGCHLD)
 * and on_lost() write to, and on the guardian's reports (guard.c), with a
 * timeout only while a SIGKILL is due. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "run.h"

static int finish_run(const char *cmd, run_opts *o);

/* `run [OPTIONS] -- NAME... -- PROGRAM [ARG]...`: every word up to the
 * second "--" is a NAME, whatever it starts with. */
static int names_after_dashdash(const char *cmd, int argc, char **argv, run_opts *o)
{
    while (optind < argc && strcmp(argv[optind], "--") != 0) {
        if (o->n_names == DLOCK_MULTI_MAX)
            return cli_usage_error(cmd, "at most %d names at once", DLOCK_MULTI_MAX);
        o->names[o->n_names++] = argv[optind++];
    }
    if (!o->n_names)
        return cli_usage_error(cmd, "missing lock NAME after '--'");
    if (optind == argc)
        return cli_usage_error(cmd, "missing '-- PROGRAM' after 'run -- NAME...' (a NAME "
                               "after '--' needs a second '--' before the program)");
    if (++optind == argc)
        return cli_usage_error(cmd, "missing PROGRAM after '--'");
    o->prog = argv + optind;
    return finish_run(cmd, o);
}

int cli_run_option(const char *cmd, int c, const char *arg, run_opts *o, const char **shell_cmd,
                   cli_global *g)
{
    switch (c) {
    case CLI_OPT_ON_LOST:
        if (!strcmp(arg, "term"))
            o->on_lost = LOST_TERM;
        else if (!strcmp(arg, "kill"))
            o->on_lost = LOST_KILL;
        else if (!strcmp(arg, "ignore"))
            o->on_lost = LOST_IGNORE;
        else
            return cli_usage_error(cmd, "--on-lost: expected term, kill or ignore, not '%s'", arg);
        return 0;
    case CLI_OPT_GRACE:
        return cli_parse_duration(cmd, "--grace", arg, &o->grace_ms) ? CLI_EXIT_USAGE : 0;
    case 'c':
        *shell_cmd = arg;
        return 0;
    case 'v':
        g->verbose = 1;
        return 0;
    default:
        return -1;
    }
}

void cli_run_shell(run_opts *o, const char *shell_cmd)
{
    o->sh_argv[0] = (char *)"/bin/sh";
    o->sh_argv[1] = (char *)"-c";
    o->sh_argv[2] = (char *)shell_cmd;
    o->sh_argv[3] = NULL;
    o->prog = o->sh_argv;
}

static int parse_run(const char *cmd, int argc, char **argv, run_opts *o, cli_global *g)
{
    static const struct option longopts[] = {
        CLI_LOCK_LONGOPTS
        {"on-lost", required_argument, NULL, CLI_OPT_ON_LOST},
        {"grace", required_argument, NULL, CLI_OPT_GRACE},
        {"command", required_argument, NULL, 'c'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *shell_cmd = NULL;
    int dashdash = 0;

    /* '+': stop at NAME, then go on after it, until "--" or -c: what
     * follows those belongs to the program. A "--" before any NAME ends
     * the options instead, as for the other commands, so that a NAME may
     * start with '-': `run [OPTIONS] -- NAME... -- PROGRAM`. */
    for (;;) {
        int before = optind ? optind : 1;
        int c = getopt_long(argc, argv, "+:t:w:nE:c:sxeqvh", longopts, NULL);
        if (c == 'e') /* flock(1)'s other letter for -x */
            c = 'x';
        if (c == -1) {
            if (optind == before + 1 && !strcmp(argv[before], "--")) {
                if (o->n_names == 0)
                    return names_after_dashdash(cmd, argc, argv, o);
                dashdash = 1;
                break;
            }
            /* NAME, or several: all of them are taken together. */
            if (optind < argc && o->n_names == DLOCK_MULTI_MAX)
                return cli_usage_error(cmd, "at most %d names at once, not more ('%s' would "
                                       "be name %d)", DLOCK_MULTI_MAX, argv[optind],
                                       DLOCK_MULTI_MAX + 1);
            if (optind < argc) {
                o->names[o->n_names++] = argv[optind++];
                continue;
            }
            break;
        }
        int rc = c == CLI_OPT_PRINT_FENCE ? -1 : cli_lock_option(cmd, c, optarg, &o->lk);
        if (rc >= 0) {
            if (rc)
                return rc;
            continue;
        }
        rc = cli_run_option(cmd, c, optarg, o, &shell_cmd, g);
        if (rc >= 0) {
            if (rc)
                return rc;
            if (shell_cmd)
                break;
            continue;
        }
        switch (c) {
        case 'h':
            exit(cli_help(cmd));
        default:
            return cli_bad_option(cmd, c, optopt, argv, optind);
        }
    }
    if (shell_cmd) {
        if (!o->n_names && optind + 1 < argc && !strcmp(argv[optind], "--"))
            optind++; /* -c CMD -- NAME: a NAME that starts with '-' */
        if (!o->n_names && optind < argc)
            o->names[o->n_names++] = argv[optind++];
        if (optind < argc)
            return cli_usage_error(cmd, "unexpected '%s' after -c: the command is one argument",
                                   argv[optind]);
        cli_run_shell(o, shell_cmd);
    } else if (dashdash && o->n_names && optind < argc) {
        o->prog = argv + optind;
    }
    if (!o->n_names)
        return cli_usage_error(cmd, "missing lock NAME%s", dashdash ? " before '--'" : "");
    if (!o->prog && dashdash)
        return cli_usage_error(cmd, "missing PROGRAM after '--'");
    if (!o->prog && optind < argc)
        return cli_usage_error(cmd, "expected '--' or -c before '%s'", argv[optind]);
    if (!o->prog && o->n_names > 1)
        /* `dlock run NAME PROGRAM` without "--": the names read on. */
        return cli_usage_error(cmd, "expected '--' or -c before '%s' (or is it a second lock "
                               "NAME? then add '-- PROGRAM')", o->names[1]);
    if (!o->prog)
        return cli_usage_error(cmd, "missing '-- PROGRAM' or -c 'COMMAND'");
    return finish_run(cmd, o);
}

/* What every form of run checks once NAMEs and PROGRAM are known. */
static int finish_run(const char *cmd, run_opts *o)
{
    o->name = o->names[0];
    o->lk.names = o->names;
    o->lk.n_names = o->n_names;
    for (size_t i = 0; i < o->n_names; i++)
        for (size_t j = i + 1; j < o->n_names; j++)
            if (!strcmp(o->names[i], o->names[j]))
                return cli_usage_error(cmd, "the name \"%s\" is given twice", o->names[i]);
    return cli_check_lock_mode(cmd, &o->lk, o->n_names);
}

/* Watchdog thread: no locks, no stdio, just a flag and a byte. */
void cli_run_on_lost(dlock_lock *lock, dlock_lost_reason reason, void *arg)
{
    run_state *rs = arg;
    char b = 'L';
    (void)lock;
    atomic_store(&rs->lost_reason, (int)reason);
    ssize_t n = write(rs->ev[1], &b, 1);
    (void)n;
}

/* The program's environment: ours, with DLOCK_NAME, DLOCK_TOKEN and
 * DLOCK_FENCE set (and DLOCK_LEADER_VALUE under `elect`: value, not
 * NULL), and without any password (cli_env_passes()). Built here rather
 * than with setenv(), which is not safe while the library's threads run. */
static char **program_env(dlock_lock *lock, const char *value, char **block)
{
    extern char **environ;
    static const char *const ours[] = {"DLOCK_NAME=", "DLOCK_TOKEN=", "DLOCK_FENCE=",
                                       "DLOCK_LEADER_VALUE="};
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 5, sizeof *env);
    if (!env)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        int skip = 0;
        for (size_t j = 0; j < 4; j++)
            skip |= !strncmp(environ[i], ours[j], strlen(ours[j]));
        if (!skip && cli_env_passes(environ[i]))
            env[k++] = environ[i];
    }
    const char *name = dlock_lock_name(lock), *token = dlock_lock_token(lock);
    size_t len = strlen(name) + strlen(token) + (value ? strlen(value) : 0) + 100;
    char *buf = malloc(len);
    if (!buf) {
        free(env);
        return NULL;
    }
    int a = snprintf(buf, len, "DLOCK_NAME=%s", name) + 1;
    int b = snprintf(buf + a, len - (size_t)a, "DLOCK_TOKEN=%s", token) + 1;
    int f = snprintf(buf + a + b, len - (size_t)(a + b), "DLOCK_FENCE=%" PRIu64,
                     dlock_lock_fence(lock)) + 1;
    *block = buf;
    env[k++] = buf;
    env[k++] = buf + a;
    env[k++] = buf + a + b;
    if (value) {
        snprintf(buf + a + b + f, len - (size_t)(a + b + f), "DLOCK_LEADER_VALUE=%s", value);
        env[k++] = buf + a + b + f;
    }
    env[k] = NULL;
    return env;
}

static void act_on_loss(run_state *rs, int reason, const char *why)
{
    char nodes[512];
    static const char *const action[] = {"; sending SIGTERM to the program",
                                         "; killing the program",
                                         "; the program keeps running (--on-lost ignore)"};
    if (!why)
        why = reason == DLOCK_LOST_NO_QUORUM ? "could not renew the lease in time"
                                             : "the key expired, was deleted or was taken over";
    cli_msg("lost \"%s\" on %s: %s%s", rs->o->name, cli_nodes(rs->client, nodes, sizeof nodes),
            why, action[rs->o->on_lost]);
    rs->lost_seen = 1;
    pid_t g = rs->ch.pid;
    if (rs->o->on_lost == LOST_TERM) {
        kill(-g, SIGTERM);
        kill(-g, SIGCONT); /* a stopped process would not see SIGTERM */
        rs->kill_at = cli_now_ms() + rs->o->grace_ms;
        rs->signalled = 1;
    } else if (rs->o->on_lost == LOST_KILL) {
        kill(-g, SIGKILL);
        rs->signalled = 1;
    }
}

/* As PID 1 (a container's entry point) orphans from outside the program's
 * tree become our children: reap those that exited, or they linger as
 * zombies. (The program's own orphans go to the guardian, a subreaper.)
 * The guardian is left alone: its end is seen on its report pipe. */
static void reap_orphans(pid_t guard)
{
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0 ||
            si.si_pid == guard)
            return;
        while (waitpid(si.si_pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
}

/* Wait until the program exits (rs->status) or its guardian died
 * (rs->guard_died); act on a lost lock and due SIGKILLs meanwhile. The
 * guardian keeps the program unreaped so that its group id cannot be
 * reused while the signal thread may still signal it. */
static void supervise(run_state *rs)
{
    cli_child *ch = &rs->ch;
    for (;;) {
        cli_guard_msg m;
        int got;
        while ((got = cli_child_report(ch, &m)) > 0) {
            if (m.kind == CLI_GUARD_EXITED) {
                rs->status = m.value;
                return;
            }
            if (m.kind != CLI_GUARD_STOPPED || ch->tty_fd < 0)
                continue;
            cli_child_suspend(ch);
            /* dlock was stopped too, and the watchdog with it. */
            if (!rs->lost_seen && dlock_lock_validity_ms(rs->lock) == 0)
                act_on_loss(rs, DLOCK_LOST_NOT_OWNER, "the lease ran out while stopped");
            kill(-ch->pid, SIGCONT);
        }
        if (got < 0) {
            rs->guard_died = 1;
            return;
        }
        reap_orphans(ch->guard_pid);
        int reason = atomic_load(&rs->lost_reason);
        if (reason && !rs->lost_seen)
            act_on_loss(rs, reason, NULL);
        int64_t now = cli_now_ms();
        if (rs->kill_at >= 0 && now >= rs->kill_at) {
            kill(-ch->pid, SIGKILL);
            rs->kill_at = -1;
        }
        int timeout = -1;
        if (rs->kill_at >= 0)
            timeout = rs->kill_at - now > INT_MAX ? INT_MAX : (int)(rs->kill_at - now);
        /* Level-triggered: a byte written after the checks above still
         * wakes this poll. */
        struct pollfd p[2] = {{rs->ev[0], POLLIN, 0}, {ch->guard_fd, POLLIN, 0}};
        if (poll(p, 2, timeout) > 0 && p[0].revents) {
            char buf[64];
            while (read(rs->ev[0], buf, sizeof buf) > 0)
                ;
        }
    }
}

/* After a loss the whole group goes, not only the program: what is left of
 * it gets the rest of the grace period, then SIGKILL. Nothing signals the
 * exit of processes that are not our children, hence the short sleeps.
 * Zombies are dead: one whose parent reaps slowly (a busy init) must not
 * hold us (cli_group_running() reads their state). */
static void kill_leftovers(run_state *rs)
{
    pid_t g = rs->ch.pid;
    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0) /* orphans, as PID 1 */
            ;
        if (!cli_group_running(g))
            return;
        if (rs->kill_at < 0 || cli_now_ms() >= rs->kill_at) {
            kill(-g, SIGKILL);
            return;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Release as soon as the program ended; say if the lock was lost. */
static void release(run_state *rs)
{
    int rc = rs->election ? dlock_election_resign(rs->election) : dlock_lock_release(rs->lock);
    int reason = atomic_load(&rs->lost_reason);
    if (rs->lost_seen)
        return;
    if (reason || rc == DLOCK_ELOST || rc == DLOCK_ENOTOWNER || rc == DLOCK_EEXPIRED) {
        rs->lost_seen = 1;
        cli_msg("lost \"%s\" before the program ended: %s", rs->o->name,
                reason == DLOCK_LOST_NO_QUORUM ? "could not renew the lease in time"
                : rc == DLOCK_ENOTOWNER        ? "another owner holds it now"
                                               : "the key had expired or was deleted");
    } else if (rc != DLOCK_OK) {
        cli_report(rs->client, rs->lock, rc, "release");
        cli_msg("\"%s\" will expire by itself within %.1fs", rs->o->name,
                (double)rs->o->lk.ttl_ms / 1000.0);
    } else if (rs->g->verbose) {
        cli_msg("released \"%s\"", rs->o->name);
    }
}

int cli_run_program(run_state *rs, const sigset_t *mask)
{
    cli_child *ch = &rs->ch;
    char *block = NULL;
    char **env = program_env(rs->lock, rs->leader_value, &block);
    int err = env ? 0 : ENOMEM;

    /* Fork under the mutex: a signal that arrives meanwhile is forwarded
     * once the group exists. One that came before means we stop here. */
    CLI_CHECK(pthread_mutex_lock(&rs->sw.mu));
    int sig = rs->sw.signo;
    if (!sig && !err)
        err = cli_child_start(ch, rs->o->prog, env, mask);
    if (!sig && !err) {
        rs->sw.pgid = ch->pid;
        rs->sw.phase = CLI_PHASE_RUN;
    } else {
        rs->sw.phase = CLI_PHASE_DONE;
    }
    CLI_CHECK(pthread_mutex_unlock(&rs->sw.mu));
    if (sig || err) {
        if (err)
            cli_msg("cannot start '%s': %s", rs->o->prog[0], strerror(err));
        release(rs);
        free(block);
        free(env);
        return sig ? 128 + sig : CLI_EXIT_OSERR;
    }
    cli_child_wait_exec(ch);
    if (ch->exec_errno)
        cli_msg("cannot run '%s': %s", rs->o->prog[0], strerror(ch->exec_errno));
    else if (rs->g->verbose)
        cli_msg("running '%s' (pid %ld) holding \"%s\"",
                rs->o->prog == rs->o->sh_argv ? rs->o->sh_argv[2] : rs->o->prog[0],
                (long)ch->pid, rs->o->name);

    supervise(rs);
    cli_sigwatch_finish(&rs->sw);
    if (rs->guard_died) {
        /* Nothing would stop the program if dlock died now: stop it while
         * the lease still holds. It and its orphans are ours now. */
        cli_msg("the guardian of the program (pid %ld) died; killing the program",
                (long)ch->guard_pid);
        cli_kill_descendants(ch->pid);
    }
    cli_child_reclaim_tty(ch);
    release(rs);
    if (rs->signalled && !rs->guard_died)
        kill_leftovers(rs);
    cli_child_done(ch);
    while (waitpid(-1, NULL, WNOHANG) > 0) /* orphans, as PID 1 */
        ;
    free(block);
    free(env);
    if (rs->guard_died)
        return CLI_EXIT_OSERR;
    /* The program's own failure says more than the loss, unless we caused
     * it by signalling the program. */
    if (rs->lost_seen && (rs->signalled || rs->status == 0))
        return CLI_EXIT_LOST;
    return rs->status;
}

int cli_run_begin(run_state *rs, const cli_global *g, const run_opts *o, sigset_t *mask)
{
    cli_child_note_inherited_fds();
    memset(rs, 0, sizeof *rs);
    rs->g = g;
    rs->o = o;
    rs->kill_at = -1;
    rs->ev[0] = rs->ev[1] = -1;
    atomic_init(&rs->lost_reason, 0);
    /* Before any thread exists, so that every thread inherits the mask. */
    cli_block_signals(mask);
    if (pipe2(rs->ev, O_CLOEXEC | O_NONBLOCK) != 0) {
        cli_msg("pipe: %s", strerror(errno));
        return CLI_EXIT_OSERR;
    }
    return 0;
}

void cli_run_end(run_state *rs)
{
    if (rs->election)
        dlock_election_free(rs->election); /* rs->lock is the election's */
    else
        dlock_lock_free(rs->lock);
    dlock_client_free(rs->client);
    if (rs->ev[0] >= 0)
        close(rs->ev[0]);
    if (rs->ev[1] >= 0)
        close(rs->ev[1]);
}

int cli_cmd_run(cli_global *g, int argc, char **argv)
{
    static run_opts o = {CLI_LOCK_OPTS_INIT, LOST_TERM, 5000, NULL, {NULL}, 0, NULL,
                         {NULL, NULL, NULL, NULL}};
    run_state rs;
    sigset_t mask;
    int rc = parse_run(argv[0], argc, argv, &o, g);
    if (rc)
        return rc;

    rc = cli_run_begin(&rs, g, &o, &mask);
    if (rc)
        return rc;
    rc = cli_open_client(g, &rs.client);
    if (rc)
        goto out;
    dlock_lock_options lo = cli_lock_options(&o.lk, DLOCK_AUTO_RENEW);
    lo.on_lost = cli_run_on_lost;
    lo.on_lost_arg = &rs;
    rc = cli_open_lock_set(rs.client, o.names, o.n_names, &lo, &o.lk, &rs.lock);
    if (rc)
        goto out;
    o.name = dlock_lock_name(rs.lock); /* a set: its names, for messages */
    rc = cli_sigwatch_start(&rs.sw, rs.lock, rs.ev[1]);
    if (rc)
        goto out;
    rc = cli_acquire(g, rs.client, rs.lock, &o.lk);
    if (rc == DLOCK_OK) {
        rc = cli_run_program(&rs, &mask);
    } else {
        rc = cli_exit_for(rc, &o.lk, cli_sigwatch_finish(&rs.sw));
    }
    cli_sigwatch_stop(&rs.sw);
out:
    cli_run_end(&rs);
    return rc;
}
