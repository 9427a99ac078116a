/* SPDX-License-Identifier: BSD-3-Clause */
/* Parsing of node URLs: redis://[user[:password]@]host[:port][/db], the
 * same with rediss:// (TLS), and unix:///path[?db=N&user=U&password=P].
 * Pure: no I/O. */
#ifndef DLOCK_URL_H
#define DLOCK_URL_H

#include <stddef.h>

typedef struct dlock__url {
    int is_unix;    /* 1: `host` is a socket path */
    char *host;     /* host name, IPv4/IPv6 literal (no brackets) or path */
    int port;       /* 1..65535; 0 for unix sockets */
    char *user;     /* ACL user, or NULL for the default user */
    char *password; /* NULL: no AUTH */
    int db;         /* SELECT on connect when > 0 */
    int tls;        /* rediss:// */
} dlock__url;

/* Parse `text` into `out` (which the caller dlock__url_clear()s on success).
 * Returns DLOCK_OK or DLOCK_EINVAL (with a reason in err), or DLOCK_ENOMEM. On error `out` holds nothing to free. */
int dlock__url_parse(dlock__url *out, const char *text, char *err,
                     size_t err_len);

void dlock__url_clear(dlock__url *u);

#endif
