/* SPDX-License-Identifier: BSD-3-Clause */
/* Parsing of ZooKeeper URLs:
 *
 *   zk://[user:password@]host:port[,host:port...][/chroot][?session_timeout_ms=N]
 *
 * One URL names every member of the ensemble (the C client fails over
 * between them itself); a client split into several URLs at its commas
 * (the CLI's DLOCK_REDIS list) continues the first with scheme-less
 * "host:port" ones. user:password is ZooKeeper's digest authentication.
 * session_timeout_ms is the session's timeout asked of the server, which
 * is every hold's lease (docs/backends.md). Pure: no I/O, and built with
 * or without ZooKeeper support, so that a build without it can say what
 * it does not do. */
#ifndef DLOCK_ZK_URL_H
#define DLOCK_ZK_URL_H

#include <stddef.h>
#include <stdint.h>

/* The session timeout asked for when the URL names none (ms). */
#define DLOCK__ZK_SESSION_DEFAULT_MS 10000

typedef struct dlock__zk_url {
    char *hosts;    /* "host:port,host:port/chroot": zookeeper_init()'s */
    char *user;     /* NULL: no digest authentication */
    char *password; /* with user */
    int64_t session_timeout_ms;
} dlock__zk_url;

/* 1 if text starts with "zk://" (any case), else 0. */
int dlock__zk_url_is(const char *text);

/* The backend's wants (backend.h): a client whose first URL is zk://. */
int dlock__zk_wanted(const char *const *urls, size_t n_urls);

/* Parse the client's URLs: the first zk://, the others scheme-less
 * "host:port" continuing its host list. DLOCK_OK, DLOCK_EINVAL with a
 * reason in err, or DLOCK_ENOMEM. On error `out` holds nothing to free;
 * on success dlock__zk_url_clear() it. */
int dlock__zk_url_parse(dlock__zk_url *out, const char *const *urls, size_t n_urls, char *err,
                        size_t err_len);

void dlock__zk_url_clear(dlock__zk_url *u);

#endif
