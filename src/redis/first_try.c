/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "first_try.h"
#include "handle.h"
#include "kinds.h"
#include "node.h"
#include "replies.h"

/* DLOCK_NO_FENCE's first try at a plain lock, on one node or several
 * masters (issue 20): with no counter to raise in the same step, a grant
 * is the one command redsync, redis-py and baseline-c send, SET NX PX, and
 * no script runs (about 1.5 us of the server's time where acquire.lua
 * takes 7 to 11: INFO commandstats, docs/waiting.md). For a busy lock the
 * try must answer what acquire.lua would: its holder and TTL, or WRONGTYPE
 * for a key of another type. On Redis 7 (every node's handshake INFO says
 * so, node.h) that is `SET KEY TOKEN NX PX TTL GET`, whose reply is nil
 * for a grant and the holder's token otherwise, with PTTL behind it in the
 * same write; before, and when the version is not known, a GET goes
 * between them. SET NX writes only an absent key, so a key of another
 * type, a live lock or another waiter's turn is left as it was. A waiter's
 * later tries, which keep the waiter list and runs, go through acquire.lua. */

enum { RAW_SET, RAW_GET, RAW_PTTL }; /* which reply */

/* Count a node's answer (the replies behind it are read in the grace). */
static int raw_count(dlock__first_try *rt, size_t node, int err, const dlock__acquire_reply *a,
                     int64_t start_ns)
{
    rt->state[node] = DLOCK__FT_DONE;
    return dlock__tally_answer(rt->t, node, err, a, start_ns);
}

/* A reply that shows no holder behind a refused SET: the refusal stands. */
static int raw_no_holder(int step, int err, const redisReply *r)
{
    if (err < 0 || r->type == REDIS_REPLY_NIL)
        return 1;
    return step == RAW_PTTL && (r->type != REDIS_REPLY_INTEGER || r->integer == -2);
}

/* The SET's error reply: WRONGTYPE from SET ... GET (a key of another
 * type) is the answer; any other leaves the verdict to the replies behind. */
static int raw_set_refused(dlock__first_try *rt, size_t node, const redisReply *r)
{
    int code = dlock__map_redis_error(r->str, r->len);
    if (rt->set_get && code == DLOCK_EWRONGTYPE)
        return 0;
    rt->state[node] = DLOCK__FT_REFUSED;
    rt->refused[node] = code;
    snprintf(rt->why[node], sizeof rt->why[node], "%s", r->str);
    if (rt->set_get && memmem(r->str, r->len, "syntax error", 12)) {
        /* A server that says it is Redis 7 and is not: the SET did not
         * run, and the next try asks the old way (transient: a waiting
         * acquire goes on). */
        dlock__node_no_set_get(&rt->t->client->nodes[node]);
        rt->refused[node] = DLOCK_EBUSY;
        snprintf(rt->why[node], sizeof rt->why[node],
                 "SET NX GET refused (%.20s): the next try sends SET, GET and PTTL", r->str);
    }
    return 1;
}

int dlock__first_try_reply(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                            const char *detail, int64_t start_ns)
{
    dlock__first_try *rt = arg;
    dlock__acquire_reply a = {.pttl = -1, .look_ms = -1};
    int step = idx == 0 ? RAW_SET : rt->set_get || idx == 2 ? RAW_PTTL : RAW_GET;
    int state = idx > 0 ? rt->state[node] : DLOCK__FT_DONE;
    if (idx > 0 && state == DLOCK__FT_DONE) /* settled by an earlier reply */
        return 0;
    if (state == DLOCK__FT_REFUSED && raw_no_holder(step, err, r)) {
        /* The SET did not run, so nothing of ours is there. */
        a.err = rt->refused[node];
        a.detail = rt->why[node];
        return raw_count(rt, node, 0, &a, start_ns);
    }
    if (err < 0 || r->type == REDIS_REPLY_ERROR) {
        if (step == RAW_SET && err == 0 && raw_set_refused(rt, node, r))
            return 0;
        dlock__decode_acquire(err, r, detail, &a);
        if (step != RAW_PTTL && a.err == DLOCK_EWRONGTYPE)
            a.detail = "WRONGTYPE the lock key holds another type, not a plain dlock lock";
        if (step == RAW_PTTL) { /* only the TTL is missing: still a "no" */
            a.err = DLOCK_OK;
            a.verdict = DLOCK__ACQ_TAKEN;
        }
        return raw_count(rt, node, err, &a, start_ns);
    }
    switch (step) {
    case RAW_SET:
        /* SET NX: OK or nil (held); SET NX GET: nil or the holder. */
        if (r->type == (rt->set_get ? REDIS_REPLY_STRING : REDIS_REPLY_NIL)) {
            if (rt->set_get)
                rt->t->holder[node] = dlock__holder_hash(r->str, r->len);
            rt->state[node] = DLOCK__FT_BUSY;
            return 0;
        }
        if (r->type != (rt->set_get ? REDIS_REPLY_NIL : REDIS_REPLY_STATUS)) {
            /* Out of step with the node: the SET may have run. */
            rt->t->maybe_ours[node] = 1;
            a.err = DLOCK_EPROTO;
            a.detail = "SET gave an unexpected reply";
        }
        a.verdict = DLOCK__ACQ_GRANTED; /* fence 0: there is no counter */
        return raw_count(rt, node, err, &a, start_ns);
    case RAW_GET:
        if (r->type == REDIS_REPLY_STRING) {
            rt->t->holder[node] = dlock__holder_hash(r->str, r->len);
            rt->state[node] = DLOCK__FT_BUSY; /* held: busy, whatever the SET said */
        }
        return 0;
    default:
        a.verdict = DLOCK__ACQ_TAKEN;
        if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0)
            a.pttl = r->integer;
        return raw_count(rt, node, err, &a, start_ns);
    }
}

/* Whether this try is DLOCK_NO_FENCE's first try at a plain lock (dlock__first_try
 * above), without a holder identity or a lock-delay (which the script writes). Not on a Redis Cluster, whose routing and redirects follow
 * scripts' keys, nor with min_replicas, whose WAIT follows scripts. */
int dlock__first_try_is_raw(const dlock_lock *l)
{
    return l->kind->raw_first_try && !l->fence_key && !l->aux_key && !l->id_key &&
           !l->delay_key && !l->wait_id_len && !dlock__client_cluster(l->client) &&
           l->client->opts.min_replicas <= 0;
}

/* The first try's commands; SET ... GET only when every node takes it. */
void dlock__first_try_prepare(dlock_lock *l, dlock__tally *t, dlock__first_try_reqs *q)
{
    memset(&q->rt, 0, sizeof q->rt);
    q->rt.t = t;
    q->rt.set_get = 1;
    for (size_t i = 0; i < l->client->n_nodes; i++)
        q->rt.set_get &= dlock__node_set_get(&l->client->nodes[i]);
    const char *set[7] = {"SET", l->name, l->token, "NX", "PX", l->ttl_s, "GET"};
    size_t set_lens[7] = {3, l->name_len, l->token_len, 2, 2, l->ttl_s_len, 3};
    memcpy(q->set, set, sizeof set);
    memcpy(q->set_lens, set_lens, sizeof set_lens);
    q->get[0] = "GET", q->pttl[0] = "PTTL";
    q->get[1] = q->pttl[1] = l->name;
    q->get_lens[0] = 3, q->pttl_lens[0] = 4;
    q->get_lens[1] = q->pttl_lens[1] = l->name_len;
    int sg = q->rt.set_get;
    q->raw[0] = (dlock__req){.script = NULL, .numkeys = 0, .nargs = sg ? 7 : 6, .args = q->set,
                             .arglens = q->set_lens};
    q->raw[1] = (dlock__req){.script = NULL, .numkeys = 0, .nargs = 2, .args = q->get,
                             .arglens = q->get_lens};
    q->raw[2] = (dlock__req){.script = NULL, .numkeys = 0, .nargs = 2, .args = q->pttl,
                             .arglens = q->pttl_lens};
    if (sg)
        q->raw[1] = q->raw[2];
    q->n = sg ? 2 : 3;
}
