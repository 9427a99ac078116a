/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd backend's gRPC transport (issue 38): the unary requests of
 * etcd_request.h sent as gRPC calls through gRPC's C core, with messages
 * from etcd's own .proto files (protoc-c at build time) converted from
 * and to the gateway's JSON (etcd_pbjson.h), so that the backend above
 * builds and reads the same JSON on either transport. Watches stay on
 * the gateway (etcd_watch.c).
 *
 * A client that chose gRPC (DLOCK_ETCD_TRANSPORT=grpc in the environment
 * at dlock_client_new()) has one channel per member, one completion queue, and one
 * thread that polls it while calls that need it are pending (the C core
 * has no fd a loop could poll); a blocking call alone on its private
 * loop polls the queue itself (etcd_grpc_poll.c). Each call has an
 * eventfd (the client's spare, reused call after call) registered on
 * the caller's loop: the poller that takes the
 * call's completion writes it (or, the call's own caller, answers at
 * once), and the loop reads the reply and calls back, so the caller sees
 * its answer on its loop's thread, as it does from curl.
 *
 * A call's record is shared by the loop and its poller until both let
 * go (the loop once it read the answer or cancelled, the poller once it
 * took the completion), and whichever comes second frees it: a call
 * cancelled on the loop (dlock__etcd_gcall_cancel) is cancelled in the C
 * core, and its late completion touches only the record, never the
 * request.
 *
 * TLS (etcds://, or the tls option) is gRPC's SSL credentials with the
 * client's CA, certificate and key files read as PEM, and
 * tls_server_name as the name the member's certificate must hold (and
 * SNI); no CA file: gRPC's default roots.
 *
 * What a failure means, as on the gateway (etcd_http.h): a status a
 * member sent is mapped by dlock__etcd_map_error(); a TLS handshake that
 * failed, or a new TLS session the member ended before it was ready, is
 * DLOCK_ETLS; another transport failure is DLOCK_EIO when the call cannot
 * have reached the member (its channel was never connected while it ran:
 * refused, unreachable, connecting past the deadline), otherwise
 * DLOCK_EUNKNOWN (it may have run). */
#ifndef DLOCK_ETCD_GRPC_H
#define DLOCK_ETCD_GRPC_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common.h"
#include "etcd_url.h"
#include "loop.h"

typedef struct dlock__etcd_grpc dlock__etcd_grpc;
typedef struct dlock__etcd_gcall dlock__etcd_gcall;

/* What a call came to, on the caller's loop. */
typedef struct dlock__etcd_answer {
    int rc;      /* DLOCK_OK: out is the reply */
    json_t *out; /* the gateway's JSON of the reply: the callee's to decref */
    long code;   /* the gRPC status a member sent, or 0 */
    char why[300];
} dlock__etcd_answer;

/* 1 when this build has the gRPC transport. */
int dlock__etcd_grpc_built(void);

/* The transport for the endpoints of u (host:port, plain or TLS as t
 * says), each connect given connect_timeout_ms. DLOCK_OK (*out NULL in
 * a child of fork() of a process that started gRPC's C core, which does
 * not survive fork(): that client keeps the gateway); DLOCK_ENOTSUP
 * (a build without gRPC, or tls_ca_dir or tls_insecure, which gRPC's
 * C core has no way to take: err says so); DLOCK_EINVAL (a TLS file
 * that cannot be read); DLOCK_ENOMEM. */
struct dlock__etcd_tls;
int dlock__etcd_grpc_new(dlock__etcd_grpc **out, const dlock__etcd_url *u,
                         const struct dlock__etcd_tls *t, int connect_timeout_ms, char *err,
                         size_t err_len);
/* Ends the thread and the channels; every call must be over (answered
 * or cancelled). */
void dlock__etcd_grpc_free(dlock__etcd_grpc *g);
/* In a child of fork(): nothing of the C core is touched (its threads
 * are the parent's): the transport is left as it is, a leak, but for
 * this process's copies of its spare eventfds, which are closed. */
void dlock__etcd_grpc_free_inherited(dlock__etcd_grpc *g);

/* 1 when the gateway path (/v3/kv/txn, ...) has a gRPC method here. */
int dlock__etcd_grpc_has(const char *path);

/* Send body (the gateway's JSON object for path, not taken: converted
 * to the method's message straight, never through text) to endpoint ep
 * as a gRPC call that ends by until_ns, with token (NULL: none) as its
 * "token" metadata; on_end(arg, answer) follows once from loop, never
 * inside this call, unless the call is cancelled first. deleted: NULL,
 * or (a DeleteRange) where its reply's fields go, read from the message
 * (the answer's out then NULL), written before on_end. *out: the call,
 * for dlock__etcd_gcall_cancel(). DLOCK_OK, DLOCK_ENOMEM, DLOCK_EPROTO (a
 * body the method's message cannot hold: why), or the loop's error. */
struct dlock__etcd_deleted;
int dlock__etcd_gcall_start(dlock__etcd_grpc *g, size_t ep, const char *path, json_t *body,
                            struct dlock__etcd_deleted *deleted, const char *token,
                            int64_t until_ns,
                            dlock__loop *loop, void (*on_end)(void *arg, dlock__etcd_answer *a),
                            void *arg, dlock__etcd_gcall **out, char *why, size_t why_len);
/* From the loop, before on_end: cancel it; on_end never comes, and the
 * record is freed when the C core is done with it. */
void dlock__etcd_gcall_cancel(dlock__etcd_gcall *c);

#endif
