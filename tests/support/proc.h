/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers for tests that run several worker processes. */
#ifndef DLOCK_TEST_PROC_H
#define DLOCK_TEST_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* Monotonic milliseconds. */
int64_t test_now_ms(void);
void test_sleep_ms(int ms);

/* fork() n children running fn(i, arg); each child _exit()s with fn's
 * return value. Returns the number of children that exited non-zero (or
 * abnormally); waits for all. */
int test_run_procs(int n, int (*fn)(int i, void *arg), void *arg);

/* test_run_procs() in two halves, for a parent that acts while the children
 * run: test_start_procs() forks them into pids[0..n) (a failed fork leaves
 * a pid < 0) and returns how many forks failed; test_wait_procs() waits for
 * them all and returns how many exited non-zero (or abnormally). */
int test_start_procs(pid_t *pids, int n, int (*fn)(int i, void *arg), void *arg);
int test_wait_procs(const pid_t *pids, int n);

/* A temp file path under $TMPDIR (or /tmp) made unique with the pid. */
void test_tmp_path(char *out, size_t len, const char *stem);

#endif
