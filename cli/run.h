/* SPDX-License-Identifier: BSD-3-Clause */
/* What `run` (run.c) shares with `elect` (elect.c): a program run while a
 * lock (or an election's term) is held, its loss handling, signals and
 * exit codes. */
#ifndef DLOCK_CLI_RUN_H
#define DLOCK_CLI_RUN_H

#include <signal.h>
#include <stdatomic.h>

#include "cli.h"

typedef enum on_lost_action { LOST_TERM, LOST_KILL, LOST_IGNORE } on_lost_action;

typedef struct run_opts {
    cli_lock_opts lk;
    on_lost_action on_lost;
    int64_t grace_ms;
    const char *name; /* for messages: the name, or the names of a set */
    const char *names[DLOCK_MULTI_MAX];
    size_t n_names;
    char **prog;
    char *sh_argv[4];
} run_opts;

typedef struct run_state {
    const cli_global *g;
    const run_opts *o;
    dlock_client *client;
    dlock_lock *lock;
    cli_sigwatch sw;
    cli_child ch;
    int ev[2];              /* self-pipe */
    atomic_int lost_reason; /* set by on_lost() on the watchdog thread */
    int lost_seen;          /* the loss was reported and acted on */
    int status;             /* the program's exit status, as a shell gives it */
    int guard_died;         /* the guardian died before the program */
    int signalled;          /* ... by signalling the program */
    int64_t kill_at;        /* SIGKILL the group then (ms), or -1 */
    /* `elect`: the election whose term is held (resigned at the end
     * instead of a release), and the value for DLOCK_LEADER_VALUE. */
    dlock_election *election;
    const char *leader_value;
} run_state;

/* The options run and elect share (--on-lost, --grace, -c, -v): 0 taken,
 * a usage error's exit status, or -1 when c is not one of them. -c sets
 * *shell_cmd. */
int cli_run_option(const char *cmd, int c, const char *arg, run_opts *o, const char **shell_cmd,
                   cli_global *g);
/* The program is `/bin/sh -c shell_cmd`. */
void cli_run_shell(run_opts *o, const char *shell_cmd);

/* rs for a run of o: the signals dlock handles blocked (call it before
 * any thread exists, so that every thread inherits that; *mask gets the
 * mask the program is to run with), the self-pipe made. 0 or the exit
 * status of a failure. */
int cli_run_begin(run_state *rs, const cli_global *g, const run_opts *o, sigset_t *mask);
/* The end of what cli_run_begin started: the election (or the lock), the
 * client and the self-pipe, each if it was made. */
void cli_run_end(run_state *rs);

/* The lock's on_lost (run_state as its argument): the watchdog thread's
 * flag and byte for the main thread. */
void cli_run_on_lost(dlock_lock *lock, dlock_lost_reason reason, void *arg);

/* Start rs->o->prog under the held lock, supervise it (a loss: the
 * --on-lost action), let the lock go when it ends; the exit status. */
int cli_run_program(run_state *rs, const sigset_t *mask);

#endif
