/* SPDX-License-Identifier: BSD-3-Clause */
/* Test harness: real redis-server processes on free loopback ports, each in
 * its own temp dir, started with fork/exec and stopped by pid (never by
 * name). A server also dies with the test process (PR_SET_PDEATHSIG), so a
 * crashed test leaves nothing running. PR_SET_PDEATHSIG follows the *thread*
 * that forked: start and restart servers from the main thread, or the
 * server dies when the helper thread exits. */
#ifndef DLOCK_TEST_REDIS_SERVER_H
#define DLOCK_TEST_REDIS_SERVER_H

#include <hiredis/hiredis.h>
#include <sys/types.h>

typedef struct test_redis {
    pid_t pid;
    int port;            /* the TLS port of a TLS server */
    int tls;             /* TLS only (port 0): admin goes by the unix socket */
    char dir[256];
    char sock[300];
    char url[340];       /* redis://127.0.0.1:PORT (rediss:// with TLS) */
    char unix_url[340];  /* unix:///dir/redis.sock */
    char extra[2048];    /* extra redis.conf lines, kept for restarts */
} test_redis;

/* Start a server; extra_conf (may be NULL) is appended to redis.conf.
 * Returns 0 or -1 (with a message on stderr). */
int test_redis_start(test_redis *r, const char *extra_conf);

/* Start again on the same port and dir (after a stop or kill). */
int test_redis_restart(test_redis *r);

/* SIGTERM, wait; SIGKILL if it does not go. Removes the temp dir unless
 * keep_dir. Safe to call twice. */
void test_redis_stop(test_redis *r);

/* kill -9 by pid and reap; the dir stays for a restart. */
void test_redis_kill9(test_redis *r);

/* SIGSTOP / SIGCONT by pid; pause returns once the server has stopped
 * (test_proc_stop). */
void test_redis_pause(test_redis *r);
void test_redis_resume(test_redis *r);

/* A blocking admin connection (caller redisFree()s); NULL on failure. */
redisContext *test_redis_admin(const test_redis *r);

/* 1 once a write of probe_key on the primary p is acknowledged by a
 * replica within max_ms (SET then WAIT 1 on one connection; the key is
 * deleted afterwards, as tests count keys). probe_key must hash to p's
 * slots on a cluster. */
int test_redis_replica_acks(const test_redis *p, const char *probe_key, int max_ms);

/* Run one command on an admin connection; returns the reply (caller frees)
 * or NULL. */
redisReply *test_redis_cmd(const test_redis *r, const char *fmt, ...);

/* Certificates for TLS tests, made with the openssl command in a temp dir:
 * a CA, a server certificate it signed (CN and SAN 127.0.0.1, SAN
 * localhost; for server and client use, as etcd's gateway presents it to
 * its own gRPC port), a server certificate that names only
 * TEST_TLS_NAMED_HOST (no address), a client certificate it signed, and
 * a second, unrelated CA. */
#define TEST_TLS_NAMED_HOST "etcd.dlock.test"
typedef struct test_tls_certs {
    char dir[256];
    char ca[300], other_ca[300];
    char server_cert[300], server_key[300];
    char named_cert[300], named_key[300];
    char client_cert[300], client_key[300];
} test_tls_certs;

/* Returns 0 or -1 (with a message on stderr). */
int test_tls_certs_make(test_tls_certs *t);
void test_tls_certs_remove(test_tls_certs *t);

/* Start a TLS-only server (port 0, tls-port PORT) with the certificates of
 * t; auth_clients: tls-auth-clients yes (1) or no (0). r->url is then
 * rediss://127.0.0.1:PORT; the admin helpers use the unix socket. */
int test_redis_start_tls(test_redis *r, const test_tls_certs *t, int auth_clients,
                         const char *extra_conf);

/* Start n servers at once. */
int test_redis_start_many(test_redis *rs, int n, const char *extra_conf);
void test_redis_stop_many(test_redis *rs, int n);

#endif
