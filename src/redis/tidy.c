/* SPDX-License-Identifier: BSD-3-Clause */
/* What a handle leaves to settle in Redis before its token changes, after
 * it was lost, or when it is freed (backend.h: settle_start,
 * release_lost_start, cleanup_start; tidy.h): each a request, a chain of
 * the release, undo, forget and fair cleanup steps (release.h, attempt.h,
 * fair.h) on op->loop, one fan-out at a time, each started from the last
 * one's done. Best effort: the answer is DLOCK_OK, but for a settle that
 * could not keep what is owed under the old token (DLOCK_ENOMEM: the
 * adopt must not change it). */
#include <string.h>

#include "attempt.h"
#include "client.h"
#include "fair.h"
#include "handle.h"
#include "kinds.h"
#include "release.h"
#include "tidy.h"

/* How long a lost handle's release by token listens for each node. A
 * handle is mostly lost because a node stalled, and then its release
 * would wait the whole I/O timeout, on the watchdog thread too when an
 * on_lost callback releases, holding up the next lock's loss report. The
 * release is written at once and a node that answers again runs it (a
 * timed-out connection is closed, which still delivers what was written);
 * before or after a late renewal it ends the same: our token gone. */
#define RELEASE_LOST_MS 50

typedef struct tidy {
    dlock_lock *l;
    dlock__op *op;
    int on_heap;                  /* allocated here, not op->scratch */
    int starting;                 /* inside the start: the answer waits for the next turn */
    int rc;                       /* the answer: DLOCK_OK, or settle's DLOCK_ENOMEM */
    void (*next)(struct tidy *q); /* after the step in flight */
    void (*owed_then)(struct tidy *q); /* after resend_owed */
    /* The handle's own pending release, set aside while the one owed
     * under an adopt's old token is resent (resend_owed). */
    char *token;
    size_t token_len;
    int rel_pending;
    uint8_t rel_nodes[DLOCK__MAX_NODES];
    dlock__release_run run;
    dlock__tally t;
    dlock__fan fan;
} tidy;

#define TIDY_OF(f) DLOCK__OWNER(f, tidy, fan)

static int64_t io_ms(const tidy *q)
{
    return q->l->client->opts.io_timeout_ms;
}

static void answer(tidy *q)
{
    dlock__op *op = q->op;
    int at_once = q->starting;
    int rc = q->rc;
    if (q->on_heap)
        dlock__free(q);
    if (at_once)
        dlock__op_complete_soon(op, rc);
    else {
        op->v.code = rc;
        dlock__op_complete(op);
    }
}

/* ---- the steps: each ends in q->next ------------------------------------ */

static void step_over(dlock__fan *f)
{
    tidy *q = TIDY_OF(f);
    q->next(q);
}

static void flushed(dlock__fan *f)
{
    tidy *q = TIDY_OF(f);
    dlock__note_release_pending(q->l, &q->t, q->run.mask);
    q->next(q);
}

/* Send the pending release again (same number: applied at most once) to
 * the nodes that have not answered it; l->rel_pending says after. */
static void flush(tidy *q, void (*then)(tidy *q))
{
    q->next = then;
    q->starting = 0;
    dlock__release_resend(q->l, &q->run, &q->t, &q->fan, q->op->loop, io_ms(q), -1, flushed);
}

/* One release by the current token to every node, votes in q->t. */
static void release(tidy *q, int64_t timeout_ms, void (*then)(tidy *q))
{
    q->next = then;
    q->starting = 0;
    dlock__release_prepare(q->l, NULL, timeout_ms, 0, &q->run, &q->t);
    dlock__release_send(q->l, &q->run, &q->t, &q->fan, q->op->loop, step_over);
}

static void forget(tidy *q, void (*then)(tidy *q))
{
    q->next = then;
    q->starting = 0;
    dlock__forget_prepare(q->l, &q->run, &q->t);
    dlock__release_send(q->l, &q->run, &q->t, &q->fan, q->op->loop, step_over);
}

static void undo_over(dlock__fan *f)
{
    tidy *q = TIDY_OF(f);
    (void)dlock__undo_noted(q->l);
    q->next(q);
}

static void undo(tidy *q, void (*then)(tidy *q))
{
    q->next = then;
    q->starting = 0;
    dlock__undo_send(q->l, &q->run, &q->fan, q->op->loop, io_ms(q), -1, undo_over);
}

static void fair_cleaned(void *arg)
{
    tidy *q = arg;
    q->next(q);
}

/* Out of memory, nothing was sent and it stays pending: on to then. */
static void fair_cleanup(tidy *q, void (*then)(tidy *q))
{
    q->next = then;
    if (dlock__fair_cleanup_start(q->l, q->op->loop, fair_cleaned, q) != DLOCK_OK) {
        then(q);
        return;
    }
    q->starting = 0;
}

/* ---- the release owed under an adopt's old token ------------------------ */

static void owed_resent(tidy *q)
{
    dlock_lock *l = q->l;
    int owed = l->rel_pending;
    memcpy(l->owed_nodes, l->rel_nodes, sizeof l->owed_nodes);
    l->token = q->token;
    l->token_len = q->token_len;
    l->rel_pending = q->rel_pending;
    memcpy(l->rel_nodes, q->rel_nodes, sizeof l->rel_nodes);
    if (!owed) {
        dlock__free(l->owed_token);
        l->owed_token = NULL;
    }
    q->owed_then(q);
}

/* The release still owed under a token an adopt replaced (handle.h,
 * owed_token): sent again by that token, the handle's own pending release
 * set aside meanwhile, to the nodes that still owe it. Best effort, as
 * every resend; forgotten once none owes it. The swap of l->token is
 * the calling thread's alone: settle runs in an adopt of a handle that
 * holds nothing, cleanup in a free after its renewal stopped, and a
 * renewal round reads its record's own pointer (renewal.h, token), never
 * l->token. */
static void resend_owed(tidy *q, void (*then)(tidy *q))
{
    dlock_lock *l = q->l;
    if (!l->owed_token) {
        then(q);
        return;
    }
    q->token = l->token;
    q->token_len = l->token_len;
    q->rel_pending = l->rel_pending;
    memcpy(q->rel_nodes, l->rel_nodes, sizeof q->rel_nodes);
    l->token = l->owed_token;
    l->token_len = l->owed_len;
    memcpy(l->rel_nodes, l->owed_nodes, sizeof l->rel_nodes);
    l->rel_pending = 1;
    q->owed_then = then;
    flush(q, owed_resent);
}

/* ---- settle: before the token changes ---------------------------------- */

/* Still owed by a node that did not answer: kept with the old token for
 * the next adopt and the free, rather than left to the TTL. One such
 * release at a time: another one is left to its TTL, as an acquire's
 * resend leaves it. Without memory for the old token's copy it stays
 * pending under the current token and the answer is DLOCK_ENOMEM: the
 * adopt then fails and leaves the token as it is, so nothing owed is
 * dropped unheard. A counted kind's token is its
 * owner's, which adopt does not change (no such kind adopts): what a node
 * still owes stays pending, for the next acquire or the free. */
static void settle_flushed(tidy *q)
{
    dlock_lock *l = q->l;
    if (!l->rel_pending || l->kind->counted) {
        answer(q);
        return;
    }
    if (!l->owed_token) {
        if (!(l->owed_token = dlock__malloc(l->token_len + 1))) {
            dlock__err_set(&l->err, "out of memory");
            q->rc = DLOCK_ENOMEM;
            answer(q);
            return;
        }
        memcpy(l->owed_token, l->token, l->token_len);
        l->owed_token[l->token_len] = '\0';
        l->owed_len = l->token_len;
        memcpy(l->owed_nodes, l->rel_nodes, sizeof l->owed_nodes);
    }
    l->rel_pending = 0;
    answer(q);
}

static void settle_own(tidy *q)
{
    dlock_lock *l = q->l;
    if (!l->rel_pending || dlock__lock_get_state(l) != DLOCK_STATE_UNLOCKED)
        answer(q);
    else
        flush(q, settle_flushed);
}

/* ---- the lost handle's release ------------------------------------------ */

/* By token, as every release: a key that holds another owner's token is
 * left alone. A fair line is left too (fair_leave.lua, then
 * fair_release.lua, which hands the lock on). Not the counted kind: its
 * token is the owner's (client x thread), which other handles of that
 * owner may hold with every right. */
static void release_lost(tidy *q, void (*then)(tidy *q))
{
    dlock_lock *l = q->l;
    if (l->kind->wait == DLOCK__WAIT_QUEUE)
        fair_cleanup(q, then);
    else if (l->kind->counted || !l->token_len)
        then(q);
    else
        release(q, DLOCK__MIN(RELEASE_LOST_MS, io_ms(q)), then);
}

/* ---- cleanup: the handle is freed ---------------------------------------- */

/* Decided and answered everywhere: not in doubt, so this handle's
 * bookkeeping can go too (other handles of the owner may keep the key
 * alive). Not while a node owes it: a copy that reached it late would
 * find no bookkeeping and leave the holds there. */
static void held_released(tidy *q)
{
    dlock_lock *l = q->l;
    if (!l->kind->counted) {
        answer(q);
        return;
    }
    dlock__note_release_pending(l, &q->t, NULL);
    if (q->t.yes >= q->t.quorum && !l->rel_pending)
        forget(q, answer);
    else
        answer(q);
}

/* Let go of every hold this handle has, in one release: a counted kind's
 * drops them all (reentrant_release.lua, ARGV[5]), and carries what a node
 * still owes; a counted lock's other handles keep theirs. */
static void cleanup_held(tidy *q)
{
    dlock_lock *l = q->l;
    if (dlock__lock_get_state(l) != DLOCK_STATE_HELD) {
        answer(q);
        return;
    }
    if (l->kind->counted)
        dlock__release_op(l, l->holds);
    release(q, io_ms(q), held_released);
}

static void cleanup_lost(tidy *q)
{
    dlock_lock *l = q->l;
    if (l->fair_cleanup_pending)
        fair_cleanup(q, cleanup_held);
    else if (dlock__lock_get_state(l) == DLOCK_STATE_LOST)
        release_lost(q, cleanup_held);
    else
        cleanup_held(q);
}

/* The key may outlive this handle (other handles of the owner hold it):
 * take this handle's bookkeeping out of it. */
static void cleanup_forget(tidy *q)
{
    dlock_lock *l = q->l;
    if (l->touched && !l->undo_pending && !l->rel_pending && !l->in_doubt &&
        dlock__lock_get_state(l) != DLOCK_STATE_HELD)
        forget(q, cleanup_lost);
    else
        cleanup_lost(q);
}

static void cleanup_release(tidy *q)
{
    if (q->l->rel_pending)
        flush(q, cleanup_forget);
    else
        cleanup_forget(q);
}

/* Best effort, as the releases after it. */
static void cleanup_undo(tidy *q)
{
    if (q->l->undo_pending)
        undo(q, cleanup_release);
    else
        cleanup_release(q);
}

/* ---- the requests ---------------------------------------------------------- */

/* Each request's first step: settle and cleanup start with the release
 * owed under an adopt's old token. */
static void settle_first(tidy *q)
{
    resend_owed(q, settle_own);
}

static void lost_first(tidy *q)
{
    release_lost(q, answer);
}

static void cleanup_first(tidy *q)
{
    resend_owed(q, cleanup_undo);
}

_Static_assert(sizeof(tidy) <= DLOCK__OP_SCRATCH, "a tidy must fit a blocking call's scratch");

/* The record lives in what the starter lent (a blocking free or adopt:
 * it cannot fail for memory), else on the heap. */
static int tidy_start(dlock_lock *l, dlock__op *op, void (*first)(tidy *q))
{
    int on_heap = op->scratch_len < sizeof(tidy);
    tidy *q = on_heap ? dlock__malloc(sizeof *q) : op->scratch;
    if (!q) {
        dlock__err_set(&l->err, "out of memory");
        return DLOCK_ENOMEM;
    }
    memset(q, 0, offsetof(tidy, fan)); /* the fan's run sets itself up */
    q->on_heap = on_heap;
    q->l = l;
    q->op = op;
    q->starting = 1;
    first(q);
    return DLOCK_OK;
}

int dlock__tidy_settle_start(dlock_lock *l, dlock__op *op)
{
    return tidy_start(l, op, settle_first);
}

int dlock__tidy_release_lost_start(dlock_lock *l, dlock__op *op)
{
    return tidy_start(l, op, lost_first);
}

int dlock__tidy_cleanup_start(dlock_lock *l, dlock__op *op)
{
    return tidy_start(l, op, cleanup_first);
}
