/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: reply handling. Arbitrary bytes are fed to a hiredis
 * reader, as a server's reply stream would be, and what comes out goes
 * through dlock's handling:
 *   - dlock__conn_take() on a connection whose expected-reply queue is
 *     given by the input (handshake checks, SCRIPT LOAD, INFO uptime
 *     parsing, caller replies, discarded replies), and
 *   - dlock__map_redis_error() on every error reply, nested ones included.
 * Layout: byte 0 low nibble = queue length n; next n bytes = kinds; the
 * rest = the RESP stream. No server and no socket I/O: the context's
 * reader is fed directly (the context is non-blocking, never read). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* hiredis 0.14 callocs count x 8 bytes when it reads a multi-bulk header,
 * before any element arrives (fixed in hiredis 1.0.1 by maxelements): a
 * header of a billion elements costs seconds of mmap, in hiredis. Such
 * inputs test hiredis, not dlock; skip them. */
static int huge_multibulk(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '*')
            continue;
        size_t j = i + 1;
        unsigned long long v = 0;
        if (j < len && s[j] == '-')
            j++;
        while (j < len && s[j] >= '0' && s[j] <= '9' && v <= 1000000)
            v = v * 10 + (unsigned long long)(s[j++] - '0');
        if (v > 100000)
            return 1;
    }
    return 0;
}

static void classify(const redisReply *r, int depth)
{
    if (r->type == REDIS_REPLY_ERROR) {
        int code = dlock__map_redis_error(r->str, r->len);
        if (code >= 0 || code < DLOCK_EPROTO)
            abort(); /* never OK, always a known code */
    } else if (r->type == REDIS_REPLY_ARRAY && depth < 8) {
        for (size_t i = 0; i < r->elements; i++)
            classify(r->element[i], depth + 1);
    }
}

static redisContext *context(void)
{
    static redisContext *ctx;
    if (!ctx) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
            abort();
        ctx = redisConnectFd(sv[0]);
        if (!ctx)
            abort();
        ctx->flags &= ~REDIS_BLOCK; /* never touch the socket */
    }
    redisReaderFree(ctx->reader);
    ctx->reader = redisReaderCreate();
    ctx->err = 0;
    ctx->errstr[0] = '\0';
    return ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    size_t n = data[0] & 15;
    if (size < 1 + n)
        return 0;
    const char *stream = (const char *)data + 1 + n;
    size_t len = size - 1 - n;
    if (huge_multibulk(stream, len))
        return 0;

    /* 1. The plain reader, every reply classified. */
    redisReader *rd = redisReaderCreate();
    if (redisReaderFeed(rd, stream, len) == REDIS_OK) {
        void *v;
        for (int i = 0; i < 64 && redisReaderGetReply(rd, &v) == REDIS_OK && v; i++) {
            classify(v, 0);
            freeReplyObject(v);
        }
    }
    redisReaderFree(rd);

    /* 2. The same stream through a connection's reply queue. */
    dlock__expect q[16];
    dlock__conn c;
    memset(&c, 0, sizeof c);
    for (size_t i = 0; i < n; i++)
        q[i] = (dlock__expect){(uint8_t)(data[1 + i] % 5), (uint32_t)i};
    c.ctx = context();
    c.state = DLOCK__CS_OPEN;
    c.q = q;
    c.q_cap = 16;
    c.q_len = n;
    if (redisReaderFeed(c.ctx->reader, stream, len) != REDIS_OK)
        return 0;
    for (int guard = 0; guard < 32; guard++) {
        redisReply *r = NULL;
        uint32_t idx = 0;
        int got = dlock__conn_take(&c, &r, &idx);
        if (got <= 0) {
            if (got < 0 && c.state != DLOCK__CS_BROKEN)
                abort(); /* a failure always breaks the connection */
            break;
        }
        if (!r || idx >= n)
            abort();
        classify(r, 0);
        freeReplyObject(r);
    }
    return 0;
}
