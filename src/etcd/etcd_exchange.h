/* SPDX-License-Identifier: BSD-3-Clause */
/* What etcd_http.c (the client's transport), etcd_request.c (a POST as a
 * request on a loop, with failover and authentication) and etcd_watch.c
 * (a watch stream on a loop) share: the client's transport state, the
 * pool of transfers, one exchange's set-up and outcome, and the token
 * (all implemented in etcd_http.c). Private to the etcd transport. */
#ifndef DLOCK_ETCD_EXCHANGE_H
#define DLOCK_ETCD_EXCHANGE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include <curl/curl.h>
#include <jansson.h>

#include "etcd_tls.h"
#include "etcd_transfer.h"
#include "etcd_url.h"

typedef struct dlock__etcd dlock__etcd; /* as etcd_http.h names it */

struct dlock__etcd {
    dlock__etcd_url url;
    dlock__etcd_tls tls; /* t.on: https to every member */
    int connect_timeout_ms, io_timeout_ms;
    pthread_mutex_t mu; /* idle, n_idle, token */
    dlock__etcd_transfer *idle;
    size_t n_idle, max_idle; /* the pool keeps max_idle at most (pool_size) */
    char *token; /* authentication token; NULL before the first */
    _Atomic size_t current; /* the endpoint that answered last */
    struct dlock__etcd_grpc *grpc; /* the unary requests over gRPC, or NULL */
};

/* Where an exchange's reply goes. */
typedef struct dlock__etcd_sink {
    char *buf;
    size_t len, cap;
    int overflow;
    /* streaming */
    int (*on_msg)(json_t *result, void *arg);
    void *arg;
    int stop;         /* on_msg said done */
    long stream_code; /* an error message in the stream */
    char stream_msg[200];
    int stream_bad;   /* a line that is not JSON */
} dlock__etcd_sink;

/* A pooled transfer (keeps its connection), or a new one; NULL out of
 * memory. put: back to the pool, or freed (its connection closed) when
 * the pool holds max_idle already; unbound from its loop first, and not
 * touched again by the caller. Thread-safe. */
dlock__etcd_transfer *dlock__etcd_handle_get(dlock__etcd *e);
void dlock__etcd_handle_put(dlock__etcd *e, dlock__etcd_transfer *h);

/* Failures that another member may not have: DLOCK_EIO, DLOCK_EUNKNOWN,
 * DLOCK_EBUSY, DLOCK_ETLS. */
int dlock__etcd_retryable(int rc);

/* Set up h->easy to POST body to path on endpoint ep (token: the
 * Authorization header, or NULL), the reply into s. *hdrs is the
 * exchange's, for _finish(). DLOCK_OK or DLOCK_ENOMEM. */
int dlock__etcd_exchange_begin(dlock__etcd *e, dlock__etcd_transfer *h, size_t ep,
                               const char *path, const char *body, size_t body_len,
                               const char *token, dlock__etcd_sink *s,
                               struct curl_slist **hdrs);
/* The exchange is over with rc (the transfer's: DLOCK_OK when curl
 * completed it; DLOCK_ETIMEDOUT, DLOCK_ECANCELED or DLOCK_ENOMEM are
 * returned as they are): takes h->easy out of the multi, frees hdrs, and
 * maps curl's result (h->res): DLOCK_OK, DLOCK_EIO (nothing sent),
 * DLOCK_EUNKNOWN, DLOCK_EPROTO (reply too large), DLOCK_ETLS (etcd_tls.h),
 * with why. */
int dlock__etcd_exchange_finish(dlock__etcd_transfer *h, int rc, dlock__etcd_sink *s,
                                struct curl_slist *hdrs, int *sent, long *http_code,
                                char *why, size_t why_len);
/* A complete reply as an object (*out, the caller's) or an error. */
int dlock__etcd_decode(dlock__etcd_sink *s, long http_code, json_t **out, long *server_code,
                       char *why, size_t why_len);

/* /v3/auth/authenticate: its body (NULL out of memory; _free wipes it),
 * and its reply (decoded) taken as the client's token. */
char *dlock__etcd_auth_body(dlock__etcd *e);
void dlock__etcd_auth_body_free(char *body);
int dlock__etcd_auth_take(dlock__etcd *e, json_t *rep, char *why, size_t why_len);
/* The token to send, copied into buf ("" when there is none yet). */
void dlock__etcd_token_copy(dlock__etcd *e, char *buf, size_t len);
/* Forget the token when it is still `stale` (the member said it is): a
 * request that already took a new one in the meantime keeps it, and the
 * others use it rather than authenticate again. */
void dlock__etcd_token_drop(dlock__etcd *e, const char *stale);

#endif
