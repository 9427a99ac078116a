/* SPDX-License-Identifier: BSD-3-Clause */
/* Release and extend requests, and the steps of a release, a resend and
 * a forget (release.h). */
#include <stddef.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "fanout.h"
#include "fanout_run.h"
#include "handle.h"
#include "kind_steps.h"
#include "kinds.h"
#include "quorum.h"
#include "release.h"
#include "replies.h"


void dlock__release_prepare(dlock_lock *l, const uint8_t *mask, int64_t timeout_ms, int undo,
                            dlock__release_run *r, dlock__tally *t)
{
    /* An undo publishes no wake-up: it frees only keys of this attempt,
     * which no waiter counts on, and its message would wake this very
     * waiter (and every other) into another attempt and another undo: a
     * storm while the lock is held on a majority but not on every node
     * (issue 15). */
    int queued = l->kind->wait == DLOCK__WAIT_QUEUE;
    dlock__step_in in = {.wake = !undo && (l->client->opts.wakeups || queued)};
    (void)dlock__step_req(l, DLOCK__STEP_RELEASE, &in, &r->a, &r->req); /* allocates nothing */
    if (mask && mask != r->mask)
        memcpy(r->mask, mask, sizeof r->mask);
    r->fo = (dlock__fanout_opts){.io_timeout_ms = timeout_ms, .deadline_ns = INT64_MAX,
                                 .only = mask ? r->mask : NULL,
                                 .grace_ms = DLOCK__DECIDED_GRACE_MS};
    dlock__tally_init(t, l->client, &l->err);
    t->quiet = undo;
}

void dlock__note_release_pending(dlock_lock *l, const dlock__tally *t, const uint8_t *mask)
{
    /* An error or no reply: it may not have run there. */
    l->rel_pending = 0;
    for (size_t i = 0; i < t->n; i++) {
        l->rel_nodes[i] = (!mask || mask[i]) && t->vote[i] != DLOCK__V_YES &&
                          t->vote[i] != DLOCK__V_NO;
        l->rel_pending |= l->rel_nodes[i];
    }
}

void dlock__release_op(dlock_lock *l, unsigned n)
{
    /* A new number, so that a node that ran the last one still runs this
     * one; counted from the run's first release while a node owes the
     * run, so that this one carries what that node owes (its number makes
     * the older copies look already run there). */
    l->rel_seq = dlock__lock_next_op_no();
    if (!l->rel_pending) {
        l->rel_base = l->rel_seq;
        l->rel_total = 0;
    }
    l->rel_total += n;
}

void dlock__forget_prepare(dlock_lock *l, dlock__release_run *r, dlock__tally *t)
{
    (void)dlock__step_req(l, DLOCK__STEP_FORGET, &(dlock__step_in){0}, &r->a, &r->req);
    r->fo = (dlock__fanout_opts){.io_timeout_ms = l->client->opts.io_timeout_ms,
                                 .deadline_ns = INT64_MAX};
    dlock__tally_init(t, l->client, &l->err);
}

void dlock__release_resend(dlock_lock *l, dlock__release_run *r, dlock__tally *t,
                           dlock__fan *fan, dlock__loop *loop, int64_t timeout_ms, int cancel_fd,
                           void (*then)(dlock__fan *fan))
{
    dlock__release_prepare(l, l->rel_nodes, timeout_ms, 1, r, t);
    dlock__fan_init(fan, l->client, &r->req, 1, &r->fo, dlock__owner_cb, t);
    /* A cancel leaves what was sent to run unheard: it stays pending. */
    fan->cancel_fd = cancel_fd;
    dlock__fan_start(fan, loop, then);
}

/* ---- the requests: a chain of fan-outs on a loop ---------------------------- */

/* A release or extend in flight: one fan-out at a time on q->loop, each
 * step started from the last one's done (the attempt's pattern,
 * attempt.h). The engine's requests (backend.h) allocate it and answer
 * their op. */
typedef struct hold_req {
    dlock_lock *l;
    dlock__loop *loop;
    dlock__op *op;                    /* the engine's request it answers */
    int on_heap;                      /* allocated here, not op->scratch */
    int rc;
    int64_t ttl_ms, deadline_ns, t0_ns, until_ns; /* an extend's */
    dlock__release_run run;
    dlock__tally t;
    dlock__fan fan;
} hold_req;

#define REQ_OF(f) DLOCK__OWNER(f, hold_req, fan)

_Static_assert(sizeof(hold_req) <= DLOCK__OP_SCRATCH, "a release must fit a blocking call's scratch");

static void hold_init(hold_req *q, dlock_lock *l)
{
    memset(q, 0, offsetof(hold_req, fan)); /* the fan's run sets itself up */
    q->l = l;
}

void dlock__release_send(dlock_lock *l, dlock__release_run *r, dlock__tally *t, dlock__fan *fan,
                         dlock__loop *loop, void (*then)(dlock__fan *fan))
{
    dlock__fan_init(fan, l->client, &r->req, 1, &r->fo, dlock__owner_cb, t);
    dlock__fan_start(fan, loop, then);
}

/* The request is over, q->rc set: its op is answered, from the loop. */
static void answered(hold_req *q)
{
    dlock__op *op = q->op;
    op->v.code = q->rc;
    op->v.until_ns = q->until_ns;
    op->v.renew_ttl_ms = q->ttl_ms;
    if (q->on_heap)
        dlock__free(q);
    dlock__op_complete(op);
}

/* Send q->run (replies counted in q->t); then(f) when its run is over. */
static void send_run(hold_req *q, void (*then)(dlock__fan *f))
{
    dlock__release_send(q->l, &q->run, &q->t, &q->fan, q->loop, then);
}

static void released(dlock__fan *f)
{
    hold_req *q = REQ_OF(f);
    dlock_lock *l = q->l;
    q->rc = dlock__tally_owner_code(&q->t);
    /* Where it may not have run, it is sent again before the handle's next
     * acquire, or on free: a lost release no longer keeps the key (and a
     * fair line) for the whole TTL when the node answers again. */
    dlock__note_release_pending(l, &q->t, NULL);
    if (l->kind->counted) {
        /* ... and with it the holds this handle drops if it failed: one
         * more release of the run, owed by every node. */
        l->in_doubt |= l->rel_pending;
        if (q->rc != DLOCK_OK && l->rel_pending && l->holds > 1) {
            dlock__release_op(l, l->holds - 1);
            memset(l->rel_nodes, 1, sizeof l->rel_nodes);
        }
    }
    answered(q);
}

/* To every node: a counted kind's release carries the older ones a node
 * still owes (dlock__release_op()), so it needs no resend first. */
static void release_begin(hold_req *q)
{
    dlock_lock *l = q->l;
    if (l->kind->counted)
        dlock__release_op(l, 1);
    dlock__release_prepare(l, NULL, l->client->opts.io_timeout_ms, 0, &q->run, &q->t);
    send_run(q, released);
}

static void extended(dlock__fan *f)
{
    hold_req *q = REQ_OF(f);
    q->rc = dlock__tally_owner_code(&q->t);
    int64_t drift_ns = dlock__drift_ns(q->l->client, q->ttl_ms);
    q->until_ns = q->t0_ns + q->ttl_ms * DLOCK__NS_PER_MS - drift_ns;
    answered(q);
}

static void extend_begin(hold_req *q)
{
    dlock_lock *l = q->l;
    if (q->ttl_ms == 0)
        q->ttl_ms = l->opts.ttl_ms;
    q->t0_ns = dlock__now_ns(); /* the lease counts from before the send */
    dlock__step_in in = {.ttl_ms = q->ttl_ms};
    (void)dlock__step_req(l, DLOCK__STEP_EXTEND, &in, &q->run.a, &q->run.req);
    q->run.fo = (dlock__fanout_opts){.io_timeout_ms = dlock__node_timeout_ms(l->client, q->ttl_ms),
                                     .deadline_ns = q->deadline_ns,
                                     .grace_ms = DLOCK__DECIDED_GRACE_MS};
    dlock__tally_init(&q->t, l->client, &l->err);
    send_run(q, extended);
}

/* ---- the engine's requests (backend.h) ---------------------------------------- */

/* The request's record: in what the starter lent (a blocking release
 * or extend: no allocation per call), else on the heap. */
static hold_req *op_req(dlock_lock *l, dlock__op *op)
{
    int on_heap = op->scratch_len < sizeof(hold_req);
    hold_req *q = on_heap ? dlock__malloc(sizeof *q) : op->scratch;
    if (!q) {
        dlock__err_set(&l->err, "out of memory");
        return NULL;
    }
    hold_init(q, l);
    q->on_heap = on_heap;
    q->loop = op->loop;
    q->op = op;
    return q;
}

/* A release that could not start sent nothing, and the engine drops the
 * handle's holds: pending on every node, as one no node answered
 * (released()), so the next acquire or the free sends it, a counted
 * kind's every hold with it (and an older pending release: one run),
 * instead of leaving the key to its TTL. */
static void not_sent(dlock_lock *l)
{
    if (l->kind->counted) {
        l->in_doubt = 1;
        dlock__release_op(l, l->holds);
    }
    memset(l->rel_nodes, 1, sizeof l->rel_nodes);
    l->rel_pending = 1;
}

/* A reentrant reader's holds below the last are the handle's own count:
 * its member in the key stays until the last. A counted kind's every hold
 * is the script's. */
int dlock__release_start(dlock_lock *l, int last, dlock__op *op)
{
    if (!last && l->kind->reenter) {
        dlock__op_complete_soon(op, DLOCK_OK);
        return DLOCK_OK;
    }
    hold_req *q = op_req(l, op);
    if (!q) {
        not_sent(l);
        return DLOCK_ENOMEM;
    }
    release_begin(q);
    return DLOCK_OK;
}

int dlock__extend_start(dlock_lock *l, int64_t ttl_ms, int64_t deadline_ns, dlock__op *op)
{
    hold_req *q = op_req(l, op);
    if (!q)
        return DLOCK_ENOMEM;
    q->ttl_ms = ttl_ms;
    q->deadline_ns = deadline_ns;
    extend_begin(q);
    return DLOCK_OK;
}
