/* SPDX-License-Identifier: BSD-3-Clause */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "error.h"
#include "url.h"

#define URL_MAX 4096

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decode %XX escapes of s[0..n) into a fresh string. *bad = 1 for a broken
 * escape or a decoded NUL/control byte. */
static char *pct_decode(const char *s, size_t n, int *bad)
{
    char *out = dlock__malloc(n + 1);
    size_t o = 0;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n) {
                *bad = 1;
                break;
            }
            int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
            if (hi < 0 || lo < 0) {
                *bad = 1;
                break;
            }
            c = (unsigned char)(hi * 16 + lo);
            i += 2;
        }
        if (c < 0x20 || c == 0x7f) {
            *bad = 1;
            break;
        }
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return out;
}

static int parse_uint(const char *s, size_t n, long max, long *out)
{
    long v = 0;
    if (n == 0 || n > 10)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

void dlock__url_clear(dlock__url *u)
{
    if (!u)
        return;
    dlock__free(u->host);
    dlock__free(u->user);
    if (u->password) {
        /* Do not leave the secret in freed memory. */
        volatile char *p = u->password;
        while (*p)
            *p++ = 0;
        dlock__free(u->password);
    }
    memset(u, 0, sizeof *u);
}

#define FAIL(code, ...)                                                        \
    do {                                                                       \
        snprintf(err, err_len, __VA_ARGS__);                                   \
        rc = (code);                                                           \
        goto fail;                                                             \
    } while (0)

/* Parse unix:///path[?k=v&...]. */
static int parse_unix(dlock__url *u, const char *rest, char *err,
                      size_t err_len)
{
    int rc;
    const char *q = strchr(rest, '?');
    size_t plen = q ? (size_t)(q - rest) : strlen(rest);
    int bad = 0;
    if (plen == 0 || rest[0] != '/')
        FAIL(DLOCK_EINVAL, "unix URL needs an absolute socket path: unix:///path/to/socket");
    u->is_unix = 1;
    u->host = pct_decode(rest, plen, &bad);
    if (!u->host)
        FAIL(DLOCK_ENOMEM, "out of memory");
    if (bad)
        FAIL(DLOCK_EINVAL, "bad character or %%-escape in socket path");
    if (strlen(u->host) >= 108)
        FAIL(DLOCK_EINVAL, "socket path longer than 107 bytes");
    const char *p = q ? q + 1 : NULL;
    while (p && *p) {
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (!eq)
            FAIL(DLOCK_EINVAL, "query parameter without '=' in unix URL");
        size_t klen = (size_t)(eq - p), vlen = n - klen - 1;
        const char *v = eq + 1;
        if (klen == 2 && !memcmp(p, "db", 2)) {
            long db;
            if (parse_uint(v, vlen, INT_MAX, &db) < 0)
                FAIL(DLOCK_EINVAL, "db must be a number from 0 to %d", INT_MAX);
            u->db = (int)db;
        } else if ((klen == 8 && !memcmp(p, "password", 8)) ||
                   (klen == 4 && !memcmp(p, "user", 4))) {
            char **dst = klen == 4 ? &u->user : &u->password;
            dlock__free(*dst);
            *dst = pct_decode(v, vlen, &bad);
            if (!*dst)
                FAIL(DLOCK_ENOMEM, "out of memory");
            if (bad)
                FAIL(DLOCK_EINVAL, "bad character or %%-escape in %.*s",
                     (int)klen, p);
        } else {
            FAIL(DLOCK_EINVAL, "unknown unix URL parameter '%.*s' (known: db, user, password)",
                 (int)(klen > 32 ? 32 : klen), p);
        }
        p = amp ? amp + 1 : NULL;
    }
    return DLOCK_OK;
fail:
    dlock__url_clear(u);
    return rc;
}

static int parse_tcp(dlock__url *u, const char *rest, char *err,
                     size_t err_len)
{
    int rc, bad = 0;
    size_t alen = strcspn(rest, "/?#");
    const char *auth = rest, *end = rest + alen;
    if (rest[alen] == '?' || rest[alen] == '#')
        FAIL(DLOCK_EINVAL, "redis URL takes no query or fragment; the form is redis://[user[:password]@]host[:port][/db]");
    /* userinfo ends at the last '@' of the authority. */
    const char *at = NULL;
    for (const char *s = auth; s < end; s++)
        if (*s == '@')
            at = s;
    const char *hp = auth;
    if (at) {
        const char *colon = memchr(auth, ':', (size_t)(at - auth));
        if (colon) {
            if (colon > auth) {
                u->user = pct_decode(auth, (size_t)(colon - auth), &bad);
                if (!u->user)
                    FAIL(DLOCK_ENOMEM, "out of memory");
            }
            u->password = pct_decode(colon + 1, (size_t)(at - colon - 1), &bad);
        } else {
            /* "redis://secret@host": a password for the default user. */
            u->password = pct_decode(auth, (size_t)(at - auth), &bad);
        }
        if (!u->password)
            FAIL(DLOCK_ENOMEM, "out of memory");
        if (bad)
            FAIL(DLOCK_EINVAL, "bad character or %%-escape in user or password");
        if (u->password[0] == '\0' && !u->user) {
            dlock__free(u->password);
            u->password = NULL;
        }
        hp = at + 1;
    }
    /* host, [v6], then :port */
    const char *hend, *port = NULL;
    if (hp < end && *hp == '[') {
        const char *rb = memchr(hp, ']', (size_t)(end - hp));
        if (!rb)
            FAIL(DLOCK_EINVAL, "unterminated '[' in IPv6 host");
        u->host = dlock__strndup(hp + 1, (size_t)(rb - hp - 1));
        hend = rb + 1;
        if (hend < end && *hend != ':')
            FAIL(DLOCK_EINVAL, "unexpected text after IPv6 host");
        if (hend < end)
            port = hend + 1;
    } else {
        const char *colon = memchr(hp, ':', (size_t)(end - hp));
        hend = colon ? colon : end;
        u->host = dlock__strndup(hp, (size_t)(hend - hp));
        if (colon)
            port = colon + 1;
    }
    if (!u->host)
        FAIL(DLOCK_ENOMEM, "out of memory");
    if (u->host[0] == '\0')
        FAIL(DLOCK_EINVAL, "redis URL has no host; the form is redis://[user[:password]@]host[:port][/db]");
    for (const char *s = u->host; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '.' || *s == '-' ||
              *s == '_' || *s == ':' || *s == '%'))
            FAIL(DLOCK_EINVAL, "bad character '%c' in host", isprint((unsigned char)*s) ? *s : '?');
    u->port = 6379;
    if (port) {
        long v;
        if (parse_uint(port, (size_t)(end - port), 65535, &v) < 0 || v == 0)
            FAIL(DLOCK_EINVAL, "port must be a number from 1 to 65535");
        u->port = (int)v;
    }
    if (*end == '/') {
        const char *db = end + 1;
        size_t dlen = strlen(db);
        long v = 0;
        if (dlen > 0 && parse_uint(db, dlen, INT_MAX, &v) < 0)
            FAIL(DLOCK_EINVAL, "database after '/' must be a number from 0 to %d", INT_MAX);
        u->db = (int)v;
    }
    return DLOCK_OK;
fail:
    dlock__url_clear(u);
    return rc;
}

int dlock__url_parse(dlock__url *out, const char *text, char *err,
                     size_t err_len)
{
    char dummy[1];
    if (!err) {
        err = dummy;
        err_len = sizeof dummy;
    }
    if (!out || !text) {
        snprintf(err, err_len, "NULL URL");
        return DLOCK_EINVAL;
    }
    memset(out, 0, sizeof *out);
    size_t len = strnlen(text, URL_MAX + 1);
    if (len == 0) {
        snprintf(err, err_len, "empty URL");
        return DLOCK_EINVAL;
    }
    if (len > URL_MAX) {
        snprintf(err, err_len, "URL longer than %d bytes", URL_MAX);
        return DLOCK_EINVAL;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] <= 0x20 || text[i] == 0x7f) {
            snprintf(err, err_len, "URL contains a space or control character");
            return DLOCK_EINVAL;
        }
    if (!strncasecmp(text, "redis://", 8))
        return parse_tcp(out, text + 8, err, err_len);
    if (!strncasecmp(text, "unix://", 7))
        return parse_unix(out, text + 7, err, err_len);
    if (!strncasecmp(text, "rediss://", 9)) {
        int rc = parse_tcp(out, text + 9, err, err_len);
        out->tls = rc == DLOCK_OK;
        return rc;
    }
    const char *colon = strstr(text, "://");
    if (colon)
        snprintf(err, err_len, "unknown URL scheme '%.*s' (use redis://, rediss://, unix://, "
                 "redis-sentinel:// or etcd://)",
                 (int)((colon - text) > 16 ? 16 : (colon - text)), text);
    else
        snprintf(err, err_len, "not a URL: expected redis://host[:port], unix:///path, "
                 "redis-sentinel://host:port/MASTER or etcd://host:port");
    return DLOCK_EINVAL;
}
