/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "common.h"
#include "conn.h"
#include "error.h"
#include "resp.h"

int dlock__conn_fail(dlock__conn *c, int code, const char *fmt, ...)
{
    if (c->state != DLOCK__CS_BROKEN) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, sizeof c->err, fmt, ap);
        va_end(ap);
        c->state = DLOCK__CS_BROKEN;
        c->err_code = code;
    }
    return code;
}

static int push_expect(dlock__conn *c, uint8_t kind, uint32_t idx)
{
    if (c->q_len == c->q_cap) {
        size_t ncap = c->q_cap ? c->q_cap * 2 : 8;
        dlock__expect *nq = dlock__malloc(ncap * sizeof *nq);
        if (!nq)
            return DLOCK_ENOMEM;
        for (size_t i = 0; i < c->q_len; i++)
            nq[i] = c->q[(c->q_head + i) % c->q_cap];
        dlock__free(c->q);
        c->q = nq;
        c->q_cap = ncap;
        c->q_head = 0;
    }
    c->q[(c->q_head + c->q_len) % c->q_cap] = (dlock__expect){kind, idx, c->tag};
    c->q_len++;
    if (c->tag)
        c->tag->owed++;
    return DLOCK_OK;
}

/* Make room for n more bytes in a growable buffer. */
static int buf_reserve(char **buf, size_t *len, size_t *cap, size_t n)
{
    if (*len + n > *cap) {
        size_t ncap = *cap ? *cap : 256;
        while (ncap < *len + n)
            ncap *= 2;
        char *nb = dlock__realloc(*buf, ncap);
        if (!nb)
            return DLOCK_ENOMEM;
        *buf = nb;
        *cap = ncap;
    }
    return DLOCK_OK;
}

/* Write a command into the output buffer, or into the held buffer while
 * the handshake's AUTH/SELECT are unanswered (hold != 0). */
static int format_out(dlock__conn *c, int argc, const char **argv,
                      const size_t *argvlen, int hold)
{
    size_t need = dlock__resp_request_len(argc, argv, argvlen);
    char **buf = &c->held;
    size_t *len = &c->held_len, *cap = &c->held_cap;
    if (!hold) {
        if (c->out_off > 0 && c->out_off == c->out_len)
            c->out_off = c->out_len = 0; /* everything was written: reuse */
        buf = &c->out;
        len = &c->out_len;
        cap = &c->out_cap;
    }
    if (buf_reserve(buf, len, cap, need) != DLOCK_OK)
        return DLOCK_ENOMEM;
    dlock__resp_request_write(*buf + *len, argc, argv, argvlen);
    *len += need;
    c->fmt_bytes += need;
    return DLOCK_OK;
}

/* Append a command expecting one reply of the given kind. */
static int append(dlock__conn *c, int argc, const char **argv,
                  const size_t *argvlen, uint8_t kind, uint32_t idx)
{
    if (c->state == DLOCK__CS_BROKEN)
        return DLOCK_EIO;
    if (push_expect(c, kind, idx) != DLOCK_OK)
        return DLOCK_ENOMEM;
    if (format_out(c, argc, argv, argvlen,
                   kind == DLOCK__R_CALLER && c->checks_pending > 0) != DLOCK_OK) {
        c->q_len--;
        if (c->tag)
            c->tag->owed--;
        return DLOCK_ENOMEM;
    }
    if (kind == DLOCK__R_CHECK || kind == DLOCK__R_ROLE)
        c->checks_pending++;
    return DLOCK_OK;
}

int dlock__conn_append_raw(dlock__conn *c, int argc, const char **argv,
                           const size_t *argvlen)
{
    if (c->state == DLOCK__CS_BROKEN)
        return DLOCK_EIO;
    return format_out(c, argc, argv, argvlen, c->checks_pending > 0);
}

int dlock__conn_has_output(const dlock__conn *c)
{
    return c->out_off < c->out_len;
}

static int queue_handshake(dlock__conn *c, const dlock__conn_config *cfg)
{
    const dlock__url *u = cfg->url;
    int rc = DLOCK_OK;
    if (u->password) {
        const char *argv[3] = {"AUTH", u->user, u->password};
        if (u->user)
            rc = append(c, 3, argv, NULL, DLOCK__R_CHECK, 0);
        else {
            argv[1] = u->password;
            rc = append(c, 2, argv, NULL, DLOCK__R_CHECK, 0);
        }
    }
    if (rc == DLOCK_OK && u->db > 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", u->db);
        const char *argv[2] = {"SELECT", db};
        rc = append(c, 2, argv, NULL, DLOCK__R_CHECK, 0);
    }
    const char *role[1] = {"ROLE"}; /* Sentinel: checked before anything is sent */
    if (rc == DLOCK_OK && cfg->verify_master)
        rc = append(c, 1, role, NULL, DLOCK__R_ROLE, 0);
    if (rc == DLOCK_OK && c->tls && c->checks_pending == 0) {
        /* With TLS 1.3 the client's handshake ends before the server has
         * checked the client certificate; a server that refuses it sends
         * its alert after our first bytes. Holding the caller's commands
         * until a first reply (as for AUTH) makes that refusal a clean
         * DLOCK_ETLS with nothing sent, not an unknown outcome. */
        const char *argv[1] = {"PING"};
        rc = append(c, 1, argv, NULL, DLOCK__R_CHECK, 0);
    }
    for (const dlock__script *s = dlock__scripts;
         rc == DLOCK_OK && cfg->load_scripts && s->name; s++) {
        const char *argv[3] = {"SCRIPT", "LOAD", s->body};
        size_t lens[3] = {6, 4, s->len};
        rc = append(c, 3, argv, lens, DLOCK__R_LOAD, 0);
    }
    if (rc == DLOCK_OK && cfg->ask_uptime) {
        const char *argv[2] = {"INFO", "server"};
        rc = append(c, 2, argv, NULL, DLOCK__R_INFO, 0);
    }
    return rc;
}

dlock__conn *dlock__conn_new(const dlock__conn_config *cfg)
{
    dlock__conn *c = dlock__calloc(1, sizeof *c);
    if (!c)
        return NULL;
    const dlock__url *u = cfg->url;
    c->ctx = u->is_unix ? redisConnectUnixNonBlock(u->host)
                        : redisConnectNonBlock(u->host, u->port);
    if (!c->ctx) {
        dlock__free(c);
        return NULL;
    }
    c->state = DLOCK__CS_CONNECTING;
    if (c->ctx->err) {
        dlock__conn_fail(c, DLOCK_EIO, "connect: %s", c->ctx->errstr);
        return c;
    }
    /* hiredis does not set close-on-exec; a program that forks and execs
     * must not hand our Redis sockets to its child. */
    int fl = fcntl(c->ctx->fd, F_GETFD);
    if (fl >= 0)
        (void)fcntl(c->ctx->fd, F_SETFD, fl | FD_CLOEXEC);
    if (cfg->tls_ctx && !(c->tls = dlock__tls_new(cfg->tls_ctx, c->ctx->fd, u->host, cfg->tls_cache))) {
        dlock__conn_free(c);
        return NULL;
    }
    if (queue_handshake(c, cfg) == DLOCK_ENOMEM) {
        dlock__conn_free(c);
        return NULL;
    }
    return c;
}

void dlock__conn_free(dlock__conn *c)
{
    if (!c)
        return;
    dlock__tls_free(c->tls); /* before redisFree() closes the socket */
    if (c->ctx)
        redisFree(c->ctx);
    dlock__free(c->q);
    dlock__free(c->out);
    dlock__free(c->held);
    dlock__free(c);
}

int dlock__conn_append(dlock__conn *c, int argc, const char **argv,
                       const size_t *argvlen, uint32_t idx)
{
    return append(c, argc, argv, argvlen, DLOCK__R_CALLER, idx);
}

short dlock__conn_events(const dlock__conn *c)
{
    if (c->state == DLOCK__CS_BROKEN)
        return 0;
    if (c->state == DLOCK__CS_CONNECTING)
        return c->tcp_open ? dlock__tls_events(c->tls) : POLLOUT;
    short ev = 0;
    if (dlock__conn_has_output(c))
        ev |= c->tls && dlock__tls_write_wants_read(c->tls) ? POLLIN : POLLOUT;
    if (c->q_len > 0)
        ev |= POLLIN;
    if (c->tls && c->tls_read_wants_write)
        ev |= POLLOUT;
    return ev;
}

static int has_caller_entry(const dlock__conn *c)
{
    for (size_t i = 0; i < c->q_len; i++)
        if (c->q[(c->q_head + i) % c->q_cap].kind == DLOCK__R_CALLER)
            return 1;
    return 0;
}

/* Write what TLS takes now. DLOCK_OK, or the code of the failure (the
 * connection is then BROKEN). */
static int write_out_tls(dlock__conn *c)
{
    while (c->out_off < c->out_len) {
        char msg[sizeof c->err];
        ssize_t n = dlock__tls_write(c->tls, c->out + c->out_off, c->out_len - c->out_off,
                                     msg, sizeof msg);
        if (n == DLOCK__TLS_AGAIN)
            return DLOCK_OK;
        if (n < 0) {
            if (c->checks_pending > 0) {
                /* No reply yet: a server that refused our client
                 * certificate sent an alert and closed, and our write ran
                 * into the reset. The alert still waits in the socket,
                 * ahead of the end: report it rather than the reset. */
                char buf[512], amsg[sizeof c->err];
                int alert = 0;
                ssize_t r;
                while ((r = dlock__tls_read(c->tls, buf, sizeof buf, &alert, amsg, sizeof amsg)) > 0)
                    ;
                if (r == DLOCK__TLS_FAILED && alert)
                    return dlock__conn_fail(c, DLOCK_ETLS, "TLS session refused by the server: %s", amsg);
            }
            return dlock__conn_fail(c, c->caller_sent ? DLOCK_EUNKNOWN : DLOCK_EIO, "%s", msg);
        }
        c->out_off += (size_t)n;
        c->sent_bytes += (uint64_t)n;
    }
    c->out_off = c->out_len = 0;
    return DLOCK_OK;
}

/* Write what the socket takes now. 0, or -1 with errno set. */
static int write_out(dlock__conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->ctx->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -1;
        }
        c->out_off += (size_t)n;
        c->sent_bytes += (uint64_t)n;
    }
    c->out_off = c->out_len = 0;
    return 0;
}

/* Read what TLS has into the hiredis reader. Never stops while OpenSSL
 * holds decrypted bytes: poll() cannot see those, and a reply left there
 * would wait forever on a quiet socket. Once OpenSSL holds none, what is
 * left is in the socket, where poll() sees it: stopping there saves the
 * recv() that would only say EAGAIN after every reply. (SSL_read() itself
 * goes through records without data, such as session tickets, until it
 * has data or would block.) */
static int read_tls(dlock__conn *c)
{
    char buf[16384]; /* one TLS record */
    for (;;) {
        char msg[sizeof c->err];
        int alert = 0;
        ssize_t n = dlock__tls_read(c->tls, buf, sizeof buf, &alert, msg, sizeof msg);
        c->tls_read_wants_write = 0;
        if (n > 0) {
            if (redisReaderFeed(c->ctx->reader, buf, (size_t)n) != REDIS_OK)
                return dlock__conn_fail(c, DLOCK_ENOMEM, "out of memory");
            if (!dlock__tls_buffered(c->tls))
                return DLOCK_OK;
            continue;
        }
        if (n == DLOCK__TLS_AGAIN) {
            c->tls_read_wants_write = dlock__tls_events(c->tls) == POLLOUT;
            return DLOCK_OK;
        }
        /* An alert before the server accepted the session (the server
         * refusing our client certificate after a TLS 1.3 handshake) is a
         * TLS failure with nothing of the caller's sent: until the first
         * check's reply the caller's commands wait in `held`, and a broken
         * connection is never used again. */
        int code = alert && (c->checks_pending > 0 || !c->caller_sent) ? DLOCK_ETLS
                   : c->caller_sent                                     ? DLOCK_EUNKNOWN
                                                                        : DLOCK_EIO;
        return dlock__conn_fail(c, code, "%s%s", code == DLOCK_ETLS ? "TLS session refused by the server: " : "", msg);
    }
}

int dlock__conn_recv(dlock__conn *c, int flags)
{
    char buf[16384];
    ssize_t n = recv(c->ctx->fd, buf, sizeof buf, flags);
    if (n > 0) {
        if (redisReaderFeed(c->ctx->reader, buf, (size_t)n) != REDIS_OK)
            return dlock__conn_fail(c, DLOCK_ENOMEM, "out of memory");
        return DLOCK_OK;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return DLOCK_OK;
    return dlock__conn_fail(c, c->caller_sent ? DLOCK_EUNKNOWN : DLOCK_EIO, "read: %s",
                            n == 0 ? "connection closed" : strerror(errno));
}

static int write_failed(dlock__conn *c)
{
    return dlock__conn_fail(c, c->caller_sent ? DLOCK_EUNKNOWN : DLOCK_EIO,
                            "write: %s", strerror(errno));
}

static int flush_out(dlock__conn *c)
{
    /* Caller commands waiting in `held` count as sent: they go out as soon
     * as the handshake's checks pass, even on a connection the caller has
     * abandoned (i22's undo-behind relies on this). */
    if (has_caller_entry(c))
        c->caller_sent = 1;
    if (c->tls)
        return write_out_tls(c);
    return write_out(c) != 0 ? write_failed(c) : DLOCK_OK;
}

int dlock__conn_io(dlock__conn *c, short revents)
{
    if (c->state == DLOCK__CS_BROKEN)
        return DLOCK_EIO;
    if (c->state == DLOCK__CS_CONNECTING) {
        if (!c->tcp_open) {
            if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
                return DLOCK_OK;
            int soerr = 0;
            socklen_t len = sizeof soerr;
            if (getsockopt(c->ctx->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
                soerr = errno;
            if (soerr != 0)
                return dlock__conn_fail(c, DLOCK_EIO, "connect: %s", strerror(soerr));
            c->tcp_open = 1;
        }
        if (c->tls) {
            char msg[sizeof c->err];
            int hs = dlock__tls_handshake(c->tls, msg, sizeof msg);
            if (hs < 0)
                return dlock__conn_fail(c, hs, "%s", msg);
            if (hs == 0)
                return DLOCK_OK; /* dlock__conn_events() says what it waits for */
        }
        c->state = DLOCK__CS_OPEN;
        revents |= POLLOUT;
    }
    if (c->tls) {
        int rc = DLOCK_OK;
        int readable = (revents & (POLLIN | POLLERR | POLLHUP)) ||
                       (c->tls_read_wants_write && (revents & POLLOUT)) ||
                       dlock__tls_buffered(c->tls);
        int write_waits_read = dlock__tls_write_wants_read(c->tls);
        if ((revents & POLLOUT) && !write_waits_read && dlock__conn_has_output(c))
            rc = flush_out(c);
        if (rc == DLOCK_OK && readable)
            rc = read_tls(c);
        /* A write that waited for TLS to read something goes on now. */
        if (rc == DLOCK_OK && readable && write_waits_read && dlock__conn_has_output(c))
            rc = flush_out(c);
        return rc;
    }
    if ((revents & POLLOUT) && dlock__conn_has_output(c)) {
        int rc = flush_out(c);
        if (rc != DLOCK_OK)
            return rc;
    }
    if (revents & (POLLIN | POLLERR | POLLHUP))
        return dlock__conn_recv(c, MSG_DONTWAIT);
    return DLOCK_OK;
}

static void note_uptime(dlock__conn *c, const redisReply *r)
{
    if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)
        return;
    const char *id = strstr(r->str, "run_id:");
    if (id && strspn(id + 7, "0123456789abcdef") == 40) {
        memcpy(c->run_id, id + 7, 40);
        c->run_id[40] = '\0';
    }
    const char *v = strstr(r->str, "redis_version:");
    c->set_get = v && strtol(v + 14, NULL, 10) >= 7;
    const char *p = strstr(r->str, "uptime_in_seconds:");
    if (!p)
        return;
    long long up = strtoll(p + 18, NULL, 10);
    int64_t now = dlock__now_ns();
    /* The start time may lie before this host booted (a negative
     * monotonic time is fine); an uptime too large to subtract is nonsense
     * and stays unknown, which the restart rule counts as "not yet". */
    if (up >= 0 && up < INT64_C(4000000000)) {
        int64_t start = now - (int64_t)up * INT64_C(1000000000);
        c->server_start_ns = start != 0 ? start : -1;
    }
}

/* Redis refuses a connection it cannot serve (maxclients, protected mode)
 * by writing one error as soon as it accepts and closing, before it reads
 * anything: whatever was pipelined never ran. */
static int is_accept_refusal(const redisReply *r)
{
    static const char full[] = "ERR max number of clients reached";
    return r->type == REDIS_REPLY_ERROR &&
           ((r->len >= sizeof full - 1 && !memcmp(r->str, full, sizeof full - 1)) ||
            (r->len >= 7 && !memcmp(r->str, "DENIED ", 7)));
}

int dlock__conn_take(dlock__conn *c, redisReply **reply, uint32_t *idx)
{
    dlock__conn_tag *tag;
    return dlock__conn_take_tagged(c, reply, idx, &tag);
}

int dlock__conn_take_tagged(dlock__conn *c, redisReply **reply, uint32_t *idx,
                            dlock__conn_tag **tag)
{
    while (c->q_len > 0) {
        if (c->state == DLOCK__CS_BROKEN)
            return DLOCK_EIO;
        void *v = NULL;
        if (redisGetReply(c->ctx, &v) != REDIS_OK)
            return dlock__conn_fail(c, DLOCK_EPROTO, "protocol error: %s", c->ctx->errstr);
        if (!v)
            return 0;
        redisReply *r = v;
        dlock__expect e = c->q[c->q_head];
        c->q_head = (c->q_head + 1) % c->q_cap;
        c->q_len--;
        if (e.tag)
            e.tag->owed--;
        if (e.kind != DLOCK__R_CALLER && is_accept_refusal(r)) {
            /* Read as the reply to a SCRIPT LOAD it would be dropped, and
             * the close that follows would look like "outcome unknown" (an
             * undo sent for a command that never ran): it is a refusal. */
            dlock__conn_fail(c, DLOCK_EREFUSED, "connection refused by the server: %.*s",
                             (int)DLOCK__MIN(r->len, 120), r->str);
            freeReplyObject(r);
            return DLOCK_EREFUSED;
        }
        if (e.kind == DLOCK__R_ROLE && r->type != REDIS_REPLY_ERROR) {
            /* Not a primary (a replica, a sentinel): the held commands
             * were never sent. */
            const char *role = r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                               r->element[0]->type == REDIS_REPLY_STRING ? r->element[0]->str : "?";
            if (strcmp(role, "master") != 0) {
                dlock__conn_fail(c, DLOCK_EIO, "server is not a primary (role %.20s)", role);
                freeReplyObject(r);
                return DLOCK_EIO;
            }
        }
        e.kind = e.kind == DLOCK__R_ROLE ? DLOCK__R_CHECK : e.kind; /* a primary: a check */
        switch (e.kind) {
        case DLOCK__R_CALLER:
            *reply = r;
            *idx = e.idx;
            *tag = e.tag;
            return 1;
        case DLOCK__R_CHECK:
            if (r->type == REDIS_REPLY_ERROR) {
                /* The held commands were never sent: a clean failure. */
                int code = dlock__map_redis_error(r->str, r->len);
                dlock__conn_fail(c, code, "handshake refused: %.*s",
                                 (int)DLOCK__MIN(r->len, 120), r->str);
                freeReplyObject(r);
                return code;
            }
            if (--c->checks_pending == 0 && c->held_len > 0) {
                if (c->out_off > 0 && c->out_off == c->out_len)
                    c->out_off = c->out_len = 0;
                if (buf_reserve(&c->out, &c->out_len, &c->out_cap, c->held_len) != DLOCK_OK) {
                    freeReplyObject(r);
                    return dlock__conn_fail(c, DLOCK_ENOMEM, "out of memory");
                }
                memcpy(c->out + c->out_len, c->held, c->held_len);
                c->out_len += c->held_len;
                c->held_len = 0;
                /* Send now rather than after the next poll(). */
                int wrc = flush_out(c);
                if (wrc != DLOCK_OK) {
                    freeReplyObject(r);
                    return wrc;
                }
            }
            break;
        case DLOCK__R_INFO:
            note_uptime(c, r);
            break;
        default: /* DISCARD, LOAD */
            break;
        }
        freeReplyObject(r);
    }
    return 0;
}

const char *dlock__conn_phase(const dlock__conn *c)
{
    if (c->state != DLOCK__CS_CONNECTING)
        return c->checks_pending > 0 ? "handshake" : "reply";
    return c->tcp_open ? "TLS handshake" : "connect";
}

void dlock__conn_abandon(dlock__conn *c)
{
    for (size_t i = 0; i < c->q_len; i++) {
        dlock__expect *e = &c->q[(c->q_head + i) % c->q_cap];
        if (e->kind == DLOCK__R_CALLER)
            e->kind = DLOCK__R_DISCARD;
    }
    c->caller_sent = 0;
}

void dlock__conn_abandon_tag(dlock__conn *c, dlock__conn_tag *tag)
{
    for (size_t i = 0; i < c->q_len && tag->owed > 0; i++) {
        dlock__expect *e = &c->q[(c->q_head + i) % c->q_cap];
        if (e->tag == tag) {
            e->kind = DLOCK__R_DISCARD;
            e->tag = NULL;
            tag->owed--;
        }
    }
}

size_t dlock__conn_pending(const dlock__conn *c)
{
    return c->q_len;
}
