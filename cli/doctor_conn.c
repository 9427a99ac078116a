/* SPDX-License-Identifier: BSD-3-Clause */
/* The doctor's own connection to one Redis node: blocking I/O with
 * timeouts (one command at a time is all a check needs), optionally over
 * TLS through OpenSSL; hiredis formats the commands and parses the
 * replies, as in the library. The TLS handshake does not stop at a
 * certificate that fails verification: the doctor reports why, and the
 * expiry date, and then stops before it sends a password. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "doctor.h"

struct doc_conn {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    redisReader *reader;
};

int64_t doc_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Percent-decode src[0..n) into dst (size len). */
static void decode(char *dst, size_t len, const char *src, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < len; i++) {
        unsigned v;
        if (src[i] == '%' && i + 2 < n + 0 && sscanf(src + i + 1, "%2x", &v) == 1) {
            dst[o++] = (char)v;
            i += 2;
        } else {
            dst[o++] = src[i];
        }
    }
    dst[o] = '\0';
}

/* host[:port] or [v6][:port] of src[0..n). */
static int parse_hostport(const char *src, size_t n, doc_target *t)
{
    const char *end = src + n, *colon;
    if (n > 0 && src[0] == '[') {
        const char *rb = memchr(src, ']', n);
        if (!rb)
            return -1;
        snprintf(t->host, sizeof t->host, "%.*s", (int)(rb - src - 1), src + 1);
        colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
    } else {
        colon = memchr(src, ':', n);
        snprintf(t->host, sizeof t->host, "%.*s", (int)(colon ? colon - src : (long)n), src);
    }
    t->port = 6379;
    if (colon) {
        char num[16];
        snprintf(num, sizeof num, "%.*s", (int)(end - colon - 1), colon + 1);
        t->port = atoi(num);
    }
    return t->host[0] && t->port > 0 && t->port < 65536 ? 0 : -1;
}

/* The value of key=... in a query string q (without '?'). */
static void query_value(const char *q, const char *key, char *out, size_t len)
{
    size_t kl = strlen(key);
    while (q && *q) {
        if (!strncmp(q, key, kl) && q[kl] == '=') {
            decode(out, len, q + kl + 1, strcspn(q + kl + 1, "&"));
            return;
        }
        q = strchr(q, '&');
        q = q ? q + 1 : NULL;
    }
}

int doc_parse_target(const char *url, const cli_global *g, doc_target *t, char *err, size_t len)
{
    memset(t, 0, sizeof *t);
    if (!strncmp(url, "unix://", 7)) {
        const char *p = url + 7, *q = strchr(p, '?');
        snprintf(t->path, sizeof t->path, "%.*s", (int)(q ? q - p : (long)strlen(p)), p);
        char db[16] = "";
        query_value(q ? q + 1 : NULL, "db", db, sizeof db);
        t->db = atoi(db);
        query_value(q ? q + 1 : NULL, "user", t->user, sizeof t->user);
        query_value(q ? q + 1 : NULL, "password", t->pass, sizeof t->pass);
    } else {
        const char *s;
        int sentinel = 0;
        if (!strncmp(url, "redis://", 8)) {
            s = url + 8;
        } else if (!strncmp(url, "rediss://", 9)) {
            s = url + 9;
            t->tls = 1;
        } else if (!strncmp(url, "redis-sentinel://", 17)) {
            s = url + 17;
            sentinel = 1;
        } else {
            snprintf(err, len, "not a Redis URL");
            return -1;
        }
        const char *end = s + strcspn(s, "/?#"), *at = NULL;
        for (const char *p = s; p < end; p++)
            if (*p == '@')
                at = p;
        if (at) {
            const char *colon = memchr(s, ':', (size_t)(at - s));
            if (colon) {
                decode(t->user, sizeof t->user, s, (size_t)(colon - s));
                decode(t->pass, sizeof t->pass, colon + 1, (size_t)(at - colon - 1));
            } else {
                decode(t->pass, sizeof t->pass, s, (size_t)(at - s));
            }
            s = at + 1;
        }
        if (sentinel) {
            snprintf(t->sentinels, sizeof t->sentinels, "%.*s", (int)(end - s), s);
            if (*end == '/')
                snprintf(t->sentinel_master, sizeof t->sentinel_master, "%.*s",
                         (int)strcspn(end + 1, "?#"), end + 1);
            const char *comma = memchr(s, ',', (size_t)(end - s));
            if (parse_hostport(s, (size_t)((comma ? comma : end) - s), t) != 0 ||
                !t->sentinel_master[0]) {
                snprintf(err, len, "bad sentinel URL");
                return -1;
            }
        } else {
            if (parse_hostport(s, (size_t)(end - s), t) != 0) {
                snprintf(err, len, "bad host or port");
                return -1;
            }
            if (*end == '/')
                t->db = atoi(end + 1);
        }
        if (g->copts.tls)
            t->tls = 1;
    }
    if (g->copts.username)
        snprintf(t->user, sizeof t->user, "%s", g->copts.username);
    if (g->copts.password)
        snprintf(t->pass, sizeof t->pass, "%s", g->copts.password);
    return 0;
}

static int connect_fd(const doc_target *t, int timeout_ms, char *err, size_t len)
{
    int fd = -1, rc;
    if (t->path[0]) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(t->path) >= sizeof sa.sun_path) {
            snprintf(err, len, "socket path too long");
            return -1;
        }
        memcpy(sa.sun_path, t->path, strlen(t->path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            snprintf(err, len, "connect %s: %s", t->path, strerror(errno));
            if (fd >= 0)
                close(fd);
            return -1;
        }
        return fd;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai, *a;
    char port[16];
    snprintf(port, sizeof port, "%d", t->port);
    if ((rc = getaddrinfo(t->host, port, &hints, &ai)) != 0) {
        snprintf(err, len, "%s: %s", t->host, gai_strerror(rc));
        return -1;
    }
    snprintf(err, len, "connect: no address");
    for (a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        int e = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
        if (e == EINPROGRESS) {
            struct pollfd p = {fd, POLLOUT, 0};
            socklen_t sl = sizeof e;
            e = 0;
            if (poll(&p, 1, timeout_ms) != 1)
                e = ETIMEDOUT;
            else
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl);
        }
        if (e == 0) {
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            break;
        }
        snprintf(err, len, "connect: %s", strerror(e));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

static void ssl_error(char *err, size_t len, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "";
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    snprintf(err, len, "%s%s%s", what, *buf ? ": " : "", buf);
    ERR_clear_error();
}

/* Handshake with verification reported, not enforced (see the top). */
static int start_tls(doc_conn *c, const doc_target *t, const cli_global *g, char *err,
                     size_t len, double *cert_days, char *verify_err, size_t verify_len)
{
    const dlock_client_options *o = &g->copts;
    const char *name = o->tls_server_name ? o->tls_server_name : t->host;
    unsigned char ip[16];
    int is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
    if (!(c->ctx = SSL_CTX_new(TLS_client_method())) || !(c->ssl = SSL_new(c->ctx))) {
        ssl_error(err, len, "TLS setup");
        return -1;
    }
    if (o->tls_ca_file || o->tls_ca_dir) {
        if (SSL_CTX_load_verify_locations(c->ctx, o->tls_ca_file, o->tls_ca_dir) != 1) {
            ssl_error(err, len, "cannot load the CA certificates");
            return -1;
        }
    } else {
        SSL_CTX_set_default_verify_paths(c->ctx);
    }
    if (o->tls_cert_file && (SSL_use_certificate_chain_file(c->ssl, o->tls_cert_file) != 1 ||
                             SSL_use_PrivateKey_file(c->ssl, o->tls_key_file ? o->tls_key_file
                                                                             : o->tls_cert_file,
                                                     SSL_FILETYPE_PEM) != 1)) {
        ssl_error(err, len, "cannot load the client certificate");
        return -1;
    }
    SSL_set_verify(c->ssl, SSL_VERIFY_NONE, NULL);
    X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
    if (is_ip) {
        X509_VERIFY_PARAM_set1_ip_asc(vp, name);
    } else {
        X509_VERIFY_PARAM_set1_host(vp, name, 0);
        SSL_set_tlsext_host_name(c->ssl, name);
    }
    SSL_set_fd(c->ssl, c->fd);
    if (SSL_connect(c->ssl) != 1) {
        ssl_error(err, len, "TLS handshake failed");
        return -1;
    }
    X509 *peer = SSL_get_peer_certificate(c->ssl);
    if (peer) {
        int days = 0, secs = 0;
        if (ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(peer)))
            *cert_days = days + secs / 86400.0;
        X509_free(peer);
    }
    long vr = SSL_get_verify_result(c->ssl);
    verify_err[0] = '\0';
    if (!peer)
        snprintf(verify_err, verify_len, "the server sent no certificate");
    else if (vr != X509_V_OK)
        snprintf(verify_err, verify_len, "%s", X509_verify_cert_error_string(vr));
    return 0;
}

doc_conn *doc_connect(const doc_target *t, const cli_global *g, char *err, size_t len,
                      double *cert_days, char *verify_err, size_t verify_len)
{
    doc_conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, len, "out of memory");
        return NULL;
    }
    if ((c->fd = connect_fd(t, g->copts.connect_timeout_ms, err, len)) < 0) {
        free(c);
        return NULL;
    }
    struct timeval tv = {g->copts.io_timeout_ms / 1000, (g->copts.io_timeout_ms % 1000) * 1000};
    struct timeval ctv = {g->copts.connect_timeout_ms / 1000,
                          (g->copts.connect_timeout_ms % 1000) * 1000};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &ctv, sizeof ctv);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &ctv, sizeof ctv);
    if (t->tls && start_tls(c, t, g, err, len, cert_days, verify_err, verify_len) != 0) {
        doc_close(c);
        return NULL;
    }
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (!(c->reader = redisReaderCreate())) {
        snprintf(err, len, "out of memory");
        doc_close(c);
        return NULL;
    }
    return c;
}

void doc_close(doc_conn *c)
{
    if (!c)
        return;
    if (c->ssl) {
        SSL_shutdown(c->ssl);
        SSL_free(c->ssl);
    }
    SSL_CTX_free(c->ctx);
    if (c->reader)
        redisReaderFree(c->reader);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

static int write_all(doc_conn *c, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = c->ssl ? SSL_write(c->ssl, buf, (int)n) : send(c->fd, buf, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

void *doc_command(doc_conn *c, char *err, size_t len, int argc, const char **argv)
{
    char *cmd = NULL;
    void *reply = NULL;
    int n = redisFormatCommandArgv(&cmd, argc, argv, NULL);
    if (n < 0) {
        snprintf(err, len, "out of memory");
        return NULL;
    }
    int wrc = write_all(c, cmd, (size_t)n);
    redisFreeCommand(cmd);
    if (wrc != 0) {
        snprintf(err, len, "send: %s", errno ? strerror(errno) : "connection closed");
        return NULL;
    }
    for (;;) {
        if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
            snprintf(err, len, "protocol error: %s", c->reader->errstr);
            return NULL;
        }
        if (reply)
            return reply;
        char buf[16384];
        errno = 0;
        ssize_t r = c->ssl ? SSL_read(c->ssl, buf, sizeof buf) : recv(c->fd, buf, sizeof buf, 0);
        if (r <= 0) {
            snprintf(err, len, "%s", r == 0 || !errno ? "connection closed"
                                     : errno == EAGAIN || errno == EWOULDBLOCK ? "no reply in time"
                                     : strerror(errno));
            return NULL;
        }
        redisReaderFeed(c->reader, buf, (size_t)r);
    }
}

void *doc_commandf(doc_conn *c, char *err, size_t len, const char *first, ...)
{
    const char *argv[16];
    int argc = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 16; a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    return doc_command(c, err, len, argc, argv);
}

void doc_reply_free(void *reply)
{
    if (reply)
        freeReplyObject(reply);
}

int doc_info_field(const char *info, const char *field, char *out, size_t len)
{
    size_t fl = strlen(field);
    for (const char *p = info; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, field, fl) && p[fl] == ':') {
            size_t n = strcspn(p + fl + 1, "\r\n");
            snprintf(out, len, "%.*s", (int)n, p + fl + 1);
            return 0;
        }
    }
    if (len)
        out[0] = '\0';
    return -1;
}
