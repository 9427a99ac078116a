/* SPDX-License-Identifier: BSD-3-Clause */
/* The gateway's JSON <-> protobuf-c messages (etcd_pbjson.h), one field
 * at a time from the message's descriptor. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "etcd_json.h"
#include "etcd_pbjson.h"

typedef const ProtobufCFieldDescriptor field;

static void *pb_alloc(void *data, size_t size)
{
    (void)data;
    return dlock__malloc(size);
}

static void pb_free(void *data, void *p)
{
    (void)data;
    dlock__free(p);
}

ProtobufCAllocator dlock__etcd_pb_allocator = {pb_alloc, pb_free, NULL};

void dlock__etcd_pb_free(ProtobufCMessage *m)
{
    if (m)
        protobuf_c_message_free_unpacked(m, &dlock__etcd_pb_allocator);
}

/* The bytes one value of type t takes in a message (or a repeated
 * field's array). */
static size_t value_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return sizeof(int64_t);
    case PROTOBUF_C_TYPE_DOUBLE:
        return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    default: /* the 32-bit integers, enums and float */
        return sizeof(int32_t);
    }
}

static int is_signed64(ProtobufCType t)
{
    return t == PROTOBUF_C_TYPE_INT64 || t == PROTOBUF_C_TYPE_SINT64 ||
           t == PROTOBUF_C_TYPE_SFIXED64;
}

static int is_unsigned64(ProtobufCType t)
{
    return t == PROTOBUF_C_TYPE_UINT64 || t == PROTOBUF_C_TYPE_FIXED64;
}

static int is_signed32(ProtobufCType t)
{
    return t == PROTOBUF_C_TYPE_INT32 || t == PROTOBUF_C_TYPE_SINT32 ||
           t == PROTOBUF_C_TYPE_SFIXED32;
}

/* ---- JSON to a message ------------------------------------------------------ */

typedef struct in_ctx {
    char *why;
    size_t why_len;
} in_ctx;

static int bad(in_ctx *c, field *f, const char *what)
{
    snprintf(c->why, c->why_len, "field %s: %s", f->name, what);
    return DLOCK_EPROTO;
}

/* An integer in JSON: a number or a decimal string (jsonpb writes 64-bit
 * ones as strings and reads either). */
static int json_integer_of(json_t *v, int is_unsigned, int64_t *s, uint64_t *u)
{
    if (json_is_integer(v)) {
        *s = (int64_t)json_integer_value(v);
        *u = (uint64_t)*s;
        return is_unsigned && *s < 0 ? -1 : 0;
    }
    if (!json_is_string(v))
        return -1;
    const char *text = json_string_value(v);
    char *end;
    errno = 0;
    if (is_unsigned) {
        if (strchr(text, '-'))
            return -1;
        *u = (uint64_t)strtoull(text, &end, 10);
        *s = (int64_t)*u;
    } else {
        *s = (int64_t)strtoll(text, &end, 10);
        *u = (uint64_t)*s;
    }
    return end == text || *end || errno ? -1 : 0;
}

static int message_in(const ProtobufCMessageDescriptor *d, json_t *j, ProtobufCMessage **out,
                      in_ctx *c);

static int enum_in(in_ctx *c, field *f, json_t *v, int32_t *dst)
{
    const ProtobufCEnumDescriptor *ed = f->descriptor;
    const ProtobufCEnumValue *ev = NULL;
    if (json_is_string(v))
        ev = protobuf_c_enum_descriptor_get_value_by_name(ed, json_string_value(v));
    else if (json_is_integer(v))
        ev = protobuf_c_enum_descriptor_get_value(ed, (int)json_integer_value(v));
    if (!ev)
        return bad(c, f, "not a value of its enum");
    *dst = ev->value;
    return DLOCK_OK;
}

static int number_in(in_ctx *c, field *f, json_t *v, void *dst)
{
    ProtobufCType t = f->type;
    if (t == PROTOBUF_C_TYPE_FLOAT || t == PROTOBUF_C_TYPE_DOUBLE) {
        if (!json_is_number(v))
            return bad(c, f, "not a number");
        if (t == PROTOBUF_C_TYPE_FLOAT)
            *(float *)dst = (float)json_number_value(v);
        else
            *(double *)dst = json_number_value(v);
        return DLOCK_OK;
    }
    int64_t s;
    uint64_t u;
    if (json_integer_of(v, !is_signed64(t) && !is_signed32(t), &s, &u))
        return bad(c, f, "not an integer");
    if (is_signed64(t))
        *(int64_t *)dst = s;
    else if (is_unsigned64(t))
        *(uint64_t *)dst = u;
    else if (is_signed32(t)) {
        if (s < INT32_MIN || s > INT32_MAX)
            return bad(c, f, "out of range");
        *(int32_t *)dst = (int32_t)s;
    } else {
        if (u > UINT32_MAX)
            return bad(c, f, "out of range");
        *(uint32_t *)dst = (uint32_t)u;
    }
    return DLOCK_OK;
}

/* One value of field f from v into dst (an element of its type). */
static int value_in(in_ctx *c, field *f, json_t *v, void *dst)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v))
            return bad(c, f, "not true or false");
        *(protobuf_c_boolean *)dst = json_is_true(v);
        return DLOCK_OK;
    case PROTOBUF_C_TYPE_ENUM:
        return enum_in(c, f, v, dst);
    case PROTOBUF_C_TYPE_STRING:
        if (!json_is_string(v))
            return bad(c, f, "not a string");
        return (*(char **)dst = dlock__strdup(json_string_value(v))) ? DLOCK_OK : DLOCK_ENOMEM;
    case PROTOBUF_C_TYPE_BYTES: {
        ProtobufCBinaryData *b = dst;
        char *data = json_is_string(v) ? dlock__etcd_b64_decode(json_string_value(v), &b->len)
                                       : NULL;
        if (!data)
            return bad(c, f, "not base64"); /* or out of memory: as rare */
        b->data = (uint8_t *)data;
        return DLOCK_OK;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        return message_in(f->descriptor, v, dst, c);
    default:
        return number_in(c, f, v, dst);
    }
}

static int repeated_in(in_ctx *c, field *f, json_t *v, char *m)
{
    if (!json_is_array(v))
        return bad(c, f, "not a list");
    size_t n = json_array_size(v), size = value_size(f->type);
    if (n == 0)
        return DLOCK_OK;
    char *arr = dlock__calloc(n, size);
    if (!arr)
        return DLOCK_ENOMEM;
    /* in place first: a failure part-way leaves zeroes the free skips */
    *(void **)(m + f->offset) = arr;
    *(size_t *)(m + f->quantifier_offset) = n;
    for (size_t i = 0; i < n; i++) {
        int rc = value_in(c, f, json_array_get(v, i), arr + i * size);
        if (rc != DLOCK_OK)
            return rc;
    }
    return DLOCK_OK;
}

static int field_in(in_ctx *c, field *f, json_t *v, char *m)
{
    if (json_is_null(v))
        return DLOCK_OK; /* jsonpb: null is the field's default */
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return repeated_in(c, f, v, m);
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t *which = (uint32_t *)(void *)(m + f->quantifier_offset);
        if (*which != 0)
            return bad(c, f, "a second member of its oneof");
        int rc = value_in(c, f, v, m + f->offset);
        if (rc == DLOCK_OK || f->type == PROTOBUF_C_TYPE_MESSAGE)
            *which = f->id; /* a message part-built: the free takes it */
        return rc;
    }
    int rc = value_in(c, f, v, m + f->offset);
    if (rc == DLOCK_OK && f->label == PROTOBUF_C_LABEL_OPTIONAL &&
        f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)
        *(protobuf_c_boolean *)(void *)(m + f->quantifier_offset) = 1;
    return rc;
}

static int message_in(const ProtobufCMessageDescriptor *d, json_t *j, ProtobufCMessage **out,
                      in_ctx *c)
{
    *out = NULL;
    if (!json_is_object(j)) {
        snprintf(c->why, c->why_len, "%s: not an object", d->name);
        return DLOCK_EPROTO;
    }
    ProtobufCMessage *m = dlock__malloc(d->sizeof_message);
    if (!m)
        return DLOCK_ENOMEM;
    protobuf_c_message_init(d, m);
    *out = m; /* part-built messages are freed by the caller's free */
    const char *name;
    json_t *v;
    json_object_foreach(j, name, v)
    {
        field *f = protobuf_c_message_descriptor_get_field_by_name(d, name);
        if (!f) {
            snprintf(c->why, c->why_len, "%s has no field %s", d->name, name);
            return DLOCK_EPROTO;
        }
        int rc = field_in(c, f, v, (char *)m);
        if (rc != DLOCK_OK)
            return rc;
    }
    return DLOCK_OK;
}

int dlock__etcd_pb_of_json(const ProtobufCMessageDescriptor *d, json_t *j,
                           ProtobufCMessage **out, char *why, size_t why_len)
{
    in_ctx c = {why, why_len};
    int rc = message_in(d, j, out, &c);
    if (rc != DLOCK_OK) {
        dlock__etcd_pb_free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- a message to JSON ------------------------------------------------------ */

static json_t *of_u64(uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return json_string(buf);
}

static json_t *value_out(field *f, const void *src)
{
    ProtobufCType t = f->type;
    if (is_signed64(t))
        return dlock__etcd_json_of_i64(*(const int64_t *)src);
    if (is_unsigned64(t))
        return of_u64(*(const uint64_t *)src);
    if (is_signed32(t))
        return json_integer(*(const int32_t *)src);
    switch (t) {
    case PROTOBUF_C_TYPE_FLOAT:
        return json_real(*(const float *)src);
    case PROTOBUF_C_TYPE_DOUBLE:
        return json_real(*(const double *)src);
    case PROTOBUF_C_TYPE_BOOL:
        return json_boolean(*(const protobuf_c_boolean *)src);
    case PROTOBUF_C_TYPE_ENUM: {
        int32_t x = *(const int32_t *)src;
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, x);
        return ev ? json_string(ev->name) : json_integer(x);
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)src;
        return json_string(s ? s : "");
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = src;
        return dlock__etcd_json_b64(b->data ? (const void *)b->data : "", b->len);
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        return dlock__etcd_json_of_pb(*(ProtobufCMessage *const *)src);
    default: /* uint32, fixed32 */
        return json_integer(*(const uint32_t *)src);
    }
}

/* 1 when a proto3 singular value is its type's zero (jsonpb leaves it
 * out). */
static int is_zero(field *f, const char *src)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)(const void *)src;
        return !s || !*s;
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)(const void *)src)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(ProtobufCMessage *const *)(const void *)src == NULL;
    default: {
        static const char zero[8];
        return memcmp(src, zero, value_size(f->type)) == 0;
    }
    }
}

/* Whether a singular field is written out. */
static int present(field *f, const char *m)
{
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)(const void *)(m + f->quantifier_offset) == f->id;
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
        f->type != PROTOBUF_C_TYPE_MESSAGE)
        return *(const protobuf_c_boolean *)(const void *)(m + f->quantifier_offset);
    return !is_zero(f, m + f->offset);
}

static json_t *field_out(field *f, const char *m)
{
    if (f->label != PROTOBUF_C_LABEL_REPEATED)
        return value_out(f, m + f->offset);
    size_t n = *(const size_t *)(const void *)(m + f->quantifier_offset);
    const char *arr = *(char *const *)(const void *)(m + f->offset);
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, value_out(f, arr + i * value_size(f->type)))) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

json_t *dlock__etcd_json_of_pb(const ProtobufCMessage *msg)
{
    const ProtobufCMessageDescriptor *d = msg->descriptor;
    const char *m = (const char *)msg;
    json_t *j = json_object();
    for (unsigned i = 0; j && i < d->n_fields; i++) {
        field *f = &d->fields[i];
        int there = f->label == PROTOBUF_C_LABEL_REPEATED
                        ? *(const size_t *)(const void *)(m + f->quantifier_offset) > 0
                        : present(f, m);
        if (there && json_object_set_new(j, f->name, field_out(f, m))) {
            json_decref(j);
            j = NULL;
        }
    }
    return j;
}
