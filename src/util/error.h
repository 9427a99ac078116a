/* SPDX-License-Identifier: BSD-3-Clause */
/* Error codes: strings, mapping of Redis error replies, detail messages. */
#ifndef DLOCK_ERROR_H
#define DLOCK_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include "common.h"

/* Map a Redis error reply ("WRONGTYPE ...", "ERR Error running script ...
 * NOPERM ...") to a dlock code. Never returns DLOCK_OK. */
int dlock__map_redis_error(const char *msg, size_t len);

/* Room for a detail message; 5 nodes with a server quote each fit. */
#define DLOCK__ERRMSG_MAX 1024

/* A detail message, allocated on the first error (most handles never fail,
 * and a thousand bytes each add up over 100k handles). If that allocation
 * fails the message is simply empty: an out-of-memory error is still
 * reported through its code. */
typedef struct dlock__errbuf {
    char *msg; /* NULL: no message */
} dlock__errbuf;

void dlock__err_clear(dlock__errbuf *e);
/* The message, or "" when there is none. */
const char *dlock__err_str(const dlock__errbuf *e);
void dlock__err_free(dlock__errbuf *e);
/* Replace the message (printf format). Truncates silently. */
void dlock__err_set(dlock__errbuf *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Append to the message, separated by "; ". Truncates silently. */
void dlock__err_append(dlock__errbuf *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Copy at most len-1 bytes of src into dst (NUL-terminated); dst may be NULL. */
void dlock__copy_msg(char *dst, size_t len, const char *src);

#endif
