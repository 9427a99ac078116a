/* SPDX-License-Identifier: BSD-3-Clause */
/* The gRPC transport's records (etcd_grpc.c: channels and calls), shared
 * with who polls its completion queue (etcd_grpc_poll.c). Private to
 * those two files. */
#ifndef DLOCK_ETCD_GRPC_CALL_H
#define DLOCK_ETCD_GRPC_CALL_H

#include <pthread.h>
#include <stdatomic.h>

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#include "etcd_url.h"
#include "loop_poll.h"

/* A gateway path the backend posts to, as a gRPC method. */
typedef struct dlock__etcd_gmethod {
    const char *path, *name;
    const ProtobufCMessageDescriptor *in, *out;
    int stream_of_one; /* a stream on the gateway: the reply is {"result": ...} */
} dlock__etcd_gmethod;
#define DLOCK__ETCD_GRPC_METHODS 8 /* etcd_grpc.c's table */
/* Eventfds kept for reuse at most: the calls a client runs at once. */
#define DLOCK__ETCD_GRPC_SPARE_FDS 8

/* etcd_grpc.h's, named here without it (which etcd_grpc.c includes:
 * one module, no circle) */
typedef struct dlock__etcd_grpc dlock__etcd_grpc;
typedef struct dlock__etcd_gcall dlock__etcd_gcall;
struct dlock__etcd_answer;

struct dlock__etcd_grpc {
    size_t n;
    grpc_channel *ch[DLOCK__ETCD_MAX_ENDPOINTS];
    void *reg[DLOCK__ETCD_MAX_ENDPOINTS][DLOCK__ETCD_GRPC_METHODS]; /* registered methods */
    int tls; /* the channels are TLS */
    grpc_completion_queue *cq;
    pthread_t thread;
    int thread_on;
    /* Who polls cq (above), under mu: */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the thread waits here for work */
    unsigned need;     /* handed calls pending: the thread's to poll for */
    int polling;       /* a thread is in next() on cq (the queue thread or a caller) */
    int closing;       /* the transport's free: the thread drains cq */
    /* A channel connecting (or waiting to) is watched, the watch counted
     * in need: its connect completes only under a poller. */
    int watching[DLOCK__ETCD_MAX_ENDPOINTS];
    char watch_tag[DLOCK__ETCD_MAX_ENDPOINTS]; /* their tags: addresses */
    /* Eventfds of calls that ended, zeroed, for the next calls (an
     * eventfd made and closed per call cost two syscalls of each): the
     * first n_spare slots (under mu), -1 in the others. Each slot is
     * written whole (atomic), and taken (-1) before its fd goes to a
     * call, so that a child of fork(), which may not take mu, closes
     * exactly the spares of the moment of the fork. */
    _Atomic int spare_fd[DLOCK__ETCD_GRPC_SPARE_FDS];
    unsigned n_spare;
};

struct dlock__etcd_gcall {
    dlock__etcd_grpc *g;
    const struct dlock__etcd_gmethod *m;
    size_t ep;
    grpc_call *call;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array head, tail;
    grpc_metadata token;
    int has_token;
    grpc_status_code status;
    grpc_slice details;
    int batch_ok, ready_at_start;
    _Atomic int holders; /* the loop and the poller: the last to let go frees */
    int efd;             /* written once, by another call's poller, at the completion */
    int told, heard;     /* efd written (the poller's), and read (the loop's) */
    dlock__fd_flag done; /* efd on the caller's loop (one-shot) */
    dlock__loop *loop;
    struct dlock__etcd_deleted *deleted; /* the reply's fields go here, not to JSON */
    void (*on_end)(void *arg, struct dlock__etcd_answer *a);
    void *arg;
    /* Under g->mu: the completion is the queue thread's to poll for (in
     * g->need until taken); the completion was taken (batch_ok set). */
    int handed, completed;
};

/* ---- etcd_grpc_poll.c ---- */

/* Free a call's record (no batch in the queue), or let go of one side's
 * hold on it (the loop's, or the poller's): the last frees it. */
void dlock__etcd_gcall_free(dlock__etcd_gcall *c);
/* An eventfd for a call (a spare one, zeroed, or a new one), or -1 with
 * errno; the transport's spares made empty at its making, and closed at
 * its free (in a child of fork() too: no lock taken). */
int dlock__etcd_grpc_efd_take(dlock__etcd_grpc *g);
void dlock__etcd_grpc_efd_init(dlock__etcd_grpc *g);
void dlock__etcd_grpc_efd_close_spares(dlock__etcd_grpc *g);
void dlock__etcd_gcall_let_go(dlock__etcd_gcall *c);
/* c's completion is the queue thread's to take from now on. */
void dlock__etcd_gcall_hand_back(dlock__etcd_gcall *c);
/* Channel ep is not ready: watch it while it connects. */
void dlock__etcd_grpc_watch(dlock__etcd_grpc *g, size_t ep);
/* Before a call's start: run what came while nobody polled. */
void dlock__etcd_grpc_catch_up(dlock__etcd_grpc *g);
/* The queue thread (arg: g), and what ends it: closing, then the queue's
 * shutdown (it drains the queue to the end). */
void *dlock__etcd_grpc_poll_main(void *arg);
void dlock__etcd_grpc_closing(dlock__etcd_grpc *g);
/* A call's io record's `alone` and `polled` (loop.h). */
int dlock__etcd_gcall_alone(dlock__io *io, int64_t until_ns);
void dlock__etcd_gcall_polled(dlock__io *io);

/* ---- etcd_grpc.c ---- */

/* The call's end on its loop: its answer to the request. */
void dlock__etcd_gcall_answered(dlock__etcd_gcall *c);

#endif
