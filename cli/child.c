/* SPDX-License-Identifier: BSD-3-Clause */
/* Starting the program in a process group of its own.
 *
 * Its own group, so that a lost lock (or a signal sent to dlock) reaches
 * everything the program started, grandchildren included, with one kill().
 * When dlock runs in the foreground of a terminal, the terminal goes to the
 * program's group as a shell would do it for a job: otherwise a program
 * that reads the terminal would be stopped by SIGTTIN, and ^C/^Z would
 * reach dlock instead of the program.
 *
 * The program's parent is not dlock but the guardian (guard.c), which
 * outlives dlock to stop the program if dlock is killed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

/* Descriptors dlock inherited pass on to the program (`3<file` works);
 * those opened since, by dlock and by the library (hiredis does not set
 * close-on-exec on its Redis sockets), do not. Descriptors from
 * FD_TRACKED up are always passed on: closing them in the child would cost
 * a system call each. */
#define FD_TRACKED 1024
static unsigned char inherited_fd[FD_TRACKED];

void cli_child_note_inherited_fds(void)
{
    for (int fd = 3; fd < FD_TRACKED; fd++)
        inherited_fd[fd] = fcntl(fd, F_GETFD) != -1;
}

static int foreground_tty(void)
{
    if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp())
        return STDIN_FILENO;
    return -1;
}

/* Close what dlock opened since it started (Redis sockets, pipes), but
 * for the keep descriptors. */
static void close_opened_fds(int keep1, int keep2, int keep3)
{
    for (int fd = 3; fd < FD_TRACKED; fd++)
        if (!inherited_fd[fd] && fd != keep1 && fd != keep2 && fd != keep3)
            close(fd);
}

/* After fork() in a threaded process only async-signal-safe calls are
 * safe until exec. execvpe() is not on POSIX's list, but glibc builds the
 * candidate paths on the stack, and its fork() leaves malloc usable in the
 * child anyway. Errors go back through report_fd: stdio is off limits. */
static void exec_child(pid_t guardian, int tty_fd, int report_fd, const int guard_fds[2],
                       char *const argv[], char *const envp[], const sigset_t *mask)
{
    /* The guardian's ends of the ctl and status pipes are close-on-exec
     * too; closed here by number all the same, whatever their numbers. */
    close(guard_fds[0]);
    close(guard_fds[1]);
    close_opened_fds(report_fd, -1, -1);
    /* If the guardian is killed, the program dies with it (dlock, if it
     * lives, then kills the rest): checked after the call, in case the
     * guardian died before it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != guardian)
        _exit(CLI_EXIT_CANNOT_EXEC);
    setpgid(0, 0);
    if (tty_fd >= 0)
        tcsetpgrp(tty_fd, getpid()); /* SIGTTOU is still blocked here */
    signal(SIGPIPE, SIG_DFL);        /* dlock ignores it; the program must not */
    sigprocmask(SIG_SETMASK, mask, NULL);
    execvpe(argv[0], argv, envp);
    int e = errno;
    ssize_t n = write(report_fd, &e, sizeof e);
    (void)n;
    _exit(e == ENOENT ? CLI_EXIT_NOT_FOUND : CLI_EXIT_CANNOT_EXEC);
}

/* The guardian, just forked: its own process group, so that a signal to
 * dlock's job (kill -9 %1) does not take it along; a subreaper, so that
 * the program's orphaned descendants stay its descendants. Then the
 * program, which it reports to dlock before it starts watching.
 *
 * It sees dlock die only if dlock holds the only write end of the ctl
 * pipe, so it closes dlock's ends of its pipes (dlock_fds) by number first
 * thing: close_opened_fds() looks only below FD_TRACKED, and dlock's pipes
 * land above it when dlock inherited some thousand descriptors. Once the
 * program is forked, it keeps only its two pipe ends. */
static void guardian(int tty_fd, int report_fd, int ctl_fd, int status_fd,
                     const int dlock_fds[3], char *const argv[], char *const envp[],
                     const sigset_t *mask)
{
    for (int i = 0; i < 3; i++)
        close(dlock_fds[i]);
    close_opened_fds(report_fd, ctl_fd, status_fd);
    setpgid(0, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int guard_fds[2] = {ctl_fd, status_fd};
    pid_t self = getpid(), pid = fork();
    if (pid == 0)
        exec_child(self, tty_fd, report_fd, guard_fds, argv, envp, mask);
    int e = errno;
    close(report_fd);
    if (pid > 0) {
        /* Both sides set the group, so that it exists before the report
         * below, whoever runs first. Errors only mean the child did it. */
        setpgid(pid, pid);
        if (tty_fd >= 0)
            tcsetpgrp(tty_fd, pid);
    }
    cli_guard_msg m = {CLI_GUARD_STARTED, pid > 0 ? (int)pid : -e};
    ssize_t n = write(status_fd, &m, sizeof m);
    (void)n;
    if (pid < 0)
        _exit(0);
    /* Whoever waits for end of file on dlock's output or terminal must
     * not wait for the guardian too. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        for (int fd = 0; fd < 3; fd++)
            dup2(null, fd);
        if (null > 2)
            close(null);
    }
    /* Whatever else it inherited (the program has it now), at any number. */
    cli_guard_close_fds_except(guard_fds, 2);
    cli_guard_run(pid, ctl_fd, status_fd);
}

static void close_pair(int p[2])
{
    close(p[0]);
    close(p[1]);
}

int cli_child_start(cli_child *ch, char *const argv[], char *const envp[], const sigset_t *mask)
{
    int rep[2], ctl[2], st[2], e;
    ch->pid = ch->guard_pid = -1;
    ch->ctl_fd = ch->guard_fd = ch->exec_fd = -1;
    ch->exec_errno = 0;
    ch->tty_fd = foreground_tty();
    /* If the guardian is killed, its children (the program, adopted
     * orphans) come to us rather than to init, for us to kill. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* The exec report pipe closes on exec: EOF means the program runs.
     * Close-on-exec everywhere: the program must never hold ctl[1], or the
     * guardian would not see dlock die. */
    if (pipe2(rep, O_CLOEXEC) != 0)
        return errno;
    if (pipe2(ctl, O_CLOEXEC) != 0) {
        e = errno;
        close_pair(rep);
        return e;
    }
    if (pipe2(st, O_CLOEXEC) != 0) {
        e = errno;
        close_pair(rep);
        close_pair(ctl);
        return e;
    }
    int dlock_fds[3] = {rep[0], ctl[1], st[0]};
    pid_t pid = fork();
    if (pid == 0)
        guardian(ch->tty_fd, rep[1], ctl[0], st[1], dlock_fds, argv, envp, mask);
    e = errno;
    close(rep[1]);
    close(ctl[0]);
    close(st[1]);
    if (pid < 0) {
        close(rep[0]);
        close(ctl[1]);
        close(st[0]);
        return e;
    }
    cli_guard_msg m = {0, 0};
    ssize_t n;
    do
        n = read(st[0], &m, sizeof m);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof m || m.kind != CLI_GUARD_STARTED || m.value <= 0) {
        close(rep[0]);
        close(ctl[1]);
        close(st[0]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return n == (ssize_t)sizeof m && m.value < 0 ? -m.value : ECHILD;
    }
    fcntl(st[0], F_SETFL, O_NONBLOCK);
    ch->pid = (pid_t)m.value;
    ch->guard_pid = pid;
    ch->ctl_fd = ctl[1];
    ch->guard_fd = st[0];
    ch->exec_fd = rep[0];
    return 0;
}

int cli_child_report(cli_child *ch, cli_guard_msg *m)
{
    ssize_t n;
    do
        n = read(ch->guard_fd, m, sizeof *m);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof *m)
        return 1;
    return n < 0 && errno == EAGAIN ? 0 : -1;
}

void cli_child_done(cli_child *ch)
{
    char q = 'Q';
    if (ch->ctl_fd < 0)
        return;
    ssize_t n = write(ch->ctl_fd, &q, 1);
    (void)n;
    close(ch->ctl_fd);
    close(ch->guard_fd);
    ch->ctl_fd = ch->guard_fd = -1;
    while (waitpid(ch->guard_pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

void cli_child_wait_exec(cli_child *ch)
{
    int e = 0;
    ssize_t n;
    do
        n = read(ch->exec_fd, &e, sizeof e);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof e)
        ch->exec_errno = e;
    close(ch->exec_fd);
    ch->exec_fd = -1;
}

/* The program's group was stopped from the terminal (^Z). Give the terminal
 * back and stop dlock too, so that the shell sees its job stopped. Returns
 * when the shell continues us; after `fg` the terminal goes back to the
 * program. The caller then sends SIGCONT to the program's group. */
void cli_child_suspend(cli_child *ch)
{
    if (ch->tty_fd < 0)
        return;
    tcsetpgrp(ch->tty_fd, getpgrp());
    raise(SIGTSTP);
    if (tcgetpgrp(ch->tty_fd) == getpgrp())
        tcsetpgrp(ch->tty_fd, ch->pid);
}

void cli_child_reclaim_tty(cli_child *ch)
{
    if (ch->tty_fd >= 0 && tcgetpgrp(ch->tty_fd) == ch->pid)
        tcsetpgrp(ch->tty_fd, getpgrp());
    ch->tty_fd = -1;
}
