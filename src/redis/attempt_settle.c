/* SPDX-License-Identifier: BSD-3-Clause */
/* The attempt's first step (attempt.h): what the handle's earlier
 * operations left with an unknown outcome is settled before a new
 * attempt; and the counted kinds' undo as a step. */
#include <string.h>

#include "attempt.h"
#include "client.h"
#include "handle.h"
#include "kinds.h"
#include "release.h"
#include "replies.h"

typedef dlock__attempt_req att;
#define ATT_OF(f) DLOCK__OWNER(f, att, fan)

dlock__req dlock__attempt_undo_req(dlock_lock *l, uint64_t seq_no, dlock__step_args *a)
{
    dlock__req req;
    dlock__step_in in = {.op_no = seq_no, .wake = l->client->opts.wakeups};
    (void)dlock__step_req(l, DLOCK__STEP_UNDO, &in, a, &req); /* allocates nothing */
    return req;
}

void dlock__undo_send(dlock_lock *l, dlock__release_run *r, dlock__fan *fan, dlock__loop *loop,
                      int64_t timeout_ms, int cancel_fd, void (*then)(dlock__fan *fan))
{
    r->req = dlock__attempt_undo_req(l, l->undo_seq, &r->a);
    memcpy(r->mask, l->undo_nodes, sizeof r->mask);
    r->fo = (dlock__fanout_opts){.io_timeout_ms = timeout_ms, .deadline_ns = INT64_MAX,
                                 .only = r->mask};
    dlock__fan_init(fan, l->client, &r->req, 1, &r->fo, dlock__undo_cb, l->undo_nodes);
    fan->cancel_fd = cancel_fd;
    dlock__fan_start(fan, loop, then);
}

int dlock__undo_noted(dlock_lock *l)
{
    l->undo_pending = 0;
    for (size_t i = 0; i < l->client->n_nodes; i++)
        l->undo_pending |= l->undo_nodes[i];
    return l->undo_pending;
}

static void undo_sent(dlock__fan *f)
{
    att *r = ATT_OF(f);
    dlock__undo_noted(r->l);
    r->next(r);
}

void dlock__attempt_send_undo(att *r, int64_t timeout_ms, int cancel_fd, void (*then)(att *r))
{
    r->next = then;
    dlock__undo_send(r->l, &r->rel, &r->fan, r->loop, timeout_ms, cancel_fd, undo_sent);
}

static int64_t settle_timeout_ms(const dlock_lock *l)
{
    return dlock__node_timeout_ms(l->client, l->opts.ttl_ms);
}

/* A cancel that came while a waiting acquire settled: used up, and the
 * wait ends. A try (no cancel pipe) leaves it for the next wait. */
static int settle_canceled(dlock_lock *l)
{
    if (l->cancel_fd[0] < 0 || !dlock__lock_use_cancel(l))
        return DLOCK_OK;
    dlock__err_set(&l->err, "cancelled while an earlier operation on \"%s\" was settled",
                   l->name);
    return DLOCK_ECANCELED;
}

/* Counted: the nodes have answered the pending undo, or not (then no new
 * attempt: it could run before the old one's undo and leave the undo
 * nothing it may take back). */
static void undo_settled(att *r)
{
    dlock_lock *l = r->l;
    if (!l->undo_pending) {
        dlock__attempt_try(r);
        return;
    }
    if (settle_canceled(l) != DLOCK_OK) {
        dlock__attempt_end(r, DLOCK_ECANCELED);
        return;
    }
    dlock__err_set(&l->err, "an earlier attempt on \"%s\" has an unknown outcome and "
                   "its undo is not answered yet", l->name);
    r->retry = 1;
    dlock__attempt_end(r, DLOCK_EUNKNOWN);
}

static void settle_undo(att *r)
{
    dlock_lock *l = r->l;
    /* A waiting acquire's cancel ends the wait here too, at once (issue
     * 34): what was resent runs unheard and stays pending. */
    if (l->undo_pending)
        dlock__attempt_send_undo(r, settle_timeout_ms(l), l->cancel_fd[0], undo_settled);
    else
        dlock__attempt_try(r);
}

/* The pending release was resent (release.h, dlock__release_resend), and
 * answered or not. */
static void release_settled(att *r)
{
    dlock_lock *l = r->l;
    if (!l->kind->counted) {
        /* Cut short by a cancel: still pending, for the next acquire or
         * free (before the token changes). Else, if the node still does
         * not answer, the key ends with its TTL, as before. */
        if (settle_canceled(l) != DLOCK_OK) {
            dlock__attempt_end(r, DLOCK_ECANCELED);
            return;
        }
        l->rel_pending = 0;
        dlock__attempt_try(r);
        return;
    }
    if (!l->rel_pending) {
        settle_undo(r);
        return;
    }
    if (settle_canceled(l) != DLOCK_OK) {
        dlock__attempt_end(r, DLOCK_ECANCELED);
        return;
    }
    /* A newer operation would make the old release's resend look stale:
     * none before the node answered it. */
    dlock__err_set(&l->err, "an earlier release of \"%s\" has an unknown outcome and "
                   "is not answered yet", l->name);
    r->retry = 1;
    dlock__attempt_end(r, DLOCK_EUNKNOWN);
}

static void release_resent(dlock__fan *f)
{
    att *r = ATT_OF(f);
    dlock__note_release_pending(r->l, &r->t2, r->rel.mask);
    release_settled(r);
}

/* The last release's outcome was unknown: send it again with its token
 * (compare-and-delete: harmless if it ran) before the token changes. */
static void resend_release(att *r)
{
    dlock_lock *l = r->l;
    dlock__release_resend(l, &r->rel, &r->t2, &r->fan, r->loop, settle_timeout_ms(l),
                          l->cancel_fd[0], release_resent);
}

void dlock__attempt_settle(att *r)
{
    dlock_lock *l = r->l;
    if (l->rel_pending)
        resend_release(r);
    else if (l->kind->counted)
        settle_undo(r);
    else
        dlock__attempt_try(r);
}
