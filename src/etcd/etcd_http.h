/* SPDX-License-Identifier: BSD-3-Clause */
/* Transport to etcd's v3 HTTP/JSON gateway: libcurl for HTTP, jansson for
 * JSON (neither is ours to write). One dlock__etcd per client holds the
 * endpoints, a pool of reusable curl handles (each keeps its keep-alive
 * connection) and the authentication token.
 *
 * A POST is a request on a loop (etcd_request.h): the pooled transfer's
 * sockets and curl's timeout are records on it, through curl's
 * multi_socket interface (etcd_transfer.c), and so is each exchange's
 * deadline. The blocking calls below run it on a private loop of their
 * own (loop_poll.h), with the cancel fd as one more record; the watchdog
 * runs it on its loop (etcd_renew.h). Nothing waits inside curl.
 *
 * Every request is a POST of a JSON body to one path. A call fails over
 * across the endpoints, starting with the last one that answered, until it
 * has an answer, has tried each endpoint once, or its deadline passes.
 * Retrying on another member is only done for failures that left nothing
 * applied or requests that are idempotent: the etcd lock only sends
 * idempotent ones (see etcd_lock.c), so every call here may be retried.
 *
 * Error mapping (gRPC code of the gateway's error reply, or transport):
 *   - connect refused or timed out, nothing sent       -> DLOCK_EIO
 *   - a TLS handshake or verification that failed, a
 *     client certificate the member refused             -> DLOCK_ETLS
 *   - sent, then no reply in time or connection broken  -> DLOCK_EUNKNOWN
 *   - 14 UNAVAILABLE "request timed out", "leader changed",
 *     4 DEADLINE_EXCEEDED, 1 CANCELED                    -> DLOCK_EUNKNOWN
 *   - 14 UNAVAILABLE (no leader, stopping, ...),
 *     8 RESOURCE_EXHAUSTED "too many requests",
 *     3 "revision of auth store is old" (after the one
 *     new authentication it causes, see below)          -> DLOCK_EBUSY
 *   - 16 UNAUTHENTICATED, 7 PERMISSION_DENIED,
 *     3 INVALID_ARGUMENT about authentication             -> DLOCK_EAUTH
 *   - 5 NOT_FOUND "requested lease not found"            -> DLOCK_EEXPIRED
 *   - any other error reply (database space exceeded,...) -> DLOCK_EREFUSED
 *   - a body that is not the JSON etcd sends             -> DLOCK_EPROTO
 * Retried on the next endpoint: DLOCK_EIO, DLOCK_EUNKNOWN, DLOCK_EBUSY,
 * DLOCK_ETLS (the same refusal from every member is the call's answer).
 * A stale token (dlock__etcd_token_stale: 16 UNAUTHENTICATED, or the auth
 * store changed since it was issued) is dropped, and the request sent
 * again once on the same endpoint after a new authentication. */
#ifndef DLOCK_ETCD_HTTP_H
#define DLOCK_ETCD_HTTP_H

#include <stdint.h>

#include <jansson.h>

#include "common.h"
#include "error.h"
#include "etcd_json.h"
#include "etcd_url.h"

typedef struct dlock__etcd dlock__etcd;

/* Takes the endpoints and credentials of *url (which it empties). Its
 * pool keeps DLOCK__ETCD_POOL_DEFAULT idle transfers (each with its
 * keep-alive connection) until dlock__etcd_pool_size() says otherwise. */
#define DLOCK__ETCD_POOL_DEFAULT 4
int dlock__etcd_new(dlock__etcd **out, dlock__etcd_url *url,
                    int connect_timeout_ms, int io_timeout_ms);
/* TLS to every member when the URLs were etcds:// or o->tls is set, with
 * o's tls_* options (etcd_tls.h); nothing when neither. Call before the
 * first request. DLOCK_OK, DLOCK_EINVAL (a TLS file that cannot be loaded;
 * err says which), DLOCK_ENOMEM. */
int dlock__etcd_use_tls(dlock__etcd *e, const dlock_client_options *o, char *err,
                        size_t err_len);
/* The unary requests over gRPC rather than the gateway (etcd_grpc.h);
 * after dlock__etcd_use_tls(), before the first request. DLOCK_OK,
 * DLOCK_ENOTSUP (a build without gRPC, or TLS: err says why),
 * DLOCK_ENOMEM. */
int dlock__etcd_use_grpc(dlock__etcd *e, char *err, size_t err_len);
/* How many idle transfers the pool keeps (the client's pool_size); call
 * before the first request. */
void dlock__etcd_pool_size(dlock__etcd *e, size_t max_idle);
void dlock__etcd_free(dlock__etcd *e);
/* The same in a child of fork(): the mutex may be held by a thread that
 * was not copied, so it is neither taken nor destroyed; the curl handles
 * close this process's copies of the sockets (plain HTTP: nothing is
 * sent). */
void dlock__etcd_free_inherited(dlock__etcd *e);

size_t dlock__etcd_endpoint_count(const dlock__etcd *e);
int dlock__etcd_io_timeout_ms(const dlock__etcd *e);
/* The deadline of a call that may try every endpoint once: io_timeout_ms
 * per endpoint from now. A shorter one leaves the members after a silent
 * one untried. */
int64_t dlock__etcd_call_deadline(const dlock__etcd *e);

/* POST body to path; on DLOCK_OK *out is the reply object (caller
 * json_decref()s). deadline_ns bounds the whole call; cancel_fd (or -1)
 * readable ends it with DLOCK_ECANCELED. On error, err says which endpoint
 * and what it said, and *server_code (may be NULL) the gRPC code of an
 * error reply (0 otherwise). *unknown_before (may be NULL): 1 when an
 * earlier copy of this request went to a member that never answered, so
 * the reply may describe the state after that copy ran. Thread-safe. */
int dlock__etcd_post(dlock__etcd *e, const char *path, json_t *body,
                     json_t **out, int64_t deadline_ns, int cancel_fd,
                     dlock__errbuf *err, long *server_code, int *unknown_before);

#endif
