/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "error.h"
#include "etcd_url.h"

#define HOST_MAX 255

/* The length of text's scheme with its "://" (7 for etcd://, 8 for
 * etcds://), or 0 when it is neither. */
static size_t scheme_len(const char *text)
{
    if (!text)
        return 0;
    if (strncasecmp(text, "etcd://", 7) == 0)
        return 7;
    if (strncasecmp(text, "etcds://", 8) == 0)
        return 8;
    return 0;
}

int dlock__etcd_url_is(const char *text)
{
    return scheme_len(text) > 0;
}

void dlock__etcd_url_clear(dlock__etcd_url *u)
{
    for (size_t i = 0; i < u->n; i++) {
        dlock__free(u->endpoint[i]);
        dlock__free(u->name[i]);
    }
    dlock__free(u->user);
    if (u->password) /* do not leave the secret in freed memory */
        memset(u->password, 0, strlen(u->password));
    dlock__free(u->password);
    memset(u, 0, sizeof *u);
}

int dlock__etcd_url_more(const char *text)
{
    return text && !strstr(text, "://");
}

static int bad(char *err, size_t len, const char *url, const char *why)
{
    if (err && len)
        snprintf(err, len, "bad etcd URL \"%.200s\": %s", url, why);
    return DLOCK_EINVAL;
}

/* One "host:port" or "[v6]:port" of length n. */
static int add_host(dlock__etcd_url *u, const char *s, size_t n, const char *url,
                    char *err, size_t len)
{
    if (n == 0)
        return bad(err, len, url, "empty host");
    if (n > HOST_MAX + 8)
        return bad(err, len, url, "host too long");
    const char *colon;
    if (s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close || close == s + 1)
            return bad(err, len, url, "unclosed or empty [IPv6] host");
        colon = close + 1 < s + n && close[1] == ':' ? close + 1 : NULL;
    } else {
        colon = memchr(s, ':', n);
        if (colon && memchr(colon + 1, ':', (size_t)(s + n - colon - 1)))
            return bad(err, len, url, "IPv6 hosts go in brackets");
    }
    if (!colon || colon == s)
        return bad(err, len, url, "every host needs a port (host:port)");
    long port = 0;
    const char *p = colon + 1;
    if (p == s + n)
        return bad(err, len, url, "empty port");
    for (; p < s + n; p++) {
        if (*p < '0' || *p > '9' || (port = port * 10 + (*p - '0')) > 65535)
            return bad(err, len, url, "port must be 1..65535");
    }
    if (port < 1)
        return bad(err, len, url, "port must be 1..65535");
    for (const char *q = s; q < colon; q++)
        if ((unsigned char)*q <= 0x20 || *q == '/' || *q == '?' || *q == '#' ||
            *q == '@')
            return bad(err, len, url, "bad character in host");
    if (u->n == DLOCK__ETCD_MAX_ENDPOINTS)
        return bad(err, len, url, "more than 16 endpoints");
    for (size_t i = 0; i < u->n; i++)
        if (strlen(u->name[i]) == n && memcmp(u->name[i], s, n) == 0)
            return bad(err, len, url, "the same endpoint twice");
    char *name = dlock__strndup(s, n);
    char *ep = dlock__malloc(n + 9);
    if (!name || !ep) {
        dlock__free(name);
        dlock__free(ep);
        return DLOCK_ENOMEM;
    }
    snprintf(ep, n + 9, "%s://%s", u->tls ? "https" : "http", name);
    u->name[u->n] = name;
    u->endpoint[u->n++] = ep;
    return DLOCK_OK;
}

static int set_cred(char **slot, const char *s, size_t n, const char *url,
                    char *err, size_t len)
{
    if (*slot) {
        if (strlen(*slot) == n && memcmp(*slot, s, n) == 0)
            return DLOCK_OK;
        return bad(err, len, url, "URLs name different users or passwords");
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20)
            return bad(err, len, url, "control character in credentials");
    return (*slot = dlock__strndup(s, n)) ? DLOCK_OK : DLOCK_ENOMEM;
}

static int parse_one(dlock__etcd_url *u, const char *url, char *err, size_t len)
{
    size_t skip = scheme_len(url);
    if (!skip)
        return bad(err, len, url, "not an etcd:// or etcds:// URL");
    /* One cluster serves its clients in TLS on every member or on none: a
     * plain member among TLS ones is a mistake (or a downgrade). */
    int tls = skip == 8;
    if (u->n > 0 && tls != u->tls)
        return bad(err, len, url, "etcd:// and etcds:// URLs cannot be mixed (one cluster is "
                                  "TLS on every member or on none)");
    u->tls = tls;
    const char *s = url + skip, *end = s + strlen(s);
    if (end > s && end[-1] == '/') /* etcd://h:1/ is fine; a path is not */
        end--;
    if (memchr(s, '/', (size_t)(end - s)) || memchr(s, '?', (size_t)(end - s)))
        return bad(err, len, url, "etcd URLs take no path or query");
    const char *at = NULL;
    for (const char *p = s; p < end; p++)
        if (*p == '@')
            at = p;
    int rc;
    if (at) {
        const char *colon = memchr(s, ':', (size_t)(at - s));
        if (!colon || colon == s)
            return bad(err, len, url, "credentials are user:password@");
        if ((rc = set_cred(&u->user, s, (size_t)(colon - s), url, err, len)) ||
            (rc = set_cred(&u->password, colon + 1, (size_t)(at - colon - 1),
                           url, err, len)))
            return rc;
        s = at + 1;
    }
    if (s == end)
        return bad(err, len, url, "no host");
    while (s <= end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *stop = comma ? comma : end;
        if ((rc = add_host(u, s, (size_t)(stop - s), url, err, len)) != DLOCK_OK)
            return rc;
        if (!comma)
            break;
        s = comma + 1;
    }
    return DLOCK_OK;
}

int dlock__etcd_url_parse(dlock__etcd_url *out, const char *const *urls,
                          size_t n_urls, char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    if (!urls || n_urls == 0)
        return bad(err, err_len, "", "no URL");
    for (size_t i = 0; i < n_urls; i++) {
        int rc;
        if (!urls[i])
            rc = bad(err, err_len, "(null)", "NULL URL");
        else if (i > 0 && dlock__etcd_url_more(urls[i]))
            /* "etcd://h1:1,h2:2" split at its commas (DLOCK_REDIS is) */
            rc = add_host(out, urls[i], strlen(urls[i]), urls[i], err, err_len);
        else
            rc = parse_one(out, urls[i], err, err_len);
        if (rc != DLOCK_OK) {
            dlock__etcd_url_clear(out);
            return rc;
        }
    }
    return DLOCK_OK;
}

int dlock__etcd_url_use_tls(dlock__etcd_url *u)
{
    if (u->tls)
        return DLOCK_OK;
    char *ep[DLOCK__ETCD_MAX_ENDPOINTS] = {0};
    for (size_t i = 0; i < u->n; i++) {
        size_t n = strlen(u->name[i]) + 9;
        if (!(ep[i] = dlock__malloc(n))) {
            for (size_t k = 0; k < i; k++)
                dlock__free(ep[k]);
            return DLOCK_ENOMEM;
        }
        snprintf(ep[i], n, "https://%s", u->name[i]);
    }
    for (size_t i = 0; i < u->n; i++) {
        dlock__free(u->endpoint[i]);
        u->endpoint[i] = ep[i];
    }
    u->tls = 1;
    return DLOCK_OK;
}
