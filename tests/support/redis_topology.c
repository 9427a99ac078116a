/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "redis_topology.h"

/* ---- cluster ------------------------------------------------------------ */

/* A short node timeout makes failovers quick; so does starting a full
 * sync at once (Redis 7 waits 5 s by default for more replicas to share a
 * diskless sync: a restarted master rejoining as a replica sat out of
 * sync that long, on a loaded machine long enough for the tests' waits
 * to run out). Validity factor 0 lets a replica take over however long
 * it was cut off (tests kill masters). It also lets a restarted node that
 * never synced take over, empty: a test that restarts a node without its
 * data keeps it from failing over until it has synced
 * (test_failover_contended.c). */
static const char cluster_conf[] = "cluster-enabled yes\n"
                                   "cluster-config-file nodes.conf\n"
                                   "cluster-node-timeout 1000\n"
                                   "cluster-replica-validity-factor 0\n"
                                   "repl-diskless-sync-delay 0\n";

/* Whether the text reply of `cmd sub` (CLUSTER INFO, INFO replication)
 * contains needle. */
static int info_has(test_redis *r, const char *cmd, const char *sub, const char *needle)
{
    redisReply *rep = test_redis_cmd(r, "%s %s", cmd, sub);
    int ok = rep && rep->type == REDIS_REPLY_STRING &&
             strstr(rep->str, needle) != NULL;
    if (rep)
        freeReplyObject(rep);
    return ok;
}

/* Every live node says cluster_state:ok and its CLUSTER SLOTS covers all
 * 16384 slots with the master named by node `probe` for slot 0...16383 in
 * three ranges. Cheap enough to poll. */
static int cluster_ok_why(test_cluster *c, char *why, size_t cap)
{
    for (int i = 0; i < TEST_CLUSTER_NODES; i++) {
        if (c->node[i].pid <= 0)
            continue;
        if (!info_has(&c->node[i], "CLUSTER", "INFO", "cluster_state:ok")) {
            snprintf(why, cap, "node %d (port %d): cluster_state not ok", i, c->node[i].port);
            return 0;
        }
        /* A replica counts once it is in sync: acknowledgements (WAIT)
         * need it. */
        if (info_has(&c->node[i], "INFO", "replication", "role:slave") &&
            !info_has(&c->node[i], "INFO", "replication", "master_link_status:up")) {
            snprintf(why, cap, "node %d (port %d): replica, link to its master not up", i,
                     c->node[i].port);
            return 0;
        }
        redisReply *rep = test_redis_cmd(&c->node[i], "CLUSTER SLOTS");
        long long covered = 0;
        if (rep && rep->type == REDIS_REPLY_ARRAY)
            for (size_t k = 0; k < rep->elements; k++) {
                redisReply *e = rep->element[k];
                if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3)
                    covered += e->element[1]->integer - e->element[0]->integer + 1;
            }
        if (rep)
            freeReplyObject(rep);
        if (covered != 16384) {
            snprintf(why, cap, "node %d (port %d): CLUSTER SLOTS covers %lld slots", i,
                     c->node[i].port, covered);
            return 0;
        }
    }
    return 1;
}

static int cluster_ok(test_cluster *c)
{
    char why[200];
    return cluster_ok_why(c, why, sizeof why);
}

/* After a wait for the cluster timed out: why, and every node's view, on
 * stderr (a flaky failover is otherwise a bare assertion). */
static void cluster_tell(test_cluster *c, const char *what)
{
    char why[200] = "";
    if (cluster_ok_why(c, why, sizeof why))
        snprintf(why, sizeof why, "ok now");
    fprintf(stderr, "test harness: %s: %s\n", what, why);
    for (int i = 0; i < TEST_CLUSTER_NODES; i++) {
        if (c->node[i].pid <= 0) {
            fprintf(stderr, "  node %d: not running\n", i);
            continue;
        }
        redisReply *rep = test_redis_cmd(&c->node[i], "CLUSTER NODES");
        fprintf(stderr, "  node %d (port %d) CLUSTER NODES:\n%s", i, c->node[i].port,
                rep && rep->type == REDIS_REPLY_STRING ? rep->str : "(no reply)\n");
        if (rep)
            freeReplyObject(rep);
    }
}

int test_cluster_start(test_cluster *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < TEST_CLUSTER_NODES; i++) {
        if (test_redis_start(&c->node[i], cluster_conf) != 0) {
            test_cluster_stop(c);
            return -1;
        }
        c->urls[i] = c->node[i].url;
    }
    char cmd[2048];
    int n = snprintf(cmd, sizeof cmd, "redis-cli --cluster create");
    for (int i = 0; i < TEST_CLUSTER_NODES; i++)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " 127.0.0.1:%d", c->node[i].port);
    snprintf(cmd + n, sizeof cmd - (size_t)n,
             " --cluster-replicas 1 --cluster-yes >'%s/cluster-create.log' 2>&1 </dev/null",
             c->node[0].dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "test harness: redis-cli --cluster create failed (see %s/cluster-create.log)\n",
                c->node[0].dir);
        test_cluster_stop(c);
        return -1;
    }
    int64_t end = test_now_ms() + 30000;
    while (test_now_ms() < end) {
        if (cluster_ok(c))
            return 0;
        test_sleep_ms(100);
    }
    fprintf(stderr, "test harness: cluster did not reach cluster_state:ok\n");
    test_cluster_stop(c);
    return -1;
}

void test_cluster_stop(test_cluster *c)
{
    for (int i = 0; i < TEST_CLUSTER_NODES; i++)
        test_redis_stop(&c->node[i]);
}

int test_cluster_keyslot(test_cluster *c, const char *key)
{
    for (int i = 0; i < TEST_CLUSTER_NODES; i++) {
        if (c->node[i].pid <= 0)
            continue;
        redisReply *rep = test_redis_cmd(&c->node[i], "CLUSTER KEYSLOT %s", key);
        int slot = rep && rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -1;
        if (rep)
            freeReplyObject(rep);
        if (slot >= 0)
            return slot;
    }
    return -1;
}

int test_cluster_master_of(test_cluster *c, int slot)
{
    for (int i = 0; i < TEST_CLUSTER_NODES; i++) {
        if (c->node[i].pid <= 0)
            continue;
        redisReply *rep = test_redis_cmd(&c->node[i], "CLUSTER SLOTS");
        int port = -1;
        if (rep && rep->type == REDIS_REPLY_ARRAY)
            for (size_t k = 0; k < rep->elements; k++) {
                redisReply *e = rep->element[k];
                if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3 &&
                    e->element[0]->integer <= slot && slot <= e->element[1]->integer)
                    port = (int)e->element[2]->element[1]->integer;
            }
        if (rep)
            freeReplyObject(rep);
        for (int j = 0; port > 0 && j < TEST_CLUSTER_NODES; j++)
            if (c->node[j].port == port)
                return j;
        if (rep)
            break;
    }
    return -1;
}

int test_cluster_wait_failover(test_cluster *c, int slot, int dead, int timeout_ms)
{
    int64_t end = test_now_ms() + timeout_ms;
    while (test_now_ms() < end) {
        int m = test_cluster_master_of(c, slot);
        if (m >= 0 && m != dead && c->node[m].pid > 0 && cluster_ok(c)) {
            redisReply *rep = test_redis_cmd(&c->node[m], "ROLE");
            int is_master = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
                            !strcmp(rep->element[0]->str, "master");
            if (rep)
                freeReplyObject(rep);
            if (is_master)
                return m;
        }
        test_sleep_ms(100);
    }
    cluster_tell(c, "no failover seen");
    return -1;
}

int test_cluster_wait_ok(test_cluster *c, int timeout_ms)
{
    int64_t end = test_now_ms() + timeout_ms;
    while (test_now_ms() < end) {
        if (cluster_ok(c))
            return 0;
        test_sleep_ms(100);
    }
    cluster_tell(c, "cluster not ok");
    return -1;
}

int test_cluster_set_node_timeout(test_cluster *c, int ms)
{
    int rc = 0;
    for (int i = 0; i < TEST_CLUSTER_NODES; i++) {
        if (c->node[i].pid <= 0)
            continue;
        redisReply *rep = test_redis_cmd(&c->node[i], "CONFIG SET cluster-node-timeout %d", ms);
        if (!rep || rep->type != REDIS_REPLY_STATUS)
            rc = -1;
        if (rep)
            freeReplyObject(rep);
    }
    return rc;
}

/* ---- sentinel ----------------------------------------------------------- */

/* Sentinels rewrite their config file, so each gets its own dir. */
static int start_sentinel(test_redis *r, const char *name, int primary_port,
                          const char *password)
{
    memset(r, 0, sizeof *r);
    if (test_make_dir(r->dir, sizeof r->dir, "test") != 0)
        return -1;
    for (int attempt = 0; attempt < 20; attempt++) {
        r->port = test_free_port();
        char conf[400];
        snprintf(conf, sizeof conf, "%s/sentinel.conf", r->dir);
        FILE *f = fopen(conf, "w");
        if (!f)
            return -1;
        fprintf(f,
                "port %d\nbind 127.0.0.1\ndir %s\nlogfile %s/sentinel.log\n"
                "sentinel monitor %s 127.0.0.1 %d 2\n"
                "sentinel down-after-milliseconds %s 1000\n"
                "sentinel failover-timeout %s 4000\n"
                "sentinel parallel-syncs %s 1\n",
                r->port, r->dir, r->dir, name, primary_port, name, name, name);
        if (password && *password)
            fprintf(f, "sentinel auth-pass %s %s\n", name, password);
        fclose(f);
        snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d", r->port);
        const char *argv[] = {"redis-sentinel", conf, NULL};
        pid_t pid = test_spawn_server(argv, NULL);
        if (pid < 0)
            return -1;
        r->pid = pid;
        for (int i = 0; i < 300; i++) {
            if (waitpid(pid, NULL, WNOHANG) == pid) {
                r->pid = 0;
                break;
            }
            redisReply *rep = test_redis_cmd(r, "PING");
            int up = rep && rep->type == REDIS_REPLY_STATUS;
            if (rep)
                freeReplyObject(rep);
            if (up)
                return 0;
            test_sleep_ms(10);
        }
        if (r->pid > 0) {
            test_reap_server(r->pid, 0);
            r->pid = 0;
        }
    }
    return -1;
}

static long long sentinel_count(test_redis *s, const char *what, const char *name)
{
    redisReply *rep = test_redis_cmd(s, "SENTINEL %s %s", what, name);
    long long n = rep && rep->type == REDIS_REPLY_ARRAY ? (long long)rep->elements : -1;
    if (rep)
        freeReplyObject(rep);
    return n;
}

/* A reply of a data node, authenticating first when the set has a
 * password. */
static redisReply *data_cmd(test_sentinel_set *s, test_redis *r, const char *a, const char *b)
{
    redisContext *c = test_redis_admin(r);
    if (!c)
        return NULL;
    if (s->password[0]) {
        redisReply *au = redisCommand(c, "AUTH %s", s->password);
        if (au)
            freeReplyObject(au);
    }
    redisReply *rep = redisCommand(c, "%s %s", a, b);
    redisFree(c);
    return rep;
}

int test_sentinel_start(test_sentinel_set *s)
{
    return test_sentinel_start_auth(s, NULL);
}

int test_sentinel_start_auth(test_sentinel_set *s, const char *password)
{
    memset(s, 0, sizeof *s);
    snprintf(s->master_name, sizeof s->master_name, "mymaster");
    snprintf(s->password, sizeof s->password, "%s", password ? password : "");
    char auth[160] = "";
    if (s->password[0])
        snprintf(auth, sizeof auth, "requirepass %s\nmasterauth %s\n", s->password, s->password);
    /* min-replicas-* stay off: the tests ask for acknowledgements with
     * WAIT (dlock's min_replicas), not through the server. */
    if (test_redis_start(&s->primary, auth) != 0)
        return -1;
    char conf[300];
    snprintf(conf, sizeof conf, "%sreplicaof 127.0.0.1 %d\n", auth, s->primary.port);
    if (test_redis_start(&s->replica, conf) != 0)
        goto fail;
    int n = snprintf(s->url, sizeof s->url, "redis-sentinel://");
    for (int i = 0; i < TEST_SENTINELS; i++) {
        if (start_sentinel(&s->sentinel[i], s->master_name, s->primary.port, s->password) != 0) {
            fprintf(stderr, "test harness: could not start redis-sentinel\n");
            goto fail;
        }
        n += snprintf(s->url + n, sizeof s->url - (size_t)n, "%s127.0.0.1:%d", i ? "," : "",
                      s->sentinel[i].port);
    }
    snprintf(s->url + n, sizeof s->url - (size_t)n, "/%s", s->master_name);
    int64_t end = test_now_ms() + 30000;
    while (test_now_ms() < end) {
        redisReply *rep = data_cmd(s, &s->replica, "INFO", "replication");
        int ready = rep && rep->type == REDIS_REPLY_STRING &&
                    strstr(rep->str, "master_link_status:up") != NULL;
        if (rep)
            freeReplyObject(rep);
        for (int i = 0; ready && i < TEST_SENTINELS; i++)
            ready = sentinel_count(&s->sentinel[i], "replicas", s->master_name) == 1 &&
                    sentinel_count(&s->sentinel[i], "sentinels", s->master_name) ==
                        TEST_SENTINELS - 1;
        if (ready)
            return 0;
        test_sleep_ms(100);
    }
    fprintf(stderr, "test harness: sentinels did not discover each other and the replica\n");
fail:
    test_sentinel_stop(s);
    return -1;
}

void test_sentinel_stop(test_sentinel_set *s)
{
    for (int i = 0; i < TEST_SENTINELS; i++)
        test_redis_stop(&s->sentinel[i]);
    test_redis_stop(&s->replica);
    test_redis_stop(&s->primary);
}

int test_sentinel_primary_port(test_sentinel_set *s)
{
    for (int i = 0; i < TEST_SENTINELS; i++) {
        if (s->sentinel[i].pid <= 0)
            continue;
        redisReply *rep = test_redis_cmd(&s->sentinel[i], "SENTINEL get-master-addr-by-name %s",
                                         s->master_name);
        int port = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2
                       ? atoi(rep->element[1]->str)
                       : -1;
        if (rep)
            freeReplyObject(rep);
        if (port > 0)
            return port;
    }
    return -1;
}

test_redis *test_sentinel_node(test_sentinel_set *s, int port)
{
    if (s->primary.port == port)
        return &s->primary;
    if (s->replica.port == port)
        return &s->replica;
    return NULL;
}

int test_sentinel_wait_failover(test_sentinel_set *s, int old_port, int timeout_ms)
{
    int64_t end = test_now_ms() + timeout_ms;
    while (test_now_ms() < end) {
        int port = test_sentinel_primary_port(s);
        test_redis *r = port > 0 && port != old_port ? test_sentinel_node(s, port) : NULL;
        if (r && r->pid > 0) {
            redisReply *rep = test_redis_cmd(r, "ROLE");
            int is_master = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
                            !strcmp(rep->element[0]->str, "master");
            if (rep)
                freeReplyObject(rep);
            if (is_master)
                return port;
        }
        test_sleep_ms(100);
    }
    return -1;
}
