/* SPDX-License-Identifier: BSD-3-Clause */
/* One lock's state machine (unlocked / held / lost), below the public
 * face: lock.c checks each verb's arguments and calls in here; a set of
 * names (set.c) drives its names through here too. Watchdog
 * registration, the lost path and cancel live here; every round trip goes
 * through the handle's backend (backend.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "engine.h"
#include "etcd_backend.h"
#include "client.h"
#include "clock.h"
#include "error.h"
#include "fair.h"
#include "handle.h"
#include "keys.h"
#include "kinds.h"
#include "quorum.h"
#include "wait.h"
#include "wakeup.h"
#include "watchdog.h"

/* The acquire loop of each wait style (kinds.h). */
static int (*const acquire_loop[DLOCK__WAIT_COUNT])(dlock_lock *, int64_t, int64_t) = {
    [DLOCK__WAIT_RETRY] = dlock__wait_acquire,
    [DLOCK__WAIT_QUEUE] = dlock__fair_acquire,
};

/* The handle's renewal record hands the watchdog's rounds back here
 * (watchdog.h): only this module changes the handle's state. */
static int renew_settle(void *owner, const dlock__renew_votes *v)
{
    dlock_lock *l = owner;
    int64_t drift = dlock__drift_ns(l->client, v->ttl_ms);
    int64_t now = dlock__now_ns();
    int lost = 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    if (l->state == DLOCK_STATE_HELD) {
        if (v->yes >= v->quorum && now < l->valid_until_ns) {
            l->valid_until_ns = v->t0_ns + v->ttl_ms * DLOCK__NS_PER_MS - drift;
        } else if (v->no > v->n - v->quorum) {
            lost = DLOCK_LOST_NOT_OWNER;
        } else if (now >= l->valid_until_ns || v->yes >= v->quorum) {
            /* Not confirmed by a majority before the lease ran out. */
            lost = DLOCK_LOST_NO_QUORUM;
        }
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    if (l->watch.moved && !lost) /* one name of a set: the set's validity moves */
        l->watch.moved(l->watch.arg, 0);
    return lost;
}

const dlock__renewal_ops dlock__engine_renewal_ops = {dlock__lock_renew_lease_end, renew_settle,
                                               dlock__lock_renew_lost, NULL};

/* Register the held lock with the watchdog, renewing to ttl_ms, the first
 * time first_ms from now (watchdog.h). */
static void renew_start(dlock_lock *l, int64_t ttl_ms, int64_t first_ms)
{
    l->renewal.token = l->token;
    l->renewal.token_len = l->token_len;
    l->renewal.ttl_ms = ttl_ms;
    dlock__watchdog_add(l->client, &l->renewal, first_ms);
}

static int renew_stop(dlock_lock *l)
{
    return dlock__watchdog_remove(l->client, &l->renewal);
}

/* The handle lets go of every hold (the store's side is the caller's). */
static void drop_holds(dlock_lock *l)
{
    l->holds = 0;
    dlock__lock_set_state(l, DLOCK_STATE_UNLOCKED, 0);
}

int dlock__engine_acquire(dlock_lock *l, int64_t wait_ms)
{
    if (l->etcd) /* the etcd backend: a line, not attempts (etcd_backend.c) */
        return dlock__etcd_lock_acquire(l, wait_ms);
    dlock_lock_state st = dlock__lock_get_state(l);
    if (st == DLOCK_STATE_LOST) {
        /* The loss was reported; the handle starts over, without its old
         * token in the store (see dlock_lock_release()). */
        renew_stop(l);
        l->backend->release_lost(l);
        drop_holds(l);
    } else if (st == DLOCK_STATE_HELD && l->kind->reenter) {
        /* A re-entry (kinds.h, reenter): the share is the handle's already,
         * so it is renewed, never asked for again (a writer's mark would
         * keep its own holder waiting). */
        int rc = dlock__engine_extend(l, 0);
        if (rc == DLOCK_OK)
            l->holds++;
        return rc;
    } else if (st == DLOCK_STATE_HELD && !l->kind->counted) {
        dlock__err_set(&l->err, "this handle already holds \"%s\"", l->name);
        return DLOCK_EINVAL;
    }
    int rc = dlock__lock_begin_acquire(l, wait_ms);
    if (rc != DLOCK_OK)
        return rc;
    int64_t deadline = dlock__deadline_after_ms(wait_ms);
    l->try_once = wait_ms == 0;
    dlock__lock_open_cancel(l, wait_ms);
    rc = acquire_loop[l->kind->wait](l, wait_ms, deadline);
    dlock__lock_close_cancel(l);
    if (rc == DLOCK_OK && l->holds == 1 && ((l->opts.flags & DLOCK_AUTO_RENEW) || l->confirm_ms)) {
        /* A new hold: no extend yet. A fair hand-over taken on its message
         * has a claim lease, which one renewal makes the full TTL. */
        l->renewal.once = !(l->opts.flags & DLOCK_AUTO_RENEW);
        /* The confirmation's schedule (its look-ahead, its retries when a
         * round gets no answer) is the claim's, not the TTL's. */
        l->renewal.interval_ms = l->renewal.once ? l->confirm_ms : l->opts.renew_interval_ms;
        renew_start(l, l->opts.ttl_ms, l->confirm_ms ? l->confirm_ms : DLOCK__RENEW_INTERVAL);
    }
    l->confirm_ms = 0;
    return rc;
}

int dlock__engine_release(dlock_lock *l)
{
    if (l->etcd)
        return dlock__etcd_lock_release(l);
    dlock_lock_state st = dlock__lock_get_state(l);
    dlock__err_clear(&l->err);
    if (st == DLOCK_STATE_UNLOCKED) {
        dlock__err_set(&l->err, "this handle does not hold \"%s\"", l->name);
        return DLOCK_ENOTHELD;
    }
    int last_hold = !(l->kind->counted || l->kind->reenter) || l->holds <= 1;
    if (last_hold) {
        renew_stop(l);
        /* A round in flight may have found the lock lost (and run on_lost)
         * while we waited for it: read the state it left. */
        st = dlock__lock_get_state(l);
    }
    if (st == DLOCK_STATE_LOST) {
        /* A renewal the watchdog gave up on may still reach the node and
         * keep our token there for a whole TTL (a fair hand-over's
         * confirmation, an auto-renewal, sent to a stalled node): the next
         * owner would wait for it. Clean up by our token. */
        l->backend->release_lost(l);
        l->holds = 0;
        dlock__lock_set_state(l, DLOCK_STATE_UNLOCKED, 0);
        dlock__err_set(&l->err, "\"%s\" was lost before this release", l->name);
        return DLOCK_ELOST;
    }
    if (st == DLOCK_STATE_UNLOCKED) { /* on_lost released it meanwhile */
        dlock__err_set(&l->err, "this handle does not hold \"%s\"", l->name);
        return DLOCK_ENOTHELD;
    }
    if (!last_hold && l->kind->reenter) { /* the member stays until the last */
        l->holds--;
        return DLOCK_OK;
    }
    int rc = l->backend->release(l);
    if (rc == DLOCK_OK && l->kind->counted && l->holds > 1) {
        l->holds--;
        return DLOCK_OK;
    }
    if (rc != DLOCK_OK && dlock__lock_get_state(l) == DLOCK_STATE_LOST) {
        /* A non-last release raced a round that found the lock lost. */
        rc = DLOCK_ELOST;
        dlock__err_set(&l->err, "\"%s\" was lost before this release", l->name);
    }
    if (!last_hold)
        /* A failed non-last release drops every hold of the handle: one
         * that holds nothing must never have anything renewed, or the key
         * would outlive the handle for as long as the process runs. */
        renew_stop(l);
    l->holds = 0;
    dlock__lock_set_state(l, DLOCK_STATE_UNLOCKED, 0);
    if (rc == DLOCK_OK)
        dlock__err_clear(&l->err);
    return rc;
}

int dlock__engine_extend(dlock_lock *l, int64_t ttl_ms)
{
    /* etcd gets 0 as 0: the TTL its lease was granted, which etcd may have
     * raised above the handle's (its minimum lease). */
    if (l->etcd)
        return dlock__etcd_lock_extend(l, ttl_ms);
    if (ttl_ms == 0)
        ttl_ms = l->opts.ttl_ms;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    dlock_lock_state st = l->state;
    int64_t old_end = l->valid_until_ns;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    if (st == DLOCK_STATE_LOST) {
        dlock__err_set(&l->err, "\"%s\" was lost", l->name);
        return DLOCK_ELOST;
    }
    if (st != DLOCK_STATE_HELD) {
        dlock__err_set(&l->err, "this handle does not hold \"%s\"", l->name);
        return DLOCK_ENOTHELD;
    }
    if (old_end != INT64_MIN && dlock__now_ns() >= old_end) {
        /* Too late: whatever the server says now proves nothing about the
         * time in between, so nothing is sent and the handle lets go. */
        renew_stop(l);
        drop_holds(l);
        dlock__err_set(&l->err, "the lease on \"%s\" had already ended", l->name);
        return DLOCK_EEXPIRED;
    }
    /* Auto-renew: take the lock out of the watchdog for the extend, so no
     * round in flight sets the old TTL after ours; it goes back with the
     * new TTL as its renewal TTL for the rest of the hold. A fair
     * hand-over's pending confirmation is taken out too; a successful
     * extend does its work. */
    int renewed = renew_stop(l);
    if (renewed) {
        if (dlock__lock_get_state(l) == DLOCK_STATE_LOST) { /* that round found it lost */
            dlock__err_set(&l->err, "\"%s\" was lost", l->name);
            return DLOCK_ELOST;
        }
    }
    int64_t t0 = dlock__now_ns();
    /* A confirmation after the current lease ended proves nothing: the key
     * may have expired and been taken in between. */
    int rc = l->backend->extend(l, ttl_ms, old_end == INT64_MIN ? INT64_MAX : old_end);
    if (rc == DLOCK_OK && old_end != INT64_MIN && dlock__now_ns() >= old_end) {
        dlock__err_set(&l->err, "majority confirmed only after the lease had ended");
        rc = l->client->n_nodes > 1 ? DLOCK_ENOQUORUM : DLOCK_EEXPIRED;
    }
    if (rc == DLOCK_OK) {
        dlock__lock_set_state(l, DLOCK_STATE_HELD,
                              t0 + ttl_ms * DLOCK__NS_PER_MS - dlock__drift_ns(l->client, ttl_ms));
        dlock__err_clear(&l->err);
        l->renewal.ttl_ms = ttl_ms;
    }
    if (renewed && !(rc == DLOCK_OK && l->renewal.once) &&
        (rc == DLOCK_OK || (rc != DLOCK_ENOTOWNER && rc != DLOCK_EEXPIRED)))
        /* Renewal goes on (a failed extend leaves the lease as it was). */
        renew_start(l, l->renewal.ttl_ms, rc != DLOCK_OK ? 0 : DLOCK__RENEW_INTERVAL);
    if (rc == DLOCK_ENOTOWNER || rc == DLOCK_EEXPIRED) {
        /* Not ours any more: the handle lets go. */
        renew_stop(l);
        drop_holds(l);
    }
    return rc;
}

int dlock__engine_adopt(dlock_lock *l, const char *token)
{
    l->backend->settle(l);
    size_t n = strnlen(token, DLOCK_TOKEN_MAX + 1);
    if (n == 0 || n > DLOCK_TOKEN_MAX || !l->kind->adopt || dlock__lock_get_state(l) != DLOCK_STATE_UNLOCKED) {
        dlock__err_set(&l->err, "adopt needs a 1..%d byte token, a handle of a single name that "
                       "is not reentrant and holds nothing", DLOCK_TOKEN_MAX);
        return DLOCK_EINVAL;
    }
    if (!l->etcd && strncmp(token, "turn:", 5) == 0) {
        /* A waiter's turn (docs/waiting.md, "Runs and turns"), not a
         * holder's token: extending it would keep everyone out. */
        dlock__err_set(&l->err, "\"%.40s\" is a waiting acquire's turn, not a holder's token",
                       token);
        return DLOCK_EINVAL;
    }
    if (l->etcd)
        return dlock__etcd_lock_adopt(l, token, n);
    dlock__lock_inline_token(l);
    if (n >= sizeof l->token_inline) {
        char *t = dlock__malloc(n + 1);
        if (!t) {
            dlock__err_set(&l->err, "out of memory");
            return DLOCK_ENOMEM;
        }
        l->token = t;
    }
    memcpy(l->token, token, n + 1);
    l->token_len = n;
    l->holds = 1;
    l->fence = 0;
    dlock__lock_set_state(l, DLOCK_STATE_HELD, INT64_MIN);
    dlock__err_clear(&l->err);
    return DLOCK_OK;
}

int dlock__engine_forget(dlock_lock *l)
{
    if (l->etcd)
        return dlock__etcd_lock_forget(l);
    renew_stop(l);
    return dlock__lock_forget_local(l, dlock__lock_get_state(l));
}

void dlock__engine_cancel(dlock_lock *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    l->canceled = 1;
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&l->cond));
    if (l->cancel_fd[1] >= 0) {
        /* Wake a round trip in flight (a full pipe already will). */
        char b = 1;
        while (write(l->cancel_fd[1], &b, 1) < 0 && errno == EINTR)
            ;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    /* ...and a wait for a silent node to confirm our subscription. */
    dlock__wakeup_kick(l->client);
}

void dlock__engine_let_go(dlock_lock *l)
{
    renew_stop(l);
    if (l->etcd)
        dlock__etcd_lock_free(l, 0); /* releases what it holds */
    else
        l->backend->cleanup(l);
}
