/* SPDX-License-Identifier: BSD-3-Clause */
/* TLS to etcd (etcds:// URLs, or the tls option): the client's tls_*
 * options as the transport keeps them, set on every curl handle it
 * makes, and curl's TLS failures told apart as DLOCK_ETLS. libcurl does
 * the TLS (its OpenSSL); nothing here reads or writes a socket.
 *
 * The options mean what they mean for Redis (include/dlock.h): the files
 * are checked at dlock_client_new() with the same rules and messages (by
 * loading them once, src/redis/tls.h), and a member is never talked to in
 * plain text once TLS is asked for. tls_server_name is both the name sent
 * as SNI and the one the certificate must hold: the request goes to
 * https://NAME:PORT and curl connects to the member's own host
 * (CURLOPT_CONNECT_TO), so the host a URL names need not appear in the
 * certificate. Private to the etcd transport. */
#ifndef DLOCK_ETCD_TLS_H
#define DLOCK_ETCD_TLS_H

#include <stddef.h>

#include <curl/curl.h>

#include "common.h"
#include "etcd_url.h"

typedef struct dlock__etcd_tls {
    int on; /* https to every member */
    char *ca_file, *ca_dir, *cert_file, *key_file, *server_name;
    int insecure;
    /* With server_name: per endpoint, "NAME:PORT:HOST:PORT" (curl's
     * CONNECT_TO), read-only once built. */
    struct curl_slist *connect_to[DLOCK__ETCD_MAX_ENDPOINTS];
} dlock__etcd_tls;

/* TLS for the endpoints of *u when they are etcds:// or o->tls is set
 * (then every endpoint becomes https://; with tls_server_name its URL
 * names that server). Copies what it keeps of o. DLOCK_OK (also when
 * there is no TLS: t->on is 0), DLOCK_EINVAL (a TLS file that cannot be
 * loaded, a certificate without its key; err says which), DLOCK_ENOMEM.
 * On error t holds nothing to free. */
int dlock__etcd_tls_init(dlock__etcd_tls *t, dlock__etcd_url *u, const dlock_client_options *o,
                         char *err, size_t err_len);
void dlock__etcd_tls_clear(dlock__etcd_tls *t);

/* Set the TLS options on c (after curl_easy_reset) for endpoint ep; with
 * TLS off, plain http only. */
void dlock__etcd_tls_apply(const dlock__etcd_tls *t, CURL *c, size_t ep);

/* Whether the exchange on c that ended with curl's result res (its detail
 * message curl_err; sent: the request went out) is a TLS failure: a
 * handshake, a certificate not verified, a member that refused our client
 * certificate or wanted one (its alert read, or a new session it ended
 * before answering, the request unsent). If so, DLOCK_ETLS with why set
 * (a verification failure says "TLS certificate verification failed: "
 * and curl's reason, as Redis says OpenSSL's); else DLOCK_OK. Nothing
 * was applied: the next member is tried (etcd_http.h). */
int dlock__etcd_tls_failure(CURL *c, CURLcode res, const char *curl_err, int sent, char *why,
                            size_t why_len);

#endif
