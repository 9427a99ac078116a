/* SPDX-License-Identifier: BSD-3-Clause */
/* The Redis backend's operations table (backend.h). One table for one
 * node, Redlock, Cluster and Sentinel, over TCP or TLS: the topology is
 * the client's (node.c, cluster.c, sentinel.c), the fan-out and the
 * majorities are fanout.c's and quorum.c's; what a handle leaves to settle
 * before its token changes, after a loss or when it is freed, tidy.c's. */
#include <string.h>

#include "attempt.h"
#include "backend.h"
#include "client.h"
#include "clock.h"
#include "engine.h"
#include "fair.h"
#include "handle.h"
#include "kinds.h"
#include "quorum.h"
#include "redis_backend.h"
#include "release.h"
#include "tidy.h"
#include "wait.h"

/* Every kind waits in the engine (src/engine/acquire.c): the kinds that
 * wait by retrying through the attempt (wait.c), the queued ones through
 * their looks in line (fair.c). */
static int try(dlock_lock *l, dlock__op *op)
{
    return l->kind->wait == DLOCK__WAIT_QUEUE ? dlock__fair_try(l, op) : dlock__wait_try(l, op);
}

static int leave(dlock_lock *l, int64_t timeout_ms, dlock__op *op)
{
    return l->kind->wait == DLOCK__WAIT_QUEUE ? dlock__fair_leave(l, timeout_ms, op)
                                              : dlock__wait_leave(l, timeout_ms, op);
}

static int64_t lease_ttl_ms(dlock_lock *l)
{
    return l->opts.ttl_ms;
}

static int64_t drift_ns(dlock_lock *l, int64_t ttl_ms)
{
    return dlock__drift_ns(l->client, ttl_ms);
}

static int adopt_check(dlock_lock *l, const char *token, size_t len)
{
    (void)len;
    if (strncmp(token, "turn:", 5) == 0) {
        /* A waiter's turn (docs/waiting.md, "Runs and turns"), not a
         * holder's token: extending it would keep everyone out. */
        dlock__err_set(&l->err, "\"%.40s\" is a waiting acquire's turn, not a holder's token",
                       token);
        return DLOCK_EINVAL;
    }
    return DLOCK_OK;
}

/* The token is the whole record (the engine keeps it). */
static int adopt(dlock_lock *l, const char *token, size_t len)
{
    (void)l, (void)token, (void)len;
    return DLOCK_OK;
}

static void no_record(dlock_lock *l)
{
    (void)l; /* the handle's fields are the whole record */
}

static const dlock__kind *kind_for(const dlock_client *c, const dlock__kind *k)
{
    (void)c;
    return k; /* every kind; several masters are checked by the caller */
}

/* Renewals are the watchdog's batched rounds (renew_round.c). */
static const dlock__renewal_ops renewal_ops = {dlock__lock_renew_lease_end,
                                               dlock__engine_renew_settle,
                                               dlock__engine_renew_lost, NULL};

/* Whatever no other backend claims (backends.c asks it last). */
static int wants_the_rest(const char *const *urls, size_t n_urls)
{
    (void)urls, (void)n_urls;
    return 1;
}

const dlock__backend dlock__redis_backend = {
    .name = "redis",
    .wants = wants_the_rest,
    .open = dlock__redis_open,
    .close = dlock__redis_close,
    .node_count = dlock__redis_node_count,
    .node_name = dlock__redis_node_name,
    .status = dlock__redis_status,
    .holders = dlock__redis_holders,
    .list = dlock__redis_list,
    .identity = dlock__redis_identity,
    .holder_identity = dlock__redis_holder_identity,
    .lock_delay = dlock__redis_lock_delay,
    .break_holds = dlock__redis_break,
    .late_answer_counts = 0,
    .sets = 1,
    .lock_delays = 1,
    .renewal = &renewal_ops,
    .kind_for = kind_for,
    .lock_init = dlock__redis_lock_init,
    .lock_clear = dlock__redis_lock_clear,
    .begin = dlock__fair_begin,
    .try = try,
    .watch = dlock__wait_watch_release,
    .watch_ready = dlock__wait_watch_ready,
    .unwatch = dlock__wait_unwatch,
    .leave = leave,
    .handed = dlock__fair_handed,
    .release_start = dlock__release_start,
    .extend_start = dlock__extend_start,
    .lease_ttl_ms = lease_ttl_ms,
    .drift_ns = drift_ns,
    .adopt_check = adopt_check,
    .adopt = adopt,
    .settle_start = dlock__tidy_settle_start,
    .release_lost_start = dlock__tidy_release_lost_start,
    .drop = no_record,
    .cleanup_start = dlock__tidy_cleanup_start,
    .elect_value_at_grant = 0,
    .elect_write = dlock__redis_elect_write,
    .elect_write_start = dlock__redis_elect_write_start,
    .elect_read = dlock__redis_elect_read,
    .elect_watch = dlock__redis_elect_watch,
    .elect_unwatch = dlock__redis_elect_unwatch,
    .elect_resigned = dlock__redis_elect_resigned,
    .elect_resigned_start = dlock__redis_elect_resigned_start,
};
