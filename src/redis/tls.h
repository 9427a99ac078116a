/* SPDX-License-Identifier: BSD-3-Clause */
/* TLS between dlock's socket and hiredis's reply reader (OpenSSL).
 *
 * dlock does its own socket I/O and uses hiredis only to format commands and
 * parse replies, so TLS needs no hiredis SSL support: after the TCP connect,
 * conn.c runs a non-blocking handshake through this module, then writes
 * through dlock__tls_write() and feeds what dlock__tls_read() returns to the
 * hiredis reader. Nothing here knows about Redis.
 *
 * One dlock__tls_ctx per client (an SSL_CTX built from the client options,
 * shared read-only by every connection of every thread); one dlock__tls per
 * connection. The session's socket I/O goes through a small BIO of our own
 * that uses send(MSG_NOSIGNAL), so a peer that went away gives EPIPE, never
 * SIGPIPE, as on plain connections. */
#ifndef DLOCK_TLS_H
#define DLOCK_TLS_H

#include <stddef.h>
#include <sys/types.h>

#include "common.h"

typedef struct dlock__tls_ctx dlock__tls_ctx;
typedef struct dlock__tls dlock__tls;
typedef struct dlock__tls_cache dlock__tls_cache;

/* Build the client's TLS context from its options: CA file/dir (else the
 * system store), client certificate and key, server name, insecure switch.
 * Returns DLOCK_OK, DLOCK_EINVAL (a file that cannot be loaded, a key that
 * does not match the certificate; err says which) or DLOCK_ENOMEM. */
int dlock__tls_ctx_new(dlock__tls_ctx **out, const dlock_client_options *o,
                       char *err, size_t err_len);
void dlock__tls_ctx_free(dlock__tls_ctx *t);

/* The newest TLS session one node's server gave us (one per node,
 * thread-safe): a new connection to that node offers it, so a reconnect
 * resumes the session (an abbreviated handshake: no certificate chain
 * sent or verified again) rather than making a full handshake. */
dlock__tls_cache *dlock__tls_cache_new(void);
void dlock__tls_cache_free(dlock__tls_cache *c);
/* In a child of fork(): free without touching the cache's mutex (a thread
 * of the parent may have held it). */
void dlock__tls_cache_forget(dlock__tls_cache *c);

/* A client session on the connected socket fd to `host` (a name or an IP
 * literal: the certificate must match it, unless the context has a server
 * name, which then is both the SNI and the name verified), offering to
 * resume the session in `cache` (may be NULL) and keeping the sessions the
 * server issues there. NULL only when out of memory. */
dlock__tls *dlock__tls_new(dlock__tls_ctx *t, int fd, const char *host,
                           dlock__tls_cache *cache);
void dlock__tls_free(dlock__tls *s);

/* Whether the handshake resumed an earlier session (for tests). */
int dlock__tls_resumed(const dlock__tls *s);

/* One step of the handshake. Returns 1 when done, 0 when it waits for the
 * socket (dlock__tls_events() says for what), or DLOCK_ETLS with err saying
 * why: a failed certificate verification says so and gives OpenSSL's reason
 * (X509_verify_cert_error_string). */
int dlock__tls_handshake(dlock__tls *s, char *err, size_t err_len);

/* Result of dlock__tls_read() and dlock__tls_write() besides a byte count. */
#define DLOCK__TLS_AGAIN 0    /* would block: poll for dlock__tls_events() */
#define DLOCK__TLS_CLOSED (-1) /* the peer closed (close_notify or EOF) */
#define DLOCK__TLS_FAILED (-2) /* socket error or TLS protocol error/alert */

/* Write up to len bytes (partial writes happen). Returns the number written
 * (> 0), DLOCK__TLS_AGAIN, or DLOCK__TLS_FAILED with err set. A write that
 * returned AGAIN must be retried with the same bytes first (more may follow
 * them); the buffer may move (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER). */
ssize_t dlock__tls_write(dlock__tls *s, const char *buf, size_t len, char *err,
                         size_t err_len);

/* Read decrypted bytes. Returns the number read (> 0), DLOCK__TLS_AGAIN,
 * DLOCK__TLS_CLOSED, or DLOCK__TLS_FAILED with err set.
 * *alert is set to 1 when the failure was a TLS alert or protocol error
 * (the server rejecting a client certificate, say), 0 for a socket error. */
ssize_t dlock__tls_read(dlock__tls *s, char *buf, size_t len, int *alert,
                        char *err, size_t err_len);

/* Whether OpenSSL holds decrypted bytes not yet returned by
 * dlock__tls_read(): poll() cannot see those, they must be read anyway. */
int dlock__tls_buffered(const dlock__tls *s);

/* poll() events the last AGAIN asked for (POLLIN or POLLOUT). */
short dlock__tls_events(const dlock__tls *s);

/* Whether the last write returned AGAIN because TLS must read first. */
int dlock__tls_write_wants_read(const dlock__tls *s);

#endif
