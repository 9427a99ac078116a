/* SPDX-License-Identifier: BSD-3-Clause */
/* etcdctl (Debian's etcd-client) as a child of the test: started with
 * fork/exec, dying with the test (PR_SET_PDEATHSIG), its stdout on a pipe,
 * stopped by its pid. For the interop tests (test_etcd_interop,
 * test_etcd_election). */
#ifndef DLOCK_TEST_ETCD_CTL_H
#define DLOCK_TEST_ETCD_CTL_H

#include <stddef.h>
#include <sys/types.h>

#include "dlock.h"
#include "etcd_server.h"

/* "--endpoints=127.0.0.1:PORT": the test sets it once its member runs. */
extern char test_etcdctl_endpoints[64];

/* 1 if etcdctl is an executable in PATH. */
int test_etcdctl_installed(void);

/* A cmocka group setup: *have = whether etcdctl is installed (else
 * nothing is started and the tests skip); one member in *srv, a client of
 * it in *cl, test_etcdctl_endpoints set. 0 or -1. The teardown stops
 * them. */
int test_etcdctl_setup(test_etcd *srv, dlock_client **cl, int *have);
void test_etcdctl_teardown(test_etcd *srv, dlock_client *cl, int have);

typedef struct ctl {
    pid_t pid;
    int out;        /* its stdout, read end */
    char buf[4096]; /* what it printed so far */
    size_t len;
} ctl;

/* Start `etcdctl --endpoints=... args...` (args NULL-terminated, at most
 * 12) with its stdout on a pipe. */
void ctl_start(ctl *c, const char *const *args);
/* The same for another program (argv NULL-terminated, argv[0] looked up
 * in PATH), stopped and read alike: a Go peer (test_etcd_rw). */
void ctl_start_prog(ctl *c, const char *const *argv);
/* Read what etcdctl prints for up to max_ms, until it printed a line that
 * holds `want` (1) or it closed its stdout (0). */
int ctl_wait_for(ctl *c, const char *want, int max_ms);
/* Stop it by its pid (SIGTERM), reap it; its exit status (-1: killed). */
int ctl_stop(ctl *c);
/* Run etcdctl with args to its end (at most 10 s); what it printed. */
void ctl_run(ctl *c, const char *const *args);

#endif
