/* SPDX-License-Identifier: BSD-3-Clause */
/* The gateway's JSON <-> protobuf-c converter of the gRPC transport
 * (src/etcd/etcd_pbjson.c): the backend's own request bodies become the
 * messages etcd's gRPC methods take, and replies read back as the gateway
 * writes them (64-bit integers as strings, bytes as base64, zero values
 * left out, oneofs by member name). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "etcd/etcdserver/etcdserverpb/rpc.pb-c.h"
#include "etcd_kv.h"
#include "etcd_pbjson.h"

static ProtobufCMessage *of_json(const ProtobufCMessageDescriptor *d, json_t *j)
{
    ProtobufCMessage *m = NULL;
    char why[200] = "";
    int rc = dlock__etcd_pb_of_json(d, j, &m, why, sizeof why);
    if (rc != DLOCK_OK)
        print_message("%s\n", why);
    assert_int_equal(rc, DLOCK_OK);
    return m;
}

/* Through the wire format and back: what etcd would receive. */
static json_t *round_trip(const ProtobufCMessageDescriptor *d, json_t *j)
{
    ProtobufCMessage *m = of_json(d, j);
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n + 1);
    protobuf_c_message_pack(m, buf);
    dlock__etcd_pb_free(m);
    ProtobufCMessage *back = protobuf_c_message_unpack(d, &dlock__etcd_pb_allocator, n, buf);
    free(buf);
    assert_non_null(back);
    json_t *out = dlock__etcd_json_of_pb(back);
    dlock__etcd_pb_free(back);
    assert_non_null(out);
    return out;
}

/* The line of lock "k": its keys k/..., no readers' gap. */
static const dlock__etcd_line line = {.begin = "k/", .end = "k0", .begin_len = 2, .end_len = 2};

static void the_create_transaction_reaches_etcd_as_the_gateway_would_send_it(void **state)
{
    (void)state;
    json_t *body = dlock__etcd_create_body("k/1", 3, NULL, 0, 0x1234, &line, 1);
    assert_non_null(body);
    ProtobufCMessage *m = of_json(&etcdserverpb__txn_request__descriptor, body);
    Etcdserverpb__TxnRequest *t = (Etcdserverpb__TxnRequest *)m;
    assert_int_equal(t->n_compare, 1);
    /* a oneof member with a zero value is still the member set */
    assert_int_equal(t->compare[0]->target_union_case,
                     ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION);
    assert_int_equal(t->compare[0]->create_revision, 0);
    assert_int_equal(t->compare[0]->target, ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE);
    assert_int_equal(t->n_success, 2);
    assert_int_equal(t->success[0]->request_case, ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT);
    assert_int_equal(t->success[0]->request_put->lease, 0x1234);
    assert_int_equal(t->success[0]->request_put->key.len, 3);
    assert_memory_equal(t->success[0]->request_put->key.data, "k/1", 3);
    Etcdserverpb__RangeRequest *r = t->success[1]->request_range;
    assert_int_equal(r->sort_order, ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND);
    assert_int_equal(r->sort_target, ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE);
    assert_true(r->keys_only);
    assert_int_equal(r->limit, 1);
    dlock__etcd_pb_free(m);
    /* and back to the same JSON, but for the zero create_revision's
     * spelling (a string, as jsonpb writes int64) */
    json_t *again = round_trip(&etcdserverpb__txn_request__descriptor, body);
    json_t *cmp = json_array_get(json_object_get(again, "compare"), 0);
    assert_string_equal(json_string_value(json_object_get(cmp, "create_revision")), "0");
    assert_true(json_equal(json_object_get(again, "success"), json_object_get(body, "success")));
    json_decref(again);
    json_decref(body);
}

static void a_reply_reads_as_the_gateway_writes_it(void **state)
{
    (void)state;
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    h.revision = 42;
    h.cluster_id = UINT64_MAX; /* above int64: a string all the same */
    Etcdserverpb__LeaseGrantResponse g = ETCDSERVERPB__LEASE_GRANT_RESPONSE__INIT;
    g.header = &h;
    g.id = -5;
    g.ttl = 10;
    json_t *j = dlock__etcd_json_of_pb(&g.base);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "ID")), "-5");
    assert_string_equal(json_string_value(json_object_get(j, "TTL")), "10");
    json_t *hj = json_object_get(j, "header");
    assert_string_equal(json_string_value(json_object_get(hj, "revision")), "42");
    assert_string_equal(json_string_value(json_object_get(hj, "cluster_id")),
                        "18446744073709551615");
    /* zero values are left out: no member_id, no raft_term, no error */
    assert_null(json_object_get(hj, "member_id"));
    assert_null(json_object_get(hj, "raft_term"));
    assert_null(json_object_get(j, "error"));
    json_decref(j);
}

static void a_range_reply_gives_kvs_with_base64_keys(void **state)
{
    (void)state;
    Mvccpb__KeyValue kv = MVCCPB__KEY_VALUE__INIT;
    kv.key.data = (uint8_t *)"a/b";
    kv.key.len = 3;
    kv.create_revision = 7;
    kv.lease = 9;
    Mvccpb__KeyValue *kvs[] = {&kv};
    Etcdserverpb__RangeResponse r = ETCDSERVERPB__RANGE_RESPONSE__INIT;
    r.kvs = kvs;
    r.n_kvs = 1;
    r.count = 1;
    json_t *j = dlock__etcd_json_of_pb(&r.base);
    json_t *k = json_array_get(json_object_get(j, "kvs"), 0);
    assert_string_equal(json_string_value(json_object_get(k, "key")), "YS9i");
    assert_string_equal(json_string_value(json_object_get(k, "create_revision")), "7");
    assert_null(json_object_get(k, "value")); /* empty bytes: left out */
    assert_null(json_object_get(j, "more"));  /* false: left out */
    json_decref(j);
}

static void what_a_message_cannot_hold_is_refused(void **state)
{
    (void)state;
    const char *bad[] = {
        "{\"no_such_field\": 1}",
        "{\"key\": \"not base64!\"}",
        "{\"limit\": \"12x\"}",
        "{\"sort_order\": \"SIDEWAYS\"}",
        "{\"keys_only\": 1}",
        "{\"key\": [\"YQ==\"]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = json_loads(bad[i], 0, NULL);
        assert_non_null(j);
        ProtobufCMessage *m = (ProtobufCMessage *)1;
        char why[200] = "";
        assert_int_equal(dlock__etcd_pb_of_json(&etcdserverpb__range_request__descriptor, j, &m,
                                                why, sizeof why),
                         DLOCK_EPROTO);
        assert_null(m);
        assert_true(why[0] != '\0');
        json_decref(j);
    }
    /* two members of one oneof */
    json_t *j = json_loads("{\"request_range\": {}, \"request_put\": {}}", 0, NULL);
    ProtobufCMessage *m = NULL;
    char why[200];
    assert_int_equal(dlock__etcd_pb_of_json(&etcdserverpb__request_op__descriptor, j, &m, why,
                                            sizeof why),
                     DLOCK_EPROTO);
    json_decref(j);
}

static void every_allocation_failure_is_out_of_memory_and_leaks_nothing(void **state)
{
    (void)state;
    json_t *body = dlock__etcd_create_body("k/1", 3, "v", 1, 1, &line, 1);
    for (long n = 0;; n++) {
        ProtobufCMessage *m = NULL;
        char why[200];
        dlock__alloc_fail_after(n);
        int rc = dlock__etcd_pb_of_json(&etcdserverpb__txn_request__descriptor, body, &m, why,
                                        sizeof why);
        dlock__alloc_fail_after(-1);
        /* base64's own allocation failing reads as bad base64 */
        assert_true(rc == DLOCK_OK || rc == DLOCK_ENOMEM || rc == DLOCK_EPROTO);
        dlock__etcd_pb_free(m);
        if (rc == DLOCK_OK)
            break;
    }
    json_decref(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_create_transaction_reaches_etcd_as_the_gateway_would_send_it),
        cmocka_unit_test(a_reply_reads_as_the_gateway_writes_it),
        cmocka_unit_test(a_range_reply_gives_kvs_with_base64_keys),
        cmocka_unit_test(what_a_message_cannot_hold_is_refused),
        cmocka_unit_test(every_allocation_failure_is_out_of_memory_and_leaks_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
