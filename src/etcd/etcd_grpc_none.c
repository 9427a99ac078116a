/* SPDX-License-Identifier: BSD-3-Clause */
/* A build without the gRPC transport (-DDLOCK_WITH_ETCD_GRPC=OFF, or
 * gRPC's C core, protobuf-c or etcd's .proto files not found): a client
 * that asks for it is refused, and every request goes to the gateway. */
#include <stdio.h>

#include "etcd_grpc.h"

int dlock__etcd_grpc_built(void)
{
    return 0;
}

int dlock__etcd_grpc_new(dlock__etcd_grpc **out, const dlock__etcd_url *u,
                         const struct dlock__etcd_tls *t, int connect_timeout_ms, char *err,
                         size_t err_len)
{
    (void)u;
    (void)t;
    (void)connect_timeout_ms;
    *out = NULL;
    snprintf(err, err_len, "etcd: DLOCK_ETCD_TRANSPORT=grpc, but this build has no gRPC "
             "transport (-DDLOCK_WITH_ETCD_GRPC: needs libgrpc-dev, libprotobuf-c-dev, "
             "protobuf-c-compiler and etcd's .proto files)");
    return DLOCK_ENOTSUP;
}

void dlock__etcd_grpc_free(dlock__etcd_grpc *g)
{
    (void)g;
}

void dlock__etcd_grpc_free_inherited(dlock__etcd_grpc *g)
{
    (void)g;
}

int dlock__etcd_grpc_has(const char *path)
{
    (void)path;
    return 0;
}

int dlock__etcd_gcall_start(dlock__etcd_grpc *g, size_t ep, const char *path, json_t *body,
                            struct dlock__etcd_deleted *deleted, const char *token,
                            int64_t until_ns,
                            dlock__loop *loop, void (*on_end)(void *arg, dlock__etcd_answer *a),
                            void *arg, dlock__etcd_gcall **out, char *why, size_t why_len)
{
    (void)g, (void)ep, (void)path, (void)body, (void)deleted, (void)token, (void)until_ns, (void)loop;
    (void)on_end, (void)arg;
    *out = NULL;
    snprintf(why, why_len, "no gRPC transport in this build");
    return DLOCK_ENOTSUP;
}

void dlock__etcd_gcall_cancel(dlock__etcd_gcall *c)
{
    (void)c;
}
