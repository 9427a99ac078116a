/* SPDX-License-Identifier: BSD-3-Clause */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "clock.h"
#include "common.h"
#include "etcd_http.h"
#include "etcd_exchange.h"
#include "etcd_grpc.h"
#include "etcd_transfer.h"

/* A reply body larger than this is not something etcd sends us. */
#define BODY_MAX (16u << 20)

typedef dlock__etcd_transfer handle;
typedef dlock__etcd_sink sink;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;

static void curl_init_once(void)
{
    curl_ok = curl_global_init(CURL_GLOBAL_ALL) == CURLE_OK;
}

int dlock__etcd_new(dlock__etcd **out, dlock__etcd_url *url,
                    int connect_timeout_ms, int io_timeout_ms)
{
    *out = NULL;
    DLOCK__CHECK_PTHREAD(pthread_once(&curl_once, curl_init_once));
    if (!curl_ok)
        return DLOCK_ENOMEM;
    dlock__etcd *e = dlock__calloc(1, sizeof *e);
    if (!e)
        return DLOCK_ENOMEM;
    e->url = *url;
    memset(url, 0, sizeof *url);
    e->connect_timeout_ms = connect_timeout_ms;
    e->io_timeout_ms = io_timeout_ms;
    e->max_idle = DLOCK__ETCD_POOL_DEFAULT;
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&e->mu, NULL));
    *out = e;
    return DLOCK_OK;
}

int dlock__etcd_use_tls(dlock__etcd *e, const dlock_client_options *o, char *err,
                        size_t err_len)
{
    return dlock__etcd_tls_init(&e->tls, &e->url, o, err, err_len);
}

int dlock__etcd_use_grpc(dlock__etcd *e, char *err, size_t err_len)
{
    return dlock__etcd_grpc_new(&e->grpc, &e->url, &e->tls, e->connect_timeout_ms, err, err_len);
}

void dlock__etcd_pool_size(dlock__etcd *e, size_t max_idle)
{
    e->max_idle = max_idle;
}

static void free_all(dlock__etcd *e, int forked);

void dlock__etcd_free(dlock__etcd *e)
{
    free_all(e, 0);
}

void dlock__etcd_free_inherited(dlock__etcd *e)
{
    free_all(e, 1);
}

static void free_all(dlock__etcd *e, int forked)
{
    if (!e)
        return;
    while (e->idle) {
        handle *h = e->idle;
        e->idle = h->next;
        if (forked)
            dlock__etcd_transfer_free_inherited(h);
        else
            dlock__etcd_transfer_free(h);
    }
    e->n_idle = 0;
    if (e->token)
        memset(e->token, 0, strlen(e->token));
    dlock__free(e->token);
    if (forked)
        dlock__etcd_grpc_free_inherited(e->grpc);
    else
        dlock__etcd_grpc_free(e->grpc);
    dlock__etcd_url_clear(&e->url);
    dlock__etcd_tls_clear(&e->tls);
    if (!forked)
        DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&e->mu));
    dlock__free(e);
}

size_t dlock__etcd_endpoint_count(const dlock__etcd *e)
{
    return e->url.n;
}

int dlock__etcd_io_timeout_ms(const dlock__etcd *e)
{
    return e->io_timeout_ms;
}

handle *dlock__etcd_handle_get(dlock__etcd *e)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&e->mu));
    handle *h = e->idle;
    if (h) {
        e->idle = h->next;
        e->n_idle--;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&e->mu));
    return h ? h : dlock__etcd_transfer_new();
}

/* Pooled handles keep their connection (curl reuses it); a handle whose
 * transfer was cut short has had its connection closed by curl. The pool
 * keeps pool_size of them, as a Redis node's does: without a cap it would
 * keep one connection for every request ever in flight at once (10,000
 * renewals in one round: 10,000 sockets, for good). */
void dlock__etcd_handle_put(dlock__etcd *e, handle *h)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&e->mu));
    int keep = e->n_idle < e->max_idle;
    if (keep) {
        h->next = e->idle;
        e->idle = h;
        e->n_idle++;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&e->mu));
    if (!keep)
        dlock__etcd_transfer_free(h);
}

int dlock__etcd_retryable(int rc)
{
    /* A TLS failure applied nothing, and another member may hold a
     * certificate that verifies (one renewed before the others). */
    return rc == DLOCK_EIO || rc == DLOCK_EUNKNOWN || rc == DLOCK_EBUSY || rc == DLOCK_ETLS;
}

/* ---- one request on one endpoint ------------------------------------------ */

static int sink_append(sink *s, const char *p, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 1024;
        while (cap < s->len + n + 1)
            cap *= 2;
        if (cap > BODY_MAX) {
            s->overflow = 1;
            return -1;
        }
        char *b = dlock__realloc(s->buf, cap);
        if (!b) {
            s->overflow = 1;
            return -1;
        }
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    s->buf[s->len] = '\0';
    return 0;
}

/* The gateway frames a stream as one JSON object per line. */
static void sink_lines(sink *s)
{
    char *start = s->buf;
    char *nl;
    while (!s->stop && (nl = memchr(start, '\n', s->len - (size_t)(start - s->buf)))) {
        json_error_t jerr;
        json_t *msg = json_loadb(start, (size_t)(nl - start), 0, &jerr);
        start = nl + 1;
        if (!msg || !json_is_object(msg)) {
            s->stream_bad = 1;
            s->stop = 1;
            json_decref(msg);
            break;
        }
        json_t *err = json_object_get(msg, "error");
        json_t *res = json_object_get(msg, "result");
        if (err) {
            /* {"error":{"grpc_code":N,"message":"..."}} */
            json_t *c = json_object_get(err, "grpc_code");
            json_t *m = json_object_get(err, "message");
            s->stream_code = json_is_integer(c) ? (long)json_integer_value(c) : 2;
            snprintf(s->stream_msg, sizeof s->stream_msg, "%s",
                     json_is_string(m) ? json_string_value(m) : "stream error");
            s->stop = 1;
        } else if (res && s->on_msg(res, s->arg)) {
            s->stop = 1;
        }
        json_decref(msg);
    }
    size_t left = s->len - (size_t)(start - s->buf);
    memmove(s->buf, start, left);
    s->len = left;
    if (s->buf)
        s->buf[left] = '\0';
}

static size_t on_write(char *p, size_t size, size_t n, void *arg)
{
    sink *s = arg;
    size_t total = size * n;
    if (s->stop || sink_append(s, p, total) != 0)
        return 0; /* ends the transfer (CURLE_WRITE_ERROR) */
    if (s->on_msg) {
        sink_lines(s);
        if (s->stop)
            return 0;
    }
    return total;
}

int dlock__etcd_exchange_begin(dlock__etcd *e, handle *h, size_t ep, const char *path,
                               const char *body, size_t body_len, const char *token, sink *s,
                               struct curl_slist **hdrs_out)
{
    char url[600];
    snprintf(url, sizeof url, "%s%s", e->url.endpoint[ep], path);
    struct curl_slist *hdrs = NULL, *t;
    char auth[1100];
    *hdrs_out = NULL;
    /* "Expect:" keeps curl from waiting for a 100 Continue on larger bodies. */
    if (!(t = curl_slist_append(hdrs, "Content-Type: application/json")))
        return DLOCK_ENOMEM;
    hdrs = t;
    if (!(t = curl_slist_append(hdrs, "Expect:")))
        goto oom;
    hdrs = t;
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: %s", token);
        if (!(t = curl_slist_append(hdrs, auth)))
            goto oom;
        hdrs = t;
    }
    CURL *c = h->easy;
    curl_easy_reset(c);
    dlock__etcd_transfer_setup(h);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)body_len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)e->connect_timeout_ms);
    dlock__etcd_tls_apply(&e->tls, c, ep);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    *hdrs_out = hdrs;
    return DLOCK_OK;
oom:
    curl_slist_free_all(hdrs);
    return DLOCK_ENOMEM;
}

/* The exchange's scheme in lower case ("http", "https"; "" unknown). */
static const char *e_scheme(CURL *c)
{
    char *scheme = NULL;
    curl_easy_getinfo(c, CURLINFO_SCHEME, &scheme);
    return !scheme ? "" : strcasecmp(scheme, "https") == 0 ? "https" : "http";
}

int dlock__etcd_exchange_finish(handle *h, int rc, sink *s, struct curl_slist *hdrs,
                                int *sent, long *http_code, char *why, size_t why_len)
{
    CURL *c = h->easy;
    CURLcode res = h->res;
    long req_size = 0;
    curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &req_size);
    *sent = req_size > 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, http_code);
    dlock__etcd_transfer_end(h);
    curl_slist_free_all(hdrs);
    if (rc != DLOCK_OK || s->stop)
        return rc;
    if (res == CURLE_OK)
        return DLOCK_OK;
    if (res == CURLE_WRITE_ERROR && s->overflow) {
        snprintf(why, why_len, "reply too large");
        return s->buf ? DLOCK_EPROTO : DLOCK_ENOMEM;
    }
    if ((rc = dlock__etcd_tls_failure(c, res, h->curl_err, *sent, why, why_len)) != DLOCK_OK)
        return rc;
    snprintf(why, why_len, "%s", curl_easy_strerror(res));
    if (res == CURLE_GOT_NOTHING && strcmp(e_scheme(c), "http") == 0)
        snprintf(why, why_len, "%s (a member that serves TLS answers plain HTTP so: "
                 "etcds:// URLs or the tls option speak TLS)", curl_easy_strerror(res));
    /* Nothing sent: nothing applied. A connect that failed after bytes
     * went out is curl's own resend on a new connection of a request the
     * old one sent (its reply lost): that copy may still land. */
    if (!*sent)
        return DLOCK_EIO;
    return DLOCK_EUNKNOWN;
}

/* Turn a finished exchange into a reply object or an error. */
int dlock__etcd_decode(sink *s, long http_code, json_t **out, long *server_code,
                  char *why, size_t why_len)
{
    json_error_t jerr;
    json_t *j = s->len ? json_loadb(s->buf, s->len, 0, &jerr) : NULL;
    if (!j || !json_is_object(j)) {
        snprintf(why, why_len, "HTTP %ld with a body that is not JSON", http_code);
        json_decref(j);
        return DLOCK_EPROTO;
    }
    json_t *code = json_object_get(j, "code");
    if (http_code != 200 || json_object_get(j, "error")) {
        json_t *m = json_object_get(j, "message");
        if (!json_is_string(m))
            m = json_object_get(j, "error");
        long c = json_is_integer(code) ? (long)json_integer_value(code) : -1;
        snprintf(why, why_len, "%s (code %ld)",
                 json_is_string(m) ? json_string_value(m) : "error", c);
        int rc = c < 0 ? DLOCK_EPROTO : dlock__etcd_map_error(c, json_string_value(m));
        if (server_code)
            *server_code = c;
        json_decref(j);
        return rc;
    }
    *out = j;
    return DLOCK_OK;
}

/* ---- authentication ------------------------------------------------------- */

char *dlock__etcd_auth_body(dlock__etcd *e)
{
    json_t *req = json_pack("{s:s, s:s}", "name", e->url.user, "password",
                            e->url.password);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    return body;
}

void dlock__etcd_auth_body_free(char *body)
{
    if (body)
        memset(body, 0, strlen(body));
    free(body);
}

int dlock__etcd_auth_take(dlock__etcd *e, json_t *rep, char *why, size_t why_len)
{
    json_t *tok = json_object_get(rep, "token");
    if (!json_is_string(tok)) {
        snprintf(why, why_len, "authenticate: no token in the reply");
        return DLOCK_EPROTO;
    }
    char *copy = dlock__strdup(json_string_value(tok));
    if (!copy)
        return DLOCK_ENOMEM;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&e->mu));
    dlock__free(e->token);
    e->token = copy;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&e->mu));
    return DLOCK_OK;
}

/* The token to send, copied into buf ("" when there is none yet). */
void dlock__etcd_token_copy(dlock__etcd *e, char *buf, size_t len)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&e->mu));
    snprintf(buf, len, "%s", e->token ? e->token : "");
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&e->mu));
}

void dlock__etcd_token_drop(dlock__etcd *e, const char *stale)
{
    char *gone = NULL;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&e->mu));
    if (e->token && strcmp(e->token, stale) == 0) {
        gone = e->token;
        e->token = NULL;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&e->mu));
    if (gone)
        memset(gone, 0, strlen(gone));
    dlock__free(gone);
}

/* ---- calls (dlock__etcd_post(): etcd_request.c) --------------------------- */

int64_t dlock__etcd_call_deadline(const dlock__etcd *e)
{
    return dlock__deadline_after_ms((int64_t)e->io_timeout_ms * (int64_t)e->url.n);
}
