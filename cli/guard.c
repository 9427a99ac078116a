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
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

/* close_range(2) (Linux 5.9) through syscall(): glibc has a wrapper only
 * from 2.34. 0, or -1 where the kernel lacks it. */
static int close_from_to(unsigned lo, unsigned hi)
{
#ifdef SYS_close_range
    if (lo > hi)
        return 0;
    return (int)syscall(SYS_close_range, lo, hi, 0);
#else
    (void)lo;
    (void)hi;
    errno = ENOSYS;
    return -1;
#endif
}

static int kept(int fd, const int *keep, int n_keep)
{
    for (int i = 0; i < n_keep; i++)
        if (fd == keep[i])
            return 1;
    return 0;
}

/* Without close_range: read /proc/self/fd with getdents64 (opendir()
 * allocates). /proc lists the descriptors in order of number, and an
 * entry's offset is its number, so closing what was read does not make the
 * next read skip any. -1 if /proc cannot be read. */
static int close_listed(const int *keep, int n_keep)
{
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return -1;
    char buf[4096] __attribute__((aligned(8)));
    long n;
    while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            /* struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name */
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen);
            const char *name = buf + off + 19;
            off += reclen;
            int fd = 0, digits = 0;
            for (; *name >= '0' && *name <= '9'; name++, digits++)
                fd = fd * 10 + (*name - '0');
            if (digits && !*name && fd > 2 && fd != dir && !kept(fd, keep, n_keep))
                close(fd);
        }
    }
    close(dir);
    return n < 0 ? -1 : 0;
}

void cli_guard_close_fds_except(const int *keep, int n_keep)
{
    /* close_range() between the kept descriptors, in increasing order. */
    int sorted[8], n = 0;
    for (int i = 0; i < n_keep && n < 8; i++)
        if (keep[i] > 2) {
            int j = n++;
            for (; j > 0 && sorted[j - 1] > keep[i]; j--)
                sorted[j] = sorted[j - 1];
            sorted[j] = keep[i];
        }
    unsigned from = 3;
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        ok = close_from_to(from, (unsigned)sorted[i] - 1) == 0;
        from = (unsigned)sorted[i] + 1;
    }
    if (ok && close_from_to(from, ~0U) == 0)
        return;
    if (close_listed(keep, n_keep) == 0)
        return;
    struct rlimit rl;
    int max = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        max = rl.rlim_cur < (rlim_t)(1 << 20) ? (int)rl.rlim_cur : 1 << 20;
    for (int fd = 3; fd < max; fd++)
        if (!kept(fd, keep, n_keep))
            close(fd);
}

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
