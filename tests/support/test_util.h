/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers the integration and thread tests share: a monotonic microsecond
 * clock; cmocka fixtures for the one redis-server (test_srv) or the five
 * (test_nodes) a test file runs against; replies of admin commands checked
 * with cmocka asserts; dlock clients and locks that fail the test when they
 * cannot be made; polling with a deadline; a fork() that dies with its
 * parent.
 *
 * Everything here that asserts runs on the main thread of the test process
 * only: never in worker threads or forked children (cmocka would longjmp
 * into their copy of the runner). */
#ifndef DLOCK_TEST_UTIL_H
#define DLOCK_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <sys/types.h>

#include "dlock.h"
#include "redis_server.h"
#include "redis_topology.h"

#if defined(__GNUC__) || defined(__clang__)
#define TEST_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TEST_PRINTF(fmt, args)
#endif

/* Monotonic microseconds (test_now_ms() in proc.h is the same clock). */
int64_t test_now_us(void);

/* ---- cmocka fixtures --------------------------------------------------- */

/* The one redis-server of a single-server test file, and a client of it
 * (made by test_srv_client_setup(), below with what calls into libdlock). */
extern test_redis test_srv;
extern dlock_client *test_cl;

/* Group setup/teardown: start test_srv (default config) / stop it. */
int test_srv_setup(void **state);
int test_srv_teardown(void **state);

/* Per-test teardown: FLUSHALL on test_srv. */
int test_srv_flush(void **state);

/* Five servers for the Redlock tests. */
#define TEST_N_NODES 5
extern test_redis test_nodes[TEST_N_NODES];

/* Group setup/teardown: start all of test_nodes / stop them. */
int test_nodes_setup(void **state);
int test_nodes_teardown(void **state);

/* Per-test setup or teardown: every one of test_nodes running again (a
 * failed test may have left one killed or stopped): resumed, and restarted
 * if it is down. */
int test_nodes_revive(void **state);

/* FLUSHALL on r; 0, or -1 with no reply. No asserts: for fixtures. */
int test_flushall(const test_redis *r);

/* ---- admin commands (hiredis format, on a fresh admin connection) ------- */

/* The reply, which must exist (caller frees). */
redisReply *test_cmd(const test_redis *r, const char *fmt, ...) TEST_PRINTF(2, 3);

/* An integer reply. */
long long test_cmd_int(const test_redis *r, const char *fmt, ...) TEST_PRINTF(2, 3);

/* A status reply (SET, ...). */
void test_cmd_status(const test_redis *r, const char *fmt, ...) TEST_PRINTF(2, 3);

/* A bulk-string reply, copied (caller frees). */
char *test_cmd_str(const test_redis *r, const char *fmt, ...) TEST_PRINTF(2, 3);

/* A bulk-string reply, copied (caller frees), or NULL for a nil reply. */
char *test_cmd_str_or_nil(const test_redis *r, const char *fmt, ...) TEST_PRINTF(2, 3);

/* EXISTS key: 1 or 0. PTTL key: ms, -1 without a TTL, -2 without the key. */
long long test_key_exists(const test_redis *r, const char *key);
long long test_key_pttl(const test_redis *r, const char *key);

/* GET key must give the string `want`. */
void test_assert_key_value(const test_redis *r, const char *key, const char *want);

/* Script calls the server has served (EVALSHA, and EVAL after a NOSCRIPT),
 * from INFO commandstats. */
long long test_script_calls(const test_redis *r);

/* ---- waiting ------------------------------------------------------------- */

/* Poll cond(arg) every poll_ms until it is true; 1 if it was within
 * max_ms, 0 if not. */
int test_wait_until(int (*cond)(void *arg), void *arg, int max_ms, int poll_ms);

/* Poll count(name) every 2 ms until it equals want; 1 if it did within
 * max_ms, 0 if not. */
int test_wait_for_count(long long (*count)(const char *name), const char *name, long long want,
                        int max_ms);

/* ---- processes ------------------------------------------------------------ */

/* fork() after flushing stdio; the test fails if fork fails. In the child
 * (return value 0) PR_SET_PDEATHSIG kills it when this process dies, and it
 * _exit(3)s at once if its parent has already gone. */
pid_t test_fork_child(void);

/* ---- what calls into libdlock ------------------------------------------ */

/* A client for urls[0..n) with options o (NULL: the defaults); a failure
 * fails the test with dlock's message. */
dlock_client *test_client_new(const char *const *urls, size_t n,
                              const dlock_client_options *o);

/* The same for the one server r. */
dlock_client *test_client_for(const test_redis *r, const dlock_client_options *o);

/* Start a Redis Cluster into *cl (the test fails if it cannot) and return
 * a client of it (the cluster option set), with key_prefix (may be NULL). */
dlock_client *test_cluster_client(test_cluster *cl, const char *key_prefix);

/* A client of the servers rs[0..n) with these timeouts (0: the default),
 * the other options at their defaults. */
dlock_client *test_client_timeouts(const test_redis *rs, size_t n, int connect_timeout_ms,
                                   int io_timeout_ms);

/* FLUSHALL on each of rs[0..n), then test_client_timeouts() with both
 * timeouts timeout_ms: a Redlock of n fresh nodes. */
dlock_client *test_client_flushed(const test_redis *rs, size_t n, int timeout_ms);

/* Start r and make *cl, a client of it with both the connect and the I/O
 * timeout set to timeout_ms; returns 0 or -1 (for a cmocka setup, which
 * must not fail the test by assertion). */
int test_srv_client_start(test_redis *r, dlock_client **cl, int timeout_ms);

/* Free *cl (set to NULL) and stop r: the pair of test_srv_client_start(). */
void test_srv_client_stop(test_redis *r, dlock_client **cl);

/* Group setup/teardown: test_srv and test_cl, a client of it with default
 * options / free the client, stop the server. */
int test_srv_client_setup(void **state);
int test_srv_client_teardown(void **state);

/* A lock handle with options o (NULL: the defaults); must succeed. */
dlock_lock *test_lock_with(dlock_client *c, const char *name, const dlock_lock_options *o);

/* The same with these options over the defaults. */
dlock_lock *test_lock_new(dlock_client *c, const char *name, int64_t ttl_ms, unsigned flags,
                          int64_t retry_min_ms, int64_t retry_max_ms);

/* On a fresh client for url with options o, try lock `name` once (and
 * release it if granted); returns the acquire's code, or the client's when
 * it could not be made, with the message of either in msg. Main thread. */
int test_try_acquire(const char *url, const dlock_client_options *o, const char *name,
                     char *msg, size_t len);

/* rc is DLOCK_ETLS and msg holds want (both printed as a "# " line). */
void test_expect_tls_error(int rc, const char *msg, const char *want);

/* Poll the handle every 5 ms until it is in `state`; 1 if it was within
 * max_ms, 0 if not. */
int test_wait_for_state(dlock_lock *l, dlock_lock_state state, int max_ms);

/* ---- this process's sockets ---------------------------------------------- */

/* How many TCP connections (IPv4 and IPv6) this process has open to remote
 * port `port` (0: to any port), read from /proc/self/fd and
 * /proc/self/net/tcp{,6}; *last_inode (may be NULL) is set to the socket
 * inode of the last one found. Fails the test if /proc cannot be read. */
int test_tcp_connections(int port, unsigned long *last_inode);

/* ---- helper keys (docs/design.md, "Key layout") ------------------------ */

/* Write helper key `key` NUL `kind` (e.g. "fence", "q") into out (cap
 * bytes); returns its length (it holds a NUL: pass it with %b). */
size_t test_helper_key(char *out, size_t cap, const char *key, const char *kind);

/* test_cmd() for formats with %b (binary keys), which the printf format
 * check of test_cmd() refuses. */
redisReply *test_cmd_bin(const test_redis *r, const char *fmt, ...);

#endif
