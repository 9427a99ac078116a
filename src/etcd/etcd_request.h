/* SPDX-License-Identifier: BSD-3-Clause */
/* A POST to etcd as a request on a loop (loop.h): the exchanges of one
 * call (authentication when needed, the request, on each endpoint in
 * turn, failing over as etcd_http.h says) are transfers on that loop
 * (etcd_transfer.h), or gRPC calls answered on it when the client chose
 * gRPC (etcd_grpc.h), each started from the one before's end, and done()
 * runs once from the loop, never inside the start. dlock__etcd_post() is
 * this request on a private loop; the watchdog's renewals run it on the
 * watchdog's loop (etcd_renew.c). */
#ifndef DLOCK_ETCD_REQUEST_H
#define DLOCK_ETCD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include "error.h"
#include "etcd_exchange.h"
#include "etcd_http.h"
#include "etcd_transfer.h"
#include "loop.h"
#include "loop_poll.h"

typedef struct dlock__etcd_req {
    /* The caller's, set before the start. */
    dlock__errbuf *err;                      /* NULL, or what each member said */
    void (*done)(struct dlock__etcd_req *q); /* once, from the loop */
    /* The outcome, when done() runs: rc as dlock__etcd_post() returns it;
     * on DLOCK_OK the reply object (the caller's to json_decref()). */
    int rc;
    json_t *out;
    long server_code;   /* the gRPC code of an error reply, or 0 */
    /* A DeleteRange's reply read into fields (out stays NULL), set by
     * dlock__etcd_req_post_delete(); NULL: out. */
    struct dlock__etcd_deleted *deleted;
    int unknown_before; /* a copy went to a member that never answered */
    /* The request's own. */
    dlock__etcd *e;
    dlock__loop *loop;
    dlock__etcd_transfer *h;
    const char *path;
    /* The body: over the gateway its text; over gRPC the object itself
     * (held), which each call converts to its message without a trip
     * through text. */
    char *text, *auth_body;
    json_t *body;
    size_t first, i, ep; /* endpoints: the first tried, how many so far, this one */
    int64_t deadline_ns, try_ms, until_ns;
    int pass;            /* 1 once a stale token was dropped on this endpoint */
    int any_sent;
    int running;         /* an exchange is on the loop */
    int grpc;            /* over gRPC (etcd_grpc.h), not the gateway */
    int authenticating;  /* the exchange is the authentication */
    struct dlock__etcd_gcall *g; /* the gRPC call running */
    dlock__etcd_sink s;
    struct curl_slist *hdrs;
    char token[1024];
    char why[300];
    dlock__timer first_step; /* the first exchange starts from the loop */
} dlock__etcd_req;

/* POST body (not taken) to path on loop: each endpoint gets try_ms at
 * most, the whole call deadline_ns. DLOCK_OK: done(q) follows; else
 * (DLOCK_ENOMEM) it never does. q stays put until done. */
int dlock__etcd_req_start(dlock__etcd_req *q, dlock__etcd *e, dlock__loop *loop,
                          const char *path, json_t *body, int64_t deadline_ns, int64_t try_ms);

/* dlock__etcd_req_start() of a body just built (NULL: out of memory,
 * DLOCK_ENOMEM), which it takes, each member getting io_timeout_ms: the
 * shape of most steps of the etcd chains. */
int dlock__etcd_req_post(dlock__etcd_req *q, dlock__etcd *e, dlock__loop *loop, const char *path,
                         json_t *body, int64_t deadline_ns);

/* dlock__etcd_req_post() of a DeleteRange whose reply's fields go to d
 * (etcd_json.h; q->out stays NULL): over gRPC read from the message
 * straight, with no JSON made of it. */
int dlock__etcd_req_post_delete(dlock__etcd_req *q, dlock__etcd *e, dlock__loop *loop,
                                json_t *body, int64_t deadline_ns,
                                struct dlock__etcd_deleted *d);

/* From the loop, while q is in flight: end it now with DLOCK_ECANCELED
 * (done() runs inside this call). */
void dlock__etcd_req_cancel(dlock__etcd_req *q);

/* A blocking call over a request: a private loop, with the caller's
 * cancel fd (-1: none) as one more record; on_cancel(b) runs from the
 * loop when it turns readable (it cancels the request), and the
 * request's done sets b->over. */
typedef struct dlock__etcd_blocking {
    dlock__loop_poll lp;
    dlock__fd_flag cancel;
    void (*on_cancel)(struct dlock__etcd_blocking *b);
    int over;
} dlock__etcd_blocking;

void dlock__etcd_blocking_open(dlock__etcd_blocking *b, int cancel_fd,
                               void (*on_cancel)(dlock__etcd_blocking *b));
/* Turn the loop until b->over. */
void dlock__etcd_blocking_wait(dlock__etcd_blocking *b);
void dlock__etcd_blocking_close(dlock__etcd_blocking *b);

#endif
