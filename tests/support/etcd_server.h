/* SPDX-License-Identifier: BSD-3-Clause */
/* Test harness: real etcd members (Debian's etcd-server) on free loopback
 * ports, one member or a cluster of three, each in its own temp dir,
 * started with fork/exec and stopped, killed or paused by pid (never by
 * name). Members die with the test process (PR_SET_PDEATHSIG): start and
 * restart them from the main thread. Elections are tuned short
 * (heartbeat 50 ms, election timeout 500 ms) so a killed leader is
 * replaced in about a second. */
#ifndef DLOCK_TEST_ETCD_SERVER_H
#define DLOCK_TEST_ETCD_SERVER_H

#include <sys/types.h>

#include "dlock.h"

#define TEST_ETCD_MAX 3
#define TEST_ETCD_EXTRA 4

/* A member serving its clients over TLS only (https): its certificate
 * and key, and whether it asks for a client certificate signed by ca
 * (--client-cert-auth --trusted-ca-file). The harness's own calls use ca to verify
 * the member and client_cert/client_key when it asks. The strings must
 * outlive the members (restart uses them). */
typedef struct test_etcd_tls {
    const char *ca, *cert, *key;
    const char *client_cert, *client_key;
    int client_cert_auth;
} test_etcd_tls;

typedef struct test_etcd_member {
    pid_t pid; /* 0: not running */
    int client_port, peer_port;
    char name[16];
    char dir[300];    /* data dir */
    char url[80];     /* etcd://127.0.0.1:PORT (etcds:// over TLS), this member alone */
    char http[80];    /* http://127.0.0.1:PORT (https://) */
    int paused;
} test_etcd_member;

typedef struct test_etcd {
    int n;
    char dir[256];            /* temp dir holding the members' dirs */
    char url[400];            /* etcd://h:p,h:p,h:p (every member; etcds:// over TLS) */
    char initial_cluster[600];
    int heartbeat_ms, election_ms; /* raft timing of every member */
    int tls;                       /* clients over TLS, as tls_conf says */
    test_etcd_tls tls_conf;
    const char *extra[TEST_ETCD_EXTRA + 1]; /* more etcd arguments, NULL-ended */
    test_etcd_member m[TEST_ETCD_MAX];
} test_etcd;

/* Start n (1..3) members and wait until they have a leader and answer.
 * Returns 0 or -1 (with a message on stderr; nothing left running). */
int test_etcd_start(test_etcd *c, int n);

/* The same with etcd's raft timing: etcd's shortest lease is 1.5 election
 * timeouts rounded up to whole seconds, so (100, 1000), etcd's defaults,
 * gives the 2 s minimum that deployments see; the tuned timing of
 * test_etcd_start() gives 1 s. */
int test_etcd_start_timed(test_etcd *c, int n, int heartbeat_ms, int election_ms);

/* The same with clients served over TLS only (the peers stay plain). */
int test_etcd_start_tls(test_etcd *c, int n, const test_etcd_tls *tls);

/* The same with up to TEST_ETCD_EXTRA more arguments for every member
 * (NULL-ended; the strings must outlive the members), e.g. "--auth-token"
 * and its value. */
int test_etcd_start_args(test_etcd *c, int n, const char *const *extra);

/* SIGTERM every member, wait; SIGKILL stragglers; remove the temp dir.
 * Safe to call twice. */
void test_etcd_stop(test_etcd *c);

/* kill -9 member i by pid and reap it; its data dir stays. */
void test_etcd_kill9(test_etcd *c, int i);

/* Start member i again on its ports with its data (after kill9); waits
 * until it answers. 0 or -1. */
int test_etcd_restart(test_etcd *c, int i);

/* SIGSTOP / SIGCONT member i by pid; pause returns once it has stopped
 * (test_proc_stop). */
void test_etcd_pause(test_etcd *c, int i);
void test_etcd_resume(test_etcd *c, int i);

/* Index of the member that is leader now (asked of the running, unpaused
 * members), or -1 if none answers with a leader within max_ms. */
int test_etcd_leader(test_etcd *c, int max_ms);

/* Wait until a running member reports a leader (0) or max_ms passed (-1). */
int test_etcd_wait_leader(test_etcd *c, int max_ms);

/* etcd's grpc_server_handled_total of one gRPC method ("Txn",
 * "LeaseGrant", ...) on member i, summed over its codes: the JSON gateway
 * hands every request to etcd's gRPC server, so this counts what clients
 * sent, whatever their transport. -1 if /metrics cannot be read (a
 * member over TLS included: its metrics are not read here). */
long test_etcd_served(const test_etcd *c, int i, const char *method);

/* A member that is a follower now (the one after the leader), or -1 if
 * no leader answers within max_ms. */
int test_etcd_follower(test_etcd *c, int max_ms);

/* ---- clients of the members (from the main thread, or a forked child:
 * nothing here asserts) ----------------------------------------------------- */

/* A test file's group setup: start n members into c and make *cl a
 * client of them all with options o (NULL: the defaults). 0, or -1 with
 * nothing left running. */
/* 1 when the tests run over the gRPC transport (DLOCK_ETCD_TRANSPORT=grpc,
 * as the "grpc" ctest rows set it): what differs is the connections. */
int test_etcd_grpc(void);
int test_etcd_setup(test_etcd *c, int n, const dlock_client_options *o, dlock_client **cl);
/* Its teardown: free cl, stop c. */
void test_etcd_teardown(test_etcd *c, dlock_client *cl);

/* A client of every member of c, member `first` asked first (-1: in
 * c->url's order), io_timeout_ms (0: the default) and the other options
 * at their defaults; NULL if it cannot be made. */
dlock_client *test_etcd_client(const test_etcd *c, int first, int io_timeout_ms);

#endif
