/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"

int64_t test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void test_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int test_start_procs(pid_t *pids, int n, int (*fn)(int i, void *arg), void *arg)
{
    int failed = 0;
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(fn(i, arg) & 0xff);
        if (pids[i] < 0)
            failed++;
    }
    return failed;
}

int test_wait_procs(const pid_t *pids, int n)
{
    int failed = 0;
    for (int i = 0; i < n; i++) {
        int st;
        if (pids[i] > 0 && (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) ||
                            WEXITSTATUS(st) != 0))
            failed++;
    }
    return failed;
}

int test_run_procs(int n, int (*fn)(int i, void *arg), void *arg)
{
    pid_t pids[256];
    if (n > 256)
        n = 256;
    int failed = test_start_procs(pids, n, fn, arg);
    return failed + test_wait_procs(pids, n);
}

void test_tmp_path(char *out, size_t len, const char *stem)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(out, len, "%s/dlock-%s-%d", tmp && *tmp ? tmp : "/tmp", stem, (int)getpid());
}
