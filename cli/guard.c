/* SPDX-License-Identifier: BSD-3-Clause */
/* The guardian: a small process between dlock and the program that stops
 * the program when dlock dies, however it dies.
 *
 * Only dlock renews the lease, so a program that outlives dlock runs
 * unprotected and, once the lease runs out, beside the next holder. A
 * dlock killed with SIGKILL (the OOM killer, kill -9, a container stop
 * that kills only the top process) cleans nothing up itself. So dlock
 * forks the guardian, and the guardian forks the program:
 *
 *   dlock --ctl pipe--> guardian --fork--> program (own process group)
 *         <-reports----
 *
 * dlock holds the only write end of the ctl pipe. When dlock dies the
 * kernel closes it, the guardian's poll() wakes on end of file at once,
 * and the guardian SIGKILLs the program's group and every other process
 * descended from it. The guardian is a child subreaper, so a grandchild
 * that left the group (setsid) and lost its parent is reparented to the
 * guardian rather than to init: "descended from the guardian" finds it.
 * When the program ends normally dlock writes 'Q' first and the guardian
 * just reaps the program and exits.
 *
 * The guardian is the program's parent, so it reports what dlock used to
 * see with waitid() (the program stopped, the program exited) as
 * cli_guard_msg records. It keeps the exited program unreaped until dlock
 * is done, so that the program's group id cannot be reused while dlock may
 * still signal it. Forked from a threaded process, it calls only system
 * calls and string functions (proc.c too): no malloc, no stdio. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

static void report(int fd, int kind, int value)
{
    cli_guard_msg m = {kind, value};
    ssize_t n = write(fd, &m, sizeof m); /* atomic: below PIPE_BUF */
    (void)n;                             /* dlock is gone: the ctl pipe says so */
}

/* The program's news since the last call: stopped, exited (then it stays
 * unreaped), and other children (orphans we adopted) reaped while it runs. */
static void check_children(pid_t program, int status_fd, int *exited)
{
    siginfo_t si;
    if (*exited)
        return;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)program, &si, WSTOPPED | WNOHANG) == 0 && si.si_pid == program)
        report(status_fd, CLI_GUARD_STOPPED, si.si_status);
    for (;;) {
        memset(&si, 0, sizeof si);
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0)
            return;
        if (si.si_pid == program) {
            *exited = 1;
            report(status_fd, CLI_GUARD_EXITED,
                   si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status);
            return;
        }
        while (waitpid(si.si_pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
}

void cli_guard_run(pid_t program, int ctl_fd, int status_fd)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    /* SIGCHLD is blocked (dlock's mask), so the signalfd gets it. */
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    int exited = 0;
    for (;;) {
        check_children(program, status_fd, &exited);
        struct pollfd p[2] = {{ctl_fd, POLLIN, 0}, {sfd, POLLIN, 0}};
        /* Without a signalfd, look at the children every 50 ms. */
        if (poll(p, sfd >= 0 ? 2 : 1, sfd >= 0 ? -1 : 50) < 0 && errno != EINTR)
            break;
        if (p[0].revents) {
            char c = 0;
            ssize_t n = read(ctl_fd, &c, 1);
            if (n < 0 && errno == EINTR)
                continue;
            if (n == 1 && c == 'Q') { /* dlock is done: no more news */
                while (waitpid(-1, NULL, WNOHANG) > 0)
                    ;
                _exit(0);
            }
            if (n <= 0) /* end of file: dlock died */
                break;
        }
        if (sfd >= 0 && p[1].revents) {
            struct signalfd_siginfo ssi;
            while (read(sfd, &ssi, sizeof ssi) > 0)
                ;
        }
    }
    cli_kill_descendants(program);
    _exit(0);
}
