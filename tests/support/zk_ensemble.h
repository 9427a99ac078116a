/* SPDX-License-Identifier: BSD-3-Clause */
/* Test harness: a ZooKeeper ensemble of real members (support/zk_server.c's
 * java, QuorumPeerMain), each on free loopback ports (client, peer,
 * election) in a temp dir of its own, tickTime 100 ms; a member killed
 * (SIGKILL, by pid) and started again. The leader is the member whose
 * "srvr" says "Mode: leader". */
#ifndef DLOCK_TEST_ZK_ENSEMBLE_H
#define DLOCK_TEST_ZK_ENSEMBLE_H

#include "zk_server.h"

#define TEST_ZK_MEMBERS_MAX 5

typedef struct test_zk_ensemble {
    int n;
    test_zk m[TEST_ZK_MEMBERS_MAX];
    char servers[TEST_ZK_MEMBERS_MAX * 64]; /* the server.N lines every zoo.cfg has */
    char url[TEST_ZK_MEMBERS_MAX * 24 + 8];  /* zk://127.0.0.1:P1,127.0.0.1:P2,... */
} test_zk_ensemble;

/* Start n members and wait until one leads and the others follow. 0, or
 * -1 with a message on stderr and nothing left running. */
int test_zk_ensemble_start(test_zk_ensemble *e, int n);

/* The index of the member that leads now, or -1 (none answers so). */
int test_zk_ensemble_leader(const test_zk_ensemble *e);

/* Wait up to timeout_ms until a member leads and every running member
 * serves: the leader's index, or -1. */
int test_zk_ensemble_wait(const test_zk_ensemble *e, int timeout_ms);

/* SIGKILL member i and reap it (its data stays, for a restart). */
void test_zk_ensemble_kill(test_zk_ensemble *e, int i);

/* Start member i again on its ports and data. 0 or -1. */
int test_zk_ensemble_restart(test_zk_ensemble *e, int i);

/* Stop every member and remove their dirs. Safe twice. */
void test_zk_ensemble_stop(test_zk_ensemble *e);

#endif
