/* SPDX-License-Identifier: BSD-3-Clause */
/* The harness's temp directories (test_make_dir(), support/proc.c): each
 * test process makes its own, and the next one removes those a process
 * left when it died before its teardown, but only when that process is
 * gone and the directory is over an hour old. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"

/* A pid that was a process and is gone (reaped). */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    return pid;
}

/* DIR/dlock-sweeptest-PID-abcdef with a file in it, aged by age_s. */
static void make_left(char *path, size_t len, const char *dir, pid_t pid, int age_s)
{
    snprintf(path, len, "%s/dlock-sweeptest-%d-abc%03d", dir, (int)pid, age_s % 1000);
    assert_int_equal(mkdir(path, 0700), 0);
    char file[600];
    snprintf(file, sizeof file, "%s/redis.log", path);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("left behind\n", f);
    fclose(f);
    struct timeval tv[2];
    gettimeofday(&tv[0], NULL);
    tv[0].tv_sec -= age_s;
    tv[1] = tv[0];
    assert_int_equal(utimes(path, tv), 0);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void leftovers_of_dead_processes_go_once_old(void **state)
{
    (void)state;
    char tmp[] = "/tmp/dlock-make-dir-unit-XXXXXX";
    assert_non_null(mkdtemp(tmp));
    assert_int_equal(setenv("TMPDIR", tmp, 1), 0);
    char old_dead[512], new_dead[512], old_alive[512], mine[512];
    pid_t gone = dead_pid();
    make_left(old_dead, sizeof old_dead, tmp, gone, 7200);
    make_left(new_dead, sizeof new_dead, tmp, gone, 60);
    make_left(old_alive, sizeof old_alive, tmp, getppid(), 7200);
    assert_int_equal(test_make_dir(mine, sizeof mine, "sweeptest"), 0);
    assert_false(exists(old_dead)); /* gone, with its file */
    assert_true(exists(new_dead));  /* its process may be a child whose parent still runs */
    assert_true(exists(old_alive)); /* a live process's */
    assert_true(exists(mine));
    char want[64];
    snprintf(want, sizeof want, "/dlock-sweeptest-%d-", (int)getpid());
    assert_non_null(strstr(mine, want));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    assert_int_equal(system(cmd), 0);
    unsetenv("TMPDIR");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(leftovers_of_dead_processes_go_once_old),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
