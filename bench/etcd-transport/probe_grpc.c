/* SPDX-License-Identifier: BSD-3-Clause */
/* The probe's gRPC transport: gRPC's C core (a unary call is one batch of
 * six operations on a completion queue, waited for with
 * grpc_completion_queue_pluck) and messages from etcd's own .proto files
 * through protobuf-c (cmake/strip-etcd-proto.py, protoc-c). */
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcdserver/etcdserverpb/rpc.pb-c.h"
#include "probe.h"

#define CALL_TIMEOUT_MS 5000

struct probe_transport {
    grpc_channel *ch;
    grpc_completion_queue *cq;
    void *txn, *del, *grant; /* registered methods */
};

static probe_transport *g_open(const char *endpoint)
{
    probe_transport *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    grpc_init();
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    t->ch = grpc_channel_create(endpoint, creds, NULL);
    grpc_channel_credentials_release(creds);
    t->cq = grpc_completion_queue_create_for_pluck(NULL);
    t->txn = grpc_channel_register_call(t->ch, "/etcdserverpb.KV/Txn", NULL, NULL);
    t->del = grpc_channel_register_call(t->ch, "/etcdserverpb.KV/DeleteRange", NULL, NULL);
    t->grant = grpc_channel_register_call(t->ch, "/etcdserverpb.Lease/LeaseGrant", NULL, NULL);
    return t;
}

static void g_close(probe_transport *t)
{
    grpc_channel_destroy(t->ch);
    grpc_completion_queue_shutdown(t->cq);
    while (grpc_completion_queue_pluck(t->cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(t->cq);
    free(t);
    grpc_shutdown();
}

/* One unary call: req (packed by the caller) out, the reply's bytes into
 * *reply (malloc'd). 0, or -1 with a message. */
static int unary(probe_transport *t, void *method, const uint8_t *req, size_t req_len,
                 uint8_t **reply, size_t *reply_len)
{
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(CALL_TIMEOUT_MS, GPR_TIMESPAN));
    grpc_call *call = grpc_channel_create_registered_call(t->ch, NULL, GRPC_PROPAGATE_DEFAULTS,
                                                          t->cq, method, deadline, NULL);
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)req, req_len);
    grpc_byte_buffer *out = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    grpc_byte_buffer *in = NULL;
    grpc_metadata_array head, tail;
    grpc_metadata_array_init(&head);
    grpc_metadata_array_init(&tail);
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = out;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &head;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &in;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &tail;
    ops[5].data.recv_status_on_client.status = &status;
    ops[5].data.recv_status_on_client.status_details = &details;
    int rc = -1;
    if (grpc_call_start_batch(call, ops, 6, call, NULL) == GRPC_CALL_OK &&
        grpc_completion_queue_pluck(t->cq, call, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).success &&
        status == GRPC_STATUS_OK && in) {
        grpc_byte_buffer_reader r;
        if (grpc_byte_buffer_reader_init(&r, in)) {
            grpc_slice all = grpc_byte_buffer_reader_readall(&r);
            *reply_len = GRPC_SLICE_LENGTH(all);
            if ((*reply = malloc(*reply_len ? *reply_len : 1)) != NULL) {
                memcpy(*reply, GRPC_SLICE_START_PTR(all), *reply_len);
                rc = 0;
            }
            grpc_slice_unref(all);
            grpc_byte_buffer_reader_destroy(&r);
        }
    } else if (status != GRPC_STATUS_OK) {
        char *d = grpc_slice_to_c_string(details);
        fprintf(stderr, "grpc: status %d: %s\n", (int)status, d);
        gpr_free(d);
    }
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&head);
    grpc_metadata_array_destroy(&tail);
    grpc_byte_buffer_destroy(out);
    if (in)
        grpc_byte_buffer_destroy(in);
    grpc_call_unref(call);
    return rc;
}

/* Pack m, call, unpack the reply as desc's message (NULL on failure). */
static ProtobufCMessage *call_msg(probe_transport *t, void *method, const ProtobufCMessage *m,
                                  const ProtobufCMessageDescriptor *desc)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t stack[512], *buf = n <= sizeof stack ? stack : malloc(n);
    if (!buf)
        return NULL;
    protobuf_c_message_pack(m, buf);
    uint8_t *reply = NULL;
    size_t reply_len = 0;
    int rc = unary(t, method, buf, n, &reply, &reply_len);
    if (buf != stack)
        free(buf);
    if (rc != 0)
        return NULL;
    ProtobufCMessage *r = protobuf_c_message_unpack(desc, NULL, reply_len, reply);
    free(reply);
    return r;
}

static int64_t g_grant(probe_transport *t, int64_t ttl_s)
{
    Etcdserverpb__LeaseGrantRequest req = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    req.ttl = ttl_s;
    Etcdserverpb__LeaseGrantResponse *r = (Etcdserverpb__LeaseGrantResponse *)call_msg(
        t, t->grant, &req.base, &etcdserverpb__lease_grant_response__descriptor);
    int64_t id = r ? r->id : 0;
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    return id;
}

static ProtobufCBinaryData bin(const char *s)
{
    return (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

static int g_lock(probe_transport *t, const char *pfx, const char *key, int64_t lease)
{
    char end[256];
    probe_prefix_end(pfx, end, sizeof end);
    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
    cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    cmp.key = bin(key);
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    cmp.create_revision = 0;
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    put.key = bin(key);
    put.lease = lease;
    Etcdserverpb__RangeRequest get = ETCDSERVERPB__RANGE_REQUEST__INIT, owner = get;
    get.key = bin(key);
    owner.key = bin(pfx);
    owner.range_end = bin(end);
    owner.limit = 1;
    owner.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
    owner.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
    Etcdserverpb__RequestOp op_put = ETCDSERVERPB__REQUEST_OP__INIT, op_get = op_put,
                            op_owner = op_put;
    op_put.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op_put.request_put = &put;
    op_get.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    op_get.request_range = &get;
    op_owner.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    op_owner.request_range = &owner;
    Etcdserverpb__Compare *cmps[] = {&cmp};
    Etcdserverpb__RequestOp *then[] = {&op_put, &op_owner}, *els[] = {&op_get, &op_owner};
    Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
    txn.n_compare = 1;
    txn.compare = cmps;
    txn.n_success = 2;
    txn.success = then;
    txn.n_failure = 2;
    txn.failure = els;
    Etcdserverpb__TxnResponse *r = (Etcdserverpb__TxnResponse *)call_msg(
        t, t->txn, &txn.base, &etcdserverpb__txn_response__descriptor);
    if (!r)
        return -1;
    int ours = -1;
    if (r->n_responses == 2 && r->header &&
        r->responses[1]->response_case == ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE) {
        int64_t mine = r->header->revision;
        Etcdserverpb__RangeResponse *me = r->responses[0]->response_range;
        if (!r->succeeded && r->responses[0]->response_case ==
                                 ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE &&
            me->n_kvs == 1)
            mine = me->kvs[0]->create_revision;
        Etcdserverpb__RangeResponse *o = r->responses[1]->response_range;
        ours = o->n_kvs == 0 || o->kvs[0]->create_revision == mine;
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return ours;
}

static int g_unlock(probe_transport *t, const char *key)
{
    Etcdserverpb__DeleteRangeRequest del = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    del.key = bin(key);
    ProtobufCMessage *r = call_msg(t, t->del, &del.base,
                                   &etcdserverpb__delete_range_response__descriptor);
    if (!r)
        return -1;
    protobuf_c_message_free_unpacked(r, NULL);
    return 0;
}

const probe_ops probe_grpc_ops = {"grpc", g_open, g_grant, g_lock, g_unlock, g_close};
