/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "zk_url.h"

#define SCHEME "zk://"
#define SCHEME_LEN 5
/* What a URL may be at most, all its parts joined (a sanity bound). */
#define URL_MAX 4096
/* The server caps a session between 2 and 20 of its ticks; these are
 * only what dlock accepts to ask for. */
#define SESSION_MIN_MS 100
#define SESSION_MAX_MS (10 * 60 * 1000)

int dlock__zk_url_is(const char *text)
{
    return text && strncasecmp(text, SCHEME, SCHEME_LEN) == 0;
}

int dlock__zk_wanted(const char *const *urls, size_t n_urls)
{
    return urls && n_urls > 0 && dlock__zk_url_is(urls[0]);
}

void dlock__zk_url_clear(dlock__zk_url *u)
{
    dlock__free(u->hosts);
    dlock__free(u->user);
    if (u->password) /* do not leave the secret in freed memory */
        memset(u->password, 0, strlen(u->password));
    dlock__free(u->password);
    memset(u, 0, sizeof *u);
}

static int bad(char *err, size_t len, const char *why)
{
    if (err && len)
        snprintf(err, len, "bad zk URL: %s", why);
    return DLOCK_EINVAL;
}

/* One "host:port" of length n: a name or IPv4 address and a port in
 * 1..65535 (the C client takes no bracketed IPv6 form). */
static int check_host(const char *s, size_t n, char *err, size_t len)
{
    if (n == 0)
        return bad(err, len, "empty host");
    if (memchr(s, '[', n))
        return bad(err, len, "IPv6 hosts are not supported on zk:// URLs");
    const char *colon = memchr(s, ':', n);
    if (!colon || colon == s)
        return bad(err, len, "every host needs a port (host:port)");
    if (colon + 1 == s + n)
        return bad(err, len, "empty port");
    long port = 0;
    for (const char *p = colon + 1; p < s + n; p++) {
        if (*p < '0' || *p > '9')
            return bad(err, len, "the port is not a number");
        port = port * 10 + (*p - '0');
        if (port > 65535)
            return bad(err, len, "the port is out of range");
    }
    if (port == 0)
        return bad(err, len, "the port is out of range");
    for (const char *p = s; p < colon; p++)
        if (*p == '@' || *p == '/' || *p == '?' || *p == ' ')
            return bad(err, len, "a host name holds a character it may not");
    return DLOCK_OK;
}

static int check_hosts(const char *s, size_t n, char *err, size_t len)
{
    while (1) {
        const char *comma = memchr(s, ',', n);
        size_t one = comma ? (size_t)(comma - s) : n;
        int rc = check_host(s, one, err, len);
        if (rc != DLOCK_OK || !comma)
            return rc;
        n -= one + 1;
        s = comma + 1;
    }
}

/* A chroot: "/a/b", no empty or relative segment, no trailing slash. */
static int check_chroot(const char *s, size_t n, char *err, size_t len)
{
    if (n < 2 || s[n - 1] == '/')
        return bad(err, len, "a chroot is /path, without a trailing slash");
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '/' && i + 1 < n && s[i + 1] == '/')
            return bad(err, len, "a chroot has no empty segment");
        if (s[i] == '/' && s[i + 1] == '.' &&
            (i + 2 == n || s[i + 2] == '/' || (s[i + 2] == '.' && (i + 3 == n || s[i + 3] == '/'))))
            return bad(err, len, "a chroot has no . or .. segment");
    }
    return DLOCK_OK;
}

static int parse_query(dlock__zk_url *u, const char *q, char *err, size_t len)
{
    if (*q == '\0')
        return DLOCK_OK;
    if (strncmp(q, "session_timeout_ms=", 19) != 0)
        return bad(err, len, "the only query parameter is session_timeout_ms=N");
    char *end = NULL;
    long long ms = strtoll(q + 19, &end, 10);
    if (end == q + 19 || *end != '\0' || ms < SESSION_MIN_MS || ms > SESSION_MAX_MS)
        return bad(err, len, "session_timeout_ms is a number of ms in 100..600000");
    u->session_timeout_ms = ms;
    return DLOCK_OK;
}

static int take_credentials(dlock__zk_url *u, const char *s, size_t n, char *err, size_t len)
{
    const char *colon = memchr(s, ':', n);
    if (!colon || colon == s || colon + 1 == s + n)
        return bad(err, len, "credentials are user:password, both non-empty");
    u->user = dlock__calloc(1, (size_t)(colon - s) + 1);
    u->password = dlock__calloc(1, (size_t)(s + n - colon));
    if (!u->user || !u->password)
        return DLOCK_ENOMEM;
    memcpy(u->user, s, (size_t)(colon - s));
    memcpy(u->password, colon + 1, (size_t)(s + n - colon - 1));
    return DLOCK_OK;
}

/* The URLs joined into one text (the first's scheme off): "a,b,c". */
static int joined(char **out, const char *const *urls, size_t n_urls, char *err, size_t len)
{
    size_t total = 0;
    for (size_t i = 0; i < n_urls; i++) {
        if (!urls[i] || (i > 0 && strstr(urls[i], "://")))
            return bad(err, len, "one zk:// URL names the ensemble (host:port,host:port)");
        total += strlen(urls[i]) + 1;
    }
    if (total > URL_MAX)
        return bad(err, len, "too long");
    char *all = dlock__calloc(1, total + 1);
    if (!all)
        return DLOCK_ENOMEM;
    strcpy(all, urls[0] + SCHEME_LEN);
    for (size_t i = 1; i < n_urls; i++) {
        strcat(all, ",");
        strcat(all, urls[i]);
    }
    *out = all;
    return DLOCK_OK;
}

static int parse_joined(dlock__zk_url *u, char *all, char *err, size_t len)
{
    char *q = strchr(all, '?');
    if (q)
        *q++ = '\0';
    char *host = all, *at = strrchr(all, '@');
    int rc = DLOCK_OK;
    if (at) {
        if ((rc = take_credentials(u, all, (size_t)(at - all), err, len)) != DLOCK_OK)
            return rc;
        host = at + 1;
    }
    char *slash = strchr(host, '/');
    size_t hosts_len = slash ? (size_t)(slash - host) : strlen(host);
    if ((rc = check_hosts(host, hosts_len, err, len)) != DLOCK_OK)
        return rc;
    if (slash && (rc = check_chroot(slash, strlen(slash), err, len)) != DLOCK_OK)
        return rc;
    if (q && (rc = parse_query(u, q, err, len)) != DLOCK_OK)
        return rc;
    if (!(u->hosts = dlock__strdup(host)))
        return DLOCK_ENOMEM;
    return DLOCK_OK;
}

int dlock__zk_url_parse(dlock__zk_url *out, const char *const *urls, size_t n_urls, char *err,
                        size_t err_len)
{
    memset(out, 0, sizeof *out);
    out->session_timeout_ms = DLOCK__ZK_SESSION_DEFAULT_MS;
    if (!urls || n_urls == 0 || !dlock__zk_url_is(urls[0]))
        return bad(err, err_len, "it starts with zk://");
    char *all = NULL;
    int rc = joined(&all, urls, n_urls, err, err_len);
    if (rc != DLOCK_OK)
        return rc;
    rc = parse_joined(out, all, err, err_len);
    memset(all, 0, strlen(all)); /* it held the password */
    dlock__free(all);
    if (rc != DLOCK_OK)
        dlock__zk_url_clear(out);
    return rc;
}
