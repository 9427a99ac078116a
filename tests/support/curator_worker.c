/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "curator_worker.h"
#include "proc.h"

#define JAVA "/usr/bin/java"
#define JAVAC "/usr/bin/javac"
#define JARS "/usr/share/java/"
/* Curator's recipes and what they load (their manifests' Class-Path), and
 * slf4j's no-op binding to keep their logging quiet. */
#define CLASSPATH                                                                           \
    JARS "curator-recipes.jar:" JARS "curator-framework.jar:" JARS "curator-client.jar:" JARS \
         "zookeeper.jar:" JARS "zookeeper-jute.jar:" JARS "guava.jar:" JARS               \
         "slf4j-api.jar:" JARS "slf4j-nop.jar"

#ifndef DLOCK_CURATOR_WORKER_SRC
#error "CMake names tests/zk/java/CuratorWorker.java"
#endif

const char *curator_missing(void)
{
    static const char *const need[] = {JAVA, JAVAC, JARS "curator-recipes.jar",
                                       JARS "curator-framework.jar", JARS "curator-client.jar",
                                       JARS "zookeeper.jar", JARS "guava.jar",
                                       JARS "slf4j-nop.jar"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (access(need[i], R_OK) != 0)
            return need[i];
    return NULL;
}

int curator_compile(const char *dir)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -Xlint:all,-path -Werror -cp '%s' -d '%s' '%s' 1>&2", JAVAC,
             CLASSPATH, dir, DLOCK_CURATOR_WORKER_SRC);
    if (system(cmd) != 0) {
        fprintf(stderr, "curator_worker: javac failed: %s\n", cmd);
        return -1;
    }
    return 0;
}

static void exec_worker(const char *dir, const char *host_port, int to_child[2],
                        int from_child[2], pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    char cp[1024], log[512];
    snprintf(cp, sizeof cp, "%s:%s", dir, CLASSPATH);
    snprintf(log, sizeof log, "%s/curator-%d.log", dir, (int)getpid());
    int err = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    if (err >= 0)
        dup2(err, 2);
    close(to_child[1]);
    close(from_child[0]);
    const char *argv[] = {JAVA, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                          "-cp", cp, "CuratorWorker", host_port, NULL};
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

int curator_start(curator_worker *w, const char *dir, const char *host_port, int timeout_ms)
{
    memset(w, 0, sizeof *w);
    w->in = w->out = -1;
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0)
        return -1;
    if (pipe2(from_child, O_CLOEXEC) != 0) {
        close(to_child[0]);
        close(to_child[1]);
        return -1;
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        exec_worker(dir, host_port, to_child, from_child, parent);
    close(to_child[0]);
    close(from_child[1]);
    w->in = to_child[1];
    w->out = from_child[0];
    w->pid = pid > 0 ? pid : 0;
    char line[128];
    if (pid < 0 || curator_read(w, line, sizeof line, timeout_ms) != 0 ||
        strcmp(line, "ready") != 0) {
        fprintf(stderr, "curator_worker: no \"ready\" (see %s/curator-%d.log)\n", dir, (int)pid);
        curator_stop(w);
        return -1;
    }
    return 0;
}

static int vsend(curator_worker *w, const char *fmt, va_list ap)
{
    char line[600];
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    if (n < 0 || (size_t)n >= sizeof line - 1)
        return -1;
    line[n++] = '\n';
    return write(w->in, line, (size_t)n) == n ? 0 : -1;
}

int curator_send(curator_worker *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vsend(w, fmt, ap);
    va_end(ap);
    return rc;
}

/* A whole line in the buffer: out, and the buffer moved on. */
static int take_line(curator_worker *w, char *line, size_t cap)
{
    char *nl = memchr(w->buf, '\n', w->have);
    if (!nl)
        return 0;
    size_t n = (size_t)(nl - w->buf);
    size_t copy = n < cap - 1 ? n : cap - 1;
    memcpy(line, w->buf, copy);
    line[copy] = '\0';
    w->have -= n + 1;
    memmove(w->buf, nl + 1, w->have);
    return 1;
}

int curator_read(curator_worker *w, char *line, size_t cap, int timeout_ms)
{
    int64_t end = test_now_ms() + timeout_ms;
    while (!take_line(w, line, cap)) {
        int64_t left = end - test_now_ms();
        if (left <= 0 || w->have == sizeof w->buf)
            return -1;
        struct pollfd p = {.fd = w->out, .events = POLLIN};
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        ssize_t got = read(w->out, w->buf + w->have, sizeof w->buf - w->have);
        if (got <= 0)
            return -1;
        w->have += (size_t)got;
    }
    return 0;
}

int curator_ask(curator_worker *w, char *line, size_t cap, int timeout_ms, const char *fmt,
                ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vsend(w, fmt, ap);
    va_end(ap);
    return rc == 0 ? curator_read(w, line, cap, timeout_ms) : -1;
}

void curator_stop(curator_worker *w)
{
    if (w->pid > 0) {
        (void)curator_send(w, "quit");
        test_reap_server(w->pid, 3000);
        w->pid = 0;
    }
    if (w->in >= 0)
        close(w->in);
    if (w->out >= 0)
        close(w->out);
    w->in = w->out = -1;
}
