/* SPDX-License-Identifier: BSD-3-Clause */
/* etcd's gateway JSON <-> protobuf-c messages, for the gRPC transport
 * (etcd_grpc.h): the backend builds and reads the JSON the gateway speaks,
 * and this turns it into the messages gRPC carries and back, driven by
 * protobuf-c's descriptors, so that one converter serves every method.
 *
 * The JSON is etcd 3.4's gateway's (grpc-gateway's jsonpb with OrigName):
 * fields by their .proto names ("ID", "TTL", "request_put"), 64-bit
 * integers as decimal strings (numbers are accepted too), bytes as
 * base64, enums by name (numbers accepted), and zero values, empty lists
 * and absent messages left out of a reply. A oneof member is set when
 * its name is in the JSON, even with a zero value ("create_revision": 0
 * in a compare), and written out whenever it is the one set.
 *
 * Messages are allocated with dlock__malloc and freed with
 * dlock__etcd_pb_free(); nothing here does I/O. */
#ifndef DLOCK_ETCD_PBJSON_H
#define DLOCK_ETCD_PBJSON_H

#include <stddef.h>

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

/* The allocator of every message here (dlock__malloc / dlock__free), for
 * protobuf_c_message_unpack() too. */
extern ProtobufCAllocator dlock__etcd_pb_allocator;

/* The message of type d that the JSON object j describes, in *out.
 * DLOCK_OK; DLOCK_EPROTO with why (a field the message does not have, a
 * value of the wrong type, bad base64); DLOCK_ENOMEM. */
int dlock__etcd_pb_of_json(const ProtobufCMessageDescriptor *d, json_t *j,
                           ProtobufCMessage **out, char *why, size_t why_len);
/* The gateway's JSON for m (a new object), or NULL out of memory. */
json_t *dlock__etcd_json_of_pb(const ProtobufCMessage *m);
/* A message from either function above or from an unpack with
 * dlock__etcd_pb_allocator; NULL does nothing. */
void dlock__etcd_pb_free(ProtobufCMessage *m);

#endif
