/* SPDX-License-Identifier: BSD-3-Clause */
/* One reusable curl transfer (an easy handle and its own multi handle)
 * driven through libcurl's multi_socket interface on a loop (loop.h):
 * curl's sockets are io records (curl_multi_assign maps a socket to its
 * record), curl's timeout is a timer, and so is the deadline of each
 * exchange. Nothing here waits except the loop.
 *
 * A transfer is pooled by etcd_http.c and keeps its connection between
 * calls (curl reuses it). It is bound to one loop at a time (a blocking
 * call's private loop, or the watchdog's for a renewal):
 * dlock__etcd_transfer_bind() moves the records of the sockets curl still
 * watches onto that loop, dlock__etcd_transfer_unbind() takes them off
 * again, keeping what curl asked for. An exchange is a request on the
 * bound loop (dlock__etcd_transfer_start(): its end is a callback). */
#ifndef DLOCK_ETCD_TRANSFER_H
#define DLOCK_ETCD_TRANSFER_H

#include <curl/curl.h>

#include "loop_poll.h"

/* Sockets one transfer may have open at once: curl uses one, two while
 * it tries an IPv6 and an IPv4 address side by side. */
#define DLOCK__ETCD_SOCKETS 8
/* Sockets one transfer's connection cache may hold, open or idle: curl
 * keeps a few connections per multi handle (CURLMOPT_MAXCONNECTS). */
#define DLOCK__ETCD_OPEN_SOCKETS 16

struct dlock__etcd_transfer;

typedef struct dlock__etcd_socket {
    dlock__io io;
    struct dlock__etcd_transfer *t;
    int used; /* curl watches io.fd */
} dlock__etcd_socket;

typedef struct dlock__etcd_transfer {
    CURL *easy;
    CURLM *multi;
    dlock__loop *loop; /* the bound loop, NULL between calls */
    dlock__etcd_socket sockets[DLOCK__ETCD_SOCKETS];
    dlock__timer curl_timer; /* CURLMOPT_TIMERFUNCTION's */
    int curl_timer_on;
    dlock__timer deadline; /* this exchange's */
    /* this exchange */
    int done, over, failed;
    int running; /* started and not ended yet */
    CURLcode res;
    void (*on_end)(struct dlock__etcd_transfer *t);
    void *on_end_arg; /* for on_end, the starter's */
    struct dlock__etcd_transfer *next; /* the idle pool (etcd_http.c) */
    char curl_err[CURL_ERROR_SIZE];    /* CURLOPT_ERRORBUFFER: curl's detail */
    /* Every socket curl opened for this transfer and has not closed
     * (-1: a free slot), watched or idle: a child of fork() blinds them
     * before curl closes them (dlock__etcd_transfer_free_inherited). */
    curl_socket_t open[DLOCK__ETCD_OPEN_SOCKETS];
} dlock__etcd_transfer;

/* NULL when out of memory. */
dlock__etcd_transfer *dlock__etcd_transfer_new(void);
/* Unbound transfers only. */
void dlock__etcd_transfer_free(dlock__etcd_transfer *t);
/* The same in a child of fork(): the sockets are shared with the parent,
 * and curl's close of a TLS connection reads from it and sends a
 * close_notify, which would take the parent's bytes or end its session.
 * So each socket curl opened is first made a copy of /dev/null (dup2),
 * where those reads and writes fail harmlessly; then curl closes it. */
void dlock__etcd_transfer_free_inherited(dlock__etcd_transfer *t);

/* After curl_easy_reset() of t->easy, before an exchange: keep curl's
 * detail message in t->curl_err and track the sockets it opens in
 * t->open. */
void dlock__etcd_transfer_setup(dlock__etcd_transfer *t);

void dlock__etcd_transfer_bind(dlock__etcd_transfer *t, dlock__loop *loop);
void dlock__etcd_transfer_unbind(dlock__etcd_transfer *t);

/* Start the exchange set up on t->easy on the bound loop: on_end(t)
 * follows from the loop, once, never inside this call, when curl
 * completed it (t->done, curl's result in t->res), deadline_ns passed
 * (t->over) or a socket or timer record could not be set (t->failed).
 * DLOCK_OK, or DLOCK_ENOMEM when curl cannot start it (then on_end is
 * never called). The easy handle stays in the multi until
 * dlock__etcd_transfer_end(), for curl_easy_getinfo(). */
int dlock__etcd_transfer_start(dlock__etcd_transfer *t, int64_t deadline_ns,
                               void (*on_end)(dlock__etcd_transfer *t));

/* Take the easy handle out of the multi (an exchange cut short closes
 * its connection); ends an exchange still running without on_end. */
void dlock__etcd_transfer_end(dlock__etcd_transfer *t);

#endif
