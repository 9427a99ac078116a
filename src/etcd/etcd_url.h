/* SPDX-License-Identifier: BSD-3-Clause */
/* Parsing of etcd URLs: etcd://[user:password@]host:port[,host:port...],
 * and etcds://, the same over TLS (https to every member, as rediss:// is
 * redis:// over TLS).
 * One URL names every member the client may talk to (the endpoints it
 * fails over between). Pure: no I/O, and built with or without etcd
 * support, so that a Redis-only build can say what it does not do. */
#ifndef DLOCK_ETCD_URL_H
#define DLOCK_ETCD_URL_H

#include <stddef.h>

#define DLOCK__ETCD_MAX_ENDPOINTS 16

typedef struct dlock__etcd_url {
    size_t n;                                   /* endpoints, >= 1 */
    char *endpoint[DLOCK__ETCD_MAX_ENDPOINTS]; /* "http://host:port" or https:// */
    char *name[DLOCK__ETCD_MAX_ENDPOINTS];     /* "host:port" */
    int tls;                                    /* etcds://: https to every member */
    char *user;                                 /* NULL: no authentication */
    char *password;
} dlock__etcd_url;

/* 1 if text starts with "etcd://" or "etcds://" (any case), else 0. */
int dlock__etcd_url_is(const char *text);

/* 1 if text has no scheme: after an etcd:// URL, "host:port" continues
 * its list (a comma-separated list split into URLs, as $DLOCK_REDIS is). */
int dlock__etcd_url_more(const char *text);

/* Parse one or more etcd:// URLs into one endpoint list (every URL adds its
 * hosts; credentials, when given more than once, must agree; etcd:// and
 * etcds:// are not mixed). Returns
 * DLOCK_OK, DLOCK_EINVAL with a reason in err, or DLOCK_ENOMEM. On error
 * `out` holds nothing to free; on success dlock__etcd_url_clear() it. */
int dlock__etcd_url_parse(dlock__etcd_url *out, const char *const *urls,
                          size_t n_urls, char *err, size_t err_len);

void dlock__etcd_url_clear(dlock__etcd_url *u);

/* Make every endpoint https:// (the tls option on etcd:// URLs, as on
 * redis:// ones). DLOCK_OK or DLOCK_ENOMEM (u unchanged). */
int dlock__etcd_url_use_tls(dlock__etcd_url *u);

#endif
