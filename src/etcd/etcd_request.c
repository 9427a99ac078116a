/* SPDX-License-Identifier: BSD-3-Clause */
/* A POST to etcd as a request on a loop (etcd_request.h), and the blocking
 * dlock__etcd_post() as that request on a private loop. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "common.h"
#include "etcd_exchange.h"
#include "etcd_grpc.h"
#include "etcd_json.h"
#include "etcd_request.h"
#include "loop_poll.h"

typedef dlock__etcd_req req;

static void finish(req *q, int rc)
{
    dlock__etcd *e = q->e;
    /* Sent to some member and answered by none: nobody knows. */
    if (rc == DLOCK_EIO && q->any_sent)
        rc = DLOCK_EUNKNOWN;
    q->unknown_before = q->any_sent;
    if (q->h) {
        dlock__etcd_transfer_unbind(q->h);
        dlock__etcd_handle_put(e, q->h);
        q->h = NULL;
    }
    free(q->text);
    q->text = NULL;
    json_decref(q->body);
    q->body = NULL;
    dlock__etcd_auth_body_free(q->auth_body);
    q->auth_body = NULL;
    dlock__free(q->s.buf);
    memset(&q->s, 0, sizeof q->s);
    q->rc = rc;
    q->done(q);
}

static void try_endpoint(req *q);

/* This endpoint failed with rc: the next one, when rc is a failure
 * another member may not have and time is left. */
static void endpoint_failed(req *q, int rc)
{
    dlock__etcd *e = q->e;
    if (rc == DLOCK_EUNKNOWN)
        q->any_sent = 1;
    if (q->err)
        dlock__err_append(q->err, "etcd %s: %s", e->url.name[q->ep], q->why);
    q->rc = rc;
    if (!dlock__etcd_retryable(rc) || dlock__now_ns() >= q->deadline_ns) {
        finish(q, rc);
        return;
    }
    /* this member failed: the next call starts with the next one */
    atomic_store(&e->current, (q->ep + 1) % e->url.n);
    q->i++;
    try_endpoint(q);
}

static void http_ended(dlock__etcd_transfer *t);
static void grpc_ended(void *arg, dlock__etcd_answer *a);

/* One gRPC call of the JSON object body. */
static int send_grpc(req *q, const char *path, json_t *body, const char *token)
{
    int rc = dlock__etcd_gcall_start(q->e->grpc, q->ep, path, body,
                                     q->authenticating ? NULL : q->deleted, token, q->until_ns,
                                     q->loop, grpc_ended, q, &q->g, q->why, sizeof q->why);
    q->running = rc == DLOCK_OK;
    return rc;
}

/* One exchange on this endpoint (authenticating: the authentication, its
 * body the text; else the request's own body), over gRPC or the
 * gateway; its end comes from the loop. */
static int send_one(req *q, const char *path, const char *body, const char *token,
                    int authenticating)
{
    q->authenticating = authenticating;
    q->why[0] = '\0';
    int rc;
    if (q->grpc && !authenticating)
        return send_grpc(q, path, q->body, token);
    if (q->grpc) { /* once per token: the text parsed back is no cost */
        json_t *j = json_loads(body, 0, NULL);
        rc = j ? send_grpc(q, path, j, token) : DLOCK_ENOMEM;
        json_decref(j);
        return rc;
    }
    q->s.len = 0;
    rc = dlock__etcd_exchange_begin(q->e, q->h, q->ep, path, body, strlen(body), token, &q->s,
                                    &q->hdrs);
    if (rc == DLOCK_OK &&
        (rc = dlock__etcd_transfer_start(q->h, q->until_ns, http_ended)) != DLOCK_OK) {
        dlock__etcd_exchange_finish(q->h, rc, &q->s, q->hdrs, &(int){0}, &(long){0}, q->why,
                                    sizeof q->why);
        q->hdrs = NULL;
    }
    q->running = rc == DLOCK_OK;
    return rc;
}

/* The outcome of the exchange that just ended, with its timeout mapped:
 * sent and unanswered is unknown, never sent is EIO. */
static int exchange_rc(req *q, long *http)
{
    int sent = 0;
    dlock__etcd_transfer *t = q->h;
    int rc = t->done ? DLOCK_OK : t->over ? DLOCK_ETIMEDOUT : DLOCK_ENOMEM;
    q->running = 0;
    rc = dlock__etcd_exchange_finish(t, rc, &q->s, q->hdrs, &sent, http, q->why, sizeof q->why);
    q->hdrs = NULL;
    if (rc == DLOCK_ETIMEDOUT) {
        snprintf(q->why, sizeof q->why, "no reply in time");
        rc = sent ? DLOCK_EUNKNOWN : DLOCK_EIO;
    }
    return rc;
}

/* The request itself, with the token if the client authenticates. */
static void send_request(req *q)
{
    int rc = send_one(q, q->path, q->text, q->token[0] ? q->token : NULL, 0);
    if (rc != DLOCK_OK)
        finish(q, rc);
}

/* The authentication's reply (rep, taken) or failure. */
static void auth_answered(req *q, int rc, json_t *rep)
{
    dlock__etcd_auth_body_free(q->auth_body);
    q->auth_body = NULL;
    if (rc == DLOCK_OK)
        rc = dlock__etcd_auth_take(q->e, rep, q->why, sizeof q->why);
    json_decref(rep);
    if (rc != DLOCK_OK) {
        endpoint_failed(q, rc);
        return;
    }
    dlock__etcd_token_copy(q->e, q->token, sizeof q->token);
    send_request(q);
}

/* Authenticate first when the client has credentials and no token. */
static void begin_pass(req *q)
{
    q->token[0] = '\0';
    if (q->e->url.user) {
        dlock__etcd_token_copy(q->e, q->token, sizeof q->token);
        if (!q->token[0]) {
            int rc = (q->auth_body = dlock__etcd_auth_body(q->e))
                         ? send_one(q, "/v3/auth/authenticate", q->auth_body, NULL, 1)
                         : DLOCK_ENOMEM;
            if (rc != DLOCK_OK)
                finish(q, rc);
            return;
        }
    }
    send_request(q);
}

/* The request's reply (out, taken, when rc is DLOCK_OK) or failure; code:
 * the gRPC status of a member's error. */
static void request_answered(req *q, int rc, json_t *out, long code)
{
    q->server_code = code;
    if (rc != DLOCK_OK && q->e->url.user && q->pass == 0 && dlock__etcd_token_stale(code, q->why)) {
        dlock__etcd_token_drop(q->e, q->token); /* stale: authenticate again */
        q->pass = 1;
        begin_pass(q);
        return;
    }
    if (rc == DLOCK_OK && q->deleted && out) { /* the gateway's: its fields */
        dlock__etcd_deleted_of_json(out, q->deleted);
        json_decref(out);
        out = NULL;
    }
    if (rc == DLOCK_OK) {
        q->out = out;
        atomic_store(&q->e->current, q->ep);
        finish(q, DLOCK_OK);
        return;
    }
    endpoint_failed(q, rc);
}

static void exchange_answered(req *q, int rc, json_t *out, long code)
{
    if (q->authenticating)
        auth_answered(q, rc, out);
    else
        request_answered(q, rc, out, code);
}

static void http_ended(dlock__etcd_transfer *t)
{
    req *q = t->on_end_arg;
    long http = 0, code = 0;
    json_t *out = NULL;
    int rc = exchange_rc(q, &http);
    if (rc == DLOCK_OK)
        rc = dlock__etcd_decode(&q->s, http, &out, &code, q->why, sizeof q->why);
    exchange_answered(q, rc, out, code);
}

static void grpc_ended(void *arg, dlock__etcd_answer *a)
{
    req *q = arg;
    q->g = NULL;
    q->running = 0;
    snprintf(q->why, sizeof q->why, "%s", a->why);
    exchange_answered(q, a->rc, a->out, a->code);
}

/* The next endpoint, starting with the one that answered last. */
static void try_endpoint(req *q)
{
    dlock__etcd *e = q->e;
    if (q->i >= e->url.n) {
        finish(q, q->rc);
        return;
    }
    q->ep = (q->first + q->i) % e->url.n;
    q->until_ns = DLOCK__MIN(dlock__deadline_after_ms(q->try_ms), q->deadline_ns);
    q->pass = 0;
    begin_pass(q);
}

static void first_step(dlock__timer *t)
{
    try_endpoint(DLOCK__OWNER(t, req, first_step));
}

int dlock__etcd_req_start(req *q, dlock__etcd *e, dlock__loop *loop, const char *path,
                          json_t *body, int64_t deadline_ns, int64_t try_ms)
{
    q->rc = DLOCK_EIO;
    q->out = NULL;
    q->server_code = 0;
    q->deleted = NULL;
    q->unknown_before = q->any_sent = q->running = 0;
    q->e = e;
    q->loop = loop;
    q->path = path;
    q->deadline_ns = deadline_ns;
    q->try_ms = try_ms;
    q->auth_body = NULL;
    q->hdrs = NULL;
    memset(&q->s, 0, sizeof q->s);
    q->g = NULL;
    q->h = NULL;
    /* gRPC when the client chose it (etcd_grpc.h); every path the
     * backend posts to has its method */
    q->grpc = e->grpc && dlock__etcd_grpc_has(path);
    /* over gRPC the object goes to the message straight (etcd_pbjson.h):
     * its text would only be parsed back */
    q->body = q->grpc ? json_incref(body) : NULL;
    q->text = q->grpc ? NULL : json_dumps(body, JSON_COMPACT);
    if (q->text)
        q->h = dlock__etcd_handle_get(e);
    if (!q->grpc && !q->h) {
        free(q->text);
        q->text = NULL;
        return DLOCK_ENOMEM;
    }
    if (q->h) {
        q->h->on_end_arg = q;
        dlock__etcd_transfer_bind(q->h, loop);
    }
    q->first = atomic_load(&e->current) % e->url.n;
    q->i = 0;
    memset(&q->first_step, 0, sizeof q->first_step); /* not registered: fired or new */
    q->first_step.fire = first_step;
    dlock__defer(loop, &q->first_step);
    return DLOCK_OK;
}

int dlock__etcd_req_post(req *q, dlock__etcd *e, dlock__loop *loop, const char *path,
                         json_t *body, int64_t deadline_ns)
{
    int rc = body ? dlock__etcd_req_start(q, e, loop, path, body, deadline_ns,
                                          dlock__etcd_io_timeout_ms(e))
                  : DLOCK_ENOMEM;
    json_decref(body);
    return rc;
}

int dlock__etcd_req_post_delete(req *q, dlock__etcd *e, dlock__loop *loop, json_t *body,
                                int64_t deadline_ns, dlock__etcd_deleted *d)
{
    int rc = dlock__etcd_req_post(q, e, loop, "/v3/kv/deleterange", body, deadline_ns);
    q->deleted = d; /* before the first step, which the loop runs */
    return rc;
}

void dlock__etcd_req_cancel(req *q)
{
    dlock__timer_clear(q->loop, &q->first_step);
    if (q->running && q->g) {
        q->running = 0;
        dlock__etcd_gcall_cancel(q->g); /* its late completion frees only itself */
        q->g = NULL;
    } else if (q->running) {
        q->running = 0;
        dlock__etcd_transfer_end(q->h); /* cut short: curl closes its connection */
        curl_slist_free_all(q->hdrs);
        q->hdrs = NULL;
    }
    finish(q, DLOCK_ECANCELED);
}

/* ---- the blocking call: the request on a private loop ---------------------- */

static void flag_raised(dlock__fd_flag *f)
{
    dlock__etcd_blocking *b = DLOCK__OWNER(f, dlock__etcd_blocking, cancel);
    if (!b->over)
        b->on_cancel(b);
}

void dlock__etcd_blocking_open(dlock__etcd_blocking *b, int cancel_fd,
                               void (*on_cancel)(dlock__etcd_blocking *b))
{
    memset(b, 0, sizeof *b);
    dlock__loop_poll_init(&b->lp);
    /* The first record on an empty loop: there is room. */
    (void)dlock__fd_flag_watch(&b->lp.loop, &b->cancel, cancel_fd);
    b->cancel.on_raise = flag_raised;
    b->on_cancel = on_cancel;
}

static int blocking_over(void *arg)
{
    return ((dlock__etcd_blocking *)arg)->over;
}

void dlock__etcd_blocking_wait(dlock__etcd_blocking *b)
{
    dlock__loop_poll_run(&b->lp, blocking_over, b, INT64_MAX);
}

void dlock__etcd_blocking_close(dlock__etcd_blocking *b)
{
    dlock__fd_flag_clear(&b->lp.loop, &b->cancel);
    dlock__loop_poll_close(&b->lp);
}

typedef struct call {
    dlock__etcd_blocking b;
    req q;
} call;

static void call_done(req *q)
{
    DLOCK__OWNER(q, call, q)->b.over = 1;
}

static void call_cancelled(dlock__etcd_blocking *b)
{
    dlock__etcd_req_cancel(&DLOCK__OWNER(b, call, b)->q);
}

int dlock__etcd_post(dlock__etcd *e, const char *path, json_t *body,
                     json_t **out, int64_t deadline_ns, int cancel_fd,
                     dlock__errbuf *err, long *server_code, int *unknown_before)
{
    *out = NULL;
    if (server_code)
        *server_code = 0;
    call k;
    dlock__etcd_blocking_open(&k.b, cancel_fd, call_cancelled);
    k.q.err = err;
    k.q.done = call_done;
    int rc = dlock__etcd_req_start(&k.q, e, &k.b.lp.loop, path, body, deadline_ns,
                                   e->io_timeout_ms);
    if (rc == DLOCK_OK) {
        dlock__etcd_blocking_wait(&k.b);
        rc = k.q.rc;
        *out = k.q.out;
        if (server_code)
            *server_code = k.q.server_code;
        if (unknown_before)
            *unknown_before = k.q.unknown_before;
    }
    dlock__etcd_blocking_close(&k.b);
    return rc;
}
