/* SPDX-License-Identifier: BSD-3-Clause */
/* Making and unmaking a lock handle: the options (their versions and
 * checks), dlock_lock_new() and the handle of one name for every kind
 * (dlock__lock_create(), also used by semaphore.c and by a set for each of
 * its names, set.c), and the memory side of dlock_lock_free(). No verb
 * here: those are lock.c's, above the engine (engine.h). */
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "async.h"
#include "backend.h"
#include "client.h"
#include "clock.h"
#include "engine.h"
#include "handle.h"
#include "keys.h"
#include "kinds.h"
#include "restore_stamp.h"
#include "versioned.h"
#include "wakeup.h"

#define KNOWN_FLAGS                                                                         \
    (DLOCK_REENTRANT | DLOCK_AUTO_RENEW | DLOCK_FAIR | DLOCK_NO_FENCE | DLOCK_SHARED |        \
     DLOCK_EXCLUSIVE)

/* Bytes of each dlock_lock_options version (versioned.h): a program built
 * against an older header passes a shorter struct, so the library copies
 * only the fields its version had and keeps the defaults for the rest
 * (tests/integration/test_options_abi.c). */
static const size_t options_sizes[] = {
    offsetof(dlock_lock_options, lock_delay_ms), /* 1: dlock 0.1.0 */
    sizeof(dlock_lock_options),                  /* 2: lock_delay_ms */
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

const dlock__kind *dlock__lock_kind_served(const dlock_client *client, unsigned flags,
                                           unsigned permits)
{
    const dlock__kind *kind = dlock__kind_of(flags, permits);
    if (kind) /* what the store serves for it (etcd: kinds.h, in_line) */
        kind = client->backend->kind_for(client, kind);
    if (!kind || (client->n_nodes > 1 && !kind->multi_node))
        return NULL;
    return kind;
}

int dlock_lock_new(dlock_lock **out, dlock_client *client, const char *name,
                   const dlock_lock_options *opts)
{
    return dlock__async_made(out, dlock__lock_create(out, client, name, opts, 0));
}

int dlock__lock_create(dlock_lock **out, dlock_client *client, const char *name,
                       const dlock_lock_options *opts, unsigned permits)
{
    dlock_lock_options defaults = DLOCK_LOCK_OPTIONS_INIT;
    if (out)
        *out = NULL;
    if (!out || !client || !name || dlock__client_forked(client))
        return DLOCK_EINVAL;
    size_t len = strnlen(name, DLOCK_NAME_MAX + 1);
    if (len == 0 || len > DLOCK_NAME_MAX)
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
        opts->retry_max_ms < opts->retry_min_ms || opts->retry_max_ms > 60000 ||
        opts->lock_delay_ms < 0 || opts->lock_delay_ms > DLOCK_LOCK_DELAY_MAX_MS)
        return DLOCK_EINVAL;
    /* Fair counted locks are not offered; a single-node kind (fair mode
     * keeps its queue in one node's memory) refuses several masters. */
    if ((opts->flags & DLOCK_SHARED) && (opts->flags & DLOCK_EXCLUSIVE))
        return DLOCK_EINVAL; /* one side or the other */
    const dlock__kind *kind = dlock__lock_kind_served(client, opts->flags, permits);
    if (!kind)
        return DLOCK_ENOTSUP;
    if (opts->lock_delay_ms > 0 && !client->backend->lock_delays)
        return DLOCK_ENOTSUP;

    dlock_lock *l = dlock__calloc(1, sizeof *l);
    if (!l)
        return DLOCK_ENOMEM;
    l->client = client;
    l->wake_fd = -1; /* before anything may destroy it */
    atomic_fetch_add(&client->live_handles, 1); /* dlock__lock_destroy() takes it back */
    l->opts = *opts;
    l->kind = kind;
    l->backend = client->backend;
    l->ttl_s_len = (size_t)snprintf(l->ttl_s, sizeof l->ttl_s, "%" PRId64, opts->ttl_ms);
    /* l->name is the key every store names the lock by: the client's
     * key_prefix + the name. The backend's own keys come in lock_init. */
    l->name = dlock__lock_key(client, name, len, &l->name_len);
    l->prefix_len = l->name ? l->name_len - len : 0;
    int ok = l->name != NULL;
    l->permits = permits;
    l->token = l->token_inline;
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&l->mu, NULL));
    dlock__cond_init_monotonic(&l->cond);
    if (!ok) {
        dlock__lock_destroy(l); /* what was made of it */
        return DLOCK_ENOMEM;
    }
    l->holder_ttl_ms = -1;
    l->cancel_fd[0] = l->cancel_fd[1] = -1;
    static _Atomic unsigned long long next_hid = 1;
    unsigned long long hno = atomic_fetch_add(&next_hid, 1);
    l->hid_len = (size_t)snprintf(l->hid, sizeof l->hid, "%llx", hno);
    /* Above every thread number (they count up from 1). */
    l->owner_no = client->loop ? (ULONG_MAX / 2 + 1) | (unsigned long)hno : 0;
    l->run_id_len = (size_t)snprintf(l->run_id, sizeof l->run_id, "%s.%s", client->id, l->hid);
    l->look_ms = -1;
    l->renewal = (dlock__renewal){.ops = l->backend->renewal, .owner = l, .key = l->name,
                                  .key_len = l->name_len, .mode = kind->renew_mode,
                                  .ttl_ms = opts->ttl_ms,
                                  .interval_ms = opts->renew_interval_ms};
    l->waiter = (dlock__waiter){.mu = &l->mu, .cond = &l->cond, .canceled = &l->canceled};
    int rc = l->backend->lock_init(l);
    if (rc != DLOCK_OK) {
        dlock__lock_destroy(l); /* nothing taken yet: memory only (lock_clear takes
                                   what lock_init made of it) */
        return rc == DLOCK_EINVAL ? rc : DLOCK_ENOMEM;
    }
    *out = l;
    return DLOCK_OK;
}

void dlock__lock_destroy(dlock_lock *l)
{
    /* In a child of fork(), the mutex may be held by a thread not copied. */
    if (!dlock__client_forked(l->client)) {
        DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&l->cond));
        DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&l->mu));
    }
    l->backend->lock_clear(l, dlock__client_forked(l->client));
    dlock__restore_stamp_unref(l->renewal.stamp, dlock__client_forked(l->client));
    if (l->wake_fd >= 0)
        close(l->wake_fd);
    dlock__free(l->name);
    if (l->token != l->token_inline)
        dlock__free(l->token);
    dlock__err_free(&l->err);
    dlock__free(l->async);
    atomic_fetch_sub(&l->client->live_handles, 1);
    dlock__free(l);
}
