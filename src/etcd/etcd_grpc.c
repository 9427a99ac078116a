/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd backend's gRPC transport (etcd_grpc.h): channels, and one
 * unary call as a record shared with whoever takes its completion (who
 * polls the completion queue: etcd_grpc_poll.c). The C core calls stay
 * in this file and that one. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "clock.h"
#include "etcd/etcdserver/etcdserverpb/rpc.pb-c.h"
#include "etcd_grpc.h"
#include "etcd_grpc_call.h"
#include "etcd_json.h"
#include "etcd_pbjson.h"
#include "etcd_tls.h"
#include "fork.h"
#include "loop_poll.h"

/* The largest reply taken, as on the gateway (etcd_http.c's BODY_MAX). */
#define REPLY_MAX (16 << 20)
/* Reconnecting after a member went away: a call on a channel waiting to
 * reconnect fails at once (and the request tries the next member), so
 * the wait is kept short for the member's return to be seen soon. */
#define RECONNECT_FIRST_MS 100
#define RECONNECT_MAX_MS 1000

/* The gateway paths the backend posts to, as gRPC methods. */
typedef dlock__etcd_gmethod method;

static const method methods[] = {
    {"/v3/kv/range", "/etcdserverpb.KV/Range", &etcdserverpb__range_request__descriptor,
     &etcdserverpb__range_response__descriptor, 0},
    {"/v3/kv/txn", "/etcdserverpb.KV/Txn", &etcdserverpb__txn_request__descriptor,
     &etcdserverpb__txn_response__descriptor, 0},
    {"/v3/kv/deleterange", "/etcdserverpb.KV/DeleteRange",
     &etcdserverpb__delete_range_request__descriptor,
     &etcdserverpb__delete_range_response__descriptor, 0},
    {"/v3/lease/grant", "/etcdserverpb.Lease/LeaseGrant",
     &etcdserverpb__lease_grant_request__descriptor,
     &etcdserverpb__lease_grant_response__descriptor, 0},
    {"/v3/lease/revoke", "/etcdserverpb.Lease/LeaseRevoke",
     &etcdserverpb__lease_revoke_request__descriptor,
     &etcdserverpb__lease_revoke_response__descriptor, 0},
    /* a bidirectional stream: one request, the close, one reply */
    {"/v3/lease/keepalive", "/etcdserverpb.Lease/LeaseKeepAlive",
     &etcdserverpb__lease_keep_alive_request__descriptor,
     &etcdserverpb__lease_keep_alive_response__descriptor, 1},
    {"/v3/lease/timetolive", "/etcdserverpb.Lease/LeaseTimeToLive",
     &etcdserverpb__lease_time_to_live_request__descriptor,
     &etcdserverpb__lease_time_to_live_response__descriptor, 0},
    {"/v3/auth/authenticate", "/etcdserverpb.Auth/Authenticate",
     &etcdserverpb__authenticate_request__descriptor,
     &etcdserverpb__authenticate_response__descriptor, 0},
};
#define N_METHODS DLOCK__ARRAY_LEN(methods)
_Static_assert(N_METHODS == DLOCK__ETCD_GRPC_METHODS, "etcd_grpc_call.h counts the methods");


int dlock__etcd_grpc_built(void)
{
    return 1;
}

static const method *method_of(const char *path)
{
    for (size_t i = 0; i < N_METHODS; i++)
        if (strcmp(methods[i].path, path) == 0)
            return &methods[i];
    return NULL;
}

int dlock__etcd_grpc_has(const char *path)
{
    return method_of(path) != NULL;
}

/* ---- the client's transport ------------------------------------------------ */

/* A whole PEM file, NUL-terminated (NULL: not read; err says why). */
static char *read_pem(const char *path, char *err, size_t err_len)
{
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (1L << 20) &&
        fseek(f, 0, SEEK_SET) == 0 && (text = dlock__malloc((size_t)n + 1)) != NULL &&
        fread(text, 1, (size_t)n, f) == (size_t)n)
        text[n] = '\0';
    else {
        dlock__free(text);
        text = NULL;
        snprintf(err, err_len, "etcd: cannot read %s for gRPC's TLS", path);
    }
    if (f)
        fclose(f);
    return text;
}

/* The channel credentials: plain, or TLS with the client's files (the
 * files were checked at the client's making, etcd_tls.h). gRPC takes PEM
 * text, not a CA directory, and has no switch for no verification: those
 * two options are refused. */
static int credentials(const dlock__etcd_tls *t, grpc_channel_credentials **out, char *err,
                       size_t err_len)
{
    *out = NULL;
    if (!t || !t->on) {
        *out = grpc_insecure_credentials_create();
        return DLOCK_OK;
    }
    if (t->ca_dir || t->insecure) {
        snprintf(err, err_len, "etcd: %s is not built on the gRPC transport: use the gateway "
                 "(unset DLOCK_ETCD_TRANSPORT)", t->ca_dir ? "tls_ca_dir" : "tls_insecure");
        return DLOCK_ENOTSUP;
    }
    char *ca = NULL, *cert = NULL, *key = NULL;
    int rc = DLOCK_OK;
    if ((t->ca_file && !(ca = read_pem(t->ca_file, err, err_len))) ||
        (t->cert_file && !(cert = read_pem(t->cert_file, err, err_len))) ||
        (t->key_file && !(key = read_pem(t->key_file, err, err_len))))
        rc = DLOCK_EINVAL;
    if (rc == DLOCK_OK) {
        /* no CA file: gRPC's default roots */
        grpc_ssl_pem_key_cert_pair pair = {key, cert};
        *out = grpc_ssl_credentials_create(ca, cert && key ? &pair : NULL, NULL, NULL);
    }
    if (key)
        memset(key, 0, strlen(key));
    dlock__free(ca);
    dlock__free(cert);
    dlock__free(key);
    return rc;
}

static grpc_channel *channel_new(const char *target, grpc_channel_credentials *creds,
                                 const char *server_name, int connect_timeout_ms)
{
    grpc_arg args[7];
    memset(args, 0, sizeof args);
    const char *keys[] = {GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
                          GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                          GRPC_ARG_ENABLE_RETRIES, GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL};
    /* the minimum backoff is also how long one connect may take */
    int values[] = {RECONNECT_FIRST_MS, connect_timeout_ms > 0 ? connect_timeout_ms : 1000,
                    RECONNECT_MAX_MS, REPLY_MAX, 0, 1};
    size_t n = DLOCK__ARRAY_LEN(keys);
    for (size_t i = 0; i < n; i++) {
        args[i].type = GRPC_ARG_INTEGER;
        args[i].key = (char *)keys[i];
        args[i].value.integer = values[i];
    }
    if (server_name) { /* the name the certificate must hold, and SNI */
        args[n].type = GRPC_ARG_STRING;
        args[n].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
        args[n++].value.string = (char *)server_name;
    }
    grpc_channel_args ca = {n, args};
    return grpc_channel_create(target, creds, &ca);
}

int dlock__etcd_grpc_new(dlock__etcd_grpc **out, const dlock__etcd_url *u,
                         const struct dlock__etcd_tls *t, int connect_timeout_ms, char *err,
                         size_t err_len)
{
    *out = NULL;
    grpc_channel_credentials *creds = NULL;
    /* The C core's threads and state do not survive fork(): in a child of
     * a process that started it, it must not be used (it would wait for
     * threads that are not there), so a client made there stays on the
     * gateway. Recorded as the fork generation + 1 it was started in. */
    static _Atomic unsigned long started_in;
    unsigned long gen = dlock__fork_watch(), was = atomic_load(&started_in);
    if (was && was != gen + 1)
        return DLOCK_OK;
    atomic_store(&started_in, gen + 1);
    dlock__etcd_grpc *g = dlock__calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, err_len, "out of memory");
        return DLOCK_ENOMEM;
    }
    grpc_init();
    int rc = credentials(t, &creds, err, err_len);
    if (rc != DLOCK_OK) {
        dlock__free(g);
        grpc_shutdown();
        return rc;
    }
    g->tls = t && t->on;
    dlock__etcd_grpc_efd_init(g);
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&g->mu, NULL));
    DLOCK__CHECK_PTHREAD(pthread_cond_init(&g->cv, NULL));
    g->cq = grpc_completion_queue_create_for_next(NULL);
    g->n = u->n;
    for (size_t i = 0; i < u->n; i++) {
        g->ch[i] = channel_new(u->name[i], creds, t && t->on ? t->server_name : NULL,
                               connect_timeout_ms);
        for (size_t k = 0; k < N_METHODS; k++)
            g->reg[i][k] = grpc_channel_register_call(g->ch[i], methods[k].name, NULL, NULL);
    }
    grpc_channel_credentials_release(creds);
    rc = pthread_create(&g->thread, NULL, dlock__etcd_grpc_poll_main, g);
    g->thread_on = rc == 0;
    if (rc == 0) /* a name to find it by (top -H, the tests' wake-up count) */
        (void)pthread_setname_np(g->thread, "dlock-grpc");
    if (rc != 0) {
        dlock__etcd_grpc_free(g);
        snprintf(err, err_len, "etcd: no thread for gRPC's completion queue");
        return DLOCK_ENOMEM;
    }
    *out = g;
    return DLOCK_OK;
}

void dlock__etcd_grpc_free(dlock__etcd_grpc *g)
{
    if (!g)
        return;
    /* Calls cancelled late are still in the queue: the thread frees each
     * as it completes, then sees the shutdown. A channel's watch (one
     * that connects: etcd_grpc_poll.c) has no deadline: destroying the
     * channel ends it (the channel shuts down, a change of state), and
     * closing keeps it from being made again. */
    dlock__etcd_grpc_closing(g);
    for (size_t i = 0; i < g->n; i++)
        grpc_channel_destroy(g->ch[i]);
    grpc_completion_queue_shutdown(g->cq);
    if (g->thread_on)
        DLOCK__CHECK_PTHREAD(pthread_join(g->thread, NULL));
    else /* no thread was made: no call either; the queue says it is shut */
        dlock__etcd_grpc_poll_main(g);
    grpc_completion_queue_destroy(g->cq);
    dlock__etcd_grpc_efd_close_spares(g);
    DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&g->cv));
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&g->mu));
    dlock__free(g);
    grpc_shutdown();
}

void dlock__etcd_grpc_free_inherited(dlock__etcd_grpc *g)
{
    /* The C core's state is the parent's: leaked, never touched. The
     * spare eventfds are this process's copies: closed (a call's own,
     * in flight at the fork, is left with its record). */
    if (g)
        dlock__etcd_grpc_efd_close_spares(g);
}

/* ---- one call --------------------------------------------------------------- */

/* The gateway's JSON object for the method: packed, as the call's
 * message. */
static int pack_body(dlock__etcd_gcall *c, json_t *body, char *why, size_t why_len)
{
    ProtobufCMessage *m = NULL;
    int rc = dlock__etcd_pb_of_json(c->m->in, body, &m, why, why_len);
    if (rc != DLOCK_OK)
        return rc;
    size_t n = protobuf_c_message_get_packed_size(m);
    grpc_slice s = grpc_slice_malloc(n);
    protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
    dlock__etcd_pb_free(m);
    c->send = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return DLOCK_OK;
}

static void call_done(dlock__fd_flag *f);

static int start_batch(dlock__etcd_gcall *c, int64_t until_ns)
{
    dlock__etcd_grpc *g = c->g;
    dlock__etcd_grpc_catch_up(g);
    int64_t left_ns = until_ns - dlock__now_ns();
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_nanos(left_ns > 0 ? left_ns : 0,
                                                             GPR_TIMESPAN));
    size_t k = (size_t)(c->m - methods);
    c->ready_at_start = grpc_channel_check_connectivity_state(g->ch[c->ep], 0) ==
                        GRPC_CHANNEL_READY;
    if (!c->ready_at_start)
        dlock__etcd_grpc_watch(g, c->ep);
    c->call = grpc_channel_create_registered_call(g->ch[c->ep], NULL, GRPC_PROPAGATE_DEFAULTS,
                                                  g->cq, g->reg[c->ep][k], deadline, NULL);
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = c->has_token ? 1 : 0;
    ops[0].data.send_initial_metadata.metadata = c->has_token ? &c->token : NULL;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = c->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &c->head;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &c->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &c->tail;
    ops[5].data.recv_status_on_client.status = &c->status;
    ops[5].data.recv_status_on_client.status_details = &c->details;
    return c->call && grpc_call_start_batch(c->call, ops, 6, c, NULL) == GRPC_CALL_OK
               ? DLOCK_OK
               : DLOCK_ENOMEM;
}

int dlock__etcd_gcall_start(dlock__etcd_grpc *g, size_t ep, const char *path, json_t *body,
                            dlock__etcd_deleted *deleted, const char *token, int64_t until_ns,
                            dlock__loop *loop, void (*on_end)(void *arg, dlock__etcd_answer *a),
                            void *arg, dlock__etcd_gcall **out, char *why, size_t why_len)
{
    *out = NULL;
    const method *m = method_of(path);
    if (!m) {
        snprintf(why, why_len, "%s has no gRPC method here", path);
        return DLOCK_EPROTO;
    }
    dlock__etcd_gcall *c = dlock__calloc(1, sizeof *c);
    if (!c)
        return DLOCK_ENOMEM;
    c->g = g;
    c->m = m;
    c->ep = ep;
    c->efd = -1;
    c->details = grpc_empty_slice();
    grpc_metadata_array_init(&c->head);
    grpc_metadata_array_init(&c->tail);
    atomic_init(&c->holders, 2);
    c->loop = loop;
    c->deleted = m->out == &etcdserverpb__delete_range_response__descriptor ? deleted : NULL;
    c->on_end = on_end;
    c->arg = arg;
    if (token && *token) {
        c->token.key = grpc_slice_from_static_string("token");
        c->token.value = grpc_slice_from_copied_string(token);
        c->has_token = 1;
    }
    int rc = pack_body(c, body, why, why_len);
    if (rc == DLOCK_OK && (c->efd = dlock__etcd_grpc_efd_take(g)) < 0)
        rc = errno == ENOMEM ? DLOCK_ENOMEM : DLOCK_EIO;
    if (rc == DLOCK_OK && (rc = dlock__fd_flag_watch(loop, &c->done, c->efd)) == DLOCK_OK) {
        c->done.on_raise = call_done;
        c->done.io.alone = dlock__etcd_gcall_alone;
        c->done.io.polled = dlock__etcd_gcall_polled;
    }
    /* released to the poller: what the loop set up happens before what
     * it reads at the completion (its exchange acquires) */
    atomic_store_explicit(&c->holders, 2, memory_order_release);
    if (rc == DLOCK_OK && (rc = start_batch(c, until_ns)) != DLOCK_OK)
        dlock__fd_flag_clear(loop, &c->done);
    if (rc != DLOCK_OK) {
        dlock__etcd_gcall_free(c); /* no batch started: nothing in the queue */
        return rc;
    }
    /* An application's loop never polls the queue: the thread does. A
     * private loop's call is its caller's to poll for, or to hand back
     * (dlock__etcd_gcall_alone(), dlock__etcd_gcall_polled()). */
    if (!dlock__loop_is_poll(loop))
        dlock__etcd_gcall_hand_back(c);
    *out = c;
    return DLOCK_OK;
}

void dlock__etcd_gcall_cancel(dlock__etcd_gcall *c)
{
    dlock__fd_flag_clear(c->loop, &c->done);
    grpc_call_cancel(c->call, NULL);
    /* nobody's loop polls for it now: the thread takes its completion and
     * frees it, unless that came */
    dlock__etcd_gcall_hand_back(c);
    dlock__etcd_gcall_let_go(c);
}

/* ---- the answer, on the loop ------------------------------------------------ */

/* A DeleteRange's reply read straight (etcd_json.h's fields). */
static void deleted_of_pb(const Etcdserverpb__DeleteRangeResponse *r, dlock__etcd_deleted *d)
{
    memset(d, 0, sizeof *d);
    d->deleted = r->deleted;
    d->has_prev = r->n_prev_kvs > 0 && r->prev_kvs[0];
    d->prev_create_rev = d->has_prev ? r->prev_kvs[0]->create_revision : 0;
}

/* The reply's bytes as the method's message, as the gateway's JSON, or
 * into the caller's fields (a DeleteRange's, c->deleted). */
static int reply_read(dlock__etcd_gcall *c, dlock__etcd_answer *a)
{
    grpc_byte_buffer_reader r;
    if (!c->recv || !grpc_byte_buffer_reader_init(&r, c->recv)) {
        snprintf(a->why, sizeof a->why, "an OK status without a reply");
        return DLOCK_EPROTO;
    }
    grpc_slice all = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    ProtobufCMessage *m = protobuf_c_message_unpack(c->m->out, &dlock__etcd_pb_allocator,
                                                    GRPC_SLICE_LENGTH(all),
                                                    GRPC_SLICE_START_PTR(all));
    grpc_slice_unref(all);
    if (!m) {
        snprintf(a->why, sizeof a->why, "a reply that is not a %s", c->m->out->name);
        return DLOCK_EPROTO;
    }
    if (c->deleted) { /* its fields, no JSON */
        deleted_of_pb((const Etcdserverpb__DeleteRangeResponse *)m, c->deleted);
        dlock__etcd_pb_free(m);
        return DLOCK_OK;
    }
    json_t *j = dlock__etcd_json_of_pb(m);
    dlock__etcd_pb_free(m);
    if (j && c->m->stream_of_one) {
        json_t *wrapped = json_pack("{s:o}", "result", j);
        j = wrapped;
    }
    if (!j)
        return DLOCK_ENOMEM;
    a->out = j;
    return DLOCK_OK;
}

/* A failure the C core reports, not a member: did the call leave? Its
 * channel connected at some point while it ran, or a reason that is not
 * a connect's: it may have. */
static int transport_rc(dlock__etcd_gcall *c, const char *details)
{
    int ready_at_end = grpc_channel_check_connectivity_state(c->g->ch[c->ep], 0) ==
                       GRPC_CHANNEL_READY;
    int connecting = c->status == GRPC_STATUS_DEADLINE_EXCEEDED ||
                     (c->status == GRPC_STATUS_UNAVAILABLE &&
                      (strstr(details, "failed to connect") || strstr(details, "resolution")));
    if (!c->ready_at_start && !ready_at_end && connecting)
        return DLOCK_EIO;
    return DLOCK_EUNKNOWN;
}

/* A TLS channel's failure to connect that is TLS's: a handshake that
 * failed (a certificate not verified, a name it does not hold), or a new
 * session the member ended before it was ready, our request unsent (under
 * TLS 1.3 the member looks at our certificate, or sees that we sent none,
 * after our side of the handshake: the gateway's new_session_cut in
 * etcd_tls.c). */
static int tls_failure(const char *d)
{
    if (strstr(d, "andshake") || strstr(d, "SSL") || strstr(d, "not in peer certificate"))
        return 1;
    return strstr(d, "failed to connect") &&
           (strstr(d, "Endpoint read failed") || strstr(d, "Socket closed"));
}

static int answer_of(dlock__etcd_gcall *c, dlock__etcd_answer *a)
{
    if (c->batch_ok && c->status == GRPC_STATUS_OK)
        return reply_read(c, a);
    char *details = grpc_slice_to_c_string(c->details);
    const char *d = details ? details : "";
    /* etcd's own errors say "etcdserver: ..."; the C core's are the
     * transport's (a connect, a reset, the deadline) */
    int from_member = c->batch_ok && strncmp(d, "etcdserver:", 11) == 0;
    grpc_status_code s = c->status;
    if (c->batch_ok && !from_member && s != GRPC_STATUS_UNAVAILABLE &&
        s != GRPC_STATUS_DEADLINE_EXCEEDED && s != GRPC_STATUS_CANCELLED &&
        s != GRPC_STATUS_UNKNOWN && s != GRPC_STATUS_INTERNAL)
        from_member = 1;
    int rc;
    if (from_member) {
        snprintf(a->why, sizeof a->why, "%s (code %d)", d, (int)s);
        a->code = (long)s;
        rc = dlock__etcd_map_error(a->code, d);
    } else if (c->g->tls && tls_failure(d)) {
        /* the handshake failed, or the member refused our certificate:
         * nothing was applied, as etcd_tls.h says of the gateway */
        int verify = strstr(d, "verify failed") || strstr(d, "not in peer certificate");
        snprintf(a->why, sizeof a->why, "TLS %s: gRPC: %s (status %d)",
                 verify ? "certificate verification failed" : "handshake failed", d, (int)s);
        rc = DLOCK_ETLS;
    } else {
        snprintf(a->why, sizeof a->why, "gRPC: %s (status %d)", *d ? d : "the call failed",
                 (int)s);
        rc = transport_rc(c, d);
    }
    gpr_free(details);
    return rc;
}

/* The call's end on its loop: its answer to the request. */
void dlock__etcd_gcall_answered(dlock__etcd_gcall *c)
{
    dlock__etcd_answer a;
    memset(&a, 0, sizeof a);
    a.rc = answer_of(c, &a);
    void (*on_end)(void *arg, dlock__etcd_answer *a) = c->on_end;
    void *arg = c->arg;
    dlock__etcd_gcall_let_go(c);
    on_end(arg, &a);
}

/* The poller wrote the eventfd: the flag cleared itself. */
static void call_done(dlock__fd_flag *f)
{
    dlock__etcd_gcall *c = DLOCK__OWNER(f, dlock__etcd_gcall, done);
    /* The count read: what the poller wrote into the record before the
     * eventfd happens before what the loop reads now (the poll alone
     * orders them in fact, but TSan cannot see it). */
    uint64_t n;
    (void)!read(c->efd, &n, sizeof n);
    c->heard = 1;
    dlock__etcd_gcall_answered(c);
}
