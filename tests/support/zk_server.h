/* SPDX-License-Identifier: BSD-3-Clause */
/* Test harness: one real ZooKeeper member (Debian's zookeeper package,
 * /usr/share/java/zookeeper.jar), standalone, on a free loopback port, in
 * its own temp dir: started with java directly (fork/exec, no init
 * script), stopped by pid. The member dies with the test process
 * (PR_SET_PDEATHSIG). tickTime is 100 ms, so sessions may be as short as
 * 200 ms (2 ticks) and as long as 60 s (maxSessionTimeout). */
#ifndef DLOCK_TEST_ZK_SERVER_H
#define DLOCK_TEST_ZK_SERVER_H

#include <stddef.h>
#include <sys/types.h>

typedef struct test_zk {
    pid_t pid; /* 0: not running */
    int port;
    char dir[256];  /* temp dir: zoo.cfg, data, log */
    char url[300];  /* zk://127.0.0.1:PORT */
} test_zk;

/* 1 if java and ZooKeeper's jar are installed (a test skips otherwise). */
int test_zk_available(void);

/* Start the member and wait until it answers "ruok" with "imok" (java
 * takes a few seconds). 0, or -1 with a message on stderr and nothing
 * left running. */
int test_zk_start(test_zk *z);

/* A four-letter word's answer (ZooKeeper's "ruok", "srvr") from the
 * member on loopback port: out (NUL-terminated), 0, or -1 when it said
 * nothing within 300 ms. */
int test_zk_four_letters(int port, const char *word, char *out, size_t cap);

/* Start z's java on z->dir and z->port as they are, with extra appended
 * to its zoo.cfg: an ensemble's member (support/zk_ensemble.c) when extra
 * has its server.N lines (QuorumPeerMain), else standalone. 0 or -1;
 * z->pid is set, nothing is waited for. */
int test_zk_spawn_member(test_zk *z, const char *extra);

/* SIGSTOP z's java, or SIGCONT it: a paused member keeps its sockets
 * (the kernel still completes connects to it and buffers what is sent)
 * but answers nothing and times no session until it is continued. Each
 * does nothing to a member not running. */
void test_zk_pause(const test_zk *z);
void test_zk_resume(const test_zk *z);

/* SIGCONT (it may be paused), SIGTERM, wait; SIGKILL a straggler; remove
 * the temp dir. Safe twice. */
void test_zk_stop(test_zk *z);

#endif
