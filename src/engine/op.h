/* SPDX-License-Identifier: BSD-3-Clause */
/* A request to a backend (docs/dev/engine-plan.md §4.2): started by the
 * engine, answered by the backend with a verdict, completed exactly once
 * through done(), from the loop the request runs on, never inside the call
 * that started it. So far the try of the engine's wait (acquire.c), a
 * release and an extend, and what a handle leaves to settle (backend.h:
 * settle_start, release_lost_start, cleanup_start; call.c) are requests;
 * the plan's other kinds (look, leave, undo) and the verdict's fence and
 * count come with the stages that need them. */
#ifndef DLOCK_OP_H
#define DLOCK_OP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "loop.h"

/* verdict flags */
enum {
    DLOCK__V_RETRY = 1,  /* waiting longer could help (busy, no majority, an I/O error) */
    DLOCK__V_SPLIT = 2,  /* a split vote, not one holder: back off, nobody will publish */
    DLOCK__V_QUEUED = 4, /* we hold a place in line */
    /* Refused only by a lock-delay (dlock_lock_options.lock_delay_ms):
     * nobody will publish its end, which holder_ttl_ms is: sleep until
     * then, not poll. */
    DLOCK__V_DELAYED = 8,
    /* A release that went out more than once (a copy went unanswered):
     * that copy may still be applied later (etcd_session.h). */
    DLOCK__V_RESENT = 16
};

typedef struct dlock__verdict {
    int code;              /* DLOCK_OK or the public dlock_error; the handle's message says why */
    unsigned flags;        /* DLOCK__V_* */
    int64_t holder_ttl_ms; /* the holder's TTL left, -1 unknown */
    int64_t look_ms;       /* when the head of the line should look again (its run's end), -1 none */
    /* An extend's, on DLOCK_OK: the new end of the lease (drift taken
     * off) and the TTL that renewals keep up from now on. */
    int64_t until_ns;
    int64_t renew_ttl_ms;
} dlock__verdict;

enum { DLOCK__OP_NEW, DLOCK__OP_STARTED, DLOCK__OP_DONE };

/* What a blocking call lends its requests (dlock__op.scratch): the
 * largest record a backend keeps there (Redis's try chain, 24 KB with an
 * io record per node, and tidy.c, 12 KB, check that theirs fit), so a
 * release or free cannot fail for memory and no acquire or release
 * allocates per call. 256 bytes over 24 KB: the io record's `polled`
 * hook (loop.h) took the try chain 136 bytes past 24 KB. */
#define DLOCK__OP_SCRATCH 24832

typedef struct dlock__op {
    dlock_lock *l;
    dlock__verdict v;                   /* filled by the backend before done() */
    void (*done)(struct dlock__op *op); /* exactly once, from *loop */
    dlock__loop *loop;
    /* A try's or begin's: the wait's deadline (INT64_MAX none, 0 not
     * set). A step that only looks may end there (etcd's look: a member
     * that stops mid-look costs the wait one leave past its end, not an
     * I/O timeout more). */
    int64_t deadline_ns;
    /* Memory the starter lends the request for its whole life (NULL:
     * none): a backend may keep its record there instead of allocating
     * one, so a request started with enough of it cannot fail for memory
     * (call.c lends DLOCK__OP_SCRATCH bytes of the calling thread's stack
     * to every blocking verb's requests, one after the other: a free out
     * of memory still releases, and a try or a release allocates
     * nothing). The next request may be started on the same memory from
     * inside this one's done(): a backend touches its record no more once
     * it has completed the op. */
    void *scratch;
    size_t scratch_len;
    /* The backend's: a request answered inside its start completes
     * from the loop's next turn (dlock__op_complete_soon). */
    dlock__timer defer;
    unsigned char state; /* DLOCK__OP_*: a second completion is a bug */
} dlock__op;

/* The engine, before it hands op to the backend. */
static inline void dlock__op_start(dlock__op *op);

/* A fresh request of l on loop, completed through done, then started
 * (dlock__op_start): what the engine hands to a backend's start. */
static inline void dlock__op_begin(dlock__op *op, dlock_lock *l, dlock__loop *loop,
                                   void (*done)(dlock__op *op))
{
    memset(op, 0, sizeof *op);
    op->l = l;
    op->loop = loop;
    op->done = done;
    op->v = (dlock__verdict){DLOCK_OK, 0, -1, -1, 0, 0};
    dlock__op_start(op);
}

static inline void dlock__op_start(dlock__op *op)
{
    if (op->state == DLOCK__OP_STARTED)
        dlock__misuse("a request started twice");
    op->state = DLOCK__OP_STARTED;
}

/* The backend, on op->loop, with op->v filled: done() runs now. */
static inline void dlock__op_complete(dlock__op *op)
{
    if (op->state != DLOCK__OP_STARTED)
        dlock__misuse("a request completed twice, or before it started");
    op->state = DLOCK__OP_DONE;
    op->done(op);
}

static inline void dlock__op_complete_deferred(dlock__timer *t)
{
    dlock__op_complete(DLOCK__OWNER(t, dlock__op, defer));
}

/* The backend, answering op inside its start (no word to a server was
 * needed): op->v.code is code, and done() runs from the loop's next turn,
 * as it must never run inside the start. The rest of op->v is the
 * caller's to fill before. */
static inline void dlock__op_complete_soon(dlock__op *op, int code)
{
    op->v.code = code;
    op->defer.fire = dlock__op_complete_deferred;
    dlock__defer(op->loop, &op->defer);
}

#endif
