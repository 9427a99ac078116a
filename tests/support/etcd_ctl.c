/* SPDX-License-Identifier: BSD-3-Clause */
/* etcdctl as a child process (etcd_ctl.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd_ctl.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_util.h"

char test_etcdctl_endpoints[64];

/* 1 if etcdctl is an executable in PATH. */
int test_etcdctl_installed(void)
{
    const char *path = getenv("PATH");
    char dir[4096], file[4200];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(dir, sizeof dir, "%.*s", (int)n, path);
        snprintf(file, sizeof file, "%s/etcdctl", n ? dir : ".");
        if (access(file, X_OK) == 0)
            return 1;
        path += n + (path[n] == ':');
    }
    return 0;
}

static void start_argv(ctl *c, const char *const *argv);

/* Start `etcdctl --endpoints=... args...` (args NULL-terminated, at most
 * 12) with its stdout on a pipe. */
void ctl_start(ctl *c, const char *const *args)
{
    const char *argv[16] = {"etcdctl", test_etcdctl_endpoints};
    size_t n = 2;
    for (; *args && n < 15; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    start_argv(c, argv);
}

void ctl_start_prog(ctl *c, const char *const *argv)
{
    start_argv(c, argv);
}

/* argv[0] (looked up in PATH) with its stdout on a pipe. */
static void start_argv(ctl *c, const char *const *argv)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    memset(c, 0, sizeof *c);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the test */
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    c->out = fds[0];
}

/* Read what etcdctl prints for up to max_ms, until it printed a line that
 * holds `want` (1) or it closed its stdout (0). */
int ctl_wait_for(ctl *c, const char *want, int max_ms)
{
    int64_t until = test_now_ms() + max_ms;
    for (;;) {
        c->buf[c->len] = '\0';
        if (strstr(c->buf, want))
            return 1;
        int64_t left = until - test_now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {c->out, POLLIN, 0};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        ssize_t got = read(c->out, c->buf + c->len, sizeof c->buf - 1 - c->len);
        if (got <= 0)
            return 0;
        c->len += (size_t)got;
    }
}

/* Stop etcdctl by its pid (SIGTERM: `etcdctl lock` unlocks and exits) and
 * reap it; its exit status (-1 if it had to be killed). */
int ctl_stop(ctl *c)
{
    int status = -1;
    (void)kill(c->pid, SIGTERM);
    for (int i = 0; i < 500; i++) {
        pid_t r = waitpid(c->pid, &status, WNOHANG);
        if (r == c->pid)
            break;
        if (i == 499) {
            (void)kill(c->pid, SIGKILL);
            (void)waitpid(c->pid, &status, 0);
            status = -1;
        }
        test_sleep_ms(10);
    }
    close(c->out);
    return status;
}

/* Run etcdctl with args to its end (at most 10 s); what it printed. */
void ctl_run(ctl *c, const char *const *args)
{
    ctl_start(c, args);
    (void)ctl_wait_for(c, "\x01never", 10000); /* until its stdout closes */
    (void)ctl_stop(c);
}


int test_etcdctl_setup(test_etcd *srv, dlock_client **cl, int *have)
{
    *have = test_etcdctl_installed();
    if (!*have)
        return 0; /* every test skips */
    setenv("ETCDCTL_API", "3", 1); /* etcdctl 3.4's default; older ones need it */
    if (test_etcd_start(srv, 1) != 0)
        return -1;
    snprintf(test_etcdctl_endpoints, sizeof test_etcdctl_endpoints, "--endpoints=127.0.0.1:%d",
             srv->m[0].client_port);
    const char *url = srv->url;
    return dlock_client_new(cl, &url, 1, NULL, NULL, 0) == DLOCK_OK ? 0 : -1;
}

void test_etcdctl_teardown(test_etcd *srv, dlock_client *cl, int have)
{
    if (have) {
        dlock_client_free(cl);
        test_etcd_stop(srv);
    }
}
