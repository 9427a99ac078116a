/* SPDX-License-Identifier: BSD-3-Clause */
/* Reading processes from /proc: whether the program's group still runs,
 * and killing every descendant.
 *
 * A zombie is dead: it waits only for its parent to read its status, and a
 * parent (or an init) that reaps slowly must not keep `dlock run` waiting,
 * as kill(-pgid, 0) did: it succeeds while a zombie is in the group.
 * The guardian (guard.c) calls these after fork() in a threaded process,
 * so they use system calls and string functions only: no malloc, no stdio. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* "/proc/PID" followed by tail, into path (at least 48 bytes). */
static void proc_path(char *path, pid_t pid, const char *tail)
{
    char digits[24];
    size_t k = 0, at = sizeof "/proc/" - 1;
    memcpy(path, "/proc/", at);
    for (long v = (long)pid; v > 0 && k < sizeof digits; v /= 10)
        digits[k++] = (char)('0' + v % 10);
    while (k > 0)
        path[at++] = digits[--k];
    memcpy(path + at, tail, strlen(tail) + 1);
}

/* A process's state, parent and group from /proc/PID/stat; 0 or -1. */
static int proc_stat(pid_t pid, char *state, pid_t *ppid, pid_t *pgrp)
{
    char path[48], buf[512];
    proc_path(path, pid, "/stat");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* "PID (COMM) STATE PPID PGRP ...": COMM may itself hold ") ". */
    char *p = strrchr(buf, ')'), *end;
    if (!p || p[1] != ' ' || !p[2] || p[3] != ' ')
        return -1;
    *state = p[2];
    *ppid = (pid_t)strtol(p + 4, &end, 10);
    *pgrp = (pid_t)strtol(end, &end, 10);
    return *end == ' ' ? 0 : -1;
}

/* Calls fn(number, arg) for every numeric entry of directory dir (the
 * processes of /proc, the threads of /proc/PID/task); -1 if it cannot be
 * read. getdents64 on a stack buffer: no malloc (see above). */
static int each_number(const char *dir, void (*fn)(pid_t, void *), void *arg)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[8192];
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            struct {
                unsigned long long ino;
                long long off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *d = (void *)(buf + off);
            char *end;
            long pid = strtol(d->name, &end, 10);
            if (pid > 0 && *end == '\0')
                fn((pid_t)pid, arg);
            off += d->reclen;
        }
    }
    close(fd);
    return 0;
}

static int each_process(void (*fn)(pid_t, void *), void *arg)
{
    return each_number("/proc", fn, arg);
}

static void count(pid_t pid, void *arg)
{
    (void)pid;
    (*(int *)arg)++;
}

/* Whether a process in that state still runs. A zombie ('Z') or a dying
 * process ('X') does not, unless only its main thread exited: a thread
 * group whose leader called pthread_exit() shows 'Z' while its other
 * threads run. */
static int process_runs(pid_t pid, char state)
{
    char path[48];
    int threads = 0;
    if (state != 'Z' && state != 'X')
        return 1;
    proc_path(path, pid, "/task");
    return each_number(path, count, &threads) == 0 && threads > 1;
}

typedef struct group_scan {
    pid_t pgid;
    int running;
} group_scan;

static void check_member(pid_t pid, void *arg)
{
    group_scan *g = arg;
    char st;
    pid_t ppid, pgrp;
    if (!g->running && proc_stat(pid, &st, &ppid, &pgrp) == 0 && pgrp == g->pgid &&
        process_runs(pid, st))
        g->running = 1;
}

int cli_group_running(pid_t pgid)
{
    group_scan g = {pgid, 0};
    if (each_process(check_member, &g) != 0)
        return kill(-pgid, 0) == 0; /* no /proc: zombies count as running */
    return g.running;
}

typedef struct tree_kill {
    pid_t root;
    int found;
} tree_kill;

/* Whether pid descends from root, following parents up through /proc. */
static int descends_from(pid_t pid, pid_t root)
{
    for (int depth = 0; depth < 4096 && pid > 1; depth++) {
        char st;
        pid_t ppid, pgrp;
        if (proc_stat(pid, &st, &ppid, &pgrp) != 0)
            return 0;
        if (ppid == root)
            return 1;
        pid = ppid;
    }
    return 0;
}

static void kill_if_descendant(pid_t pid, void *arg)
{
    tree_kill *t = arg;
    char st;
    pid_t ppid, pgrp;
    if (pid != t->root && proc_stat(pid, &st, &ppid, &pgrp) == 0 && process_runs(pid, st) &&
        descends_from(pid, t->root)) {
        kill(pid, SIGKILL);
        t->found = 1;
    }
}

void cli_kill_descendants(pid_t pgid)
{
    /* The group first: one call reaches most of it at once. */
    kill(-pgid, SIGKILL);
    for (;;) {
        tree_kill t = {getpid(), 0};
        if (each_process(kill_if_descendant, &t) != 0)
            t.found = 0; /* no /proc: the group is all we can reach */
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        if (!t.found)
            return;
        /* A killed process can no longer fork, but one forked before the
         * scan is found by the next; those killed take a moment to die. */
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}
