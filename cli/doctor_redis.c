/* SPDX-License-Identifier: BSD-3-Clause */
/* The doctor's checks of a Redis node, and those across the nodes of a
 * Redlock deployment. Each check states what it saw, and when that is
 * unsafe or slow, why and what to change (docs/dlock.1, "doctor"). */
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

struct doc_node {
    char url[1024]; /* redacted */
    int reached;
    int have_time;
    int64_t offset_us; /* node clock minus our monotonic clock */
    int64_t rtt_us;    /* best round trip of TIME */
};

int doc_node_reached(const doc_node *n)
{
    return n && n->reached;
}

void doc_node_free(doc_node *n)
{
    free(n);
}

static int is_error(const redisReply *r)
{
    return !r || r->type == REDIS_REPLY_ERROR;
}

static const char *reply_text(const redisReply *r, const char *err)
{
    return !r ? err : r->str ? r->str : "unexpected reply";
}

/* A version "a.b.c" as a number a*10000 + b*100 + c. */
static int version_num(const char *v)
{
    int a = 0, b = 0, c = 0;
    sscanf(v, "%d.%d.%d", &a, &b, &c);
    return a * 10000 + b * 100 + c;
}

/* --- server family and version ------------------------------------- */

static void check_server(const char *node, const char *info, const doc_settings *s)
{
    char name[64], ver[64], vver[64], mode[64];
    doc_info_field(info, "server_name", name, sizeof name);
    doc_info_field(info, "redis_version", ver, sizeof ver);
    doc_info_field(info, "redis_mode", mode, sizeof mode);
    /* Valkey reports redis_version 7.2.4 whatever its own version, for
     * clients that test it; its own is valkey_version. */
    int valkey = !strcmp(name, "valkey") || !doc_info_field(info, "valkey_version", vver, sizeof vver);
    if (valkey && doc_info_field(info, "valkey_version", vver, sizeof vver) != 0)
        snprintf(vver, sizeof vver, "%s", ver);
    const char *family = valkey ? "Valkey" : "Redis";
    const char *shown = valkey ? vver : ver;
    int v = version_num(ver); /* the Redis API level, Valkey's too */
    if (!strcmp(mode, "sentinel")) {
        doc_add(node, "server", DOC_FAIL, "this is a Sentinel, not a data node: it has no locks",
                "name it as redis-sentinel://HOST:PORT/MASTER, or point -r at the primary",
                "Redis Sentinel %s", shown);
    } else if (v < 50000) {
        doc_add(node, "server", DOC_FAIL, "dlock needs Redis 5 or newer (its scripts and commands)",
                "upgrade the server", "%s %s", family, shown);
    } else if (s->g->copts.cluster && v < 70000) {
        doc_add(node, "server", DOC_FAIL, "Cluster wake-ups use sharded pub/sub, new in Redis 7",
                "upgrade the cluster to Redis 7 or newer", "%s %s", family, shown);
    } else if (v < 60006) {
        doc_add(node, "server", DOC_WARN,
                "fair mode needs LPOS (Redis 6.0.6) and TLS needs Redis 6",
                "upgrade to Redis 6.0.6 or newer for --fair and rediss://", "%s %s", family, shown);
    } else {
        doc_add(node, "server", DOC_OK, NULL, NULL, "%s %s (%s)", family, shown,
                *mode ? mode : "standalone");
    }
    char enabled[8];
    doc_info_field(info, "cluster_enabled", enabled, sizeof enabled);
    if (!strcmp(enabled, "1") && !s->g->copts.cluster)
        doc_add(node, "cluster", DOC_FAIL,
                "a Cluster node answers MOVED for keys in another node's slots",
                "add --cluster (client option cluster = 1)", "cluster mode on, --cluster not given");
    else if (strcmp(enabled, "1") != 0 && s->g->copts.cluster && strcmp(mode, "sentinel") != 0)
        doc_add(node, "cluster", DOC_FAIL, "--cluster needs Cluster nodes",
                "drop --cluster, or point -r at the cluster's nodes", "not a Cluster node");
}

/* --- scripting --------------------------------------------------------- */

static int check_scripting(doc_conn *c, const char *node)
{
    char err[256];
    redisReply *r = doc_commandf(c, err, sizeof err, "EVAL", "return 1", "0", NULL);
    int ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    if (ok)
        doc_add(node, "scripting", DOC_OK, NULL, NULL, "EVAL runs Lua scripts");
    else
        doc_add(node, "scripting", DOC_FAIL,
                "every lock step of dlock is a Lua script (EVALSHA, EVAL on NOSCRIPT)",
                r && r->str && !strncmp(r->str, "NOPERM", 6)
                    ? "grant the user +eval +evalsha +script|load (docs/design.md, Key layout)"
                    : "enable scripting (no rename-command of EVAL, no scripting-disabled proxy)",
                "EVAL refused: %s", reply_text(r, err));
    doc_reply_free(r);
    return ok;
}

/* --- memory, persistence, replication -------------------------------- */

static void check_eviction(const char *node, const char *info)
{
    char policy[64], maxmem[32];
    if (doc_info_field(info, "maxmemory_policy", policy, sizeof policy) != 0) {
        doc_add(node, "eviction", DOC_SKIP, "INFO memory did not say", NULL,
                "maxmemory-policy unknown");
        return;
    }
    doc_info_field(info, "maxmemory", maxmem, sizeof maxmem);
    long long limit = atoll(maxmem);
    if (!strcmp(policy, "noeviction")) {
        doc_add(node, "eviction", DOC_OK, NULL, NULL,
                "maxmemory-policy noeviction: lock keys are never evicted (when full, "
                "acquires fail with OOM instead)");
        return;
    }
    const char *why = !strncmp(policy, "allkeys", 7)
                          ? "an allkeys policy evicts any key, a held lock's too: a second "
                            "client then gets the lock while the first still holds it"
                          : "a volatile policy evicts keys that have a TTL, and every lock key "
                            "has one: a second client then gets an evicted lock";
    if (limit > 0)
        doc_add(node, "eviction", DOC_FAIL, why,
                "CONFIG SET maxmemory-policy noeviction (and in redis.conf), or a separate "
                "Redis for locks",
                "maxmemory-policy %s with maxmemory %lld bytes can evict held locks", policy, limit);
    else
        doc_add(node, "eviction", DOC_WARN, why,
                "CONFIG SET maxmemory-policy noeviction before any maxmemory is set",
                "maxmemory-policy %s (no maxmemory now, so nothing is evicted yet)", policy);
}

static void config_value(doc_conn *c, const char *name, char *out, size_t len, int *refused)
{
    char err[256];
    redisReply *r = doc_commandf(c, err, sizeof err, "CONFIG", "GET", name, NULL);
    out[0] = '\0';
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->str)
        snprintf(out, len, "%s", r->element[1]->str);
    else
        *refused = 1;
    doc_reply_free(r);
}

static void check_persistence(doc_conn *c, const char *node, const char *info,
                              const doc_settings *s)
{
    char aof[16] = "", fsync[16] = "", save[256] = "", up[32] = "";
    int refused = 0;
    config_value(c, "appendonly", aof, sizeof aof, &refused);
    config_value(c, "appendfsync", fsync, sizeof fsync, &refused);
    config_value(c, "save", save, sizeof save, &refused);
    if (refused) { /* CONFIG refused or renamed: INFO persistence tells AOF only */
        char on[8];
        if (info && doc_info_field(info, "aof_enabled", on, sizeof on) == 0)
            snprintf(aof, sizeof aof, "%s", !strcmp(on, "1") ? "yes" : "no");
    }
    if (info)
        doc_info_field(info, "uptime_in_seconds", up, sizeof up);
    int64_t rule_ms = s->g->copts.min_node_uptime_ms;
    const char *fix = "appendonly yes with appendfsync always, or --min-node-uptime set to your "
                      "longest TTL (docs/redlock.md, The restart rule)";
    if (!aof[0]) {
        doc_add(node, "persistence", DOC_SKIP, "CONFIG GET and INFO were refused", fix,
                "persistence unknown");
    } else if (!strcmp(aof, "yes") && !strcmp(fsync, "always")) {
        doc_add(node, "persistence", DOC_OK, NULL, NULL,
                "AOF with appendfsync always: a restart keeps every granted lock");
    } else if (rule_ms > 0 && rule_ms >= s->ttl_ms) {
        doc_add(node, "persistence", DOC_OK, NULL, NULL,
                "a restart may forget locks, but --min-node-uptime %" PRId64 "ms >= the TTL keeps "
                "a restarted node from granting them again (node up %ss)", rule_ms, up);
    } else if (!strcmp(aof, "yes")) {
        doc_add(node, "persistence", DOC_WARN,
                "a crash loses the grants of the last second (or more), which another client "
                "can then be granted again after the restart",
                fix, "AOF with appendfsync %s", fsync[0] ? fsync : "unknown (CONFIG refused)");
    } else {
        doc_add(node, "persistence", DOC_FAIL,
                "a restart forgets the locks not yet on disk, and grants them again to the "
                "next client while their holders still run",
                fix, "appendonly no, %s%s%s", refused ? "save unknown (CONFIG refused)"
                                                      : save[0] ? "RDB snapshots only (save "
                                                                : "no snapshots (save \"\")",
                !refused && save[0] ? save : "", !refused && save[0] ? ")" : "");
    }
    if (rule_ms > 0 && rule_ms < s->ttl_ms)
        doc_add(node, "restart-rule", DOC_WARN,
                "a node restarted without its data votes again before every lease it granted "
                "ran out", "set --min-node-uptime to the longest TTL (--ttl)",
                "--min-node-uptime %" PRId64 "ms is shorter than the TTL %" PRId64 "ms", rule_ms,
                s->ttl_ms);
    if (rule_ms > 0 && !info)
        doc_add(node, "restart-rule", DOC_FAIL,
                "the restart rule reads the node's uptime with INFO; without it the node never "
                "votes", "grant the user +info", "--min-node-uptime is set but INFO is refused");
}

static void check_replication(doc_conn *c, const char *node, const char *info,
                              const doc_settings *s)
{
    char role[32], slaves[16], err[256];
    doc_info_field(info, "role", role, sizeof role);
    doc_info_field(info, "connected_slaves", slaves, sizeof slaves);
    int n = atoi(slaves), want = s->g->copts.min_replicas;
    if (!strcmp(role, "slave")) {
        doc_add(node, "replication", DOC_FAIL, "a replica refuses writes (READONLY): no lock "
                "can be taken on it", "point -r at the primary (or use redis-sentinel://)",
                "this node is a replica");
        return;
    }
    if (want > 0) {
        char num[16], ms[16];
        snprintf(num, sizeof num, "%d", want);
        snprintf(ms, sizeof ms, "%d", s->g->copts.min_replicas_timeout_ms);
        int64_t t0 = doc_mono_us();
        redisReply *r = doc_commandf(c, err, sizeof err, "WAIT", num, ms, NULL);
        double took_ms = (double)(doc_mono_us() - t0) / 1000.0;
        if (!r || r->type != REDIS_REPLY_INTEGER)
            doc_add(node, "replication", DOC_FAIL, "--min-replicas waits with WAIT after each "
                    "acquire and extend", "grant the user +wait", "WAIT refused: %s",
                    reply_text(r, err));
        else if (r->integer < want)
            doc_add(node, "replication", DOC_FAIL, "every acquire will be undone and fail with "
                    "DLOCK_ENOREPLICAS (exit 69)",
                    "add replicas, or lower --min-replicas", "--min-replicas %d but WAIT "
                    "counted %lld of %d connected replicas", want, r->integer, n);
        else
            doc_add(node, "replication", DOC_OK, NULL, NULL, "%d replicas; WAIT %d answered "
                    "%lld in %.1fms", n, want, r->integer, took_ms);
        doc_reply_free(r);
    } else if (n > 0) {
        doc_add(node, "replication", DOC_WARN, "replication is asynchronous: a failover can "
                "lose a granted lock, which the promoted replica grants again",
                "--min-replicas N (WAIT) narrows the window; fencing tokens close it "
                "(docs/deployment.md)", "%d replicas, and --min-replicas is off", n);
    } else {
        doc_add(node, "replication", DOC_OK, NULL, NULL, "no replicas");
    }
}

static void check_cluster(doc_conn *c, const char *node)
{
    char err[256], state[32], assigned[16], failing[16];
    redisReply *r = doc_commandf(c, err, sizeof err, "CLUSTER", "INFO", NULL);
    if (is_error(r) || !r->str) {
        doc_add(node, "cluster", DOC_FAIL, "--cluster reads the slot map from the nodes",
                "grant +cluster|info +cluster|slots, or check that this is a Cluster node",
                "CLUSTER INFO refused: %s", reply_text(r, err));
        doc_reply_free(r);
        return;
    }
    doc_info_field(r->str, "cluster_state", state, sizeof state);
    doc_info_field(r->str, "cluster_slots_assigned", assigned, sizeof assigned);
    doc_info_field(r->str, "cluster_slots_fail", failing, sizeof failing);
    doc_reply_free(r);
    if (strcmp(state, "ok") != 0 || atoi(assigned) < 16384)
        doc_add(node, "cluster", DOC_FAIL, "locks whose key hashes to an unserved slot fail "
                "(CLUSTERDOWN)", "assign every slot to a master (redis-cli --cluster fix)",
                "cluster_state %s, %s of 16384 slots assigned, %s failing", state, assigned,
                failing);
    else
        doc_add(node, "cluster", DOC_OK, NULL, NULL, "cluster_state ok, all 16384 slots "
                "assigned");
}

/* TIME three times; the sample with the shortest round trip gives the
 * node's clock against ours, to within half that round trip. */
static void sample_time(doc_conn *c, doc_node *n)
{
    char err[256];
    for (int i = 0; i < 3; i++) {
        int64_t t0 = doc_mono_us();
        redisReply *r = doc_commandf(c, err, sizeof err, "TIME", NULL);
        int64_t t1 = doc_mono_us();
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
            int64_t node_us = atoll(r->element[0]->str) * 1000000 + atoll(r->element[1]->str);
            if (!n->have_time || t1 - t0 < n->rtt_us) {
                n->rtt_us = t1 - t0;
                n->offset_us = node_us - (t0 + t1) / 2;
                n->have_time = 1;
            }
        }
        doc_reply_free(r);
    }
}

/* --- one node ---------------------------------------------------------- */

/* redis-sentinel://: ask the sentinels for the primary, then check it. */
static int resolve_sentinel(doc_target *t, const char *node, const cli_global *g)
{
    char list[1024], err[256], verr[256];
    snprintf(list, sizeof list, "%s", t->sentinels);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        doc_target st = *t;
        st.user[0] = st.pass[0] = '\0';
        char url[1100];
        snprintf(url, sizeof url, "redis://%s", tok);
        if (doc_parse_target(url, &(cli_global){.copts = g->copts}, &st, err, sizeof err) != 0)
            continue;
        st.user[0] = st.pass[0] = '\0'; /* sentinels are asked without AUTH */
        st.tls = t->tls;
        double days = 1e9;
        doc_conn *c = doc_connect(&st, g, err, sizeof err, &days, verr, sizeof verr);
        if (!c)
            continue;
        redisReply *r = doc_commandf(c, err, sizeof err, "SENTINEL", "get-master-addr-by-name",
                                     t->sentinel_master, NULL);
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
            snprintf(t->host, sizeof t->host, "%s", r->element[0]->str);
            t->port = atoi(r->element[1]->str);
            doc_add(node, "sentinel", DOC_OK, NULL, NULL, "sentinel %s: master '%s' is %s:%d",
                    tok, t->sentinel_master, t->host, t->port);
            doc_reply_free(r);
            doc_close(c);
            return 0;
        }
        doc_reply_free(r);
        doc_close(c);
    }
    doc_add(node, "sentinel", DOC_FAIL, "without a primary no lock can be taken",
            "check the sentinels' addresses and the master's name",
            "no sentinel named a primary for '%s'", t->sentinel_master);
    return -1;
}

static void check_tls(const char *node, const cli_global *g, double days, const char *verr)
{
    if (verr[0] && !g->copts.tls_insecure) {
        doc_add(node, "tls", DOC_FAIL, "dlock refuses this server (DLOCK_ETLS, exit 69)",
                "give the CA with --cacert, or fix the server's certificate (name, chain, dates)",
                "certificate verification failed: %s", verr);
    } else if (g->copts.tls_insecure) {
        doc_add(node, "tls", DOC_WARN, "--insecure accepts any server, a man in the middle too",
                "drop --insecure and give the CA with --cacert", "verification off (--insecure)%s%s",
                verr[0] ? "; it would fail: " : "", verr);
    }
    if (days < 0)
        doc_add(node, "tls-expiry", DOC_FAIL, "clients refuse an expired certificate",
                "renew the server certificate now", "the certificate expired %.0f days ago",
                -days);
    else if (days < 7)
        doc_add(node, "tls-expiry", DOC_FAIL, "when it expires every client is refused, and "
                "every lock with it", "renew the server certificate",
                "the certificate expires in %.1f days", days);
    else if (days < 30)
        doc_add(node, "tls-expiry", DOC_WARN, "when it expires every client is refused",
                "renew the server certificate", "the certificate expires in %.0f days", days);
    else
        doc_add(node, "tls-expiry", DOC_OK, NULL, NULL, "the certificate is valid for %.0f more "
                "days", days);
}

doc_node *doc_redis_check(const char *url, const doc_settings *s)
{
    doc_node *n = calloc(1, sizeof *n);
    doc_target t;
    char err[512], verr[256] = "";
    if (!n)
        return NULL;
    cli_redact_url(url, n->url, sizeof n->url);
    const char *node = n->url;
    if (doc_parse_target(url, s->g, &t, err, sizeof err) != 0) {
        doc_add(node, "connect", DOC_FAIL, NULL, "check the URL", "%s", err);
        return n;
    }
    if (t.sentinel_master[0] && resolve_sentinel(&t, node, s->g) != 0)
        return n;
    double days = 1e9;
    int64_t t0 = doc_mono_us();
    doc_conn *c = doc_connect(&t, s->g, err, sizeof err, &days, verr, sizeof verr);
    if (!c) {
        doc_add(node, "connect", DOC_FAIL, "no lock can be taken or released on it",
                "check the address, that the server runs, and firewalls", "unreachable: %s", err);
        return n;
    }
    double connect_ms = (double)(doc_mono_us() - t0) / 1000.0;
    n->reached = 1; /* it answered: what follows are findings, not "unreachable" */
    doc_add(node, "connect", DOC_OK, NULL, NULL, "connected%s in %.1fms", t.tls ? " with TLS" : "",
            connect_ms);
    if (t.tls) {
        check_tls(node, s->g, days, verr);
        if (verr[0] && !s->g->copts.tls_insecure) {
            doc_close(c); /* no password to an unverified server */
            return n;
        }
    }
    if (t.pass[0]) {
        redisReply *r = t.user[0] ? doc_commandf(c, err, sizeof err, "AUTH", t.user, t.pass, NULL)
                                  : doc_commandf(c, err, sizeof err, "AUTH", t.pass, NULL);
        if (is_error(r)) {
            doc_add(node, "auth", DOC_FAIL, "every command is refused (exit 77)",
                    "check --user and the password", "AUTH refused: %s", reply_text(r, err));
            doc_reply_free(r);
            doc_close(c);
            return n;
        }
        doc_reply_free(r);
    }
    redisReply *info = doc_commandf(c, err, sizeof err, "INFO", "all", NULL);
    const char *text = !is_error(info) && info->str ? info->str : NULL;
    if (!text) {
        doc_add(node, "server", DOC_SKIP, "INFO was refused: version, memory, replication and "
                "uptime cannot be read", "grant the user +info (also needed by Redlock's restart "
                "rule)", "INFO refused: %s", reply_text(info, err));
    } else {
        check_server(node, text, s);
    }
    check_scripting(c, node);
    doc_check_acl(c, node, s);
    if (text)
        check_eviction(node, text);
    check_persistence(c, node, text, s);
    if (text)
        check_replication(c, node, text, s);
    if (s->g->copts.cluster)
        check_cluster(c, node);
    sample_time(c, n);
    doc_reply_free(info);
    doc_close(c);
    return n;
}

/* --- across nodes -------------------------------------------------------- */

void doc_redis_across(doc_node **nodes, size_t count, const doc_settings *s)
{
    const double drift_ms = (double)s->ttl_ms * s->g->copts.drift_factor + 2.0;
    int64_t lo = 0, hi = 0, rtt_max = 0;
    size_t with_time = 0;
    const char *lo_url = "", *hi_url = "", *slow_url = "";
    for (size_t i = 0; i < count; i++) {
        doc_node *n = nodes[i];
        if (!n || !n->have_time)
            continue;
        if (!with_time || n->offset_us < lo)
            lo = n->offset_us, lo_url = n->url;
        if (!with_time || n->offset_us > hi)
            hi = n->offset_us, hi_url = n->url;
        if (n->rtt_us >= rtt_max)
            rtt_max = n->rtt_us, slow_url = n->url;
        with_time++;
    }
    if (with_time == 0)
        return;
    /* Redlock's per-node timeout: min(io_timeout, ttl/10). */
    double per_node_ms = (double)s->g->copts.io_timeout_ms;
    if ((double)s->ttl_ms / 10.0 < per_node_ms)
        per_node_ms = (double)s->ttl_ms / 10.0;
    double rtt_ms = (double)rtt_max / 1000.0;
    if (rtt_ms >= per_node_ms)
        doc_add(NULL, "round-trip", DOC_FAIL, "a node slower than the per-node timeout "
                "min(--io-timeout, TTL/10) never votes in time: acquires fail or lose quorum",
                "bring the nodes closer, or use a longer TTL (--ttl) and --io-timeout",
                "round trip %.1fms to %s, per-node timeout %.0fms for a TTL of %" PRId64 "ms",
                rtt_ms, slow_url, per_node_ms, s->ttl_ms);
    else if (rtt_ms >= per_node_ms / 2)
        doc_add(NULL, "round-trip", DOC_WARN, "half the per-node timeout: a busy moment makes "
                "acquires time out", "bring the nodes closer, or a longer TTL",
                "round trip %.1fms to %s, per-node timeout %.0fms", rtt_ms, slow_url,
                per_node_ms);
    else
        doc_add(NULL, "round-trip", DOC_OK, NULL, NULL, "slowest round trip %.2fms (%s); a "
                "%" PRId64 "ms lock keeps about %.0fms of validity after acquiring",
                rtt_ms, slow_url, s->ttl_ms, (double)s->ttl_ms - rtt_ms - drift_ms);
    /* Cluster seeds and a Sentinel's primary are one deployment, not
     * independent Redlock masters: no vote, no clock comparison. */
    if (s->n_redis < 2 || with_time < 2 || s->g->copts.cluster)
        return;
    double skew_ms = (double)(hi - lo) / 1000.0;
    if (skew_ms > drift_ms)
        doc_add(NULL, "clocks", DOC_WARN,
                "Redlock allows for clocks that drift by the drift allowance (TTL x 1% + 2ms) "
                "within a lease; clocks this far apart are not kept in step, and one that is "
                "set back or runs fast ends a lease early on its node: two holders become "
                "possible", "run NTP (chrony, systemd-timesyncd) with slewing on every node",
                "clocks %.0fms apart (%s ahead of %s), more than the drift allowance %.0fms for a "
                "TTL of %" PRId64 "ms", skew_ms, hi_url, lo_url, drift_ms, s->ttl_ms);
    else
        doc_add(NULL, "clocks", DOC_OK, NULL, NULL,
                "clocks within %.1fms of each other (drift allowance %.0fms for a TTL of "
                "%" PRId64 "ms)", skew_ms, drift_ms, s->ttl_ms);
    if (s->n_redis % 2 == 0)
        doc_add(NULL, "redlock", DOC_WARN, "a majority of an even number tolerates no more "
                "failures than one node fewer (2 tolerate none)", "use 3 or 5 independent masters",
                "%zu nodes", s->n_redis);
    else
        doc_add(NULL, "redlock", DOC_OK, NULL, NULL, "%zu nodes: a lock survives %zu failing",
                s->n_redis, s->n_redis / 2);
}
