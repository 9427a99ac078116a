/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "etcd_tls.h"
#include "tls.h"

void dlock__etcd_tls_clear(dlock__etcd_tls *t)
{
    dlock__free(t->ca_file);
    dlock__free(t->ca_dir);
    dlock__free(t->cert_file);
    dlock__free(t->key_file);
    dlock__free(t->server_name);
    for (size_t i = 0; i < DLOCK__ETCD_MAX_ENDPOINTS; i++)
        curl_slist_free_all(t->connect_to[i]);
    memset(t, 0, sizeof *t);
}

/* A copy of an optional string: 0, or -1 out of memory. */
static int copy_opt(char **to, const char *from)
{
    *to = NULL;
    return from && !(*to = dlock__strdup(from)) ? -1 : 0;
}

/* With a server name, endpoint i's URL names it and curl connects to the
 * member's host: "https://NAME:PORT" and "NAME:PORT:HOST:PORT" (an IPv6
 * address as a name goes in brackets, as the hosts already do). */
static int aim_at_server_name(dlock__etcd_tls *t, dlock__etcd_url *u, size_t i)
{
    const char *name = u->name[i], *colon = strrchr(name, ':');
    int v6 = strchr(t->server_name, ':') != NULL;
    const char *open = v6 ? "[" : "", *close = v6 ? "]" : "";
    size_t n = strlen(t->server_name) + strlen(name) * 2 + 16;
    char *ep = dlock__malloc(n), *line = dlock__malloc(n);
    struct curl_slist *l = NULL;
    if (ep && line) {
        snprintf(ep, n, "https://%s%s%s%s", open, t->server_name, close, colon);
        snprintf(line, n, "%s%s%s%s:%s", open, t->server_name, close, colon, name);
        l = curl_slist_append(NULL, line);
    }
    dlock__free(line);
    if (!l) {
        dlock__free(ep);
        return DLOCK_ENOMEM;
    }
    dlock__free(u->endpoint[i]);
    u->endpoint[i] = ep;
    t->connect_to[i] = l;
    return DLOCK_OK;
}

int dlock__etcd_tls_init(dlock__etcd_tls *t, dlock__etcd_url *u, const dlock_client_options *o,
                         char *err, size_t err_len)
{
    memset(t, 0, sizeof *t);
    if (!u->tls && !o->tls)
        return DLOCK_OK;
    /* The files are loaded once here, as the Redis side loads them, so a
     * wrong path or a key that is not the certificate's fails now, with
     * the same message; curl reads them again for each connection. */
    dlock__tls_ctx *check = NULL;
    int rc = dlock__tls_ctx_new(&check, o, err, err_len);
    dlock__tls_ctx_free(check);
    if (rc != DLOCK_OK)
        return rc;
    if (dlock__etcd_url_use_tls(u) != DLOCK_OK || copy_opt(&t->ca_file, o->tls_ca_file) ||
        copy_opt(&t->ca_dir, o->tls_ca_dir) || copy_opt(&t->cert_file, o->tls_cert_file) ||
        copy_opt(&t->key_file, o->tls_key_file) ||
        copy_opt(&t->server_name, o->tls_server_name && o->tls_server_name[0]
                                      ? o->tls_server_name : NULL))
        goto oom;
    for (size_t i = 0; t->server_name && i < u->n; i++)
        if (aim_at_server_name(t, u, i) != DLOCK_OK)
            goto oom;
    t->insecure = o->tls_insecure;
    t->on = 1;
    return DLOCK_OK;
oom:
    dlock__etcd_tls_clear(t);
    snprintf(err, err_len, "out of memory");
    return DLOCK_ENOMEM;
}

void dlock__etcd_tls_apply(const dlock__etcd_tls *t, CURL *c, size_t ep)
{
    if (!t->on) {
#if LIBCURL_VERSION_NUM >= 0x075500
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
#else
        curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTP);
#endif
        return;
    }
    /* https only: never plain text once TLS was asked for. */
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTPS);
#endif
    curl_easy_setopt(c, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    /* HTTP/1.1 as over plain TCP (curl would offer h2 in the handshake):
     * one protocol for the gateway, its streams framed alike. */
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    /* A CA directory alone is the only trust, as for Redis: no default
     * bundle beside it. Neither: curl's default, the system store. */
    if (t->ca_file || t->ca_dir) {
        curl_easy_setopt(c, CURLOPT_CAINFO, t->ca_file);
        curl_easy_setopt(c, CURLOPT_CAPATH, t->ca_dir);
    }
    if (t->cert_file) {
        curl_easy_setopt(c, CURLOPT_SSLCERT, t->cert_file);
        curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(c, CURLOPT_SSLKEY, t->key_file);
        curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    }
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, t->insecure ? 0L : 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, t->insecure ? 0L : 2L);
    if (t->connect_to[ep])
        curl_easy_setopt(c, CURLOPT_CONNECT_TO, t->connect_to[ep]);
}

/* A brand-new TLS session the member ended before it answered anything,
 * our request not sent: under TLS 1.3 the client's side of the handshake
 * is over before the member looked at the client certificate, so its
 * refusal comes after it; the alert saying so is lost when the member's
 * reset overtakes it (a write fails with EPIPE or ECONNRESET). */
static int new_session_cut(CURL *c, CURLcode res, int sent)
{
    long connects = 0, code = 0;
    char *scheme = NULL;
    curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(c, CURLINFO_SCHEME, &scheme);
    return connects > 0 && code == 0 && scheme && strcasecmp(scheme, "https") == 0 &&
           (res == CURLE_SEND_ERROR || (res == CURLE_RECV_ERROR && !sent));
}

int dlock__etcd_tls_failure(CURL *c, CURLcode res, const char *curl_err, int sent, char *why,
                            size_t why_len)
{
    const char *detail = curl_err && curl_err[0] ? curl_err : curl_easy_strerror(res);
    switch (res) {
    case CURLE_PEER_FAILED_VERIFICATION:
        /* "SSL certificate problem: unable to get local issuer
         * certificate" (a wrong CA), "SSL: no alternative certificate
         * subject name matches target host name ..." (a name mismatch) */
        snprintf(why, why_len, "TLS certificate verification failed: %s", detail);
        return DLOCK_ETLS;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_USE_SSL_FAILED:
        snprintf(why, why_len, "TLS handshake failed: %s", detail);
        return DLOCK_ETLS;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        /* The member's alert, read: "tlsv13 alert certificate required",
         * "sslv3 alert bad certificate" (curl says so only in words). */
        if (strstr(detail, "SSL") && strstr(detail, "alert")) {
            snprintf(why, why_len, "TLS: the member refused the session: %s", detail);
            return DLOCK_ETLS;
        }
        if (new_session_cut(c, res, sent)) {
            /* curl's detail is about the socket it found closed */
            snprintf(why, why_len, "TLS: the member ended the new session before answering "
                     "(does it want a client certificate, or refuse ours?): %s",
                     curl_easy_strerror(res));
            return DLOCK_ETLS;
        }
        return DLOCK_OK;
    default:
        return DLOCK_OK;
    }
}
