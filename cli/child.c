/* SPDX-License-Identifier: BSD-3-Clause */
/* Starting the program in a process group of its own.
 *
 * Its own group, so that a lost lock (or a signal sent to dlock) reaches
 * everything the program started, grandchildren included, with one kill().
 * When dlock runs in the foreground of a terminal, the terminal goes to the
 * program's group as a shell would do it for a job: otherwise a program
 * that reads the terminal would be stopped by SIGTTIN, and ^C/^Z would
 * reach dlock instead of the program. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
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

/* After fork() in a threaded process only async-signal-safe calls are
 * safe until exec. execvpe() is not on POSIX's list, but glibc builds the
 * candidate paths on the stack, and its fork() leaves malloc usable in the
 * child anyway. Errors go back through report_fd: stdio is off limits. */
static void exec_child(int tty_fd, int report_fd, char *const argv[], char *const envp[],
                       const sigset_t *mask)
{
    for (int fd = 3; fd < FD_TRACKED; fd++)
        if (!inherited_fd[fd] && fd != report_fd)
            close(fd);
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

int cli_child_start(cli_child *ch, char *const argv[], char *const envp[], const sigset_t *mask)
{
    int p[2];
    ch->pid = -1;
    ch->exec_errno = 0;
    ch->exec_fd = -1;
    ch->tty_fd = foreground_tty();
    /* The exec report pipe closes on exec: EOF means the program runs. */
    if (pipe2(p, O_CLOEXEC) != 0)
        return errno;
    pid_t pid = fork();
    if (pid == 0)
        exec_child(ch->tty_fd, p[1], argv, envp, mask);
    int e = errno;
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return e;
    }
    /* Both sides set the group, so that it exists before fork() returns
     * here, whoever runs first. Errors only mean the child did it. */
    setpgid(pid, pid);
    if (ch->tty_fd >= 0)
        tcsetpgrp(ch->tty_fd, pid);
    ch->pid = pid;
    ch->exec_fd = p[0];
    return 0;
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
