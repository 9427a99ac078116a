/* SPDX-License-Identifier: BSD-3-Clause */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "proc.h"

#include "etcd_server.h"

/* Ports handed out by this process, so two members never draw one port
 * between the probe and etcd's bind. */
static int used_ports[64];
static int n_used;

static int free_port(void)
{
    for (int tries = 0; tries < 50; tries++) {
        int p = test_free_port(), seen = 0;
        if (p < 0)
            return -1;
        for (int i = 0; i < n_used; i++)
            seen |= used_ports[i] == p;
        if (!seen) {
            used_ports[n_used++ % 64] = p;
            return p;
        }
    }
    return -1;
}

static int spawn(test_etcd *c, int i, int existing)
{
    test_etcd_member *m = &c->m[i];
    char client[80], peer[80], log[400];
    snprintf(client, sizeof client, "%s://127.0.0.1:%d", c->tls ? "https" : "http",
             m->client_port);
    snprintf(peer, sizeof peer, "http://127.0.0.1:%d", m->peer_port);
    snprintf(log, sizeof log, "%s.log", m->dir);
    char heartbeat[16], election[16];
    snprintf(heartbeat, sizeof heartbeat, "%d", c->heartbeat_ms);
    snprintf(election, sizeof election, "%d", c->election_ms);
    const char *argv[] = {"etcd", "--name", m->name, "--data-dir", m->dir,
                          "--listen-client-urls", client, "--advertise-client-urls", client,
                          "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                          "--initial-cluster", c->initial_cluster, "--initial-cluster-state",
                          existing ? "existing" : "new", "--initial-cluster-token", c->dir,
                          "--heartbeat-interval", heartbeat, "--election-timeout", election,
                          "--logger", "zap", "--log-level", "warn", NULL, NULL, NULL, NULL,
                          NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t k = 0;
    while (argv[k])
        k++;
    for (size_t x = 0; c->extra[x]; x++)
        argv[k++] = c->extra[x];
    if (c->tls) {
        argv[k++] = "--cert-file";
        argv[k++] = c->tls_conf.cert;
        argv[k++] = "--key-file";
        argv[k++] = c->tls_conf.key;
        /* etcd 3.4 asks every client for a certificate once it has a CA
         * to check them with: only the member that should. */
        if (c->tls_conf.client_cert_auth) {
            argv[k++] = "--trusted-ca-file";
            argv[k++] = c->tls_conf.ca;
            argv[k++] = "--client-cert-auth";
        }
    }
    pid_t pid = test_spawn_server(argv, log);
    if (pid < 0)
        return -1;
    m->pid = pid;
    m->paused = 0;
    return 0;
}

/* The members' TLS settings for the harness's own calls (one harness
 * per test process runs TLS members at a time). */
static test_etcd_tls harness_tls;
static int harness_tls_on;

/* POST body to member i; the reply object or NULL. */
static json_t *member_post(const test_etcd_member *m, const char *path,
                           const char *body, int timeout_ms)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    char url[200];
    snprintf(url, sizeof url, "%s%s", m->http, path);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    if (harness_tls_on && !strncmp(m->http, "https", 5)) {
        curl_easy_setopt(h, CURLOPT_CAINFO, harness_tls.ca);
        /* A member's certificate may name a host, not 127.0.0.1. */
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
        if (harness_tls.client_cert) {
            curl_easy_setopt(h, CURLOPT_SSLCERT, harness_tls.client_cert);
            curl_easy_setopt(h, CURLOPT_SSLKEY, harness_tls.client_key);
        }
    }
    CURLcode res = curl_easy_perform(h);
    curl_easy_cleanup(h);
    fclose(f);
    json_t *j = res == CURLE_OK ? json_loads(buf, 0, NULL) : NULL;
    free(buf);
    return j;
}

/* GET url into a string (malloc'd), or NULL. */
static char *member_get(const char *url, int timeout_ms)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    CURLcode res = curl_easy_perform(h);
    curl_easy_cleanup(h);
    fclose(f);
    if (res != CURLE_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

long test_etcd_served(const test_etcd *c, int i, const char *method)
{
    char url[200], want[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", c->m[i].client_port);
    snprintf(want, sizeof want, "grpc_method=\"%s\"", method);
    char *text = member_get(url, 2000);
    if (!text)
        return -1;
    long sum = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (strncmp(line, "grpc_server_handled_total{", 26) == 0 && strstr(line, want))
            sum += atol(strrchr(line, ' ') + 1);
    free(text);
    return sum;
}

/* "leader" and our own member id from /v3/maintenance/status. */
static int member_status(const test_etcd_member *m, char *leader, size_t llen,
                         char *self, size_t slen)
{
    json_t *j = member_post(m, "/v3/maintenance/status", "{}", 500);
    json_t *l = json_object_get(j, "leader");
    json_t *id = json_object_get(json_object_get(j, "header"), "member_id");
    int ok = json_is_string(l) && json_is_string(id);
    if (ok) {
        snprintf(leader, llen, "%s", json_string_value(l));
        snprintf(self, slen, "%s", json_string_value(id));
    }
    json_decref(j);
    return ok ? 0 : -1;
}

int test_etcd_leader(test_etcd *c, int max_ms)
{
    int64_t end = test_now_ms() + max_ms;
    do {
        for (int i = 0; i < c->n; i++) {
            if (!c->m[i].pid || c->m[i].paused)
                continue;
            char leader[32], self[32];
            if (member_status(&c->m[i], leader, sizeof leader, self, sizeof self))
                continue;
            if (strcmp(leader, "0") == 0)
                continue;
            for (int k = 0; k < c->n; k++) {
                char l2[32], s2[32];
                if (c->m[k].pid && !c->m[k].paused &&
                    member_status(&c->m[k], l2, sizeof l2, s2, sizeof s2) == 0 &&
                    strcmp(s2, leader) == 0)
                    return k;
            }
        }
        test_sleep_ms(50);
    } while (test_now_ms() < end);
    return -1;
}

int test_etcd_wait_leader(test_etcd *c, int max_ms)
{
    return test_etcd_leader(c, max_ms) >= 0 ? 0 : -1;
}

static int wait_member(test_etcd_member *m, int max_ms)
{
    int64_t end = test_now_ms() + max_ms;
    do {
        json_t *j = member_post(m, "/v3/kv/range", "{\"key\":\"AA==\"}", 500);
        /* an authentication refusal (auth on, no token) is an answer too;
         * "no leader" and timeouts are not */
        json_int_t code = json_integer_value(json_object_get(j, "code"));
        int ok = j && (json_object_get(j, "header") || code == 3 || code == 7 || code == 16);
        json_decref(j);
        if (ok)
            return 0;
        test_sleep_ms(50);
    } while (test_now_ms() < end);
    return -1;
}

int test_etcd_start(test_etcd *c, int n)
{
    return test_etcd_start_timed(c, n, 50, 500);
}

static int start_members(test_etcd *c, int n, int heartbeat_ms, int election_ms);

int test_etcd_start_timed(test_etcd *c, int n, int heartbeat_ms, int election_ms)
{
    memset(c, 0, sizeof *c);
    return start_members(c, n, heartbeat_ms, election_ms);
}

int test_etcd_start_tls(test_etcd *c, int n, const test_etcd_tls *tls)
{
    memset(c, 0, sizeof *c);
    c->tls = 1;
    c->tls_conf = *tls;
    harness_tls = *tls;
    harness_tls_on = 1;
    return start_members(c, n, 50, 500);
}

int test_etcd_start_args(test_etcd *c, int n, const char *const *extra)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; extra[i] && i < TEST_ETCD_EXTRA; i++)
        c->extra[i] = extra[i];
    return start_members(c, n, 50, 500);
}

static int start_members(test_etcd *c, int n, int heartbeat_ms, int election_ms)
{
    if (n < 1 || n > TEST_ETCD_MAX)
        return -1;
    c->heartbeat_ms = heartbeat_ms;
    c->election_ms = election_ms;
    curl_global_init(CURL_GLOBAL_ALL);
    if (test_make_dir(c->dir, sizeof c->dir, "etcd") != 0)
        return -1;
    c->n = n;
    size_t used = 0, uused = 0;
    uused += (size_t)snprintf(c->url, sizeof c->url, c->tls ? "etcds://" : "etcd://");
    for (int i = 0; i < n; i++) {
        test_etcd_member *m = &c->m[i];
        m->client_port = free_port();
        m->peer_port = free_port();
        if (m->client_port < 0 || m->peer_port < 0) {
            fprintf(stderr, "etcd harness: no free port\n");
            test_etcd_stop(c);
            return -1;
        }
        snprintf(m->name, sizeof m->name, "m%d", i);
        snprintf(m->dir, sizeof m->dir, "%s/m%d", c->dir, i);
        snprintf(m->url, sizeof m->url, "%s://127.0.0.1:%d", c->tls ? "etcds" : "etcd",
                 m->client_port);
        snprintf(m->http, sizeof m->http, "%s://127.0.0.1:%d", c->tls ? "https" : "http",
                 m->client_port);
        used += (size_t)snprintf(c->initial_cluster + used, sizeof c->initial_cluster - used,
                                 "%s%s=http://127.0.0.1:%d", i ? "," : "", m->name,
                                 m->peer_port);
        uused += (size_t)snprintf(c->url + uused, sizeof c->url - uused, "%s127.0.0.1:%d",
                                  i ? "," : "", m->client_port);
    }
    for (int i = 0; i < n; i++)
        if (spawn(c, i, 0) != 0) {
            test_etcd_stop(c);
            return -1;
        }
    for (int i = 0; i < n; i++)
        if (wait_member(&c->m[i], 20000) != 0) {
            fprintf(stderr, "etcd harness: member %d did not answer (log: %s.log)\n", i,
                    c->m[i].dir);
            test_etcd_stop(c);
            return -1;
        }
    if (test_etcd_wait_leader(c, 20000) != 0) {
        fprintf(stderr, "etcd harness: no leader\n");
        test_etcd_stop(c);
        return -1;
    }
    return 0;
}

static void reap(test_etcd_member *m, int sig, int max_ms)
{
    if (!m->pid)
        return;
    if (m->paused)
        kill(m->pid, SIGCONT);
    kill(m->pid, sig);
    test_reap_server(m->pid, max_ms);
    m->pid = 0;
    m->paused = 0;
}

void test_etcd_stop(test_etcd *c)
{
    for (int i = 0; i < c->n; i++)
        reap(&c->m[i], SIGTERM, 5000);
    if (c->dir[0] && !getenv("DLOCK_TEST_KEEP")) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "etcd harness: could not remove %s\n", c->dir);
    }
    c->dir[0] = '\0';
    c->n = 0;
}

void test_etcd_kill9(test_etcd *c, int i)
{
    reap(&c->m[i], SIGKILL, 5000);
}

int test_etcd_restart(test_etcd *c, int i)
{
    if (c->m[i].pid)
        return 0;
    if (spawn(c, i, 1) != 0)
        return -1;
    return wait_member(&c->m[i], 20000);
}

void test_etcd_pause(test_etcd *c, int i)
{
    if (c->m[i].pid && !c->m[i].paused) {
        (void)test_proc_stop(c->m[i].pid, 5000);
        c->m[i].paused = 1;
    }
}

void test_etcd_resume(test_etcd *c, int i)
{
    if (c->m[i].pid && c->m[i].paused) {
        kill(c->m[i].pid, SIGCONT);
        c->m[i].paused = 0;
    }
}

/* ---- clients of the members ------------------------------------------------ */

int test_etcd_setup(test_etcd *c, int n, const dlock_client_options *o, dlock_client **cl)
{
    if (test_etcd_start(c, n) != 0)
        return -1;
    const char *url = c->url;
    if (dlock_client_new(cl, &url, 1, o, NULL, 0) != DLOCK_OK) {
        test_etcd_stop(c);
        return -1;
    }
    return 0;
}

void test_etcd_teardown(test_etcd *c, dlock_client *cl)
{
    dlock_client_free(cl);
    test_etcd_stop(c);
}

dlock_client *test_etcd_client(const test_etcd *c, int first, int io_timeout_ms)
{
    char url[sizeof c->url];
    const char *u = c->url;
    if (first >= 0) {
        /* m[i].url is "etcd://host:port": the rest of the list is host:port */
        int n = snprintf(url, sizeof url, "%s", c->m[first].url);
        for (int i = 0; i < c->n; i++)
            if (i != first)
                n += snprintf(url + n, sizeof url - (size_t)n, ",%s", strstr(c->m[i].url, "://") + 3);
        u = url;
    }
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    if (io_timeout_ms > 0)
        o.io_timeout_ms = io_timeout_ms;
    dlock_client *cl = NULL;
    return dlock_client_new(&cl, &u, 1, &o, NULL, 0) == DLOCK_OK ? cl : NULL;
}

int test_etcd_follower(test_etcd *c, int max_ms)
{
    int leader = test_etcd_leader(c, max_ms);
    return leader < 0 ? -1 : (leader + 1) % c->n;
}

int test_etcd_grpc(void)
{
    const char *t = getenv("DLOCK_ETCD_TRANSPORT");
    return t && strcmp(t, "grpc") == 0;
}
