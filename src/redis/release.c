/* SPDX-License-Identifier: BSD-3-Clause */
/* Release, extend and forget requests (release.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "fanout.h"
#include "handle.h"
#include "kinds.h"
#include "release.h"
#include "replies.h"
#include "waitq.h"


/* Release, extend and forget replies, typed (replies.h), counted. */
static int release_cb(void *arg, size_t node, uint32_t idx, int err,
                      const redisReply *r, const char *detail, int64_t start_ns)
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

dlock__req dlock__fair_release_req(dlock_lock *l, const char **args, size_t *lens)
{
    int k = 0;
    args[k] = l->name, lens[k++] = l->name_len;
    args[k] = l->queue_key, lens[k++] = l->queue_len;
    if (l->fence_key)
        args[k] = l->fence_key, lens[k++] = l->fence_len;
    int nkeys = k;
    args[k] = l->token, lens[k++] = l->token_len;
    args[k] = l->channel, lens[k++] = l->channel_len;
    args[k] = l->live_prefix, lens[k++] = l->live_prefix_len;
    return (dlock__req){.script = dlock__script_get(l->kind->release), .numkeys = nkeys, .nargs = k,
                        .args = args, .arglens = lens};
}

static void send_release(dlock_lock *l, const uint8_t *mask, int64_t timeout_ms, int undo,
                         int cancel_fd, dlock__tally *t)
{
    /* An undo publishes no wake-up: it frees only keys of this attempt,
     * which no waiter counts on, and its message would wake this very
     * waiter (and every other) into another attempt and another undo: a
     * storm while the lock is held on a majority but not on every node
     * (issue 15). */
    const char *args[10];
    size_t lens[10];
    char rel_seq[24], rel_n[16];
    dlock__req req;
    const dlock__kind *kind = l->kind;
    int queued = kind->leave != DLOCK__S_NONE;
    int wake = !undo && (l->client->opts.wakeups || queued);
    if (queued) {
        req = dlock__fair_release_req(l, args, lens);
    } else {
        /* KEYS[2], the waiter list: the release wakes one of it; KEYS[3],
         * the run: a release within this handle's run wakes nobody. */
        int runs = wake && l->wq_key && l->wr_key;
        int k = 0, nkeys = wake && l->wq_key ? 2 + runs : 1;
        args[k] = l->name, lens[k++] = l->name_len;
        if (nkeys > 1)
            args[k] = l->wq_key, lens[k++] = l->wq_len;
        if (runs)
            args[k] = l->wr_key, lens[k++] = l->wr_len;
        args[k] = l->token, lens[k++] = l->token_len;
        args[k] = wake ? l->channel : "", lens[k++] = wake ? l->channel_len : 0;
        if (runs) {
            args[k] = l->run_id, lens[k++] = l->run_id_len;
            args[k] = DLOCK__RUN_US_S, lens[k++] = sizeof DLOCK__RUN_US_S - 1;
            args[k] = DLOCK__TURN_MS_S, lens[k++] = sizeof DLOCK__TURN_MS_S - 1;
        }
        if (kind->counted) {
            args[k] = l->ttl_s, lens[k++] = l->ttl_s_len;
            args[k] = rel_seq, lens[k++] = (size_t)snprintf(rel_seq, sizeof rel_seq, "%" PRIu64,
                                                            l->rel_seq);
            args[k] = rel_n, lens[k++] = (size_t)snprintf(rel_n, sizeof rel_n, "%u", l->rel_n);
            args[k] = l->hid, lens[k++] = l->hid_len;
        }
        req = (dlock__req){.script = dlock__script_get(kind->release), .numkeys = nkeys, .nargs = k,
                           .args = args, .arglens = lens};
    }
    dlock__fanout_opts fo = {timeout_ms, INT64_MAX, mask, DLOCK__DECIDED_GRACE_MS};
    dlock__tally_init(t, l->client, &l->err);
    t->quiet = undo;
    /* A cancel leaves what was sent to run unheard: it stays pending. */
    if (dlock__fanout_cancellable(l->client, &req, 1, &fo, cancel_fd, NULL, release_cb, t) ==
        DLOCK_ENOMEM)
        dlock__tally_error(t, 0, DLOCK_ENOMEM, "");
}

void dlock__send_release(dlock_lock *l, const uint8_t *mask, int64_t timeout_ms, int undo,
                         dlock__tally *t)
{
    send_release(l, mask, timeout_ms, undo, -1, t);
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

int dlock__flush_release(dlock_lock *l, int64_t timeout_ms, int cancel_fd)
{
    while (l->rel_pending) {
        uint8_t mask[DLOCK__MAX_NODES];
        memcpy(mask, l->rel_nodes, sizeof mask);
        dlock__tally t;
        send_release(l, mask, timeout_ms, 1, cancel_fd, &t);
        dlock__note_release_pending(l, &t, mask);
        if (l->rel_pending)
            return 1;
        if (l->rel_extra) {
            l->rel_seq = dlock__lock_next_op_no();
            l->rel_n = l->rel_extra;
            l->rel_extra = 0;
            memset(l->rel_nodes, 1, sizeof l->rel_nodes);
            l->rel_pending = 1;
        }
    }
    return 0;
}

int dlock__release_hold(dlock_lock *l)
{
    dlock__tally t;
    int counted = l->kind->counted;
    if (counted) {
        if (l->rel_pending) /* an older release first (best effort) */
            dlock__flush_release(l, l->client->opts.io_timeout_ms, -1);
        l->rel_seq = dlock__lock_next_op_no();
        l->rel_n = 1;
        l->rel_extra = 0;
    }
    dlock__send_release(l, NULL, l->client->opts.io_timeout_ms, 0, &t);
    int rc = dlock__tally_owner_code(&t);
    /* Where it may not have run, it is sent again before the handle's next
     * acquire, or on free: a lost release no longer keeps the key (and a
     * fair line) for the whole TTL when the node answers again. */
    dlock__note_release_pending(l, &t, NULL);
    if (counted) {
        /* ... and with it the holds this handle drops below if it failed. */
        l->in_doubt |= l->rel_pending;
        if (rc != DLOCK_OK && l->rel_pending && l->holds > 1)
            l->rel_extra = l->holds - 1;
    }
    return rc;
}

int dlock__extend_hold(dlock_lock *l, int64_t ttl_ms, int64_t deadline_ns)
{
    char ttl_s[24];
    snprintf(ttl_s, sizeof ttl_s, "%" PRId64, ttl_ms);
    const char *args[3] = {l->name, l->token, ttl_s};
    size_t lens[3] = {l->name_len, l->token_len, strlen(ttl_s)};
    dlock__req req = {.script = dlock__script_get(l->kind->extend), .numkeys = 1, .nargs = 3,
                      .args = args, .arglens = lens, .acks = l->kind->acks_extend};
    dlock__fanout_opts fo = {dlock__node_timeout_ms(l->client, ttl_ms), deadline_ns, NULL,
                             DLOCK__DECIDED_GRACE_MS};
    dlock__tally t;
    dlock__tally_init(&t, l->client, &l->err);
    return dlock__fanout(l->client, &req, 1, &fo, release_cb, &t) != DLOCK_OK
               ? DLOCK_ENOMEM
               : dlock__tally_owner_code(&t);
}

void dlock__forget_hold(dlock_lock *l)
{
    const char *args[3] = {l->name, l->token, l->hid};
    size_t lens[3] = {l->name_len, l->token_len, l->hid_len};
    dlock__req req = {.script = dlock__script_get(l->kind->forget), .numkeys = 1, .nargs = 3,
                      .args = args, .arglens = lens};
    dlock__fanout_opts fo = {l->client->opts.io_timeout_ms, INT64_MAX, NULL, 0};
    dlock__tally t;
    dlock__tally_init(&t, l->client, &l->err);
    (void)dlock__fanout(l->client, &req, 1, &fo, release_cb, &t);
}
