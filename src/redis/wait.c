/* SPDX-License-Identifier: BSD-3-Clause */
/* Redis's part of waiting (wait.h): the try, the watch and the leave of
 * the engine's wait (src/engine/acquire.c) for the kinds that wait by
 * retrying, and the watch of every kind (fair.c has the queued kinds'
 * begin, try and leave). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "attempt.h"
#include "backend.h"
#include "client.h"
#include "clock.h"
#include "fanout.h"
#include "handle.h"
#include "keys.h"
#include "kind_steps.h"
#include "kinds.h"
#include "rand.h"
#include "wait.h"
#include "wakeup.h"

/* The tag of the handle's inbox (keys.h), which is made on its first wait;
 * NULL for kinds and clients without one, or when out of memory (then the
 * waiter is woken on the lock's channel, as it was before inboxes). */
static const char *inbox_tag(dlock_lock *l)
{
    const dlock_client *c = l->client;
    if (!l->kind->inbox || c->n_nodes != 1 || dlock__client_cluster(c) ||
        dlock__wakeup_inbox_off(l->client))
        return NULL;
    if (!l->inbox)
        l->inbox = dlock__inbox_channel(l->channel, l->channel_len, c->id, &l->inbox_len);
    return l->inbox ? l->inbox + l->inbox_len - DLOCK__INBOX_TAG_LEN : NULL;
}

/* Fill the waiter record and start the subscription (the engine waits
 * for its confirmation on its loop: dlock__wait_watch_ready). fair: a
 * queued kind, woken by a hand-over to its token too. */
static int watch(dlock_lock *l, int fair)
{
    /* An id or fair token that ends with the inbox's tag is woken there
     * (src/redis/scripts/lib/wake_to.lua): a release's addressed wake-up reaches
     * this process alone, not every process waiting on the name. */
    const char *tag = inbox_tag(l);
    if (fair && tag && l->token == l->token_inline && l->token_len == DLOCK_TOKEN_HEX_LEN) {
        memcpy(l->token + l->token_len, tag, DLOCK__INBOX_TAG_LEN);
        l->token_len += DLOCK__INBOX_TAG_LEN;
        l->token[l->token_len] = '\0';
    }
    /* The record's constant part; its thread part is under l->mu. */
    l->waiter.channel = l->channel;
    l->waiter.channel_len = l->channel_len;
    l->waiter.inbox = tag ? l->inbox : NULL;
    l->waiter.inbox_len = tag ? l->inbox_len : 0;
    l->waiter.token = fair ? l->token : NULL;
    l->waiter.token_len = fair ? l->token_len : 0;
    /* Listed in the waiter list from the next attempt on (attempt.c), so a
     * release wakes this waiter alone when its turn comes. Without an id
     * (no list, or no random bytes) it is woken by every release. */
    l->wait_id_len = 0;
    if (!fair && l->wq_key && dlock__token_hex(l->wait_id) == DLOCK_OK) {
        l->wait_id_len = DLOCK_TOKEN_HEX_LEN;
        if (tag) {
            memcpy(l->wait_id + l->wait_id_len, tag, DLOCK__INBOX_TAG_LEN);
            l->wait_id_len += DLOCK__INBOX_TAG_LEN;
        }
        l->wait_id[l->wait_id_len] = '\0';
    }
    l->waiter.wait_id = l->wait_id_len ? l->wait_id : NULL;
    l->waiter.wait_id_len = l->wait_id_len;
    l->waiter.mu = &l->mu;
    l->waiter.cond = &l->cond;
    l->waiter.canceled = &l->canceled;
    int rc = dlock__wakeup_watch_start(l->client, &l->waiter);
    if (rc != DLOCK_OK)
        l->wait_id_len = 0; /* not woken by messages: not listed either */
    return rc;
}

void dlock__wait_unwatch(dlock_lock *l)
{
    dlock__wakeup_unwatch(l->client, &l->waiter);
    l->wait_id_len = 0;
}

/* A listed waiter that gives up behind a holder leaves the list at once,
 * so no release wakes it in vain (the others would then sleep until their
 * next look), and passes on a turn it was handed meanwhile (wq_leave.lua).
 * Best effort, one script call, a request on op->loop: otherwise the entry
 * goes with the list, and a turn lapses. A grant took the entry off
 * already. */
typedef struct leave_req {
    dlock__step_args a;
    dlock__req req;
    dlock__fanout_opts fo;
    dlock__fan fan;
    dlock__op *op;
} leave_req;

static void left(dlock__fan *f)
{
    leave_req *q = DLOCK__OWNER(f, leave_req, fan);
    dlock__op *op = q->op;
    dlock__free(q);
    dlock__op_complete(op); /* its answer changes nothing: v stays */
}

int dlock__wait_leave(dlock_lock *l, int64_t timeout_ms, dlock__op *op)
{
    if (!l->wait_id_len)
        return DLOCK_ENOTHELD; /* not listed: nothing to leave */
    leave_req *q = dlock__malloc(sizeof *q);
    if (!q)
        return DLOCK_ENOMEM; /* the entry lapses by itself */
    q->op = op;
    (void)dlock__step_req(l, DLOCK__STEP_LEAVE_LIST, &(dlock__step_in){0}, &q->a, &q->req);
    q->fo = (dlock__fanout_opts){
        .io_timeout_ms = DLOCK__MIN(timeout_ms, l->client->opts.io_timeout_ms),
        .deadline_ns = INT64_MAX};
    dlock__fan_init(&q->fan, l->client, &q->req, 1, &q->fo, dlock__ignore_cb, NULL);
    dlock__fan_start(&q->fan, op->loop, left);
    return DLOCK_OK;
}

/* A try in flight: the attempt's chain and the op it answers. Not kept
 * with the handle (it holds a fan-out's slots for every node, 20 KB):
 * the starter's scratch, or made for the try and freed when it answers. */
typedef struct try_req {
    dlock__attempt_req r;
    dlock__op *op;
    int on_heap; /* allocated here, not op->scratch */
} try_req;

_Static_assert(sizeof(try_req) <= DLOCK__OP_SCRATCH, "a try must fit a blocking call's scratch");

static void try_answered(dlock__attempt_req *r)
{
    try_req *q = DLOCK__OWNER(r, try_req, r);
    dlock__op *op = q->op;
    dlock_lock *l = r->l;
    op->v.code = r->rc;
    op->v.flags = (r->retry ? DLOCK__V_RETRY : 0u) | (l->split_vote ? DLOCK__V_SPLIT : 0u) |
                  (l->delayed && r->rc == DLOCK_ENOTACQUIRED ? DLOCK__V_DELAYED : 0u);
    op->v.holder_ttl_ms = l->holder_ttl_ms;
    op->v.look_ms = l->look_ms;
    if (q->on_heap)
        dlock__free(q);
    dlock__op_complete(op);
}

int dlock__wait_try(dlock_lock *l, dlock__op *op)
{
    /* The attempt is a chain of fan-outs on op->loop (attempt.h): the
     * engine's wait no longer blocks inside its try. A cancel ends it at
     * once: each fan-out watches the handle's cancel pipe on that loop. */
    /* In what the starter lent (a blocking acquire: one record on its
     * stack for every try, not an allocation per try), else the heap. */
    int on_heap = op->scratch_len < sizeof(try_req);
    try_req *q = on_heap ? dlock__malloc(sizeof *q) : op->scratch;
    if (!q) {
        dlock__err_set(&l->err, "out of memory");
        return DLOCK_ENOMEM;
    }
    q->op = op;
    q->on_heap = on_heap;
    dlock__attempt_start(&q->r, l, op->loop, try_answered);
    return DLOCK_OK;
}

int dlock__wait_watch_release(dlock_lock *l)
{
    return watch(l, l->kind->wait == DLOCK__WAIT_QUEUE);
}

int dlock__wait_watch_ready(dlock_lock *l, int64_t until_ns)
{
    return dlock__wakeup_watch_ready(l->client, &l->waiter, until_ns);
}
