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
    char *buf = dlock__malloc(strlen(text) + 16);
    int rc = DLOCK_ENOMEM;
    if (!buf)
        goto fail;
    if (!(s->master_name = dlock__strdup(slash + 1)))
        goto fail;
    /* The primary: credentials from the URL, the master name as a
     * placeholder host (the sentinels give the real one). */
    snprintf(buf, strlen(text) + 16, "redis://%.*s%sx", at ? (int)(at - rest) : 0, rest,
             at ? "@" : "");
    char uerr[200];
    if ((rc = dlock__url_parse(primary, buf, uerr, sizeof uerr)) != DLOCK_OK) {
        snprintf(err, err_len, "sentinel URL: %s", uerr);
        goto fail_keep_err;
    }
    dlock__free(primary->host);
    if (!(primary->host = dlock__strdup(s->master_name))) {
        rc = DLOCK_ENOMEM;
        goto fail;
    }
    primary->port = 0;
    if (hosts < slash && slash[-1] == ',') {
        snprintf(err, err_len, "sentinel URL: empty entry in the sentinel list: %s", FORM);
        rc = DLOCK_EINVAL;
        goto fail_keep_err;
    }
    for (const char *h = hosts; h < slash;) {
        const char *comma = memchr(h, ',', (size_t)(slash - h));
        const char *end = comma ? comma : slash;
        if (end == h || !memchr(h, ':', (size_t)(end - h))) {
            snprintf(err, err_len, "sentinel URL: every sentinel needs host:port: %s", FORM);
            rc = DLOCK_EINVAL;
            goto fail_keep_err;
        }
        if (s->n == DLOCK__SENTINEL_MAX) {
            snprintf(err, err_len, "sentinel URL names more than %d sentinels", DLOCK__SENTINEL_MAX);
            rc = DLOCK_EINVAL;
            goto fail_keep_err;
        }
        snprintf(buf, strlen(text) + 16, "redis://%.*s", (int)(end - h), h);
        if ((rc = dlock__url_parse(&s->addr[s->n], buf, uerr, sizeof uerr)) != DLOCK_OK) {
            snprintf(err, err_len, "sentinel %zu: %s", s->n + 1, uerr);
            goto fail_keep_err;
        }
        s->n++;
        h = comma ? comma + 1 : slash;
    }
    if (s->n == 0) {
        snprintf(err, err_len, "sentinel URL names no sentinel: %s", FORM);
        rc = DLOCK_EINVAL;
        goto fail_keep_err;
    }
    dlock__free(buf);
    *out = s;
    return DLOCK_OK;
fail:
    snprintf(err, err_len, "out of memory");
fail_keep_err:
    dlock__url_clear(primary);
    dlock__free(buf);
    dlock__sentinel_free(s);
    return rc;
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
