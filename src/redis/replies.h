/* SPDX-License-Identifier: BSD-3-Clause */
/* Script replies decoded into typed results, one decoder per script family
 * (the reply shapes are stated in the header of each script in src/scripts). The
 * fan-out callbacks count these results; none of them looks at a
 * redisReply. A failed node (no reply) and an error reply decode to
 * .err < 0 with .detail saying why. */
#ifndef DLOCK_REPLIES_H
#define DLOCK_REPLIES_H

#include <hiredis/hiredis.h>
#include <stdint.h>

/* acquire.lua, reentrant_acquire.lua, fair_acquire.lua, fair_leave.lua,
 * exclusive_acquire.lua, shared_acquire.lua: {1, fence[, count]} granted
 * (acquire.lua: the integer fence alone), {0, pttl[, holder[, look]]} taken; shared_acquire.lua's {-1, N} (a semaphore
 * with another N) decodes to .err DLOCK_EINVAL. */
typedef enum { DLOCK__ACQ_GRANTED, DLOCK__ACQ_TAKEN } dlock__acq_verdict;

typedef struct dlock__acquire_reply {
    int err;            /* DLOCK_OK, or the node's failure */
    const char *detail; /* with err: what the node said, if anything */
    dlock__acq_verdict verdict;
    uint64_t fence;     /* GRANTED: the fencing counter */
    long long count;    /* GRANTED, counted kinds: the hold count */
    int has_count;
    int64_t pttl;       /* TAKEN: the holder's TTL, -1 unknown */
    const char *holder; /* TAKEN: the holder's token, if the script names it */
    size_t holder_len;
    int64_t look_ms;    /* TAKEN: look again in this many ms although no
                           release message comes (acquire.lua), -1 none */
    int joined;         /* TAKEN: the call put us in the line, which we
                           were not in (fair_acquire.lua) */
    int delayed;        /* TAKEN: free, but under a lock-delay whose end
                           pttl is (lib/delay.lua) */
} dlock__acquire_reply;

void dlock__decode_acquire(int err, const redisReply *r, const char *detail,
                           dlock__acquire_reply *out);

/* release.lua, extend.lua, reentrant_release/extend/forget.lua,
 * fair_release.lua: 1 done (fair: 2, done and handed over), 0 the key is
 * gone, -1 another owner holds it; reentrant release: {code, holds left}. */
typedef enum { DLOCK__OWN_DONE, DLOCK__OWN_GONE, DLOCK__OWN_OTHER } dlock__own_verdict;

typedef struct dlock__owner_reply {
    int err;
    const char *detail;
    int replied;     /* the node ran the script (err may still be EPROTO) */
    dlock__own_verdict verdict;
    long long count; /* DONE, reentrant release: holds left */
} dlock__owner_reply;

void dlock__decode_owner(int err, const redisReply *r, const char *detail,
                         dlock__owner_reply *out);

/* fence_sync.lua: the counter after raising it to at least `want`. */
void dlock__decode_fence_sync(int err, const redisReply *r, const char *detail,
                              uint64_t want, int *out_err, const char **out_detail);

/* reentrant_undo.lua: 1 taken back or 0 nothing to take back both settle
 * the attempt on that node. Returns 1 if settled. */
int dlock__decode_undo(int err, const redisReply *r);

/* renew_batch.lua: one integer per lock of the call. Returns 1 renewed,
 * 0 not ours, -1 failed (no usable reply); *gone is set to 1 when the
 * key was gone there (reply 0: expired or deleted), else 0. */
int dlock__decode_renew(int err, const redisReply *r, size_t n, size_t i, int *gone);

/* status.lua: {held, pttl, fence} and, asked with the identity key,
 * the holder's identity. */
typedef struct dlock__status_reply {
    int err;
    int held;
    int64_t ttl_ms; /* -1: none or unknown */
    uint64_t fence;
    const char *identity; /* in the reply (not NUL-terminated); NULL: none */
    size_t identity_len;
} dlock__status_reply;

void dlock__decode_status(int err, const redisReply *r, dlock__status_reply *out);

/* holders.lua: {mode, permits, mark_pttl, token1, ttl1, ...}. The holders
 * are read in place: holder i is (token(r, i), ttl(r, i)). */
typedef struct dlock__holders_reply {
    int err;
    int mode;         /* dlock_hold_mode */
    long long permits;
    int64_t mark_ms;  /* -1: no writer waits */
    size_t count;
} dlock__holders_reply;

void dlock__decode_holders(int err, const redisReply *r, dlock__holders_reply *out);

/* elect_read.lua: {0} nobody, {1, pttl, fence, token} a holder without
 * its term's value, {2, pttl, fence, value, token, seq} the holder's
 * value. */
typedef struct dlock__leader_reply {
    int err;
    const char *detail;
    int state;      /* 0, 1 or 2 as above */
    int64_t ttl_ms; /* states 1 and 2: the holder's lease left, -1 unknown */
    uint64_t fence;
    const char *value; /* state 2: in the reply (not NUL-terminated) */
    size_t value_len;
    const char *token; /* states 1 and 2: the holder's, in the reply */
    size_t token_len;
    long long seq; /* state 2: the write's sequence (0: none) */
} dlock__leader_reply;

void dlock__decode_leader(int err, const redisReply *r, const char *detail,
                          dlock__leader_reply *out);
/* Holder i of a reply decode_holders accepted. */
const redisReply *dlock__holders_token(const redisReply *r, size_t i);
int64_t dlock__holders_ttl(const redisReply *r, size_t i);

#endif
