/* SPDX-License-Identifier: BSD-3-Clause */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "test_util.h"

int64_t test_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- cmocka fixtures ----------------------------------------------------- */

test_redis test_srv;
dlock_client *test_cl;
test_redis test_nodes[TEST_N_NODES];

int test_srv_setup(void **state)
{
    (void)state;
    return test_redis_start(&test_srv, NULL);
}

int test_srv_teardown(void **state)
{
    (void)state;
    test_redis_stop(&test_srv);
    return 0;
}

int test_srv_flush(void **state)
{
    (void)state;
    return test_flushall(&test_srv);
}

int test_nodes_setup(void **state)
{
    (void)state;
    return test_redis_start_many(test_nodes, TEST_N_NODES, NULL);
}

int test_nodes_teardown(void **state)
{
    (void)state;
    test_redis_stop_many(test_nodes, TEST_N_NODES);
    return 0;
}

int test_nodes_revive(void **state)
{
    (void)state;
    for (int i = 0; i < TEST_N_NODES; i++) {
        test_redis_resume(&test_nodes[i]);
        if (test_nodes[i].pid <= 0 && test_redis_restart(&test_nodes[i]) != 0)
            return -1;
    }
    return 0;
}

int test_flushall(const test_redis *r)
{
    redisReply *rep = test_redis_cmd(r, "FLUSHALL");
    if (!rep)
        return -1;
    freeReplyObject(rep);
    return 0;
}

/* ---- admin commands ------------------------------------------------------ */

static redisReply *vcmd(const test_redis *r, const char *fmt, va_list ap)
{
    redisContext *c = test_redis_admin(r);
    if (!c)
        return NULL;
    redisReply *rep = redisvCommand(c, fmt, ap);
    redisFree(c);
    return rep;
}

/* In a function (const test_redis *r, const char *fmt, ...): run the
 * command, set `rep` to its reply (NULL if none). */
#define REPLY_OF_ARGS(rep)                                                     \
    do {                                                                       \
        va_list ap_;                                                           \
        va_start(ap_, fmt);                                                    \
        (rep) = vcmd(r, fmt, ap_);                                             \
        va_end(ap_);                                                           \
    } while (0)

/* Check a reply of the wanted kind (NULL fails the test), free it and
 * return what it carried. */
static long long take_int(redisReply *rep)
{
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

static char *take_str(redisReply *rep, int nil_ok)
{
    assert_non_null(rep);
    char *v = NULL;
    if (!nil_ok || rep->type != REDIS_REPLY_NIL) {
        assert_int_equal(rep->type, REDIS_REPLY_STRING);
        v = strdup(rep->str);
        assert_non_null(v);
    }
    freeReplyObject(rep);
    return v;
}

redisReply *test_cmd(const test_redis *r, const char *fmt, ...)
{
    redisReply *rep;
    REPLY_OF_ARGS(rep);
    assert_non_null(rep);
    return rep;
}

long long test_cmd_int(const test_redis *r, const char *fmt, ...)
{
    redisReply *rep;
    REPLY_OF_ARGS(rep);
    return take_int(rep);
}

void test_cmd_status(const test_redis *r, const char *fmt, ...)
{
    redisReply *rep;
    REPLY_OF_ARGS(rep);
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

char *test_cmd_str(const test_redis *r, const char *fmt, ...)
{
    redisReply *rep;
    REPLY_OF_ARGS(rep);
    return take_str(rep, 0);
}

char *test_cmd_str_or_nil(const test_redis *r, const char *fmt, ...)
{
    redisReply *rep;
    REPLY_OF_ARGS(rep);
    return take_str(rep, 1);
}

long long test_key_exists(const test_redis *r, const char *key)
{
    return test_cmd_int(r, "EXISTS %s", key);
}

long long test_key_pttl(const test_redis *r, const char *key)
{
    return test_cmd_int(r, "PTTL %s", key);
}

void test_assert_key_value(const test_redis *r, const char *key, const char *want)
{
    redisReply *rep = test_cmd(r, "GET %s", key);
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    assert_string_equal(rep->str, want);
    freeReplyObject(rep);
}

long long test_script_calls(const test_redis *r)
{
    redisReply *rep = test_cmd(r, "INFO commandstats");
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    long long total = 0;
    const char *stems[] = {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="};
    for (int i = 0; i < 2; i++) {
        const char *p = strstr(rep->str, stems[i]);
        if (p)
            total += strtoll(p + strlen(stems[i]), NULL, 10);
    }
    freeReplyObject(rep);
    return total;
}

/* ---- waiting ------------------------------------------------------------- */

int test_wait_until(int (*cond)(void *arg), void *arg, int max_ms, int poll_ms)
{
    int64_t until = test_now_ms() + max_ms;
    for (;;) {
        if (cond(arg))
            return 1;
        if (test_now_ms() >= until)
            return 0;
        test_sleep_ms(poll_ms);
    }
}

typedef struct count_wait {
    long long (*count)(const char *name);
    const char *name;
    long long want;
} count_wait;

static int count_reached(void *arg)
{
    const count_wait *w = arg;
    return w->count(w->name) == w->want;
}

int test_wait_for_count(long long (*count)(const char *name), const char *name, long long want,
                        int max_ms)
{
    count_wait w = {count, name, want};
    return test_wait_until(count_reached, &w, max_ms, 2);
}

/* ---- processes ----------------------------------------------------------- */

pid_t test_fork_child(void)
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(3);
    }
    return pid;
}

/* ---- what calls into libdlock ------------------------------------------ */

/* A client for urls[0..n) with options o (NULL: the defaults); a failure
 * fails the test with dlock's message. */
dlock_client *test_client_new(const char *const *urls, size_t n,
                                            const dlock_client_options *o)
{
    dlock_client *c = NULL;
    char err[256] = "";
    if (dlock_client_new(&c, urls, n, o, err, sizeof err) != DLOCK_OK)
        fail_msg("dlock_client_new(%s%s): %s", n > 0 ? urls[0] : "", n > 1 ? ", ..." : "", err);
    return c;
}

/* The same for the one server r. */
dlock_client *test_client_for(const test_redis *r, const dlock_client_options *o)
{
    const char *urls[] = {r->url};
    return test_client_new(urls, 1, o);
}

dlock_client *test_client_flushed(const test_redis *rs, size_t n, int timeout_ms)
{
    for (size_t i = 0; i < n; i++)
        assert_int_equal(test_flushall(&rs[i]), 0);
    return test_client_timeouts(rs, n, timeout_ms, timeout_ms);
}

dlock_client *test_cluster_client(test_cluster *cl, const char *key_prefix)
{
    assert_int_equal(test_cluster_start(cl), 0);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = 1;
    o.key_prefix = key_prefix;
    return test_client_new(cl->urls, TEST_CLUSTER_NODES, &o);
}

dlock_client *test_client_timeouts(const test_redis *rs, size_t n, int connect_timeout_ms,
                                   int io_timeout_ms)
{
    const char *urls[TEST_N_NODES];
    assert_true(n >= 1 && n <= TEST_N_NODES);
    for (size_t i = 0; i < n; i++)
        urls[i] = rs[i].url;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    if (connect_timeout_ms)
        o.connect_timeout_ms = connect_timeout_ms;
    if (io_timeout_ms)
        o.io_timeout_ms = io_timeout_ms;
    return test_client_new(urls, n, &o);
}

int test_srv_client_start(test_redis *r, dlock_client **cl, int timeout_ms)
{
    if (test_redis_start(r, NULL) != 0)
        return -1;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.io_timeout_ms = timeout_ms;
    o.connect_timeout_ms = timeout_ms;
    const char *urls[] = {r->url};
    return dlock_client_new(cl, urls, 1, &o, NULL, 0) == DLOCK_OK ? 0 : -1;
}

void test_srv_client_stop(test_redis *r, dlock_client **cl)
{
    dlock_client_free(*cl);
    *cl = NULL;
    test_redis_stop(r);
}

/* Group setup/teardown: test_srv and test_cl, a client of it with default
 * options / free the client, stop the server. */
int test_srv_client_setup(void **state)
{
    if (test_srv_setup(state) != 0)
        return -1;
    const char *urls[] = {test_srv.url};
    return dlock_client_new(&test_cl, urls, 1, NULL, NULL, 0) == DLOCK_OK ? 0 : -1;
}

int test_srv_client_teardown(void **state)
{
    dlock_client_free(test_cl);
    test_cl = NULL;
    return test_srv_teardown(state);
}

/* A lock handle with options o (NULL: the defaults); must succeed. */
dlock_lock *test_lock_with(dlock_client *c, const char *name,
                                         const dlock_lock_options *o)
{
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, c, name, o), DLOCK_OK);
    return l;
}

/* The same with these options over the defaults. */
int test_try_acquire(const char *url, const dlock_client_options *o, const char *name,
                     char *msg, size_t len)
{
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    int rc = dlock_client_new(&c, &url, 1, o, msg, len);
    if (rc != DLOCK_OK)
        return rc;
    assert_int_equal(dlock_lock_new(&l, c, name, NULL), DLOCK_OK);
    rc = dlock_lock_acquire(l, 0);
    snprintf(msg, len, "%s", dlock_lock_errmsg(l));
    if (rc == DLOCK_OK)
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
    return rc;
}

void test_expect_tls_error(int rc, const char *msg, const char *want)
{
    printf("# %s: %s\n", dlock_errname(rc), msg);
    assert_int_equal(rc, DLOCK_ETLS);
    if (!strstr(msg, want))
        fail_msg("message \"%s\" does not contain \"%s\"", msg, want);
}

dlock_lock *test_lock_new(dlock_client *c, const char *name, int64_t ttl_ms,
                                        unsigned flags, int64_t retry_min_ms,
                                        int64_t retry_max_ms)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = flags;
    o.retry_min_ms = retry_min_ms;
    o.retry_max_ms = retry_max_ms;
    return test_lock_with(c, name, &o);
}

typedef struct test_state_wait {
    dlock_lock *lock;
    dlock_lock_state state;
} test_state_wait;

static int test_state_reached(void *arg)
{
    const test_state_wait *w = (const test_state_wait *)arg;
    return dlock_lock_state_get(w->lock) == w->state;
}

/* Poll the handle every 5 ms until it is in `state`; 1 if it was within
 * max_ms, 0 if not. */
int test_wait_for_state(dlock_lock *l, dlock_lock_state state, int max_ms)
{
    test_state_wait w = {l, state};
    return test_wait_until(test_state_reached, &w, max_ms, 5);
}

/* ---- helper keys ---------------------------------------------------------- */

size_t test_helper_key(char *out, size_t cap, const char *key, const char *kind)
{
    /* key NUL kind, as src/engine/lock.c's dlock__derived_key() makes it. */
    size_t kl = strlen(key), hl = strlen(kind);
    assert_true(kl + 1 + hl < cap);
    memcpy(out, key, kl);
    out[kl] = '\0';
    memcpy(out + kl + 1, kind, hl + 1);
    return kl + 1 + hl;
}

redisReply *test_cmd_bin(const test_redis *r, const char *fmt, ...)
{
    redisReply *rep;
    REPLY_OF_ARGS(rep);
    assert_non_null(rep);
    return rep;
}

/* ---- this process's sockets ---------------------------------------------- */

/* Append to ino[] (cap) the inodes of the sockets in the /proc/net file at
 * path whose remote port is port (any when 0); returns the new count. */
static size_t tcp_inodes(const char *path, int port, unsigned long *ino, size_t n, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return n; /* no IPv6 here */
    char line[512];
    while (n < cap && fgets(line, sizeof line, f)) {
        /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
        unsigned rport;
        unsigned long inode;
        if (sscanf(line, " %*d: %*x:%*x %*x:%x %*x %*x:%*x %*x:%*x %*x %*u %*u %lu", &rport,
                   &inode) == 2 &&
            inode != 0 && (port == 0 || (int)rport == port))
            ino[n++] = inode;
    }
    fclose(f);
    return n;
}

int test_tcp_connections(int port, unsigned long *last_inode)
{
    enum { CAP = 4096 };
    static unsigned long ino[CAP]; /* main thread only (above) */
    size_t n_ino = tcp_inodes("/proc/self/net/tcp", port, ino, 0, CAP);
    n_ino = tcp_inodes("/proc/self/net/tcp6", port, ino, n_ino, CAP);
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], target[64];
        unsigned long inode;
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        if (sscanf(target, "socket:[%lu]", &inode) != 1)
            continue;
        for (size_t i = 0; i < n_ino; i++)
            if (ino[i] == inode) {
                n++;
                if (last_inode)
                    *last_inode = inode;
                break;
            }
    }
    closedir(d);
    return n;
}
