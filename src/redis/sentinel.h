/* SPDX-License-Identifier: BSD-3-Clause */
/* A node reached through Redis Sentinel: the URL names sentinels and a
 * master name; the primary's address is asked of the sentinels (SENTINEL
 * get-master-addr-by-name), remembered, and asked again after a connection
 * to it failed or it answered READONLY (a failover moved the primary).
 * Every new connection to the primary checks ROLE in its handshake before
 * any command of the caller's is sent (src/redis/conn.c), so a stale answer or a
 * demoted primary is never written to.
 *
 * URL: redis-sentinel://[user[:password]@]host:port[,host:port...]/MASTER
 * The user and password are the primary's (as in redis://); the sentinels
 * are asked without AUTH. With the client's tls option every connection,
 * sentinels included, speaks TLS. */
#ifndef DLOCK_SENTINEL_H
#define DLOCK_SENTINEL_H

#include <pthread.h>
#include <stddef.h>

#include "exchange.h"
#include "flight.h"
#include "loop.h"
#include "tls.h"
#include "url.h"

#define DLOCK__SENTINEL_MAX 16
#define DLOCK__SENTINEL_SCHEME "redis-sentinel://"

typedef struct dlock__sentinel {
    char *master_name;
    size_t n;
    dlock__url addr[DLOCK__SENTINEL_MAX];
    int timeout_ms; /* per sentinel asked (the client's connect timeout) */
    /* Guards the flight: one thread asks, the others observe it and use
     * its answer (flight.h). Never held across I/O. */
    pthread_mutex_t ask_mu;
    dlock__flight flight;
    /* The primary's address, under the owning node's mutex. */
    char host[256];
    int port;
    int known;
    unsigned generation; /* bumped by every new answer */
    size_t good;         /* the sentinel that answered last: asked first */
} dlock__sentinel;

/* 1 if text starts with the sentinel scheme. */
int dlock__sentinel_is_url(const char *text);

/* Parse a sentinel URL into *out (allocated) and the primary's credentials
 * into primary (host: the master name, port 0: filled in per connection).
 * DLOCK_OK, DLOCK_EINVAL with a reason in err, or DLOCK_ENOMEM. */
int dlock__sentinel_parse(dlock__sentinel **out, dlock__url *primary, const char *text,
                          char *err, size_t err_len);
void dlock__sentinel_free(dlock__sentinel *s);
/* Free in a child of fork(): the mutex is not touched (a thread that does
 * not exist here may hold it). */
void dlock__sentinel_forget(dlock__sentinel *s);

/* Asking the sentinels, in turn, for the primary's address: a chain of
 * exchanges (exchange.h) on the loop of the request that needs it, each
 * sentinel given up to timeout_ms, the whole within the request's
 * deadline. */
typedef struct dlock__sentinel_asking {
    dlock__sentinel *s;
    dlock__tls_ctx *tls;
    dlock__loop *loop;
    int64_t deadline_ns;
    size_t k; /* sentinels asked so far */
    int rc;   /* DLOCK_OK with host and port set, or why not (err) */
    char host[256];
    int port;
    char err[200];
    dlock__exchange x;
    dlock__timer kick; /* the next sentinel, from the loop */
    void (*done)(struct dlock__sentinel_asking *a);
} dlock__sentinel_asking;

/* Start asking on loop l; done is called from the loop once (never
 * inside this call), unless dlock__sentinel_ask_stop comes first. rc
 * then: DLOCK_OK with host/port set; DLOCK_EIO when none answered (err
 * names the last failure); DLOCK_EREFUSED when a sentinel answered that
 * it knows no master of that name; DLOCK_EPROTO; DLOCK_ENOMEM. The caller
 * holds the sentinel's flight. */
void dlock__sentinel_ask_start(dlock__sentinel_asking *a, dlock__sentinel *s,
                               dlock__tls_ctx *tls, dlock__loop *l, int64_t deadline_ns,
                               void (*done)(dlock__sentinel_asking *a));
void dlock__sentinel_ask_stop(dlock__sentinel_asking *a);

#endif
