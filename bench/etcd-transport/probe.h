/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd transport probe (issue 38): Go's concurrency.Mutex cycle, the
 * same requests, over two transports, so that their cost can be read as a
 * ratio in one run beside Go's own client:
 *
 *   lock    one Txn: if create_revision(KEY/<lease hex>) == 0 then put it
 *           on the session's lease and read the prefix's first creator,
 *           else read the key and the first creator; ours when the first
 *           creator is our key (the uncontended path: one request);
 *   unlock  a DeleteRange of our key.
 *
 * The session (one lease, granted once) is made before the clock starts,
 * as Go's worker does. Two writes and two requests per cycle. */
#ifndef ETCD_PROBE_H
#define ETCD_PROBE_H

#include <stdint.h>

typedef struct probe_transport probe_transport;

typedef struct probe_ops {
    const char *name;
    /* host:port of one member; NULL on failure (a message on stderr) */
    probe_transport *(*open)(const char *endpoint);
    /* a lease of ttl_s seconds: its ID, or 0 on failure */
    int64_t (*grant)(probe_transport *t, int64_t ttl_s);
    /* the Txn above for key (prefix pfx), on lease: 1 ours, 0 someone
     * else's first, -1 a failure */
    int (*lock)(probe_transport *t, const char *pfx, const char *key, int64_t lease);
    /* 0 deleted, -1 a failure */
    int (*unlock)(probe_transport *t, const char *key);
    void (*close)(probe_transport *t);
} probe_ops;

extern const probe_ops probe_grpc_ops; /* gRPC's C core + protobuf-c */
extern const probe_ops probe_http_ops; /* the JSON gateway: libcurl + jansson */

/* The end of the prefix range of p: p with its last byte + 1 (etcd's
 * clientv3.GetPrefixRangeEnd for a prefix that does not end in 0xff). */
void probe_prefix_end(const char *p, char *out, size_t size);

#endif
