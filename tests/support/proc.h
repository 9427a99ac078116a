/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers for tests that run several worker processes. */
#ifndef DLOCK_TEST_PROC_H
#define DLOCK_TEST_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* Monotonic milliseconds. */
int64_t test_now_ms(void);
void test_sleep_ms(int ms);
/* CPU seconds this process has used (user + system): an observer that
 * spins shows here (test_election_faults, test_election_redlock). */
double test_cpu_s(void);
/* Times this process's threads named comm (pthread_setname_np) have
 * slept and been woken (voluntary context switches, /proc/self/task):
 * a thread that should sleep and wakes on a timer shows here. */
long test_thread_wakeups(const char *comm);
/* How many eventfds this process has open (/proc/self/fd). */
int test_eventfds(void);

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

/* Make a fresh directory $TMPDIR/dlock-STEM-PID-XXXXXX (or under /tmp) for
 * a test's servers and put its path in out; 0, or -1 (with the reason on
 * stderr). Also removes the STEM directories a test process left when it
 * died before its teardown: those whose PID is gone and which are more
 * than an hour old (no test runs that long, and a directory made by a
 * child process that has exited may still be in use by its parent). */
int test_make_dir(char *out, size_t len, const char *stem);

/* ---- server processes (redis-server, redis-sentinel, etcd) ---------- */

/* Test servers listen below the ephemeral range (32768 and up on Linux),
 * so a client's outgoing connection can never take a port a server is
 * about to bind, and a Redis Cluster node's bus port (port + 10000) is
 * below it too. */
#define TEST_PORT_MIN 10000
#define TEST_PORT_MAX 22768
#define TEST_PORT_BUS_OFFSET 10000

/* A loopback TCP port in [TEST_PORT_MIN, TEST_PORT_MAX) that is free now,
 * and whose port + TEST_PORT_BUS_OFFSET is free too, or -1. The server
 * started on it may still lose a race for it: callers retry. */
int test_free_port(void);

/* fork() and exec argv[0] (searched in PATH) with argv, as a server the
 * test owns: the child dies with this process (PR_SET_PDEATHSIG; it exits
 * 127 at once if this process is already gone), stdin is /dev/null, stdout
 * and stderr are appended to log_path, or with log_path NULL stdout goes to
 * /dev/null and stderr stays. Returns the pid (stop it by that pid), or -1
 * if fork failed; a failed exec exits 127. */
pid_t test_spawn_server(const char *const argv[], const char *log_path);

/* Wait up to max_ms for the child pid (already signalled by the caller) to
 * exit and reap it; if it has not gone by then, kill -9 it by that pid and
 * reap it. max_ms 0: kill -9 now unless it has already exited. */
void test_reap_server(pid_t pid, int max_ms);

/* SIGSTOP pid and wait up to max_ms until every thread of it has stopped.
 * kill() returns before that, and a thread still running on the other
 * core answers a request sent right after it (a "paused" etcd member
 * renewed a lease). 0 once all are stopped, -1 if not within max_ms. */
int test_proc_stop(pid_t pid, int max_ms);

/* 1 if every thread of pid is stopped (or gone), 0 if one still runs. */
int test_proc_threads_stopped(pid_t pid);

#endif
