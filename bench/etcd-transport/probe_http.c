/* SPDX-License-Identifier: BSD-3-Clause */
/* The probe's gateway transport: the same requests as JSON POSTs to etcd's
 * HTTP/JSON gateway (/v3/...), with one libcurl easy handle (a kept-alive
 * connection, as dlock's etcd backend keeps), jansson for the bodies and
 * OpenSSL's base64 for keys. */
#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

struct probe_transport {
    CURL *curl;
    struct curl_slist *headers;
    char base[128];
    char *body; /* the last reply */
    size_t len;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    probe_transport *t = arg;
    char *b = realloc(t->body, t->len + size * n + 1);
    if (!b)
        return 0;
    memcpy(b + t->len, p, size * n);
    t->body = b;
    t->len += size * n;
    b[t->len] = '\0';
    return size * n;
}

static probe_transport *h_open(const char *endpoint)
{
    probe_transport *t = calloc(1, sizeof *t);
    if (!t || !(t->curl = curl_easy_init())) {
        free(t);
        return NULL;
    }
    snprintf(t->base, sizeof t->base, "http://%s", endpoint);
    t->headers = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(t->curl, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(t->curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(t->curl, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(t->curl, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(t->curl, CURLOPT_TCP_NODELAY, 1L);
    return t;
}

static void h_close(probe_transport *t)
{
    curl_slist_free_all(t->headers);
    curl_easy_cleanup(t->curl);
    free(t->body);
    free(t);
}

/* POST body (stolen) to path: the reply parsed, or NULL. */
static json_t *post(probe_transport *t, const char *path, json_t *body)
{
    char url[256], *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!text)
        return NULL;
    snprintf(url, sizeof url, "%s%s", t->base, path);
    t->len = 0;
    curl_easy_setopt(t->curl, CURLOPT_URL, url);
    curl_easy_setopt(t->curl, CURLOPT_POSTFIELDS, text);
    CURLcode rc = curl_easy_perform(t->curl);
    free(text);
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || status != 200) {
        fprintf(stderr, "http %s: %s, status %ld\n", path, curl_easy_strerror(rc), status);
        return NULL;
    }
    return json_loadb(t->body, t->len, 0, NULL);
}

static char *b64(const char *s, char *out)
{
    EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)strlen(s));
    return out;
}

/* The gateway writes int64 fields as JSON strings. */
static int64_t num(json_t *v)
{
    return json_is_string(v) ? strtoll(json_string_value(v), NULL, 10) : json_integer_value(v);
}

static int64_t h_grant(probe_transport *t, int64_t ttl_s)
{
    json_t *r = post(t, "/v3/lease/grant", json_pack("{sI}", "TTL", (json_int_t)ttl_s));
    int64_t id = r ? num(json_object_get(r, "ID")) : 0;
    json_decref(r);
    return id;
}

static int h_lock(probe_transport *t, const char *pfx, const char *key, int64_t lease)
{
    char end[256], k64[512], p64[512], e64[512], lease_s[32];
    probe_prefix_end(pfx, end, sizeof end);
    b64(key, k64), b64(pfx, p64), b64(end, e64);
    snprintf(lease_s, sizeof lease_s, "%lld", (long long)lease);
    json_t *owner = json_pack("{s:{ss ss si ss ss}}", "request_range", "key", p64, "range_end", e64,
                              "limit", 1, "sort_order", "ASCEND", "sort_target", "CREATE");
    json_t *txn = json_pack(
        "{s:[{ss ss ss si}] s:[{s:{ss ss}} O] s:[{s:{ss}} o]}", "compare", "result", "EQUAL",
        "target", "CREATE", "key", k64, "create_revision", 0, "success", "request_put", "key", k64,
        "lease", lease_s, owner, "failure", "request_range", "key", k64, owner);
    json_t *r = post(t, "/v3/kv/txn", txn);
    if (!r)
        return -1;
    json_t *rs = json_object_get(r, "responses");
    int64_t mine = num(json_object_get(json_object_get(r, "header"), "revision"));
    if (!json_is_true(json_object_get(r, "succeeded")))
        mine = num(json_object_get(
            json_array_get(json_object_get(json_object_get(json_array_get(rs, 0), "response_range"),
                                           "kvs"),
                           0),
            "create_revision"));
    json_t *kvs =
        json_object_get(json_object_get(json_array_get(rs, 1), "response_range"), "kvs");
    int ours = json_array_size(kvs) == 0 ||
               num(json_object_get(json_array_get(kvs, 0), "create_revision")) == mine;
    json_decref(r);
    return ours;
}

static int h_unlock(probe_transport *t, const char *key)
{
    char k64[512];
    json_t *r = post(t, "/v3/kv/deleterange", json_pack("{ss}", "key", b64(key, k64)));
    if (!r)
        return -1;
    json_decref(r);
    return 0;
}

const probe_ops probe_http_ops = {"http", h_open, h_grant, h_lock, h_unlock, h_close};
