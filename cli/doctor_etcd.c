/* SPDX-License-Identifier: BSD-3-Clause */
/* The doctor's checks of an etcd cluster, through the v3 HTTP/JSON
 * gateway as the etcd backend talks to it: each member's health and
 * version, a majority healthy, and the shortest lease the cluster grants
 * (a 1 s lease is asked for, its granted TTL read, and it is revoked). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

int doc_is_etcd(const char *url)
{
    return !strncmp(url, "etcd://", 7) || !strncmp(url, "etcds://", 8);
}

#ifndef DLOCK_WITH_ETCD

int doc_etcd_check(const char *url, const doc_settings *s)
{
    char red[1024];
    (void)s;
    doc_add(cli_redact_url(url, red, sizeof red), "etcd", DOC_FAIL,
            "this dlock was built without the etcd backend", "rebuild with -DDLOCK_WITH_ETCD=ON",
            "etcd:// is not supported here");
    return 0;
}

#else

#include <curl/curl.h>
#include <jansson.h>

typedef struct buf {
    char data[65536];
    size_t len;
} buf;

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    buf *b = arg;
    size_t take = size * n;
    if (take > sizeof b->data - 1 - b->len)
        take = sizeof b->data - 1 - b->len;
    memcpy(b->data + b->len, p, take);
    b->len += take;
    b->data[b->len] = '\0';
    return size * n;
}

/* Over TLS (etcds:// or --tls): the --cacert, --cacertdir, --cert, --key,
 * --sni and --insecure options as the library applies them: with --sni
 * the URL names that server and curl connects to the endpoint's host. */
static int tls_on;

static void tls_setup(CURL *h, const char *endpoint, const char *path, const doc_settings *s,
                      char *url, size_t url_len, struct curl_slist **connect_to)
{
    const dlock_client_options *o = &s->g->copts;
    const char *colon = strrchr(endpoint, ':');
    if (!tls_on) {
        snprintf(url, url_len, "http://%s%s", endpoint, path);
        return;
    }
    if (o->tls_server_name && colon) {
        char line[600];
        snprintf(url, url_len, "https://%s%s%s", o->tls_server_name, colon, path);
        snprintf(line, sizeof line, "%s%s:%s", o->tls_server_name, colon, endpoint);
        *connect_to = curl_slist_append(NULL, line);
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, *connect_to);
    } else {
        snprintf(url, url_len, "https://%s%s", endpoint, path);
    }
    if (o->tls_ca_file || o->tls_ca_dir) {
        curl_easy_setopt(h, CURLOPT_CAINFO, o->tls_ca_file);
        curl_easy_setopt(h, CURLOPT_CAPATH, o->tls_ca_dir);
    }
    if (o->tls_cert_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, o->tls_cert_file);
        curl_easy_setopt(h, CURLOPT_SSLKEY, o->tls_key_file);
    }
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, o->tls_insecure ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, o->tls_insecure ? 0L : 2L);
}

/* POST body (or GET when body is NULL) to http(s)://endpoint/path; the
 * parsed JSON reply or NULL with err set. */
static json_t *call(const char *endpoint, const char *path, const char *body, const char *token,
                    const doc_settings *s, char *err, size_t len)
{
    CURL *h = curl_easy_init();
    buf *b = calloc(1, sizeof *b);
    char url[600], auth[1100], curl_err[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdr = NULL, *connect_to = NULL;
    json_t *j = NULL;
    long code = 0;
    if (!h || !b) {
        snprintf(err, len, "out of memory");
        goto out;
    }
    tls_setup(h, endpoint, path, s, url, sizeof url, &connect_to);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)s->g->copts.connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                     (long)(s->g->copts.connect_timeout_ms + s->g->copts.io_timeout_ms));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    if (body) {
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    }
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: %s", token);
        hdr = curl_slist_append(hdr, auth);
    }
    if (hdr)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
        snprintf(err, len, "%s", curl_err[0] ? curl_err : curl_easy_strerror(rc));
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    json_error_t je;
    j = json_loadb(b->data, b->len, 0, &je);
    if (code != 200 || !j) {
        const char *msg = j ? json_string_value(json_object_get(j, "error")) : NULL;
        snprintf(err, len, "HTTP %ld%s%s", code, msg ? ": " : "", msg ? msg : "");
        json_decref(j);
        j = NULL;
    }
out:
    curl_slist_free_all(hdr);
    curl_slist_free_all(connect_to);
    curl_easy_cleanup(h);
    free(b);
    return j;
}

/* A number etcd's gateway sends as a string ("5") or a number. */
static long long json_num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? atoll(json_string_value(v)) : json_is_integer(v) ? json_integer_value(v) : 0;
}

#define MAX_EP 16

int doc_etcd_check(const char *url, const doc_settings *s)
{
    char red[1024], eps[MAX_EP][256], user[256] = "", pass[256] = "", err[512];
    size_t n = 0;
    const char *node = cli_redact_url(url, red, sizeof red);
    tls_on = !strncmp(url, "etcds://", 8) || s->g->copts.tls;
    const char *p = strstr(url, "://") + 3, *end = p + strcspn(p, "/?#"), *at = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == '@')
            at = q;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        snprintf(user, sizeof user, "%.*s", (int)(colon ? colon - p : at - p), p);
        if (colon)
            snprintf(pass, sizeof pass, "%.*s", (int)(at - colon - 1), colon + 1);
        p = at + 1;
    }
    if (s->g->copts.username)
        snprintf(user, sizeof user, "%s", s->g->copts.username);
    if (s->g->copts.password)
        snprintf(pass, sizeof pass, "%s", s->g->copts.password);
    while (p < end && n < MAX_EP) {
        size_t k = strcspn(p, ",/?#");
        snprintf(eps[n++], sizeof eps[0], "%.*s", (int)k, p);
        p += k + (p[k] == ',');
        if (p[-1] != ',')
            break;
    }
    /* Further -r HOST:PORT arguments after an etcd:// URL are endpoints too. */
    for (size_t i = 0; i < s->g->n_urls && n < MAX_EP; i++)
        if (!strstr(s->g->urls[i], "://"))
            snprintf(eps[n++], sizeof eps[0], "%s", s->g->urls[i]);

    curl_global_init(CURL_GLOBAL_DEFAULT);
    size_t healthy = 0;
    const char *good = NULL;
    char token[1024] = "";
    for (size_t i = 0; i < n; i++) {
        char who[300];
        snprintf(who, sizeof who, "%s://%s", tls_on ? "etcds" : "etcd", eps[i]);
        json_t *st = call(eps[i], "/v3/maintenance/status", "{}", NULL, s, err, sizeof err);
        if (!st) {
            doc_add(who, "member", DOC_FAIL, "an unreachable member cannot serve locks; "
                    "losing a majority stops every lock", "check the member and its address",
                    "unreachable or unhealthy: %s", err);
            continue;
        }
        const char *ver = json_string_value(json_object_get(st, "version"));
        json_t *errs = json_object_get(st, "errors");
        long long leader = json_num(st, "leader");
        if (json_array_size(errs) > 0 || leader == 0) {
            doc_add(who, "member", DOC_FAIL, "a member without a leader or with errors does not "
                    "serve linearizable requests", "check the member's log and its peers",
                    "etcd %s: %s", ver ? ver : "?",
                    leader == 0 ? "no leader" : json_string_value(json_array_get(errs, 0)));
        } else {
            healthy++;
            good = good ? good : eps[i];
            doc_add(who, "member", DOC_OK, NULL, NULL, "etcd %s, healthy, leader %llx, db %lld "
                    "bytes", ver ? ver : "?", (unsigned long long)leader,
                    json_num(st, "dbSize"));
        }
        json_decref(st);
    }
    if (n > 1 && healthy <= n / 2)
        doc_add(node, "quorum", DOC_FAIL, "etcd needs a majority of its members to grant or "
                "release anything", "bring members back", "%zu of %zu members healthy", healthy, n);
    if (!good) {
        curl_global_cleanup();
        return 0;
    }
    if (user[0]) {
        json_t *body = json_pack("{ssss}", "name", user, "password", pass);
        char *text = json_dumps(body, JSON_COMPACT);
        json_t *a = call(good, "/v3/auth/authenticate", text, NULL, s, err, sizeof err);
        free(text);
        json_decref(body);
        const char *tok = a ? json_string_value(json_object_get(a, "token")) : NULL;
        if (!tok) {
            doc_add(node, "auth", DOC_FAIL, "every lock request is refused (exit 77)",
                    "check --user and the password", "authentication refused: %s", err);
            json_decref(a);
            curl_global_cleanup();
            return (int)healthy;
        }
        snprintf(token, sizeof token, "%s", tok);
        json_decref(a);
    }
    /* The lease minimum: etcd raises a shorter TTL to it, so a lock asked
     * for with a shorter lease outlives its holder's crash for longer. */
    json_t *g = call(good, "/v3/lease/grant", "{\"TTL\":1}", token[0] ? token : NULL, s, err,
                     sizeof err);
    if (!g) {
        doc_add(node, "lease", DOC_FAIL, "every lock is a lease", "grant the user lease rights",
                "LeaseGrant refused: %s", err);
    } else {
        long long ttl_s = json_num(g, "TTL");
        char body[128];
        snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", json_num(g, "ID"));
        json_t *rv = call(good, "/v3/lease/revoke", body, token[0] ? token : NULL, s, err,
                          sizeof err);
        json_decref(rv);
        if (ttl_s * 1000 > s->ttl_ms)
            doc_add(node, "lease", DOC_WARN, "etcd raises a shorter lease to its minimum: a "
                    "lock whose holder crashed stays taken that long, not for --ttl",
                    "use a TTL of at least the minimum, or lower etcd's --election-timeout",
                    "a 1s lease was granted for %llds: the TTL %lldms is below etcd's minimum",
                    ttl_s, (long long)s->ttl_ms);
        else
            doc_add(node, "lease", DOC_OK, NULL, NULL, "a 1s lease was granted for %llds (the "
                    "minimum); the TTL %lldms is above it", ttl_s, (long long)s->ttl_ms);
        json_decref(g);
    }
    curl_global_cleanup();
    return (int)healthy;
}

#endif
