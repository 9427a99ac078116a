/* SPDX-License-Identifier: BSD-3-Clause */
/* What the frames on a wake-up subscriber mean (wakeup_frames.h): a
 * confirmed SUBSCRIBE (the watchers waiting for it go on, the node's
 * deadline moves), a message (its channel's watchers are woken,
 * wakeup_chan.c), a channel the server dropped (a Cluster slot moved), and
 * a refusal: of an inbox (the client's waiters go without inboxes) or of
 * SUBSCRIBE itself (they poll). The connections themselves, and when to
 * subscribe, are wakeup.c's. */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "wakeup_frames.h"

/* Node i's subscriber confirmed a SUBSCRIBE: it answers, so what is still
 * unconfirmed gets another I/O timeout from now. wk->mu held. */
static void note_progress(dlock_client *c, dlock__wakeup *wk, size_t i)
{
    wk->due_ns[i] = 0;
    for (dlock__chan *ch = wk->chans; ch; ch = ch->next)
        if (ch->sent[i] && !ch->confirmed[i])
            wk->due_ns[i] = dlock__now_ns() + (int64_t)c->opts.io_timeout_ms * DLOCK__NS_PER_MS;
}

/* Tell the user, once, that the inboxes went (drop_inboxes). wk->mu held. */
static void say_no_inbox(dlock_client *c, dlock__wakeup *wk, size_t i)
{
    dlock__client_log(c, DLOCK_LOG_WARN,
                      "%s refused SUBSCRIBE to a waiter's own channel (%s); waiters are woken on "
                      "the lock's channel instead",
                      c->nodes[i].name, wk->inbox_why);
    wk->inbox_why[0] = '\0';
}

/* A subscription was confirmed, or will never be: wake whoever waits for
 * it, a blocking watch (the condition) and an engine's wait (its hook).
 * wk->mu held. */
static void confirmations_changed(dlock__wakeup *wk)
{
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&wk->confirmed));
    dlock__chan_poke_all(wk->chans);
}

/* A refused SUBSCRIBE while an inbox waits for its confirmation on node
 * i: the refusal names no channel, so it is taken for the inbox's. An ACL
 * that grants the lock's channel by its exact name refuses the inbox (a
 * longer name) and nothing else: the inboxes go, for good, and the
 * waiters of this client are woken on the lock's channel, as the release
 * scripts do when they may not publish to an inbox (wake_to.lua). Should
 * the lock's channel be refused too, its own refusal comes next and finds
 * no inbox waiting: every waiter polls (wk->refused). Returns 1 if it
 * dropped the inboxes. wk->mu held. */
static int drop_inboxes(dlock_client *c, dlock__wakeup *wk, size_t i, const char *why)
{
    int waiting = 0, lock_pending = 0;
    for (dlock__chan *ch = wk->chans; ch; ch = ch->next) {
        waiting |= ch->inbox && ch->sent[i] && !ch->confirmed[i];
        lock_pending |= !ch->inbox && ch->sent[i] && !ch->confirmed[i];
    }
    if (!waiting || wk->no_inbox)
        return 0;
    wk->no_inbox = 1;
    for (dlock__chan *ch = wk->chans; ch; ch = ch->next)
        if (ch->inbox)
            memset(ch->sent, 0, sizeof ch->sent), memset(ch->confirmed, 0, sizeof ch->confirmed);
    note_progress(c, wk, i);
    snprintf(wk->inbox_why, sizeof wk->inbox_why, "%s", why);
    if (!lock_pending)
        say_no_inbox(c, wk, i);
    confirmations_changed(wk);
    return 1;
}

int dlock__wakeup_read_frames(dlock_client *cl, dlock__wakeup *wk, size_t i)
{
    dlock__conn *c = wk->sub[i];
    /* Handshake replies (AUTH, SELECT) come first, through the queue. */
    if (dlock__conn_pending(c) > 0) {
        redisReply *r;
        uint32_t idx;
        int rc = dlock__conn_take(c, &r, &idx);
        if (rc < 0)
            return rc;
        if (dlock__conn_pending(c) > 0)
            return 0;
    }
    for (;;) {
        void *v = NULL;
        if (redisGetReply(c->ctx, &v) != REDIS_OK)
            return DLOCK_EPROTO;
        if (!v)
            return 0;
        redisReply *r = v;
        if (r->type == REDIS_REPLY_ERROR && drop_inboxes(cl, wk, i, r->str)) {
            /* said by drop_inboxes() or at the next confirmation */
        } else if (r->type == REDIS_REPLY_ERROR && !wk->refused) {
            wk->inbox_why[0] = '\0'; /* this refusal says it all */
            /* The only commands here are SUBSCRIBE and UNSUBSCRIBE: an
             * error is a refusal (NOPERM), which retrying will not mend. */
            wk->refused = 1;
            dlock__client_log(cl, DLOCK_LOG_WARN,
                              "%s refused SUBSCRIBE (%.200s); waiters poll with backoff up to "
                              "retry_max_ms instead of being woken on release",
                              cl->nodes[i].name, r->str);
            confirmations_changed(wk);
        }
        if (r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
            r->element[0]->type == REDIS_REPLY_STRING &&
            r->element[1]->type == REDIS_REPLY_STRING) {
            const redisReply *kind = r->element[0], *name = r->element[1];
            dlock__chan *ch = dlock__chan_find(wk->chans, name->str, name->len);
            /* Sharded frames (Cluster) are the same with an 's' first. */
            int sh = (kind->len == 10 && !memcmp(kind->str, "ssubscribe", 10)) ||
                     (kind->len == 8 && !memcmp(kind->str, "smessage", 8)) ||
                     (kind->len == 12 && !memcmp(kind->str, "sunsubscribe", 12));
            const char *k = kind->str + sh;
            size_t klen = kind->len - (size_t)sh;
            if (ch && sh && klen == 11 && !memcmp(k, "unsubscribe", 11)) {
                /* The server dropped it (the slot moved away): look again,
                 * and subscribe where the slot is now. */
                ch->sent[i] = ch->confirmed[i] = 0;
                ch->master = -1;
                dlock__chan_wake_all(ch);
            } else if (ch && klen == 9 && !memcmp(k, "subscribe", 9)) {
                ch->confirmed[i] = 1;
                if (wk->inbox_why[0] && !ch->inbox)
                    say_no_inbox(cl, wk, i);
                wk->failures[i] = 0;
                note_progress(cl, wk, i);
                confirmations_changed(wk);
            } else if (ch && klen == 7 && !memcmp(k, "message", 7) &&
                       r->element[2]->type == REDIS_REPLY_STRING) {
                dlock__chan_deliver(ch, r->element[2]->str, r->element[2]->len);
            }
        }
        freeReplyObject(r);
    }
}
