/* SPDX-License-Identifier: BSD-3-Clause */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>

#include "tls.h"

struct dlock__tls_cache {
    pthread_mutex_t mu;
    SSL_SESSION *session; /* one reference held; NULL: none yet */
};

struct dlock__tls_ctx {
    SSL_CTX *ssl_ctx;
    BIO_METHOD *bio_method;
    char *server_name; /* NULL: verify each URL's host */
    int insecure;
};

struct dlock__tls {
    SSL *ssl;
    int fd;
    int sys_errno;       /* errno of the last failed send/recv */
    short want;          /* POLLIN/POLLOUT asked for by the last AGAIN */
    int write_wants_read;
};

/* ---- a socket BIO that never raises SIGPIPE ---------------------------- */

static int bio_write(BIO *b, const char *buf, int len)
{
    dlock__tls *s = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    for (;;) {
        ssize_t n = send(s->fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0)
            return (int)n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            BIO_set_retry_write(b);
        else
            s->sys_errno = errno;
        return -1;
    }
}

static int bio_read(BIO *b, char *buf, int len)
{
    dlock__tls *s = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    for (;;) {
        ssize_t n = recv(s->fd, buf, (size_t)len, MSG_DONTWAIT);
        if (n >= 0)
            return (int)n; /* 0: end of stream */
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            BIO_set_retry_read(b);
        else
            s->sys_errno = errno;
        return -1;
    }
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    /* send() has no user-space buffer to flush; everything else (kTLS,
     * datagram and file controls) does not apply to this BIO. */
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

/* ---- context ------------------------------------------------------------ */

/* OpenSSL's reason for the last failure, or `fallback`; clears the queue. */
static const char *ssl_reason(char *buf, size_t len, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    if (e) {
        const char *r = ERR_reason_error_string(e);
        if (r)
            snprintf(buf, len, "%s", r);
        else
            ERR_error_string_n(e, buf, len);
    } else {
        snprintf(buf, len, "%s", fallback);
    }
    ERR_clear_error();
    return buf;
}

void dlock__tls_ctx_free(dlock__tls_ctx *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->ssl_ctx);
    if (t->bio_method)
        BIO_meth_free(t->bio_method);
    dlock__free(t->server_name);
    dlock__free(t);
}

/* The SSL ex_data slot that points a session at its node's cache. */
static int cache_idx = -1;
static pthread_once_t cache_idx_once = PTHREAD_ONCE_INIT;

static void make_cache_index(void)
{
    cache_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

static int cache_index(void)
{
    DLOCK__CHECK_PTHREAD(pthread_once(&cache_idx_once, make_cache_index));
    return cache_idx;
}

/* OpenSSL hands over a session the server issued (after the handshake in
 * TLS 1.2, with a ticket read after it in TLS 1.3): keep a copy of the
 * newest in the node's cache. A copy, because the connection's own session
 * object is marked not resumable when the connection ends without a
 * close_notify (SSL_free of an unfinished session), and ours always do
 * (dlock__tls_free). Returning 0: OpenSSL keeps its reference. */
static int on_new_session(SSL *ssl, SSL_SESSION *session)
{
    dlock__tls_cache *c = cache_idx >= 0 ? SSL_get_ex_data(ssl, cache_idx) : NULL;
    SSL_SESSION *copy = c ? SSL_SESSION_dup(session) : NULL;
    if (!copy)
        return 0; /* out of memory: the next connection makes a full handshake */
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    SSL_SESSION *old = c->session;
    c->session = copy;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
    SSL_SESSION_free(old);
    return 0;
}

int dlock__tls_ctx_new(dlock__tls_ctx **out, const dlock_client_options *o,
                       char *err, size_t err_len)
{
    char why[200];
    int rc = DLOCK_ENOMEM;
    dlock__tls_ctx *t = dlock__calloc(1, sizeof *t);
    *out = NULL;
    snprintf(err, err_len, "out of memory");
    if (!t)
        return DLOCK_ENOMEM;
    ERR_clear_error();
    t->insecure = o->tls_insecure;
    if (o->tls_server_name && o->tls_server_name[0] &&
        !(t->server_name = dlock__strdup(o->tls_server_name)))
        goto fail;
    if (!(t->ssl_ctx = SSL_CTX_new(TLS_client_method())))
        goto fail;
    if (!SSL_CTX_set_min_proto_version(t->ssl_ctx, TLS1_2_VERSION))
        goto fail;
    /* Partial writes and a write buffer that may move between retries: the
     * output buffer grows (realloc) while a write waits for the socket. */
    SSL_CTX_set_mode(t->ssl_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                                     SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(t->ssl_ctx, t->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    /* Client sessions are kept per node (dlock__tls_cache), not in
     * OpenSSL's internal store, which a client never looks up. */
    SSL_CTX_set_session_cache_mode(t->ssl_ctx,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(t->ssl_ctx, on_new_session);
    rc = DLOCK_EINVAL;
    /* OpenSSL's reason for a missing file is "system lib": say it plainly. */
    const char *const files[] = {o->tls_ca_file, o->tls_ca_dir, o->tls_cert_file, o->tls_key_file};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (files[i] && access(files[i], R_OK) != 0) {
            snprintf(err, err_len, "TLS: cannot read %s: %s", files[i], strerror(errno));
            goto fail;
        }
    if (o->tls_ca_file || o->tls_ca_dir) {
        if (!SSL_CTX_load_verify_locations(t->ssl_ctx, o->tls_ca_file, o->tls_ca_dir)) {
            snprintf(err, err_len, "TLS: cannot load CA certificates from %s: %s",
                     o->tls_ca_file ? o->tls_ca_file : o->tls_ca_dir,
                     ssl_reason(why, sizeof why, "unknown error"));
            goto fail;
        }
    } else if (!SSL_CTX_set_default_verify_paths(t->ssl_ctx)) {
        snprintf(err, err_len, "TLS: cannot load the system CA store: %s",
                 ssl_reason(why, sizeof why, "unknown error"));
        goto fail;
    }
    if ((o->tls_cert_file != NULL) != (o->tls_key_file != NULL)) {
        snprintf(err, err_len, "TLS: a client certificate needs both tls_cert_file and tls_key_file");
        goto fail;
    }
    if (o->tls_cert_file) {
        if (!SSL_CTX_use_certificate_chain_file(t->ssl_ctx, o->tls_cert_file)) {
            snprintf(err, err_len, "TLS: cannot load the client certificate %s: %s",
                     o->tls_cert_file, ssl_reason(why, sizeof why, "unknown error"));
            goto fail;
        }
        if (!SSL_CTX_use_PrivateKey_file(t->ssl_ctx, o->tls_key_file, SSL_FILETYPE_PEM) ||
            !SSL_CTX_check_private_key(t->ssl_ctx)) {
            snprintf(err, err_len, "TLS: cannot use the client key %s: %s", o->tls_key_file,
                     ssl_reason(why, sizeof why, "unknown error"));
            goto fail;
        }
    }
    rc = DLOCK_ENOMEM;
    t->bio_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "dlock socket");
    if (!t->bio_method || !BIO_meth_set_write(t->bio_method, bio_write) ||
        !BIO_meth_set_read(t->bio_method, bio_read) ||
        !BIO_meth_set_ctrl(t->bio_method, bio_ctrl))
        goto fail;
    *out = t;
    return DLOCK_OK;
fail:
    ERR_clear_error();
    dlock__tls_ctx_free(t);
    return rc;
}

/* ---- session ------------------------------------------------------------ */

dlock__tls_cache *dlock__tls_cache_new(void)
{
    dlock__tls_cache *c = dlock__calloc(1, sizeof *c);
    if (c)
        DLOCK__CHECK_PTHREAD(pthread_mutex_init(&c->mu, NULL));
    return c;
}

void dlock__tls_cache_free(dlock__tls_cache *c)
{
    if (!c)
        return;
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&c->mu));
    dlock__tls_cache_forget(c);
}

void dlock__tls_cache_forget(dlock__tls_cache *c)
{
    if (!c)
        return;
    SSL_SESSION_free(c->session); /* NULL is fine */
    dlock__free(c);
}

static int is_ip_literal(const char *host)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

dlock__tls *dlock__tls_new(dlock__tls_ctx *t, int fd, const char *host,
                           dlock__tls_cache *cache)
{
    dlock__tls *s = dlock__calloc(1, sizeof *s);
    BIO *bio = NULL;
    if (!s)
        return NULL;
    s->fd = fd;
    if (!(s->ssl = SSL_new(t->ssl_ctx)) || !(bio = BIO_new(t->bio_method)))
        goto fail;
    BIO_set_data(bio, s);
    BIO_set_init(bio, 1);
    SSL_set_bio(s->ssl, bio, bio); /* the SSL owns the BIO from here */
    bio = NULL;
    const char *name = t->server_name ? t->server_name : host;
    /* SNI carries host names only, never an address (RFC 6066). */
    if (!is_ip_literal(name) && !SSL_set_tlsext_host_name(s->ssl, name))
        goto fail;
    if (!t->insecure) {
        X509_VERIFY_PARAM *p = SSL_get0_param(s->ssl);
        /* The certificate must name what we connected to: an IP literal
         * must be in its IP SANs, a name in its DNS SANs (or CN). */
        int ok = is_ip_literal(name) ? X509_VERIFY_PARAM_set1_ip_asc(p, name)
                                     : X509_VERIFY_PARAM_set1_host(p, name, 0);
        if (!ok)
            goto fail;
        X509_VERIFY_PARAM_set_hostflags(p, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    }
    if (cache) {
        if (!SSL_set_ex_data(s->ssl, cache_index(), cache))
            goto fail;
        /* Only a session of this node's server, which verified the name
         * we verify now: resuming it skips nothing we would check. A
         * session the server no longer knows costs a full handshake. */
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&cache->mu));
        int ok = !cache->session || SSL_set_session(s->ssl, cache->session);
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&cache->mu));
        if (!ok)
            goto fail;
    }
    SSL_set_connect_state(s->ssl);
    return s;
fail:
    ERR_clear_error();
    BIO_free(bio);
    dlock__tls_free(s);
    return NULL;
}

int dlock__tls_resumed(const dlock__tls *s)
{
    return SSL_session_reused(s->ssl) == 1;
}

void dlock__tls_free(dlock__tls *s)
{
    if (!s)
        return;
    /* No close_notify: after fork() a child freeing its copy of a client
     * would end the parent's session on the shared socket, and Redis needs
     * none (its protocol frames every reply). */
    SSL_free(s->ssl);
    dlock__free(s);
}

/* Classify an SSL call's result that was <= 0. */
static ssize_t after_error(dlock__tls *s, int ret, int *alert, char *err,
                           size_t err_len, const char *what)
{
    char why[200];
    int e = SSL_get_error(s->ssl, ret);
    if (alert)
        *alert = 0;
    switch (e) {
    case SSL_ERROR_WANT_READ:
        s->want = POLLIN;
        return DLOCK__TLS_AGAIN;
    case SSL_ERROR_WANT_WRITE:
        s->want = POLLOUT;
        return DLOCK__TLS_AGAIN;
    case SSL_ERROR_ZERO_RETURN:
        ERR_clear_error();
        snprintf(err, err_len, "%s: the server closed the TLS session", what);
        return DLOCK__TLS_CLOSED;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        if (s->sys_errno == 0) {
            snprintf(err, err_len, "%s: connection closed", what);
            return DLOCK__TLS_CLOSED;
        }
        snprintf(err, err_len, "%s: %s", what, strerror(s->sys_errno));
        return DLOCK__TLS_FAILED;
    default: {
        unsigned long last = ERR_peek_last_error();
        if (ERR_GET_LIB(last) == ERR_LIB_SSL &&
            ERR_GET_REASON(last) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
            /* OpenSSL 3 reports an EOF without close_notify this way; for
             * Redis it is a closed connection like any other. */
            ERR_clear_error();
            snprintf(err, err_len, "%s: connection closed", what);
            return DLOCK__TLS_CLOSED;
        }
        if (alert)
            *alert = 1;
        snprintf(err, err_len, "%s: TLS error: %s", what,
                 ssl_reason(why, sizeof why, "protocol error"));
        return DLOCK__TLS_FAILED;
    }
    }
}

int dlock__tls_handshake(dlock__tls *s, char *err, size_t err_len)
{
    char why[200];
    ERR_clear_error();
    s->sys_errno = 0;
    int ret = SSL_connect(s->ssl);
    if (ret == 1) {
        s->want = 0;
        return 1;
    }
    long vr = SSL_get_verify_result(s->ssl);
    int e = SSL_get_error(s->ssl, ret);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        s->want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return 0;
    }
    if (vr != X509_V_OK) {
        /* Say it was verification and why: "unable to get local issuer
         * certificate" (wrong CA), "hostname mismatch", "certificate has
         * expired", ... */
        ERR_clear_error();
        snprintf(err, err_len, "TLS certificate verification failed: %s",
                 X509_verify_cert_error_string(vr));
        return DLOCK_ETLS;
    }
    if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN) {
        ERR_clear_error();
        if (s->sys_errno)
            snprintf(err, err_len, "TLS handshake failed: %s", strerror(s->sys_errno));
        else
            snprintf(err, err_len, "TLS handshake failed: the server closed the connection "
                                   "(does it speak TLS on this port?)");
        return DLOCK_ETLS;
    }
    snprintf(err, err_len, "TLS handshake failed: %s",
             ssl_reason(why, sizeof why, "protocol error"));
    return DLOCK_ETLS;
}

ssize_t dlock__tls_write(dlock__tls *s, const char *buf, size_t len, char *err,
                         size_t err_len)
{
    size_t done = 0;
    ERR_clear_error();
    s->sys_errno = 0;
    s->write_wants_read = 0;
    if (len > INT32_MAX)
        len = INT32_MAX;
    int ret = SSL_write_ex(s->ssl, buf, len, &done) == 1 ? 1 : 0;
    if (ret == 1)
        return (ssize_t)done;
    ssize_t r = after_error(s, ret, NULL, err, err_len, "write");
    if (r == DLOCK__TLS_AGAIN && s->want == POLLIN)
        s->write_wants_read = 1;
    if (r == DLOCK__TLS_CLOSED) {
        snprintf(err, err_len, "write: connection closed");
        r = DLOCK__TLS_FAILED;
    }
    return r;
}

ssize_t dlock__tls_read(dlock__tls *s, char *buf, size_t len, int *alert,
                        char *err, size_t err_len)
{
    size_t done = 0;
    ERR_clear_error();
    s->sys_errno = 0;
    *alert = 0;
    if (SSL_read_ex(s->ssl, buf, len, &done) == 1)
        return (ssize_t)done;
    return after_error(s, 0, alert, err, err_len, "read");
}

int dlock__tls_buffered(const dlock__tls *s)
{
    /* Decrypted bytes ready now. (SSL_has_pending() would also count a
     * partial record, whose rest poll() does see arriving.) */
    return SSL_pending(s->ssl) > 0;
}

short dlock__tls_events(const dlock__tls *s)
{
    return s->want ? s->want : POLLIN;
}

int dlock__tls_write_wants_read(const dlock__tls *s)
{
    return s->write_wants_read;
}
