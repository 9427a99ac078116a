/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "redis_server.h"

static int write_conf(test_redis *r)
{
    char path[400];
    snprintf(path, sizeof path, "%s/redis.conf", r->dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    if (r->tls)
        fprintf(f, "port 0\ntls-port %d\n", r->port);
    else
        fprintf(f, "port %d\n", r->port);
    fprintf(f,
            "bind 127.0.0.1\nsave \"\"\nappendonly no\n"
            "dir %s\nlogfile %s/redis.log\nunixsocket %s\nunixsocketperm 700\n"
            "enable-debug-command local\n%s\n",
            r->dir, r->dir, r->sock, r->extra);
    fclose(f);
    return 0;
}

static int spawn(test_redis *r)
{
    char conf[400];
    snprintf(conf, sizeof conf, "%s/redis.conf", r->dir);
    const char *argv[] = {"redis-server", conf, NULL};
    pid_t pid = test_spawn_server(argv, NULL);
    if (pid < 0)
        return -1;
    r->pid = pid;
    /* Wait for PING. */
    for (int i = 0; i < 500; i++) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            r->pid = 0;
            return -1; /* exited: port taken, or bad config */
        }
        struct timeval tv = {0, 200000};
        redisContext *c = r->tls ? redisConnectUnixWithTimeout(r->sock, tv)
                                 : redisConnectWithTimeout("127.0.0.1", r->port, tv);
        if (c && !c->err) {
            redisReply *rep = redisCommand(c, "PING");
            /* Up: PONG, or NOAUTH from a server with a password. */
            int ok = rep && (rep->type == REDIS_REPLY_STATUS ||
                             (rep->type == REDIS_REPLY_ERROR && strstr(rep->str, "NOAUTH")));
            if (rep)
                freeReplyObject(rep);
            redisFree(c);
            if (ok)
                return 0;
        } else if (c) {
            redisFree(c);
        }
        test_sleep_ms(10);
    }
    test_reap_server(pid, 0);
    r->pid = 0;
    return -1;
}

static int start(test_redis *r, int tls, const char *extra_conf)
{
    memset(r, 0, sizeof *r);
    r->tls = tls;
    snprintf(r->extra, sizeof r->extra, "%s", extra_conf ? extra_conf : "");
    if (test_make_dir(r->dir, sizeof r->dir, "test") != 0)
        return -1;
    snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
    for (int attempt = 0; attempt < 20; attempt++) {
        r->port = test_free_port();
        if (r->port <= 0)
            continue;
        snprintf(r->url, sizeof r->url, "%s://127.0.0.1:%d", r->tls ? "rediss" : "redis",
                 r->port);
        snprintf(r->unix_url, sizeof r->unix_url, "unix://%s", r->sock);
        if (write_conf(r) == 0 && spawn(r) == 0)
            return 0;
    }
    fprintf(stderr, "test harness: could not start redis-server (see %s/redis.log)\n", r->dir);
    return -1;
}

int test_redis_start(test_redis *r, const char *extra_conf)
{
    return start(r, 0, extra_conf);
}

int test_redis_start_tls(test_redis *r, const test_tls_certs *t, int auth_clients,
                         const char *extra_conf)
{
    char conf[2048];
    snprintf(conf, sizeof conf,
             "tls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\ntls-auth-clients %s\n%s",
             t->server_cert, t->server_key, t->ca, auth_clients ? "yes" : "no",
             extra_conf ? extra_conf : "");
    return start(r, 1, conf);
}

/* Run one shell command line; 0 if it succeeded. */
static int sh(const char *dir, const char *cmd)
{
    char line[2048];
    snprintf(line, sizeof line, "cd '%s' && { %s; } >>openssl.log 2>&1", dir, cmd);
    int st = system(line);
    if (st != 0)
        fprintf(stderr, "test harness: failed (%d): %s (see %s/openssl.log)\n", st, cmd, dir);
    return st == 0 ? 0 : -1;
}

int test_tls_certs_make(test_tls_certs *t)
{
    memset(t, 0, sizeof *t);
    if (test_make_dir(t->dir, sizeof t->dir, "test") != 0)
        return -1;
    /* EC keys: made in milliseconds, and cheap handshakes. */
#define KEY "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    static const char *const steps[] = {
        "openssl req -x509 -new " KEY " -keyout ca.key -out ca.crt -days 3 -subj /CN=dlock-test-ca",
        "openssl req -x509 -new " KEY " -keyout other-ca.key -out other-ca.crt -days 3 "
        "-subj /CN=dlock-unrelated-ca",
        "openssl req -new " KEY " -keyout server.key -out server.csr -subj /CN=127.0.0.1",
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n"
        "extendedKeyUsage=serverAuth,clientAuth\\n' >server.ext",
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3 "
        "-extfile server.ext -out server.crt",
        "openssl req -new " KEY " -keyout named.key -out named.csr -subj /CN=" TEST_TLS_NAMED_HOST,
        "printf 'subjectAltName=DNS:" TEST_TLS_NAMED_HOST "\\n"
        "extendedKeyUsage=serverAuth,clientAuth\\n' >named.ext",
        "openssl x509 -req -in named.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3 "
        "-extfile named.ext -out named.crt",
        "openssl req -new " KEY " -keyout client.key -out client.csr -subj /CN=dlock-test-client",
        "printf 'extendedKeyUsage=clientAuth\\n' >client.ext",
        "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3 "
        "-extfile client.ext -out client.crt",
    };
#undef KEY
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (sh(t->dir, steps[i]) != 0) {
            test_tls_certs_remove(t);
            return -1;
        }
    snprintf(t->ca, sizeof t->ca, "%s/ca.crt", t->dir);
    snprintf(t->other_ca, sizeof t->other_ca, "%s/other-ca.crt", t->dir);
    snprintf(t->server_cert, sizeof t->server_cert, "%s/server.crt", t->dir);
    snprintf(t->server_key, sizeof t->server_key, "%s/server.key", t->dir);
    snprintf(t->named_cert, sizeof t->named_cert, "%s/named.crt", t->dir);
    snprintf(t->named_key, sizeof t->named_key, "%s/named.key", t->dir);
    snprintf(t->client_cert, sizeof t->client_cert, "%s/client.crt", t->dir);
    snprintf(t->client_key, sizeof t->client_key, "%s/client.key", t->dir);
    return 0;
}

void test_tls_certs_remove(test_tls_certs *t)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
    if (t->dir[0] && strstr(t->dir, "/dlock-test-"))
        (void)!system(cmd);
    t->dir[0] = '\0';
}

int test_redis_restart(test_redis *r)
{
    if (r->pid > 0)
        test_redis_kill9(r);
    for (int attempt = 0; attempt < 50; attempt++) {
        if (spawn(r) == 0)
            return 0;
        test_sleep_ms(50); /* the port may still be in TIME_WAIT/closing */
    }
    fprintf(stderr, "test harness: restart on port %d failed\n", r->port);
    return -1;
}

void test_redis_kill9(test_redis *r)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, SIGCONT);
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
    r->pid = 0;
}

void test_redis_stop(test_redis *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGCONT);
        kill(r->pid, SIGTERM);
        test_reap_server(r->pid, 5000);
        r->pid = 0;
    }
    if (r->dir[0]) {
        char cmd[600];
        /* Only our own mkdtemp() directory. */
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->dir);
        if (strstr(r->dir, "/dlock-test-"))
            (void)!system(cmd);
        r->dir[0] = '\0';
    }
}

void test_redis_pause(test_redis *r)
{
    if (r->pid > 0)
        (void)test_proc_stop(r->pid, 5000);
}

void test_redis_resume(test_redis *r)
{
    if (r->pid > 0)
        kill(r->pid, SIGCONT);
}

redisContext *test_redis_admin(const test_redis *r)
{
    struct timeval tv = {2, 0};
    redisContext *c = r->tls ? redisConnectUnixWithTimeout(r->sock, tv)
                             : redisConnectWithTimeout("127.0.0.1", r->port, tv);
    if (!c || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    return c;
}

redisReply *test_redis_cmd(const test_redis *r, const char *fmt, ...)
{
    redisContext *c = test_redis_admin(r);
    if (!c)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return rep;
}

int test_redis_start_many(test_redis *rs, int n, const char *extra_conf)
{
    for (int i = 0; i < n; i++)
        if (test_redis_start(&rs[i], extra_conf) != 0) {
            test_redis_stop_many(rs, i);
            return -1;
        }
    return 0;
}

void test_redis_stop_many(test_redis *rs, int n)
{
    for (int i = 0; i < n; i++)
        test_redis_stop(&rs[i]);
}

int test_redis_replica_acks(const test_redis *p, const char *probe_key, int max_ms)
{
    redisContext *c = test_redis_admin(p);
    int ok = 0;
    for (int64_t t0 = test_now_ms(); c && !ok && test_now_ms() - t0 < max_ms;) {
        redisReply *set = redisCommand(c, "SET %s 1 PX 10000", probe_key);
        redisReply *w = set ? redisCommand(c, "WAIT 1 200") : NULL;
        ok = w && w->type == REDIS_REPLY_INTEGER && w->integer >= 1;
        if (set)
            freeReplyObject(set);
        if (w)
            freeReplyObject(w);
        if (!set || !w)
            break;
    }
    if (c) {
        freeReplyObject(redisCommand(c, "DEL %s", probe_key));
        redisFree(c);
    }
    return ok;
}
