/* SPDX-License-Identifier: BSD-3-Clause */
/* Script reply decoders (replies.h). */
#include "common.h"
#include "error.h"
#include "replies.h"

static int64_t int_elem(const redisReply *r, size_t i, int *ok)
{
    if (r->type != REDIS_REPLY_ARRAY || i >= r->elements ||
        r->element[i]->type != REDIS_REPLY_INTEGER) {
        *ok = 0;
        return 0;
    }
    return r->element[i]->integer;
}

/* A failed node or an error reply: sets *err and *detail, returns 1. */
static int failed(int err, const redisReply *r, const char *detail, int *out_err,
                  const char **out_detail)
{
    if (err < 0) {
        *out_err = err;
        *out_detail = detail;
        return 1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        *out_err = dlock__map_redis_error(r->str, r->len);
        *out_detail = r->str;
        return 1;
    }
    *out_err = DLOCK_OK;
    *out_detail = NULL;
    return 0;
}

void dlock__decode_acquire(int err, const redisReply *r, const char *detail,
                           dlock__acquire_reply *out)
{
    *out = (dlock__acquire_reply){.pttl = -1, .look_ms = -1};
    if (failed(err, r, detail, &out->err, &out->detail))
        return;
    if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0) {
        /* acquire.lua's grant: the fencing token alone, which the server
         * converts for less than a table (issue 20). */
        out->verdict = DLOCK__ACQ_GRANTED;
        out->fence = (uint64_t)r->integer;
        return;
    }
    int ok = 1;
    int64_t granted = int_elem(r, 0, &ok), v = int_elem(r, 1, &ok);
    if (!ok) {
        out->err = DLOCK_EPROTO;
        out->detail = "acquire script gave an unexpected reply";
    } else if (granted == -1) {
        /* shared_acquire.lua: the semaphore stores another N. */
        out->err = DLOCK_EINVAL;
        out->detail = "the semaphore's stored number of permits differs from this handle's "
                      "(every user of a name must give the same N)";
    } else if (granted == -2) {
        /* shared_acquire.lua / exclusive_acquire.lua with an owner prefix. */
        out->err = DLOCK_EINVAL;
        out->detail = "this owner (client x thread) holds the name already through another "
                      "handle, as its writer or on the other side (upgrade and downgrade "
                      "are not offered: release first)";
    } else if (granted == 1) {
        out->verdict = DLOCK__ACQ_GRANTED;
        out->fence = (uint64_t)v;
        if (r->elements > 2) {
            out->count = int_elem(r, 2, &ok);
            out->has_count = 1;
        }
    } else {
        out->verdict = DLOCK__ACQ_TAKEN;
        out->pttl = v >= 0 ? v : -1;
        if (r->elements > 2 && r->element[2]->type == REDIS_REPLY_STRING) {
            out->holder = r->element[2]->str;
            out->holder_len = r->element[2]->len;
        }
        if (r->elements > 3 && r->element[3]->type == REDIS_REPLY_INTEGER &&
            r->element[3]->integer >= 0)
            out->look_ms = r->element[3]->integer;
        out->joined = r->elements > 4 && r->element[4]->type == REDIS_REPLY_INTEGER &&
                      r->element[4]->integer == 1;
        out->delayed = r->elements > 5 && r->element[5]->type == REDIS_REPLY_INTEGER &&
                       r->element[5]->integer == 1;
    }
}

void dlock__decode_owner(int err, const redisReply *r, const char *detail,
                         dlock__owner_reply *out)
{
    *out = (dlock__owner_reply){0};
    if (failed(err, r, detail, &out->err, &out->detail))
        return;
    out->replied = 1;
    long long code;
    int ok = 1;
    if (r->type == REDIS_REPLY_INTEGER) {
        code = r->integer;
        if (code == 2) /* fair release: released and handed over */
            code = 1;
    } else {
        code = int_elem(r, 0, &ok);
        if (ok && code == 1)
            out->count = int_elem(r, 1, &ok);
    }
    if (!ok || code < -1 || code > 1) {
        out->err = DLOCK_EPROTO;
        out->detail = "unexpected reply";
    } else {
        out->verdict = code == 1 ? DLOCK__OWN_DONE : code == 0 ? DLOCK__OWN_GONE : DLOCK__OWN_OTHER;
    }
}

void dlock__decode_fence_sync(int err, const redisReply *r, const char *detail,
                              uint64_t want, int *out_err, const char **out_detail)
{
    if (failed(err, r, detail, out_err, out_detail))
        return;
    if (r->type != REDIS_REPLY_INTEGER || (uint64_t)r->integer < want) {
        *out_err = DLOCK_EPROTO;
        *out_detail = "fence_sync gave an unexpected reply";
    }
}

int dlock__decode_undo(int err, const redisReply *r)
{
    return err == DLOCK_OK && r->type == REDIS_REPLY_INTEGER;
}

int dlock__decode_renew(int err, const redisReply *r, size_t n, size_t i, int *gone)
{
    *gone = 0;
    if (err < 0 || r->type != REDIS_REPLY_ARRAY || r->elements != n ||
        r->element[i]->type != REDIS_REPLY_INTEGER)
        return -1;
    *gone = r->element[i]->integer == 0;
    return r->element[i]->integer == 1;
}

void dlock__decode_status(int err, const redisReply *r, dlock__status_reply *out)
{
    *out = (dlock__status_reply){.ttl_ms = -1};
    const char *detail;
    if (failed(err, r, NULL, &out->err, &detail))
        return;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->elements > 4 ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER ||
        r->element[2]->type != REDIS_REPLY_INTEGER ||
        (r->elements == 4 && r->element[3]->type != REDIS_REPLY_STRING)) {
        out->err = DLOCK_EPROTO;
        return;
    }
    if (r->elements == 4 && r->element[3]->len > 0) {
        out->identity = r->element[3]->str;
        out->identity_len = r->element[3]->len;
    }
    out->held = r->element[0]->integer == 1;
    out->ttl_ms = out->held && r->element[1]->integer >= 0 ? r->element[1]->integer : -1;
    out->fence = r->element[2]->integer > 0 ? (uint64_t)r->element[2]->integer : 0;
}

void dlock__decode_holders(int err, const redisReply *r, dlock__holders_reply *out)
{
    *out = (dlock__holders_reply){.mark_ms = -1};
    const char *detail;
    if (failed(err, r, NULL, &out->err, &detail))
        return;
    int ok = 1;
    int64_t mode = int_elem(r, 0, &ok), permits = int_elem(r, 1, &ok), mark = int_elem(r, 2, &ok);
    if (ok && ((r->elements - 3) % 2 != 0 || mode < 0 || mode > 5))
        ok = 0;
    for (size_t i = 3; ok && i + 1 < r->elements; i += 2)
        ok = r->element[i]->type == REDIS_REPLY_STRING &&
             r->element[i + 1]->type == REDIS_REPLY_INTEGER;
    if (!ok) {
        out->err = DLOCK_EPROTO;
        return;
    }
    out->mode = (int)mode;
    out->permits = permits;
    out->mark_ms = mark > 0 ? mark : -1;
    out->count = (r->elements - 3) / 2;
}

const redisReply *dlock__holders_token(const redisReply *r, size_t i)
{
    return r->element[3 + 2 * i];
}

int64_t dlock__holders_ttl(const redisReply *r, size_t i)
{
    return r->element[4 + 2 * i]->integer;
}

void dlock__decode_leader(int err, const redisReply *r, const char *detail,
                          dlock__leader_reply *out)
{
    *out = (dlock__leader_reply){.ttl_ms = -1};
    if (failed(err, r, detail, &out->err, &out->detail))
        return;
    int ok = 1;
    int64_t state = int_elem(r, 0, &ok);
    if (ok && state > 0) {
        int64_t pttl = int_elem(r, 1, &ok), fence = int_elem(r, 2, &ok);
        out->ttl_ms = pttl >= 0 ? pttl : -1;
        out->fence = fence > 0 ? (uint64_t)fence : 0;
    }
    if (ok && state == 2) {
        ok = r->elements > 3 && r->element[3]->type == REDIS_REPLY_STRING;
        if (ok) {
            out->value = r->element[3]->str;
            out->value_len = r->element[3]->len;
        }
    }
    if (ok && state == 2 && r->elements > 5) /* the write's sequence */
        out->seq = (long long)int_elem(r, 5, &ok);
    if (ok && state > 0) { /* the holder's token */
        size_t at = state == 2 ? 4 : 3;
        ok = r->elements > at && r->element[at]->type == REDIS_REPLY_STRING;
        if (ok) {
            out->token = r->element[at]->str;
            out->token_len = r->element[at]->len;
        }
    }
    if (!ok || state < 0 || state > 2) {
        out->err = DLOCK_EPROTO;
        out->detail = "election read script gave an unexpected reply";
        return;
    }
    out->state = (int)state;
}
