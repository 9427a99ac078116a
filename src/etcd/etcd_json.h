/* SPDX-License-Identifier: BSD-3-Clause */
/* What both etcd transports (etcd_http.h, etcd_grpc.h) read and write
 * alike: the mapping of etcd's errors (a gRPC code and message, as the
 * gateway's error reply or a gRPC status carries them) and the gateway
 * JSON's encodings of 64-bit integers and bytes (etcd_json.c). */
#ifndef DLOCK_ETCD_JSON_H
#define DLOCK_ETCD_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Map a gateway error (gRPC code, message) to a dlock code (never OK). */
int dlock__etcd_map_error(long grpc_code, const char *msg);
/* 1 when that error says the token is stale (expired, unknown, or older
 * than the auth store's last change: "revision of auth store is old"):
 * a client with credentials authenticates again and sends the request
 * once more, which is safe because the member refused it unapplied. */
int dlock__etcd_token_stale(long grpc_code, const char *msg);

/* ---- JSON helpers for the gateway's encoding ---------------------------- */

/* int64 fields come as decimal strings (proto3 JSON); absent means 0.
 * Returns 0 or -1 if the field is there but not a number. */
int dlock__etcd_json_i64(json_t *obj, const char *field, int64_t *out);
/* A JSON string holding an int64 in decimal (new reference or NULL). */
json_t *dlock__etcd_json_of_i64(int64_t v);
/* bytes fields are base64: encode (new reference or NULL) / decode into a
 * fresh buffer (caller dlock__free()s; NULL on bad input or OOM). */
json_t *dlock__etcd_json_b64(const void *data, size_t len);
char *dlock__etcd_b64_decode(const char *text, size_t *out_len);
/* A transaction body (taken) with one more compare: key made at rev. So
 * a delete deletes only the key made then (a session gives a released key
 * to a later hold: etcd_session.h). rev <= 0: the body as it was. NULL
 * out of memory (the body freed). */
json_t *dlock__etcd_json_if_created(json_t *txn, const char *key, size_t len, int64_t rev);

/* ---- a reply read into fields: the hot path's, on either transport ------ */

/* A DeleteRange's reply as a hold's release judges it (etcd_release.c):
 * read from the gateway's JSON (below) or from gRPC's message straight
 * (etcd_grpc.c), never through JSON there. */
typedef struct dlock__etcd_deleted {
    int64_t deleted;         /* keys deleted */
    int has_prev;            /* prev_kvs held one */
    int64_t prev_create_rev; /* its create revision */
    int bad;                 /* the reply was not one: a protocol error */
} dlock__etcd_deleted;

/* d from the gateway's reply rep (not taken). */
void dlock__etcd_deleted_of_json(json_t *rep, dlock__etcd_deleted *d);

#endif
