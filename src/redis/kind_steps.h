/* SPDX-License-Identifier: BSD-3-Clause */
/* A kind's Redis steps, in one table (issue 36 stage 2): per kind and step,
 * the script it runs, the function that lays out the script's KEYS and ARGV
 * from the handle, the fan-out callback that decodes its reply, and whether
 * it waits for replica acknowledgement (client option min_replicas). The
 * callers (attempt.c, release.c, fair.c, wait.c) decide when a step goes
 * and what its verdict means; what goes on the wire is decided here, next
 * to what comes back. A new kind adds its row in kinds.c, its row here and
 * its scripts (docs/design.md, "Adding a kind").
 *
 * The order of the arguments is each script's contract (the header comment
 * of every src/redis/scripts/NAME.lua); tests/unit/test_kind_steps.c holds the
 * bytes each step sends for every kind and variant. */
#ifndef DLOCK_KIND_STEPS_H
#define DLOCK_KIND_STEPS_H

#include <stdint.h>

#include "common.h"
#include "fanout.h"
#include "kinds.h"
#include "scripts.h"

struct dlock__kind;

typedef enum dlock__step_id {
    DLOCK__STEP_ACQUIRE,    /* one attempt; fair: one look (joins the line) */
    DLOCK__STEP_RELEASE,    /* give one hold back; with wake 0, as an undo */
    DLOCK__STEP_EXTEND,     /* push the expiry out to in->ttl_ms */
    DLOCK__STEP_UNDO,       /* take back attempt in->op_no, queued behind it */
    DLOCK__STEP_FORGET,     /* drop the handle's bookkeeping (counted) */
    DLOCK__STEP_LEAVE,      /* leave the line (queued kinds) */
    DLOCK__STEP_LEAVE_LIST, /* leave the waiter list (wake-one kinds) */
    DLOCK__STEP_FENCE_SYNC, /* raise the fencing counter to in->fence (Redlock) */
    DLOCK__STEP_COUNT
} dlock__step_id;

/* What a step's arguments depend on besides the handle. */
typedef struct dlock__step_in {
    uint64_t op_no;       /* counted acquire and undo: the attempt's number */
    int wake;             /* release and undo: publish the wake-up */
    int64_t ttl_ms;       /* extend */
    const char *live_ttl; /* fair look: the liveness key's life in ms ("0": a try) */
    uint64_t fence;       /* fence sync */
} dlock__step_in;

/* The storage a built request points into; lives as long as the request. */
typedef struct dlock__step_args {
    const char *args[20];
    size_t lens[20];
    char num[3][24];
    char *me; /* fair: the liveness key of our token (heap) */
} dlock__step_args;

typedef struct dlock__step_row {
    dlock__script_id script; /* DLOCK__S_NONE: the kind has no such step */
    /* Fills a->args/lens; returns the number of keys, or DLOCK_ENOMEM. */
    int (*build)(dlock_lock *l, const dlock__step_in *in, dlock__step_args *a, int *nargs);
    dlock__on_reply decode; /* the reply's fan-out callback (its arg: see each) */
    int acks;               /* with min_replicas: WAIT behind it */
} dlock__step_row;

/* The kind's step (script DLOCK__S_NONE: none). */
const dlock__step_row *dlock__kind_step(const struct dlock__kind *kind, dlock__step_id step);

/* The request for l's kind's `step` into *req, pointing into *a; DLOCK_OK,
 * DLOCK_ENOMEM (only the fair steps allocate) or DLOCK_ENOTSUP (the kind
 * has no such step). Call dlock__step_args_free(a) once it is sent. */
int dlock__step_req(dlock_lock *l, dlock__step_id step, const dlock__step_in *in,
                    dlock__step_args *a, dlock__req *req);
void dlock__step_args_free(dlock__step_args *a);

/* The decoders (fan-out callbacks), by what their arg is:
 * acquire and fair steps: a dlock__tally (quorum.h), counted by
 * dlock__tally_answer; release, extend, forget: a dlock__tally, owner
 * verdicts; a counted undo: uint8_t left[n_nodes], cleared where the
 * attempt is settled; fence sync: a dlock__tally with max_fence set. */
int dlock__acquire_cb(void *arg, size_t node, uint32_t idx, int err,
                      const struct redisReply *r, const char *detail, int64_t start_ns);
int dlock__owner_cb(void *arg, size_t node, uint32_t idx, int err, const struct redisReply *r,
                    const char *detail, int64_t start_ns);
int dlock__undo_cb(void *arg, size_t node, uint32_t idx, int err, const struct redisReply *r,
                   const char *detail, int64_t start_ns);
int dlock__fence_cb(void *arg, size_t node, uint32_t idx, int err, const struct redisReply *r,
                    const char *detail, int64_t start_ns);
int dlock__ignore_cb(void *arg, size_t node, uint32_t idx, int err, const struct redisReply *r,
                     const char *detail, int64_t start_ns);

#endif
