/* SPDX-License-Identifier: BSD-3-Clause */
/* Test harness: a Java process running Apache Curator's recipes on the
 * same ZooKeeper as dlock (tests/zk/java/CuratorWorker.java, whose header
 * lists its commands), compiled by the test with Debian's JDK against
 * Debian's jars (libcurator-recipes-java and what it needs). The worker is
 * driven one line at a time on its stdin and answers one line each on its
 * stdout, so that the JVM's start (seconds) happens before any timing the
 * test asserts. It dies with the test process (PR_SET_PDEATHSIG). */
#ifndef DLOCK_TEST_CURATOR_WORKER_H
#define DLOCK_TEST_CURATOR_WORKER_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct curator_worker {
    pid_t pid; /* 0: not running */
    int in;    /* its stdin */
    int out;   /* its stdout */
    char buf[512];
    size_t have;
} curator_worker;

/* NULL if java, javac and the jars are all there, else what is missing
 * (a test skips and says so; under DLOCK_TEST_REQUIRE_CURATOR=1, as
 * scripts/check.sh runs the suite, it fails instead). */
const char *curator_missing(void);

/* Compile the worker into dir (javac, once per dir). 0, or -1 with the
 * compiler's words on stderr. */
int curator_compile(const char *dir);

/* Start a worker compiled into dir on the ZooKeeper at host_port
 * ("127.0.0.1:PORT") and wait (timeout_ms) for its "ready". 0, or -1 with
 * nothing left running; its stderr goes to dir/curator-PID.log. */
int curator_start(curator_worker *w, const char *dir, const char *host_port, int timeout_ms);

/* Send one command line (printf-style, no newline). 0 or -1. */
int curator_send(curator_worker *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Its next answer line into line (NUL-terminated, no newline), waiting
 * timeout_ms at most. 0, or -1 on timeout or end of file. */
int curator_read(curator_worker *w, char *line, size_t cap, int timeout_ms);

/* curator_send, then curator_read. */
int curator_ask(curator_worker *w, char *line, size_t cap, int timeout_ms, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));

/* "quit", wait a little, SIGKILL a straggler by its pid. Safe twice. */
void curator_stop(curator_worker *w);

#endif
