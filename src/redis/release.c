/* SPDX-License-Identifier: BSD-3-Clause */
/* Release, extend and forget requests (release.h). */
#include <string.h>

#include "client.h"
#include "fanout.h"
#include "handle.h"
#include "kind_steps.h"
#include "kinds.h"
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
    r->fo = (dlock__fanout_opts){.io_timeout_ms = timeout_ms, .deadline_ns = INT64_MAX,
                                 .only = mask, .grace_ms = DLOCK__DECIDED_GRACE_MS};
    dlock__tally_init(t, l->client, &l->err);
    t->quiet = undo;
}

static void send_release(dlock_lock *l, const uint8_t *mask, int64_t timeout_ms, int undo,
                         int cancel_fd, dlock__tally *t)
{
    dlock__release_run r;
    dlock__release_prepare(l, mask, timeout_ms, undo, &r, t);
    /* A cancel leaves what was sent to run unheard: it stays pending. */
    if (dlock__fanout_cancellable(l->client, &r.req, 1, &r.fo, cancel_fd, NULL, dlock__owner_cb,
                                  t) == DLOCK_ENOMEM)
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

int dlock__flush_release_next(dlock_lock *l, const dlock__tally *t, const uint8_t *mask)
{
    dlock__note_release_pending(l, t, mask);
    if (l->rel_pending)
        return 0;
    if (l->rel_extra) {
        l->rel_seq = dlock__lock_next_op_no();
        l->rel_n = l->rel_extra;
        l->rel_extra = 0;
        memset(l->rel_nodes, 1, sizeof l->rel_nodes);
        l->rel_pending = 1;
    }
    return l->rel_pending;
}

int dlock__flush_release(dlock_lock *l, int64_t timeout_ms, int cancel_fd)
{
    while (l->rel_pending) {
        uint8_t mask[DLOCK__MAX_NODES];
        memcpy(mask, l->rel_nodes, sizeof mask);
        dlock__tally t;
        send_release(l, mask, timeout_ms, 1, cancel_fd, &t);
        if (!dlock__flush_release_next(l, &t, mask))
            break;
    }
    return l->rel_pending;
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
    dlock__step_args a;
    dlock__req req;
    (void)dlock__step_req(l, DLOCK__STEP_EXTEND, &(dlock__step_in){.ttl_ms = ttl_ms}, &a, &req);
    dlock__fanout_opts fo = {.io_timeout_ms = dlock__node_timeout_ms(l->client, ttl_ms),
                             .deadline_ns = deadline_ns, .grace_ms = DLOCK__DECIDED_GRACE_MS};
    dlock__tally t;
    dlock__tally_init(&t, l->client, &l->err);
    return dlock__fanout(l->client, &req, 1, &fo, dlock__owner_cb, &t) != DLOCK_OK
               ? DLOCK_ENOMEM
               : dlock__tally_owner_code(&t);
}

void dlock__forget_hold(dlock_lock *l)
{
    dlock__step_args a;
    dlock__req req;
    (void)dlock__step_req(l, DLOCK__STEP_FORGET, &(dlock__step_in){0}, &a, &req);
    dlock__fanout_opts fo = {.io_timeout_ms = l->client->opts.io_timeout_ms,
                             .deadline_ns = INT64_MAX};
    dlock__tally t;
    dlock__tally_init(&t, l->client, &l->err);
    (void)dlock__fanout(l->client, &req, 1, &fo, dlock__owner_cb, &t);
}
