/* SPDX-License-Identifier: BSD-3-Clause */
/* The Redis backend's operations table (backend.h), and what a handle
 * leaves to settle in Redis before its token changes or it is freed. */
#include "attempt.h"
#include "backend.h"
#include "client.h"
#include "fair.h"
#include "handle.h"
#include "kinds.h"
#include "release.h"

static void settle(dlock_lock *l)
{
    if (l->rel_pending && dlock__lock_get_state(l) == DLOCK_STATE_UNLOCKED) {
        dlock__flush_release(l, l->client->opts.io_timeout_ms, -1); /* before the token changes */
        l->rel_pending = 0;
    }
}

/* How long a lost handle's release by token listens for each node. A
 * handle is mostly lost because a node stalled, and then its release
 * would wait the whole I/O timeout, on the watchdog thread too when an
 * on_lost callback releases, holding up the next lock's loss report. The
 * release is written at once and a node that answers again runs it (a
 * timed-out connection is closed, which still delivers what was written);
 * before or after a late renewal it ends the same: our token gone. */
#define RELEASE_LOST_MS 50

/* By token, as every release: a key that holds another owner's token is
 * left alone. A fair line is left too (fair_leave.lua, then
 * fair_release.lua, which hands the lock on). Not the counted kind: its
 * token is the owner's (client x thread), which other handles of that
 * owner may hold with every right. */
static void release_lost(dlock_lock *l)
{
    if (l->kind->wait == DLOCK__WAIT_QUEUE) {
        dlock__fair_cleanup(l, -1);
        return;
    }
    if (l->kind->counted || !l->token_len)
        return;
    dlock__tally t;
    dlock__send_release(l, NULL, DLOCK__MIN(RELEASE_LOST_MS, l->client->opts.io_timeout_ms), 0,
                        &t);
}

static void cleanup(dlock_lock *l)
{
    int64_t io = l->client->opts.io_timeout_ms;
    if (l->undo_pending) /* best effort, as the releases below */
        dlock__send_undo(l, io, -1);
    if (l->rel_pending)
        dlock__flush_release(l, io, -1);
    if (l->touched && !l->undo_pending && !l->rel_pending && !l->in_doubt &&
        dlock__lock_get_state(l) != DLOCK_STATE_HELD)
        /* The key may outlive this handle (other handles of the owner
         * hold it): take this handle's bookkeeping out of it. */
        dlock__forget_hold(l);
    if (l->fair_cleanup_pending)
        dlock__fair_cleanup(l, -1);
    else if (dlock__lock_get_state(l) == DLOCK_STATE_LOST)
        release_lost(l);
    if (dlock__lock_get_state(l) == DLOCK_STATE_HELD) {
        /* Let go of every hold this handle has (a counted lock's other
         * handles keep theirs). */
        unsigned n = l->kind->counted ? l->holds : 1, done = 0;
        for (; done < n; done++) {
            dlock__tally t;
            l->rel_seq = dlock__lock_next_op_no();
            l->rel_n = 1;
            dlock__send_release(l, NULL, io, 0, &t);
            if (t.yes < t.quorum)
                break;
        }
        /* Every release decided: none of them is in doubt, so this
         * handle's bookkeeping can go too (other handles of the owner may
         * keep the key alive). */
        if (l->kind->counted && done == n)
            dlock__forget_hold(l);
    }
}

const dlock__backend dlock__redis_backend = {
    "redis", dlock__attempt, dlock__release_hold, dlock__extend_hold, settle, cleanup,
    release_lost,
};
