/* SPDX-License-Identifier: BSD-3-Clause */
/* The kinds' Redis steps (kind_steps.h): each script's arguments, laid out
 * next to the decoder of its reply, and the table that gives each kind its
 * steps. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "handle.h"
#include "kind_steps.h"
#include "quorum.h"
#include "replies.h"

/* How long a subscribed waiter's entry in the lock's waiter list lives
 * unless it looks again (lib/waitq.lua), in ms, as the string the acquire
 * scripts get: two looks (src/engine/acquire.c, SAFETY_POLL_MS), so a live waiter that
 * looks on time stays listed, and a dead one drops out soon. */
#define DLOCK__WAIT_ENTRY_MS_S "400"

/* Runs and turns (plain locks on one node; lib/waitq.lua, docs/waiting.md
 * "Runs and turns"), as the strings the release script gets: a contended
 * holder keeps the lock for DLOCK__RUN_US_S microseconds past its first
 * release before the release hands it to the longest waiter, which has
 * DLOCK__TURN_MS_S ms to take it. */
#define DLOCK__RUN_US_S "1000"
#define DLOCK__TURN_MS_S "50"

#define ARG(p, n) (a->args[k] = (p), a->lens[k++] = (n))
#define NUM(i, fmt, v) ARG(a->num[i], (size_t)snprintf(a->num[i], sizeof a->num[i], fmt, v))

/* The holder identity (lib/ident.lua), when the client keeps one: its
 * hash after the script's last key, and its argument after the last
 * argument: the text on an acquire, none on extend and release (the
 * four bytes NUL "id:"). */
#define ID_MARK_LEN 4
#define ID_KEY() (l->id_key ? ARG(l->id_key, l->id_len) : 0)
#define ID_ARG(n) (l->id_key ? ARG(l->id_arg, (n)) : 0)

/* The lock-delay (lib/delay.lua), when the handle has one: its marks
 * after the script's own keys and before the identity's, and its argument
 * likewise before the identity's. A handle without one sends neither. */
#define DL_KEY() (l->delay_key ? ARG(l->delay_key, l->delay_len) : 0)
#define DL_ARG() (l->delay_key ? ARG(l->delay_arg, l->delay_arg_len) : 0)

/* ---- acquire: acquire.lua and its kin (KEYS: lock, fence?, aux?, waiter
 * list and run if listed; ARGV: token, ttl, aux arg?, OWNER#?, op number
 * and handle id if counted, waiter id and its entry life if listed, the
 * run's holder, length and channel if it has a run) ---------------------- */

static int acquire_args(dlock_lock *l, const dlock__step_in *in, dlock__step_args *a, int *nargs)
{
    int k = 0;
    ARG(l->name, l->name_len);
    if (l->fence_key)
        ARG(l->fence_key, l->fence_len);
    if (l->aux_key) /* the kind's helper key (kinds.h) */
        ARG(l->aux_key, l->aux_len);
    if (l->wait_id_len) { /* a subscribed waiter: noted in the waiter list */
        ARG(l->wq_key, l->wq_len);
        if (l->wr_key) /* and told when the holder's run ends */
            ARG(l->wr_key, l->wr_len);
    }
    DL_KEY();
    ID_KEY();
    int nkeys = k;
    ARG(l->token, l->token_len);
    ARG(l->ttl_s, l->ttl_s_len);
    if (l->aux_arg_len && l->try_once && l->kind->aux_arg == DLOCK__AUX_MARK_MS)
        /* A writer that tries once does not wait: it leaves no mark
         * (exclusive_acquire.lua, mark lifetime 0), or it would keep new
         * readers out for the mark's life while nobody waits (dlock(1)). */
        ARG("0", 1);
    else if (l->aux_arg_len)
        ARG(l->aux_arg, l->aux_arg_len);
    if (l->kind->reenter) /* OWNER#: shared_acquire.lua's re-entry test */
        ARG(l->token,
            (size_t)((const char *)memchr(l->token, '#', l->token_len) - l->token) + 1);
    if (l->kind->counted) {
        NUM(0, "%" PRIu64, in->op_no);
        ARG(l->hid, l->hid_len);
    }
    if (l->wait_id_len) {
        ARG(l->wait_id, l->wait_id_len);
        ARG(DLOCK__WAIT_ENTRY_MS_S, sizeof DLOCK__WAIT_ENTRY_MS_S - 1);
        if (l->wr_key) { /* a turn's grant starts this handle's run */
            ARG(l->run_id, l->run_id_len);
            ARG(DLOCK__RUN_US_S, sizeof DLOCK__RUN_US_S - 1);
            ARG(l->channel, l->channel_len);
        }
    }
    DL_ARG();
    ID_ARG(l->id_arg_len);
    *nargs = k;
    return nkeys;
}

int dlock__acquire_cb(void *arg, size_t node, uint32_t idx, int err,
                      const struct redisReply *r, const char *detail, int64_t start_ns)
{
    dlock__acquire_reply a;
    (void)idx;
    dlock__decode_acquire(err, r, detail, &a);
    return dlock__tally_answer(arg, node, err, &a, start_ns);
}

/* ---- fair: fair_acquire.lua looks, fair_leave.lua leaves (KEYS: lock,
 * line, our liveness key, fence?, identity?; ARGV: token, ttl, for a look
 * the liveness key's life and prefix, then the identity text?). Both
 * answer in the acquire shape. The text goes with every look, not only a
 * grant: a waiter leaves it beside its liveness key, for the release that
 * hands it the lock (fair_release.lua). ---------------------------------- */

static int fair_args(dlock_lock *l, dlock__step_args *a, int *nargs)
{
    size_t me_len = l->live_prefix_len + l->token_len;
    if (!(a->me = dlock__malloc(me_len + 1)))
        return DLOCK_ENOMEM;
    memcpy(a->me, l->live_prefix, l->live_prefix_len);
    memcpy(a->me + l->live_prefix_len, l->token, l->token_len + 1);
    int k = 0;
    ARG(l->name, l->name_len);
    ARG(l->queue_key, l->queue_len);
    ARG(a->me, me_len);
    if (l->fence_key)
        ARG(l->fence_key, l->fence_len);
    DL_KEY();
    ID_KEY();
    int nkeys = k;
    ARG(l->token, l->token_len);
    ARG(l->ttl_s, l->ttl_s_len);
    *nargs = k;
    return nkeys;
}

static int fair_look_args(dlock_lock *l, const dlock__step_in *in, dlock__step_args *a,
                          int *nargs)
{
    int nkeys = fair_args(l, a, nargs), k = *nargs;
    if (nkeys < 0)
        return nkeys;
    ARG(in->live_ttl, strlen(in->live_ttl));
    ARG(l->live_prefix, l->live_prefix_len);
    DL_ARG();
    ID_ARG(l->id_arg_len);
    *nargs = k;
    return nkeys;
}

/* A leave that finds the lock handed to it confirms the hand-over: the
 * text, should the release have kept no identity. */
static int fair_leave_args(dlock_lock *l, const dlock__step_in *in, dlock__step_args *a,
                           int *nargs)
{
    int nkeys = fair_args(l, a, nargs), k = *nargs;
    (void)in;
    if (nkeys < 0)
        return nkeys;
    DL_ARG();
    ID_ARG(l->id_arg_len);
    *nargs = k;
    return nkeys;
}

/* ---- release: release.lua and its kin (KEYS: lock, and with a wake-up
 * on one node the waiter list and run; ARGV: token, channel or "" for no
 * wake-up, the run's holder, length and turn if it has one, and if counted
 * the ttl, release number, holds its run drops, handle id and the run's
 * first number); fair_release.lua
 * (KEYS: lock, line, fence?; ARGV: token, channel, liveness prefix). The
 * identity's key and mark go last in both. ------------------------------ */

static int release_args(dlock_lock *l, const dlock__step_in *in, dlock__step_args *a, int *nargs)
{
    /* KEYS[2], the waiter list: the release wakes one of it; KEYS[3],
     * the run: a release within this handle's run wakes nobody. */
    int wake = in->wake;
    int runs = wake && l->wq_key && l->wr_key;
    int k = 0, nkeys = wake && l->wq_key ? 2 + runs : 1;
    ARG(l->name, l->name_len);
    if (nkeys > 1)
        ARG(l->wq_key, l->wq_len);
    if (runs)
        ARG(l->wr_key, l->wr_len);
    DL_KEY();
    ID_KEY();
    nkeys = k;
    ARG(l->token, l->token_len);
    ARG(wake ? l->channel : "", wake ? l->channel_len : 0);
    if (runs) {
        ARG(l->run_id, l->run_id_len);
        ARG(DLOCK__RUN_US_S, sizeof DLOCK__RUN_US_S - 1);
        ARG(DLOCK__TURN_MS_S, sizeof DLOCK__TURN_MS_S - 1);
    }
    if (l->kind->counted) {
        ARG(l->ttl_s, l->ttl_s_len);
        NUM(0, "%" PRIu64, l->rel_seq);
        NUM(1, "%u", l->rel_total);
        ARG(l->hid, l->hid_len);
        NUM(2, "%" PRIu64, l->rel_base);
    }
    DL_ARG();
    ID_ARG(ID_MARK_LEN);
    *nargs = k;
    return nkeys;
}

static int fair_release_args(dlock_lock *l, const dlock__step_in *in, dlock__step_args *a,
                             int *nargs)
{
    (void)in; /* a hand-over is always published: the next in line waits for it */
    int k = 0;
    ARG(l->name, l->name_len);
    ARG(l->queue_key, l->queue_len);
    if (l->fence_key)
        ARG(l->fence_key, l->fence_len);
    DL_KEY();
    ID_KEY();
    int nkeys = k;
    ARG(l->token, l->token_len);
    ARG(l->channel, l->channel_len);
    ARG(l->live_prefix, l->live_prefix_len);
    DL_ARG();
    ID_ARG(ID_MARK_LEN);
    *nargs = k;
    return nkeys;
}

/* An undo queued behind an attempt that is not counted: a release by the
 * attempt's token (KEYS: lock; ARGV: token, channel or ""). */
static int release_undo_args(dlock_lock *l, const dlock__step_in *in, dlock__step_args *a,
                             int *nargs)
{
    int k = 0;
    ARG(l->name, l->name_len);
    DL_KEY();
    ID_KEY();
    int nkeys = k;
    ARG(l->token, l->token_len);
    ARG(in->wake ? l->channel : "", in->wake ? l->channel_len : 0);
    DL_ARG();
    ID_ARG(ID_MARK_LEN);
    *nargs = k;
    return nkeys;
}

/* ---- extend (KEYS: lock; ARGV: token, ttl) and forget (KEYS: lock;
 * ARGV: owner, handle id): the owner verdicts of replies.h ---------------- */

static int extend_args(dlock_lock *l, const dlock__step_in *in, dlock__step_args *a, int *nargs)
{
    int k = 0;
    ARG(l->name, l->name_len);
    DL_KEY();
    ID_KEY();
    int nkeys = k;
    ARG(l->token, l->token_len);
    NUM(0, "%" PRId64, in->ttl_ms);
    DL_ARG();
    ID_ARG(ID_MARK_LEN);
    *nargs = k;
    return nkeys;
}

static int forget_args(dlock_lock *l, const dlock__step_in *in, dlock__step_args *a, int *nargs)
{
    (void)in;
    int k = 0;
    ARG(l->name, l->name_len);
    ARG(l->token, l->token_len);
    ARG(l->hid, l->hid_len);
    *nargs = k;
    return 1;
}

int dlock__owner_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                    const char *detail, int64_t start_ns)
{
    dlock__tally *t = arg;
    dlock__owner_reply o;
    (void)idx;
    (void)start_ns;
    dlock__decode_owner(err, r, detail, &o);
    if (o.err != DLOCK_OK) {
        dlock__tally_error(t, node, o.err, o.detail);
        if (!o.replied)
            return 0;
    } else if (o.verdict == DLOCK__OWN_DONE) {
        t->yes++;
        t->vote[node] = DLOCK__V_YES;
        t->count = o.count;
    } else {
        t->no++;
        t->vote[node] = DLOCK__V_NO;
        if (o.verdict == DLOCK__OWN_GONE) {
            t->gone++;
            if (!t->quiet)
                dlock__err_append(t->err, "%s: key gone", t->client->nodes[node].name);
        } else {
            t->other_owner++;
            if (!t->quiet)
                dlock__err_append(t->err, "%s: held by another owner",
                                  t->client->nodes[node].name);
        }
    }
    /* Release and extend decide at a majority either way; the fan-out's
     * grace lets the other nodes that answer at once be heard too, but a
     * silent node does not hold the caller up (issue 15). */
    return dlock__tally_decided(t);
}

/* ---- counted undo: reentrant_undo.lua (KEYS: lock; ARGV: owner, attempt
 * number, channel or "", handle id) -------------------------------------- */

static int counted_undo_args(dlock_lock *l, const dlock__step_in *in, dlock__step_args *a,
                             int *nargs)
{
    int k = 0;
    ARG(l->name, l->name_len);
    DL_KEY();
    ID_KEY();
    int nkeys = k;
    ARG(l->token, l->token_len);
    NUM(0, "%" PRIu64, in->op_no);
    ARG(in->wake ? l->channel : "", in->wake ? l->channel_len : 0);
    ARG(l->hid, l->hid_len);
    DL_ARG();
    ID_ARG(ID_MARK_LEN);
    *nargs = k;
    return nkeys;
}

int dlock__undo_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                   const char *detail, int64_t start_ns)
{
    uint8_t *left = arg;
    (void)idx;
    (void)detail;
    (void)start_ns;
    /* Taken back or nothing to take back settle the attempt there; no
     * answer or an error leaves it pending. */
    if (dlock__decode_undo(err, r))
        left[node] = 0;
    return 0;
}

/* ---- leave the waiter list: wq_leave.lua (KEYS: lock, list, run?; ARGV:
 * waiter id, channel); best effort, its answer is not read -------------- */

static int leave_list_args(dlock_lock *l, const dlock__step_in *in, dlock__step_args *a,
                           int *nargs)
{
    (void)in;
    int k = 0;
    ARG(l->name, l->name_len);
    ARG(l->wq_key, l->wq_len);
    if (l->wr_key)
        ARG(l->wr_key, l->wr_len);
    int nkeys = k;
    ARG(l->wait_id, l->wait_id_len);
    ARG(l->channel, l->channel_len);
    *nargs = k;
    return nkeys;
}

int dlock__ignore_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                     const char *detail, int64_t start_ns)
{
    (void)arg, (void)node, (void)idx, (void)err, (void)r, (void)detail, (void)start_ns;
    return 0;
}

/* ---- fence sync: fence_sync.lua (KEYS: fence; ARGV: the value) ---------- */

static int fence_sync_args(dlock_lock *l, const dlock__step_in *in, dlock__step_args *a,
                           int *nargs)
{
    int k = 0;
    ARG(l->fence_key, l->fence_len);
    NUM(0, "%" PRIu64, in->fence);
    *nargs = k;
    return 1;
}

int dlock__fence_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                    const char *detail, int64_t start_ns)
{
    dlock__tally *t = arg;
    int code;
    const char *why;
    (void)idx;
    (void)start_ns;
    dlock__decode_fence_sync(err, r, detail, t->max_fence, &code, &why);
    if (code != DLOCK_OK)
        dlock__tally_error(t, node, code, why);
    else
        t->yes++;
    return dlock__tally_decided(t);
}

/* ---- the table ------------------------------------------------------------ */

#define NONE {DLOCK__S_NONE, NULL, NULL, 0}
#define ACQUIRE(s) {s, acquire_args, dlock__acquire_cb, 1}
#define RELEASE(s) {s, release_args, dlock__owner_cb, 0}
#define EXTEND(s) {s, extend_args, dlock__owner_cb, 1}
#define UNDO(s) {s, release_undo_args, dlock__owner_cb, 0}
#define LEAVE_LIST {DLOCK__S_WQ_LEAVE, leave_list_args, dlock__ignore_cb, 0}
#define FENCE_SYNC {DLOCK__S_FENCE_SYNC, fence_sync_args, dlock__fence_cb, 0}

/* The writer kinds hold a plain string (plain release, extend, fencing);
 * readers and permits share shared_*.lua, and readers raise the fencing
 * counter (the break's guard, kinds.h) and sync it as writers do; the
 * waiter list is the wake-one kinds' (kinds.h). The fair acquire waits for
 * no replica: the extend that confirms its hand-over does. */
static const dlock__step_row steps[DLOCK__KIND_COUNT][DLOCK__STEP_COUNT] = {
    [DLOCK__KIND_PLAIN] = {ACQUIRE(DLOCK__S_ACQUIRE), RELEASE(DLOCK__S_RELEASE),
                           EXTEND(DLOCK__S_EXTEND), UNDO(DLOCK__S_RELEASE), NONE, NONE,
                           LEAVE_LIST, FENCE_SYNC},
    [DLOCK__KIND_COUNTED] = {ACQUIRE(DLOCK__S_RACQUIRE), RELEASE(DLOCK__S_RRELEASE),
                             EXTEND(DLOCK__S_REXTEND),
                             {DLOCK__S_RUNDO, counted_undo_args, dlock__undo_cb, 0},
                             {DLOCK__S_RFORGET, forget_args, dlock__owner_cb, 0}, NONE,
                             LEAVE_LIST, FENCE_SYNC},
    [DLOCK__KIND_FAIR] = {{DLOCK__S_FAIR_ACQUIRE, fair_look_args, dlock__acquire_cb, 0},
                          {DLOCK__S_FAIR_RELEASE, fair_release_args, dlock__owner_cb, 0},
                          EXTEND(DLOCK__S_EXTEND),
                          {DLOCK__S_FAIR_RELEASE, fair_release_args, dlock__owner_cb, 0},
                          NONE,
                          {DLOCK__S_FAIR_LEAVE, fair_leave_args, dlock__acquire_cb, 0}, NONE,
                          NONE /* one node: nothing to sync */},
    [DLOCK__KIND_EXCLUSIVE] = {ACQUIRE(DLOCK__S_X_ACQUIRE), RELEASE(DLOCK__S_RELEASE),
                               EXTEND(DLOCK__S_EXTEND), UNDO(DLOCK__S_RELEASE), NONE, NONE,
                               LEAVE_LIST, FENCE_SYNC},
    [DLOCK__KIND_SHARED] = {ACQUIRE(DLOCK__S_Z_ACQUIRE), RELEASE(DLOCK__S_Z_RELEASE),
                            EXTEND(DLOCK__S_Z_EXTEND), UNDO(DLOCK__S_Z_RELEASE), NONE, NONE,
                            NONE, FENCE_SYNC},
    [DLOCK__KIND_SEMAPHORE] = {ACQUIRE(DLOCK__S_Z_ACQUIRE), RELEASE(DLOCK__S_Z_RELEASE),
                               EXTEND(DLOCK__S_Z_EXTEND), UNDO(DLOCK__S_Z_RELEASE), NONE, NONE,
                               NONE, NONE},
    [DLOCK__KIND_SHARED_COUNTED] = {ACQUIRE(DLOCK__S_Z_ACQUIRE), RELEASE(DLOCK__S_Z_RELEASE),
                                    EXTEND(DLOCK__S_Z_EXTEND), UNDO(DLOCK__S_Z_RELEASE), NONE,
                                    NONE, NONE, FENCE_SYNC},
    [DLOCK__KIND_EXCLUSIVE_COUNTED] = {ACQUIRE(DLOCK__S_X_ACQUIRE), RELEASE(DLOCK__S_RELEASE),
                                       EXTEND(DLOCK__S_EXTEND), UNDO(DLOCK__S_RELEASE), NONE,
                                       NONE, LEAVE_LIST, FENCE_SYNC},
};

const dlock__step_row *dlock__kind_step(const dlock__kind *kind, dlock__step_id step)
{
    return &steps[kind->id][step];
}

int dlock__step_req(dlock_lock *l, dlock__step_id step, const dlock__step_in *in,
                    dlock__step_args *a, dlock__req *req)
{
    const dlock__step_row *s = &steps[l->kind->id][step];
    int nargs = 0;
    a->me = NULL;
    if (!s->build) { /* a step the kind does not take: a caller's bug */
        *req = (dlock__req){0};
        return DLOCK_ENOTSUP;
    }
    int nkeys = s->build(l, in, a, &nargs);
    if (nkeys < 0)
        return nkeys;
    *req = (dlock__req){.script = dlock__script_get(s->script), .numkeys = nkeys,
                        .nargs = nargs, .args = a->args, .arglens = a->lens, .acks = s->acks};
    return DLOCK_OK;
}

void dlock__step_args_free(dlock__step_args *a)
{
    dlock__free(a->me);
    a->me = NULL;
}
