/* SPDX-License-Identifier: BSD-3-Clause */
/* The dlock command: declarations shared by its files.
 *
 *   main.c      global options, dispatch and --version
 *   help.c      --help texts and the synopses of usage errors
 *   common.c    messages, the exit-code mapping, the lock options' parser,
 *               durations, opening the client
 *   wait.c      acquiring with a deadline, progress (-v), and the signal
 *               thread that lets SIGINT/SIGTERM/SIGHUP cancel a wait
 *   commands.c  acquire, release, extend (and their option parsing)
 *   status.c    status, as text or JSON
 *   list.c      list: the held names, as text or JSON
 *   break.c     break: remove every hold of a stuck lock, after asking
 *   json.c      JSON strings of arbitrary bytes (status, list)
 *   run.c       run: hold the lock while a program runs (run.h: what
 *               elect shares)
 *   elect.c     elect: run a program while leading an election; leader
 *   child.c     starting the program in its own process group
 *   guard.c     the guardian: stops the program when dlock dies
 *   proc.c      processes seen through /proc: group alive, killing a tree
 *   tls.c       the TLS options and their environment variables
 *
 * The tool uses only the public header, like any other user. */
#ifndef DLOCK_CLI_H
#define DLOCK_CLI_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "dlock.h"

/* Exit statuses (sysexits.h values, spelled out so the man page and the
 * code say the same thing). */
#define CLI_EXIT_CONFLICT 1     /* default; -E changes it */
#define CLI_EXIT_USAGE 64       /* EX_USAGE */
#define CLI_EXIT_NOINPUT 66     /* EX_NOINPUT: --password-file unreadable */
#define CLI_EXIT_UNAVAILABLE 69 /* EX_UNAVAILABLE: Redis unreachable, no answer,
                                 * no quorum, busy loading */
#define CLI_EXIT_OSERR 71       /* EX_OSERR: fork, pipe, thread failed */
#define CLI_EXIT_PROTOCOL 76    /* EX_PROTOCOL: Redis refused the command
                                 * (OOM, READONLY, WRONGTYPE, ...) */
#define CLI_EXIT_NOPERM 77      /* EX_NOPERM: authentication or ACL refused */
#define CLI_EXIT_LOST 75        /* EX_TEMPFAIL: the lock was lost */
#define CLI_EXIT_CANNOT_EXEC 126
#define CLI_EXIT_NOT_FOUND 127

/* A failed pthread call is a bug, not a condition to limp on with. */
#define CLI_CHECK(call)                                                        \
    do {                                                                       \
        int cli_check_rc_ = (call);                                            \
        if (cli_check_rc_ != 0) {                                              \
            fprintf(stderr, "dlock: %s: error %d\n", #call, cli_check_rc_);    \
            abort();                                                           \
        }                                                                      \
    } while (0)

#define CLI_DEFAULT_URL "redis://127.0.0.1:6379"
/* Shortest lease accepted (-t). Below it the first renewal (every TTL/3)
 * and, with several nodes, the drift allowance (1% + 2 ms) and one round
 * trip on a loaded host eat the whole lease: the lock would be lost at
 * once. docs/dlock.1 explains the figure. */
#define CLI_MIN_TTL_MS 100
#define CLI_MAX_URLS 64

/* Values of long options that have no letter (above any char, so that
 * getopt's optopt never mistakes them for one). */
enum cli_long_opt {
    CLI_OPT_FAIR = 256,
    CLI_OPT_ON_LOST,
    CLI_OPT_GRACE,
    CLI_OPT_JSON,
    CLI_OPT_CONNECT_TIMEOUT,
    CLI_OPT_IO_TIMEOUT,
    CLI_OPT_MIN_UPTIME,
    CLI_OPT_USER,
    CLI_OPT_PASSWORD_FILE,
    CLI_OPT_NO_AUTH_WARNING,
    CLI_OPT_PREFIX,
    CLI_OPT_FENCE,
    CLI_OPT_NO_FENCE,
    CLI_OPT_PRINT_FENCE,
    CLI_OPT_PERMITS,
    CLI_OPT_IDENTITY,
    CLI_OPT_NO_IDENTITY,
    CLI_OPT_LOCK_DELAY
};

/* The one table of lock options, shared by `run` and the commands that
 * take a lock (acquire); cli_lock_option() parses every one of them. */
#define CLI_LOCK_LONGOPTS                                                      \
    {"ttl", required_argument, NULL, 't'},                                     \
    {"wait", required_argument, NULL, 'w'},                                    \
    {"timeout", required_argument, NULL, 'w'}, /* flock(1)'s name for -w */  \
    {"nonblock", no_argument, NULL, 'n'},                                      \
    {"conflict-exit-code", required_argument, NULL, 'E'},                      \
    {"fair", no_argument, NULL, CLI_OPT_FAIR},                                 \
    {"fence", no_argument, NULL, CLI_OPT_FENCE},                               \
    {"no-fence", no_argument, NULL, CLI_OPT_NO_FENCE},                         \
    {"quiet", no_argument, NULL, 'q'},                                         \
    {"shared", no_argument, NULL, 's'},                                        \
    {"exclusive", no_argument, NULL, 'x'},                                     \
    {"permits", required_argument, NULL, CLI_OPT_PERMITS},                     \
    {"lock-delay", required_argument, NULL, CLI_OPT_LOCK_DELAY},

/* Values of the TLS options (cli/tls.c), apart from the others. */
enum cli_tls_opt {
    CLI_OPT_TLS = 512,
    CLI_OPT_CACERT,
    CLI_OPT_CACERTDIR,
    CLI_OPT_CERT,
    CLI_OPT_KEY,
    CLI_OPT_SNI,
    CLI_OPT_INSECURE
};

#define CLI_TLS_LONGOPTS                                                       \
    {"tls", no_argument, NULL, CLI_OPT_TLS},                                   \
    {"cacert", required_argument, NULL, CLI_OPT_CACERT},                       \
    {"cacertdir", required_argument, NULL, CLI_OPT_CACERTDIR},                 \
    {"cert", required_argument, NULL, CLI_OPT_CERT},                           \
    {"key", required_argument, NULL, CLI_OPT_KEY},                             \
    {"sni", required_argument, NULL, CLI_OPT_SNI},                             \
    {"insecure", no_argument, NULL, CLI_OPT_INSECURE},

#define CLI_TLS_HELP                                                           \
    "      --tls                TLS for every node (redis:// as rediss://, etcd://\n" \
    "                           as etcds://)\n"                                \
    "      --cacert=FILE        CA certificates to verify the servers with\n"  \
    "                           (default: the system store)\n"                 \
    "      --cacertdir=DIR      directory of hashed CA certificates\n"         \
    "      --cert=FILE          client certificate (with --key)\n"             \
    "      --key=FILE           client private key\n"                          \
    "      --sni=NAME           server name to send and to verify\n"          \
    "      --insecure           do not verify server certificates (tests only)\n"

/* Values of the deployment options (cli/deploy.c). */
enum cli_deploy_opt {
    CLI_OPT_MIN_REPLICAS = 560,
    CLI_OPT_MIN_REPLICAS_TIMEOUT,
    CLI_OPT_CLUSTER
};

#define CLI_DEPLOY_LONGOPTS                                                    \
    {"min-replicas", required_argument, NULL, CLI_OPT_MIN_REPLICAS},           \
    {"min-replicas-timeout", required_argument, NULL, CLI_OPT_MIN_REPLICAS_TIMEOUT}, \
    {"cluster", no_argument, NULL, CLI_OPT_CLUSTER},

#define CLI_DEPLOY_HELP                                                        \
    "      --cluster            the -r URLs are seed nodes of one Redis Cluster\n" \
    "      --min-replicas=N     acquire/extend only once N replicas acknowledged\n" \
    "                           (WAIT); else undone, exit 69 (default 0: off)\n" \
    "      --min-replicas-timeout=D  how long to wait for them (default 1s)\n"

/* Options that come before the command. */
typedef struct cli_global {
    const char *urls[CLI_MAX_URLS];
    size_t n_urls;
    char *env_urls; /* owned copy of DLOCK_REDIS, split in place */
    dlock_client_options copts;
    int verbose;
    int quiet;             /* -q: no message for an expected conflict */
    const char *pass;      /* -a/--pass (argv hidden after reading) */
    char *pass_copy;       /* owned copy of -a's value */
    const char *pass_file; /* --password-file */
    char *file_pass;       /* owned: what --password-file held */
    int no_auth_warning;
    char *url_copies[CLI_MAX_URLS]; /* owned copies of -r URLs with a password */
    size_t n_url_copies;
    int url_pass_in_argv; /* a -r URL had a password (now out of argv) */
} cli_global;

/* Options shared by `run` and `acquire`. */
typedef struct cli_lock_opts {
    int64_t ttl_ms;
    int64_t wait_ms; /* DLOCK_WAIT_FOREVER, 0 (-n) or a deadline */
    int wait_given;  /* -w or -n seen: they exclude each other */
    int conflict_exit;
    int fair;
    int quiet;       /* -q */
    int fence;       /* --fence: keep a fencing counter (off by default) */
    int print_fence; /* acquire --print-fence: print "TOKEN FENCE" */
    int shared;       /* -s: the shared side of a read-write lock (-x: not) */
    unsigned permits; /* --permits N: a semaphore of N permits (0: none) */
    const char *const *names; /* run: the names taken together (busy messages) */
    size_t n_names;
    int64_t lock_delay_ms; /* --lock-delay D (0: none) */
    int exclusive;         /* -x given (the default is exclusive too, but on zk://) */
} cli_lock_opts;

/* The defaults of the lock options; extend waits for nothing. */
#define CLI_LOCK_OPTS_INIT {30000, DLOCK_WAIT_FOREVER, 0, CLI_EXIT_CONFLICT, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0}

/* common.c */
void cli_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int cli_bad_option(const char *cmd, int c, int optopt_value, char **argv, int ind);
int cli_lock_option(const char *cmd, int c, const char *arg, cli_lock_opts *o);
/* The library's lock options for o, with `flags` added (DLOCK_AUTO_RENEW). */
dlock_lock_options cli_lock_options(const cli_lock_opts *o, unsigned flags);
int cli_parse_duration(const char *cmd, const char *opt, const char *text,
                       int64_t *out_ms);
int cli_parse_ttl(const char *cmd, const char *text, int64_t *out_ms);
int cli_parse_exit_code(const char *cmd, const char *text, int *out);
int64_t cli_now_ms(void);
const char *cli_nodes(const dlock_client *c, char *buf, size_t len);
int cli_open_client(cli_global *g, dlock_client **out);
int cli_open_lock(dlock_client *c, const char *name,
                  const dlock_lock_options *lo, dlock_lock **out);
/* cli_open_lock() for run: a semaphore (o->permits), or several names
 * taken together (n > 1); the same messages. */
int cli_open_lock_set(dlock_client *c, const char *const *names, size_t n,
                      const dlock_lock_options *lo, const cli_lock_opts *o, dlock_lock **out);
/* The -s, -x, --permits, --fair and names combination run accepts; 0 or
 * the usage error's exit status. */
int cli_check_lock_mode(const char *cmd, const cli_lock_opts *o, size_t n_names);
/* The one mapping from a dlock code to an exit status. o (may be NULL)
 * supplies -E for a lock not acquired; a signal that interrupted an
 * acquire (sig != 0, rc DLOCK_ECANCELED, or DLOCK_OK taken too late)
 * exits 128 + sig, as a shell reports it. */
int cli_exit_for(int rc, const cli_lock_opts *o, int sig);
void cli_report(dlock_client *c, dlock_lock *lock, int rc, const char *doing);
/* What to add to the message of a failure rc (detail: the library's
 * message, may be ""): a hint at the likely cause, or "". */
const char *cli_hint(int rc, const char *detail);
/* How a name is held, as status, list and break print it. */
const char *cli_mode_name(dlock_hold_mode m);
/* `text` with control characters as \xNN, for human-readable output. */
const char *cli_escape(const char *text, char *buf, size_t len);
/* Where the password of `url` starts (*start) and its length; 0: none. */
size_t cli_password_span(const char *url, size_t *start);
/* `url` with its password replaced by "***". */
const char *cli_redact_url(const char *url, char *buf, size_t len);
/* Whether environment entry `e` ("NAME=value") may reach the program run
 * under the lock: never DLOCK_PASSWORD or REDISCLI_AUTH, nor a DLOCK_REDIS
 * with a password. */
int cli_env_passes(const char *e);

/* tls.c: DLOCK_TLS & co. into g->copts, then the options over them.
 * cli_tls_option() returns 0 when it took option c, -1 if c is not one. */
void cli_tls_env(cli_global *g);
int cli_tls_option(cli_global *g, int c, const char *arg);

/* deploy.c: the deployment options (cluster, replica acknowledgement). Returns -1
 * when c is not one of them, else 0 or the exit code of a usage error. */
int cli_deploy_option(cli_global *g, int c, const char *arg);

/* wait.c: the signal thread and acquiring under it. */
typedef enum cli_phase {
    CLI_PHASE_WAIT, /* a signal cancels the acquire */
    CLI_PHASE_RUN,  /* a signal is forwarded to the program's group */
    CLI_PHASE_DONE  /* signals are noted and otherwise ignored */
} cli_phase;

typedef struct cli_sigwatch {
    pthread_mutex_t mu;
    pthread_t thread;
    cli_phase phase;  /* under mu */
    dlock_lock *lock; /* under mu; cancelled in CLI_PHASE_WAIT */
    pid_t pgid;       /* under mu; the program's group in CLI_PHASE_RUN */
    int signo;        /* under mu; first SIGINT/SIGTERM/SIGHUP seen */
    int stopping;     /* under mu; the thread returns */
    int wake_fd;      /* each signal taken writes a byte here (-1: none) */
} cli_sigwatch;

void cli_block_signals(sigset_t *old);
int cli_sigwatch_start(cli_sigwatch *sw, dlock_lock *lock, int wake_fd);
int cli_sigwatch_finish(cli_sigwatch *sw);
void cli_sigwatch_stop(cli_sigwatch *sw);
int cli_acquire(const cli_global *g, dlock_client *c, dlock_lock *lock,
                const cli_lock_opts *o);

/* guard.c: the guardian's reports to dlock (child.c), one record per write. */
enum cli_guard_kind {
    CLI_GUARD_STARTED, /* value: the program's pid, or -errno of fork() */
    CLI_GUARD_STOPPED, /* value: the stop signal */
    CLI_GUARD_EXITED   /* value: exit status, or 128 + the signal */
};

typedef struct cli_guard_msg {
    int kind;
    int value;
} cli_guard_msg;

/* child.c */
typedef struct cli_child {
    pid_t pid;       /* also the process group id */
    pid_t guard_pid; /* the guardian (guard.c): the program's parent */
    int ctl_fd;      /* write end the guardian watches; closed, it kills */
    int guard_fd;    /* the guardian's reports (cli_guard_msg), non-blocking */
    int tty_fd;      /* terminal handed to the program's group, or -1 */
    int exec_fd;     /* read end of the exec report pipe */
    int exec_errno;  /* why exec failed; 0 if the program runs */
} cli_child;

/* Remember which descriptors dlock inherited: only those reach the
 * program. Call before opening anything. */
void cli_child_note_inherited_fds(void);
/* Make dlock a child subreaper, fork the guardian, which forks and execs
 * argv[0] (PATH search) in a new process group, with the environment envp
 * and the signal mask *mask. Returns 0 or an errno. */
int cli_child_start(cli_child *ch, char *const argv[], char *const envp[],
                    const sigset_t *mask);
/* Wait until the program runs or exec failed (sets exec_errno). */
void cli_child_wait_exec(cli_child *ch);
/* The guardian's next report into *m: 1, or 0 if none yet, or -1 if the
 * guardian is gone. */
int cli_child_report(cli_child *ch, cli_guard_msg *m);
/* Once dlock no longer signals the program's group: the guardian reaps
 * the program and exits, and is waited for. */
void cli_child_done(cli_child *ch);
void cli_child_suspend(cli_child *ch);
void cli_child_reclaim_tty(cli_child *ch);

/* guard.c: the guardian's life once it forked the program: report on it
 * to status_fd, and kill its group and every descendant when ctl_fd
 * reaches end of file without a 'Q' (dlock died). Never returns. */
void cli_guard_run(pid_t program, int ctl_fd, int status_fd) __attribute__((noreturn));
/* Close every descriptor above 2 but the n_keep in keep (at most 8), whatever
 * their numbers: close_range(2), else a /proc/self/fd scan, else
 * every number below the RLIMIT_NOFILE soft limit. Async-signal-safe: for
 * a process forked from a threaded one. */
void cli_guard_close_fds_except(const int *keep, int n_keep);

/* proc.c */
/* Whether a process of group pgid still runs: zombies do not (/proc;
 * without it kill(-pgid, 0), which counts them). */
int cli_group_running(pid_t pgid);
/* SIGKILL the group pgid and every living descendant of the caller, until
 * none is left; reaps the caller's children. */
void cli_kill_descendants(pid_t pgid);

/* commands.c: options and exactly n_args positional arguments (NAME, then
 * TOKEN) of the commands other than run. Letters in shorts are the short
 * options taken; lock options need o, --json needs json. */
int cli_parse_simple(const char *cmd, int argc, char **argv, cli_global *g, const char *shorts,
                     cli_lock_opts *o, int *json, int n_args, const char **args);

/* The commands; each returns the process exit status. */
int cli_cmd_run(cli_global *g, int argc, char **argv);
int cli_cmd_acquire(cli_global *g, int argc, char **argv);
int cli_cmd_release(cli_global *g, int argc, char **argv);
int cli_cmd_extend(cli_global *g, int argc, char **argv);
int cli_cmd_status(cli_global *g, int argc, char **argv);

int cli_cmd_list(cli_global *g, int argc, char **argv);
int cli_cmd_break(cli_global *g, int argc, char **argv);
int cli_cmd_elect(cli_global *g, int argc, char **argv);
int cli_cmd_leader(cli_global *g, int argc, char **argv);

/* json.c: whether s is well-formed UTF-8; s as a JSON string (control
 * characters escaped, bytes that are not UTF-8 as U+FFFD); and
 * "name":NAME, plus "name_hex" with the exact bytes when NAME is not
 * UTF-8. */
int cli_is_utf8(const char *s);
void cli_json_string(const char *s, FILE *f);
void cli_json_name(const char *name, FILE *f);

/* help.c: help text; cmd NULL means the tool as a whole. */
void cli_synopsis(const char *cmd, FILE *f);
int cli_help(const char *cmd);

#endif
