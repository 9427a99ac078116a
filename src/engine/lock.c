/* SPDX-License-Identifier: BSD-3-Clause */
/* The lock handle's public face: options, the handle's state machine
 * (unlocked / held / lost), watchdog registration and cancel (the
 * getters, which only read the handle, are in handle.c).
 *
 * Everything kind-specific comes from the handle's kind (kinds.h), fixed
 * at dlock_lock_new(), and every round trip goes through its backend's
 * operations (backend.h): this file knows no script and no reply. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "etcd_backend.h"
#include "client.h"
#include "clock.h"
#include "error.h"
#include "fair.h"
#include "handle.h"
#include "keys.h"
#include "kinds.h"
#include "multi.h"
#include "quorum.h"
#include "versioned.h"
#include "wait.h"
#include "wakeup.h"
#include "watchdog.h"

#define KNOWN_FLAGS                                                                         \
    (DLOCK_REENTRANT | DLOCK_AUTO_RENEW | DLOCK_FAIR | DLOCK_NO_FENCE | DLOCK_SHARED |        \
     DLOCK_EXCLUSIVE)

/* Bytes of each dlock_lock_options version (versioned.h): a program built
 * against an older header passes a shorter struct, so the library copies
 * only the fields its version had and keeps the defaults for the rest
 * (tests/integration/test_options_abi.c). */
static const size_t options_sizes[] = {
    sizeof(dlock_lock_options), /* 1: dlock 0.1.0 */
};
DLOCK__VERSIONED_CHECK(dlock_lock_options, options_sizes, DLOCK_LOCK_OPTIONS_VERSION);

static size_t options_size(unsigned int version)
{
    return dlock__versioned_size(options_sizes, DLOCK__ARRAY_LEN(options_sizes), version);
}

int dlock_lock_options_init(dlock_lock_options *opts, unsigned int version)
{
    const dlock_lock_options defaults = DLOCK_LOCK_OPTIONS_INIT;
    return dlock__versioned_init(opts, &defaults, options_sizes,
                                 DLOCK__ARRAY_LEN(options_sizes), version);
}

/* The acquire loop of each wait style (kinds.h). */
static int (*const acquire_loop[DLOCK__WAIT_COUNT])(dlock_lock *, int64_t, int64_t) = {
    [DLOCK__WAIT_RETRY] = dlock__wait_acquire,
    [DLOCK__WAIT_QUEUE] = dlock__fair_acquire,
    [DLOCK__WAIT_MULTI] = dlock__multi_acquire,
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
    if (l->parent && !lost) /* one name of a set: the set's validity moves */
        dlock__multi_sync(l->parent);
    return lost;
}

static const dlock__renewal_ops renewal_ops = {dlock__lock_renew_lease_end, renew_settle,
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

/* A lost set gives back the names it still holds (multi.c). */
static void release_names(dlock_lock *l)
{
    for (size_t i = 0; i < l->n_subs; i++)
        if (dlock__lock_get_state(l->subs[i]) != DLOCK_STATE_UNLOCKED)
            (void)dlock_lock_release(l->subs[i]);
}

/* The handle lets go of every hold (the store's side is the caller's; a
 * set gives back the names it still holds, or its next acquire would find
 * them held). */
static void drop_holds(dlock_lock *l)
{
    release_names(l);
    l->holds = 0;
    dlock__lock_set_state(l, DLOCK_STATE_UNLOCKED, 0);
}

/* A handle inherited across fork() refuses every call (see
 * dlock__client_forked()). */
static int forked(dlock_lock *l)
{
    if (!dlock__client_forked(l->client))
        return 0;
    dlock__err_set(&l->err, "\"%s\": used after fork(); a client and its locks belong to the "
                   "process that made them (make a new client in the child)", l->name);
    return 1;
}

int dlock_lock_new(dlock_lock **out, dlock_client *client, const char *name,
                   const dlock_lock_options *opts)
{
    return dlock__lock_create(out, client, name, opts, 0, 0);
}

int dlock__lock_create(dlock_lock **out, dlock_client *client, const char *name,
                       const dlock_lock_options *opts, unsigned permits, int multi)
{
    dlock_lock_options defaults = DLOCK_LOCK_OPTIONS_INIT;
    if (out)
        *out = NULL;
    if (!out || !client || !name || dlock__client_forked(client))
        return DLOCK_EINVAL;
    /* A set's name is its names joined, for display (checked one by one). */
    size_t len = multi ? strlen(name) : strnlen(name, DLOCK_NAME_MAX + 1);
    if (len == 0 || (len > DLOCK_NAME_MAX && !multi))
        return DLOCK_EINVAL;
    if (opts) {
        /* An older caller's struct is shorter: read only what it has. */
        size_t n = options_size(opts->version);
        if (n == 0)
            return DLOCK_EINVAL;
        memcpy(&defaults, opts, n);
        defaults.version = DLOCK_LOCK_OPTIONS_VERSION;
    }
    opts = &defaults;
    if (opts->ttl_ms <= 0 ||
        opts->ttl_ms > DLOCK_TTL_MAX_MS || (opts->flags & ~(unsigned)KNOWN_FLAGS) ||
        opts->renew_interval_ms < 0 || opts->renew_interval_ms >= opts->ttl_ms ||
        opts->retry_min_ms < 1 || opts->retry_min_ms > 60000 ||
        opts->retry_max_ms < opts->retry_min_ms || opts->retry_max_ms > 60000)
        return DLOCK_EINVAL;
    /* Fair counted locks are not offered; a single-node kind (fair mode
     * keeps its queue in one node's memory) refuses several masters. */
    if ((opts->flags & DLOCK_SHARED) && (opts->flags & DLOCK_EXCLUSIVE))
        return DLOCK_EINVAL; /* one side or the other */
    const dlock__kind *kind = dlock__kind_of(opts->flags, permits, multi);
    if (kind && client->etcd) /* what etcd serves for it (kinds.h, on_etcd) */
        kind = dlock__kind_on_etcd(kind);
    if (!kind || (client->n_nodes > 1 && !kind->multi_node))
        return DLOCK_ENOTSUP;

    dlock_lock *l = dlock__calloc(1, sizeof *l);
    if (!l)
        return DLOCK_ENOMEM;
    l->client = client;
    atomic_fetch_add(&client->live_handles, 1); /* dlock_lock_free() takes it back */
    l->opts = *opts;
    l->kind = kind;
    l->backend = &dlock__redis_backend;
    l->ttl_s_len = (size_t)snprintf(l->ttl_s, sizeof l->ttl_s, "%" PRId64, opts->ttl_ms);
    /* l->name is the Redis key: the client's key_prefix + the name. */
    l->name = dlock__lock_key(client, name, len, &l->name_len);
    l->prefix_len = l->name ? l->name_len - len : 0;
    if (l->name)
        l->channel = dlock__wake_channel_for(client, l->name, l->name_len, &l->channel_len);
    int ok = l->name && l->channel;
    if (ok && kind->fenced && !(opts->flags & DLOCK_NO_FENCE))
        ok = (l->fence_key = dlock__helper_key(client, l->name, l->name_len, "fence", 5,
                                               &l->fence_len)) != NULL;
    if (ok && kind->aux_key)
        ok = (l->aux_key = dlock__helper_key(client, l->name, l->name_len, kind->aux_key,
                                             strlen(kind->aux_key), &l->aux_len)) != NULL;
    l->permits = permits;
    l->aux_arg_len = dlock__kind_aux_arg(kind, opts->retry_max_ms, permits, l->aux_arg,
                                         sizeof l->aux_arg);
    if (ok && kind->leave != DLOCK__S_NONE) { /* queued: the line and liveness keys */
        l->queue_key = dlock__helper_key(client, l->name, l->name_len, "q", 1, &l->queue_len);
        l->live_prefix = dlock__helper_key(client, l->name, l->name_len, "w\0", 2,
                                           &l->live_prefix_len);
        ok = l->queue_key && l->live_prefix;
    } else if (ok && kind->wake_one && client->n_nodes == 1 && !client->etcd &&
               !dlock__client_cluster(client)) {
        /* One waiter woken per release (docs/waiting.md, "Who is woken").
         * Not on Redlock: nodes that wake different waiters split the
         * vote. Not on a cluster: a script with keys that come and go gets
         * TRYAGAIN while its slot migrates. */
        ok = (l->wq_key = dlock__helper_key(client, l->name, l->name_len, "wq", 2,
                                            &l->wq_len)) != NULL;
        if (ok && kind->runs)
            ok = (l->wr_key = dlock__helper_key(client, l->name, l->name_len, "wr", 2,
                                                &l->wr_len)) != NULL;
    }
    if (!ok) {
        dlock__free(l->name);
        dlock__free(l->channel);
        dlock__free(l->fence_key);
        dlock__free(l->queue_key);
        dlock__free(l->live_prefix);
        dlock__free(l->wq_key);
        dlock__free(l->wr_key);
        dlock__free(l->aux_key);
        atomic_fetch_sub(&client->live_handles, 1);
        dlock__free(l);
        return DLOCK_ENOMEM;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&l->mu, NULL));
    dlock__cond_init_monotonic(&l->cond);
    l->holder_ttl_ms = -1;
    l->cancel_fd[0] = l->cancel_fd[1] = -1;
    static _Atomic unsigned long long next_hid = 1;
    l->hid_len = (size_t)snprintf(l->hid, sizeof l->hid, "%llx", atomic_fetch_add(&next_hid, 1));
    l->run_id_len = (size_t)snprintf(l->run_id, sizeof l->run_id, "%s.%s", client->id, l->hid);
    l->look_ms = -1;
    l->token = l->token_inline;
    l->renewal = (dlock__renewal){.ops = &renewal_ops, .owner = l, .key = l->name,
                                  .key_len = l->name_len, .mode = kind->renew_mode,
                                  .ttl_ms = opts->ttl_ms,
                                  .interval_ms = opts->renew_interval_ms};
    l->waiter = (dlock__waiter){.mu = &l->mu, .cond = &l->cond, .canceled = &l->canceled};
    if (client->etcd && dlock__etcd_lock_init(l, client->etcd) != DLOCK_OK) {
        dlock_lock_free(l);
        return DLOCK_ENOMEM;
    }
    *out = l;
    return DLOCK_OK;
}

int dlock_lock_acquire(dlock_lock *l, int64_t wait_ms)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
    if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER) {
        dlock__err_set(&l->err, "wait_ms must be >= 0 or DLOCK_WAIT_FOREVER");
        return DLOCK_EINVAL;
    }
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
        int rc = dlock_lock_extend(l, 0);
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

int dlock_lock_release(dlock_lock *l)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
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
        release_names(l);
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

int dlock_lock_extend(dlock_lock *l, int64_t ttl_ms)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
    dlock__err_clear(&l->err);
    if (ttl_ms < 0 || ttl_ms > DLOCK_TTL_MAX_MS) {
        dlock__err_set(&l->err, "ttl_ms must be 1..%" PRId64 " (or 0 for the lock's TTL)",
                       DLOCK_TTL_MAX_MS);
        return DLOCK_EINVAL;
    }
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

int dlock_lock_adopt(dlock_lock *l, const char *token)
{
    if (!l || !token || forked(l))
        return DLOCK_EINVAL;
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

int dlock_lock_forget(dlock_lock *l)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
    if (l->etcd)
        return dlock__etcd_lock_forget(l);
    renew_stop(l);
    for (size_t i = 0; i < l->n_subs; i++) /* every name of a set */
        (void)dlock_lock_forget(l->subs[i]);
    return dlock__lock_forget_local(l, dlock__lock_get_state(l));
}

void dlock_lock_cancel(dlock_lock *l)
{
    if (!l || dlock__client_forked(l->client))
        return;
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
    for (size_t i = 0; i < l->n_subs; i++) /* the name a set waits for */
        dlock_lock_cancel(l->subs[i]);
    /* ...and a wait for a silent node to confirm our subscription. */
    dlock__wakeup_kick(l->client);
}

void dlock_lock_free(dlock_lock *l)
{
    if (!l)
        return;
    if (dlock__client_forked(l->client))
        goto free_memory; /* release nothing: the parent's lock is the parent's */
    renew_stop(l);
    if (l->etcd)
        dlock__etcd_lock_free(l, 0); /* releases what it holds */
    else
        l->backend->cleanup(l);
    DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&l->cond));
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&l->mu));
free_memory: /* in a child of fork(), the mutex may be held by a thread not copied */
    if (l->etcd)
        dlock__etcd_lock_free(l, 1); /* memory only */
    dlock__free(l->name);
    dlock__free(l->fence_key);
    dlock__free(l->channel);
    dlock__free(l->inbox);
    dlock__free(l->queue_key);
    dlock__free(l->live_prefix);
    dlock__free(l->wq_key);
    dlock__free(l->wr_key);
    dlock__free(l->aux_key);
    if (l->token != l->token_inline)
        dlock__free(l->token);
    dlock__err_free(&l->err);
    atomic_fetch_sub(&l->client->live_handles, 1);
    dlock__free(l);
}
