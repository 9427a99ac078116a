/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clock.h"
#include "common.h"
#include "conn.h"
#include "error.h"
#include "sentinel.h"

int dlock__sentinel_is_url(const char *text)
{
    return text && !strncasecmp(text, DLOCK__SENTINEL_SCHEME, sizeof DLOCK__SENTINEL_SCHEME - 1);
}

void dlock__sentinel_forget(dlock__sentinel *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        dlock__url_clear(&s->addr[i]);
    dlock__free(s->master_name);
    dlock__free(s);
}

void dlock__sentinel_free(dlock__sentinel *s)
{
    if (!s)
        return;
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&s->ask_mu));
    dlock__sentinel_forget(s);
}

#define FORM "redis-sentinel://[user[:password]@]host:port[,host:port...]/MASTERNAME"

/* The primary's half of the URL: the credentials before the hosts (rest
 * up to at; at NULL: none), with the master name as a placeholder host
 * and port 0 (the sentinels give the real address). buf (buf_len bytes)
 * is scratch. On failure err says why. */
static int parse_primary(dlock__url *primary, const char *rest, const char *at,
                         const char *master_name, char *buf, size_t buf_len, char *err,
                         size_t err_len)
{
    snprintf(buf, buf_len, "redis://%.*s%sx", at ? (int)(at - rest) : 0, rest, at ? "@" : "");
    char uerr[200];
    int rc = dlock__url_parse(primary, buf, uerr, sizeof uerr);
    if (rc != DLOCK_OK) {
        snprintf(err, err_len, "sentinel URL: %s", uerr);
        return rc;
    }
    dlock__free(primary->host);
    if (!(primary->host = dlock__strdup(master_name))) {
        snprintf(err, err_len, "out of memory");
        return DLOCK_ENOMEM;
    }
    primary->port = 0;
    return DLOCK_OK;
}

/* The sentinels' half: host:port entries between hosts and end, comma
 * separated, each parsed into s->addr. buf (buf_len bytes) is scratch.
 * On failure err says why. */
static int parse_sentinels(dlock__sentinel *s, const char *hosts, const char *end, char *buf,
                           size_t buf_len, char *err, size_t err_len)
{
    if (hosts < end && end[-1] == ',') {
        snprintf(err, err_len, "sentinel URL: empty entry in the sentinel list: %s", FORM);
        return DLOCK_EINVAL;
    }
    for (const char *h = hosts; h < end;) {
        const char *comma = memchr(h, ',', (size_t)(end - h));
        const char *stop = comma ? comma : end;
        if (stop == h || !memchr(h, ':', (size_t)(stop - h))) {
            snprintf(err, err_len, "sentinel URL: every sentinel needs host:port: %s", FORM);
            return DLOCK_EINVAL;
        }
        if (s->n == DLOCK__SENTINEL_MAX) {
            snprintf(err, err_len, "sentinel URL names more than %d sentinels", DLOCK__SENTINEL_MAX);
            return DLOCK_EINVAL;
        }
        snprintf(buf, buf_len, "redis://%.*s", (int)(stop - h), h);
        char uerr[200];
        int rc = dlock__url_parse(&s->addr[s->n], buf, uerr, sizeof uerr);
        if (rc != DLOCK_OK) {
            snprintf(err, err_len, "sentinel %zu: %s", s->n + 1, uerr);
            return rc;
        }
        s->n++;
        h = comma ? comma + 1 : end;
    }
    if (s->n == 0) {
        snprintf(err, err_len, "sentinel URL names no sentinel: %s", FORM);
        return DLOCK_EINVAL;
    }
    return DLOCK_OK;
}

int dlock__sentinel_parse(dlock__sentinel **out, dlock__url *primary, const char *text,
                          char *err, size_t err_len)
{
    *out = NULL;
    const char *rest = text + sizeof DLOCK__SENTINEL_SCHEME - 1;
    const char *slash = strchr(rest, '/');
    if (!slash || !slash[1] || strchr(slash + 1, '/') || strpbrk(slash + 1, "?#")) {
        snprintf(err, err_len, "sentinel URL needs one master name after the hosts: %s", FORM);
        return DLOCK_EINVAL;
    }
    /* Credentials end at the last '@' before the hosts. */
    const char *hosts = rest, *at = NULL;
    for (const char *p = rest; p < slash; p++)
        if (*p == '@')
            at = p;
    if (at)
        hosts = at + 1;
    dlock__sentinel *s = dlock__calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "out of memory");
        return DLOCK_ENOMEM;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&s->ask_mu, NULL));
    size_t buf_len = strlen(text) + 16;
    char *buf = dlock__malloc(buf_len);
    int rc = DLOCK_ENOMEM;
    if (!buf || !(s->master_name = dlock__strdup(slash + 1)))
        snprintf(err, err_len, "out of memory");
    else if ((rc = parse_primary(primary, rest, at, s->master_name, buf, buf_len, err,
                                 err_len)) == DLOCK_OK)
        rc = parse_sentinels(s, hosts, slash, buf, buf_len, err, err_len);
    dlock__free(buf);
    if (rc != DLOCK_OK) {
        dlock__url_clear(primary);
        dlock__sentinel_free(s);
        return rc;
    }
    *out = s;
    return DLOCK_OK;
}

static void ask_next(dlock__timer *t);

/* Sentinel i answered r (got 1) or failed (got < 0): 1 when the asking
 * is over (a->rc set), else 0 (the next is asked). */
static int judge(dlock__sentinel_asking *a, size_t i, int got, redisReply *r)
{
    dlock__sentinel *s = a->s;
    const char *h = s->addr[i].host;
    int p = s->addr[i].port;
    int over = 0;
    if (got < 0) {
        snprintf(a->err, sizeof a->err, "sentinel %s:%d: %s", h, p, a->x.conn->err);
        a->rc = got == DLOCK_ENOMEM ? DLOCK_ENOMEM : DLOCK_EIO;
    } else if (r->type == REDIS_REPLY_NIL) {
        /* A sentinel that knows no such master: a configuration error,
         * not an outage. Another sentinel may still know it (a sentinel
         * set being reconfigured), so ask on. */
        snprintf(a->err, sizeof a->err, "sentinel %s:%d knows no master named \"%.100s\"", h, p,
                 s->master_name);
        a->rc = DLOCK_EREFUSED;
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(a->err, sizeof a->err, "sentinel %s:%d: %.120s", h, p, r->str);
        a->rc = dlock__map_redis_error(r->str, r->len);
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
               r->element[0]->type == REDIS_REPLY_STRING &&
               r->element[1]->type == REDIS_REPLY_STRING &&
               r->element[0]->len < sizeof a->host && atoi(r->element[1]->str) > 0 &&
               atoi(r->element[1]->str) < 65536) {
        memcpy(a->host, r->element[0]->str, r->element[0]->len);
        a->host[r->element[0]->len] = '\0';
        a->port = atoi(r->element[1]->str);
        s->good = i; /* the caller holds the flight */
        a->rc = DLOCK_OK;
        over = 1;
    } else {
        snprintf(a->err, sizeof a->err,
                 "sentinel %s:%d: unexpected reply to get-master-addr-by-name", h, p);
        a->rc = DLOCK_EPROTO;
    }
    if (r)
        freeReplyObject(r);
    dlock__exchange_stop(&a->x);
    return over;
}

static void answered(dlock__exchange *x, int got, redisReply *r)
{
    dlock__sentinel_asking *a = DLOCK__OWNER(x, dlock__sentinel_asking, x);
    if (judge(a, (a->s->good + a->k - 1) % a->s->n, got, r))
        a->done(a);
    else
        ask_next(&a->kick);
}

/* Ask the next sentinel; the asking is over when none is left, or the
 * deadline passed. */
static void ask_next(dlock__timer *t)
{
    dlock__sentinel_asking *a = DLOCK__OWNER(t, dlock__sentinel_asking, kick);
    dlock__sentinel *s = a->s;
    while (a->k < s->n) {
        int64_t now = dlock__now_ns();
        if (now >= a->deadline_ns) {
            if (a->k == 0)
                snprintf(a->err, sizeof a->err, "no sentinel asked in time");
            a->rc = DLOCK_EIO;
            break;
        }
        size_t i = (s->good + a->k++) % s->n;
        dlock__conn_config cfg = {&s->addr[i], 0, 0, a->tls, 0, NULL};
        dlock__conn *c = dlock__conn_new(&cfg);
        if (!c) {
            snprintf(a->err, sizeof a->err, "out of memory");
            a->rc = DLOCK_ENOMEM;
            break;
        }
        const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", s->master_name};
        int64_t until = now + (int64_t)s->timeout_ms * DLOCK__NS_PER_MS;
        a->x.done = answered;
        int got = dlock__exchange_start(&a->x, a->loop, c, 3, argv,
                                        DLOCK__MIN(until, a->deadline_ns));
        if (got == DLOCK_OK)
            return; /* answered() goes on */
        if (judge(a, i, got, NULL))
            break;
    }
    a->done(a);
}

void dlock__sentinel_ask_start(dlock__sentinel_asking *a, dlock__sentinel *s,
                               dlock__tls_ctx *tls, dlock__loop *l, int64_t deadline_ns,
                               void (*done)(dlock__sentinel_asking *a))
{
    memset(a, 0, sizeof *a);
    a->s = s;
    a->tls = tls;
    a->loop = l;
    a->deadline_ns = deadline_ns;
    a->done = done;
    a->rc = DLOCK_EIO;
    snprintf(a->err, sizeof a->err, "no sentinel configured");
    a->kick.fire = ask_next;
    dlock__defer(l, &a->kick);
}

void dlock__sentinel_ask_stop(dlock__sentinel_asking *a)
{
    if (!a->loop)
        return;
    dlock__timer_clear(a->loop, &a->kick);
    dlock__exchange_stop(&a->x);
}
