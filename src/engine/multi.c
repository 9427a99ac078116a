/* SPDX-License-Identifier: BSD-3-Clause */
/* Several names at once (multi.h).
 *
 * Why handles and not one script: every name keeps its own key, token,
 * lease, fencing counter and kind (a set of shared locks works as a set of
 * exclusive ones), and on several masters each name is a Redlock lock of
 * its own. All or nothing: a failed acquire gives back what it took before
 * it returns. No deadlock: every set takes its names in one order (bytewise
 * sorted), so no two callers each hold a name the other waits for. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "client.h"
#include "clock.h"
#include "fsm.h"
#include "handle.h"
#include "multi.h"

static int64_t name_end_ns(dlock_lock *n)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
    int64_t end = n->state == DLOCK_STATE_HELD ? n->valid_until_ns : 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
    return end;
}

/* The least lease end of the names (0 if one is not held). */
static int64_t set_end_ns(dlock_lock *set)
{
    int64_t end = INT64_MAX;
    for (size_t i = 0; i < set->n_subs; i++) {
        int64_t e = name_end_ns(set->subs[i]);
        if (e < end)
            end = e;
    }
    return end;
}

void dlock__multi_sync(dlock_lock *set)
{
    int64_t end = set_end_ns(set);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&set->mu));
    if (set->state == DLOCK_STATE_HELD && end > 0)
        set->valid_until_ns = end;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&set->mu));
}

/* A name's on_lost (the watchdog thread): the set is lost, once. */
static void name_lost(dlock_lock *name, dlock_lost_reason reason, void *arg)
{
    dlock_lock *set = arg;
    (void)name;
    int was_held = dlock__fsm_fire(set, DLOCK__EV_LOST, 0) == DLOCK_STATE_HELD;
    if (was_held && set->opts.on_lost)
        set->opts.on_lost(set, reason, set->opts.on_lost_arg);
}

/* Give back the first n names (best effort); the first failure's code. */
static int give_back(dlock_lock *set, size_t n)
{
    int rc = DLOCK_OK;
    for (size_t i = n; i-- > 0;) {
        if (dlock__lock_get_state(set->subs[i]) == DLOCK_STATE_UNLOCKED)
            continue;
        int r = dlock_lock_release(set->subs[i]);
        if (rc == DLOCK_OK && r != DLOCK_OK) {
            rc = r;
            dlock__err_set(&set->err, "\"%s\": %s", dlock_lock_name(set->subs[i]),
                           dlock_lock_errmsg(set->subs[i]));
        }
    }
    return rc;
}

/* One pass: every name in order, each waiting up to the deadline (or
 * trying once when wait_ms is 0). */
static int take_all(dlock_lock *set, int64_t wait_ms, int64_t deadline_ns)
{
    for (size_t i = 0; i < set->n_subs; i++) {
        int64_t w = wait_ms;
        if (wait_ms > 0) {
            int64_t left = (deadline_ns - dlock__now_ns()) / DLOCK__NS_PER_MS;
            w = left > 0 ? left : 0;
        }
        int rc = dlock_lock_acquire(set->subs[i], w);
        if (rc == DLOCK_ENOTACQUIRED && wait_ms != 0)
            rc = DLOCK_ETIMEDOUT; /* the deadline came while taking this name */
        if (rc != DLOCK_OK) {
            dlock__err_set(&set->err, "\"%s\": %s", dlock_lock_name(set->subs[i]),
                           dlock_lock_errmsg(set->subs[i]));
            give_back(set, i);
            return rc;
        }
    }
    return DLOCK_OK;
}

int dlock__multi_acquire(dlock_lock *set, int64_t wait_ms, int64_t deadline_ns)
{
    for (size_t i = 0; i < set->n_subs; i++) { /* a stale cancel is not for this call */
        dlock_lock *n = set->subs[i];
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
        n->canceled = 0;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
    }
    for (;;) {
        int rc = take_all(set, wait_ms, deadline_ns);
        if (rc != DLOCK_OK)
            return rc;
        int64_t end = set_end_ns(set);
        if (end > dlock__now_ns()) {
            set->holds = 1;
            set->fence = dlock_lock_fence(set->subs[0]);
            const char *tok = dlock_lock_token(set->subs[0]);
            size_t len = strlen(tok);
            memcpy(set->token_inline, tok, len < sizeof set->token_inline ? len + 1 : 1);
            set->token = set->token_inline;
            set->token_len = len < sizeof set->token_inline ? len : 0;
            dlock__lock_granted(set, end);
            dlock__err_clear(&set->err);
            return DLOCK_OK;
        }
        /* The first names' leases ran out while later ones were waited
         * for: no validity left for the set. Give all back, try again. */
        give_back(set, set->n_subs);
        if (wait_ms == 0 || dlock__now_ns() >= deadline_ns) {
            dlock__err_set(&set->err, "the names' leases ran out before all of them were held");
            return wait_ms == 0 ? DLOCK_ENOTACQUIRED : DLOCK_ETIMEDOUT;
        }
    }
}

static int multi_release(dlock_lock *set, int last)
{
    (void)last; /* a set is held once */
    return give_back(set, set->n_subs);
}

static int multi_extend(dlock_lock *set, int64_t ttl_ms, int64_t deadline_ns, int64_t *until_ns,
                        int64_t *renew_ttl_ms)
{
    (void)deadline_ns; /* each name checks its own lease */
    *renew_ttl_ms = ttl_ms ? ttl_ms : set->opts.ttl_ms; /* a set is never renewed itself */
    for (size_t i = 0; i < set->n_subs; i++) {
        int rc = dlock_lock_extend(set->subs[i], ttl_ms);
        if (rc != DLOCK_OK) {
            dlock__err_set(&set->err, "\"%s\": %s", dlock_lock_name(set->subs[i]),
                           dlock_lock_errmsg(set->subs[i]));
            if (rc == DLOCK_ENOTOWNER || rc == DLOCK_EEXPIRED || rc == DLOCK_ELOST) {
                give_back(set, set->n_subs); /* the set is gone: all of it */
                return rc == DLOCK_ELOST ? DLOCK_EEXPIRED : rc;
            }
            return rc;
        }
    }
    *until_ns = set_end_ns(set);
    return DLOCK_OK;
}

/* Nothing of the set's own: every name settles, drops and cleans up
 * its own, and dlock_lock_release() gives back each name it still holds. */
static void multi_nothing(dlock_lock *set)
{
    (void)set;
}

static void multi_cleanup(dlock_lock *set)
{
    /* Every name out of the watchdog first (a release waits for a round
     * in flight): a round renewing a later name reads all of set->subs
     * (dlock__multi_sync()), so none may be freed while one is renewed. */
    give_back(set, set->n_subs);
    for (size_t i = 0; i < set->n_subs; i++)
        dlock_lock_free(set->subs[i]);
    dlock__free(set->subs);
    set->subs = NULL;
    set->n_subs = 0;
}

static int64_t multi_ttl(dlock_lock *set)
{
    return set->opts.ttl_ms;
}

static int64_t multi_drift(dlock_lock *set, int64_t ttl_ms)
{
    (void)set, (void)ttl_ms;
    return 0; /* never renewed itself */
}

static int multi_no_adopt(dlock_lock *set, const char *token, size_t len)
{
    (void)set, (void)token, (void)len;
    return DLOCK_EINVAL; /* kinds.h: a set is not adopted */
}

static void multi_clear(dlock_lock *set, int forked)
{
    (void)set, (void)forked;
}

const dlock__backend dlock__multi_backend = {
    .name = "multi",
    .acquire = dlock__multi_acquire,
    .release = multi_release,
    .extend = multi_extend,
    .lease_ttl_ms = multi_ttl,
    .drift_ns = multi_drift,
    .adopt_check = multi_no_adopt,
    .adopt = multi_no_adopt,
    .settle = multi_nothing,
    .release_lost = multi_nothing,
    .drop = multi_nothing,
    .cleanup = multi_cleanup,
    .lock_clear = multi_clear,
};

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int dlock_lock_new_multi(dlock_lock **out, dlock_client *client, const char *const *names,
                         size_t n_names, const dlock_lock_options *opts)
{
    if (out)
        *out = NULL;
    if (!out || !client || !names || n_names == 0 || n_names > DLOCK_MULTI_MAX)
        return DLOCK_EINVAL;
    if (opts && (opts->flags & DLOCK_FAIR))
        return DLOCK_ENOTSUP; /* a line per name cannot be joined in order */
    const char **sorted = dlock__calloc(n_names, sizeof *sorted);
    if (!sorted)
        return DLOCK_ENOMEM;
    size_t total = 0;
    int rc = DLOCK_OK;
    for (size_t i = 0; i < n_names && rc == DLOCK_OK; i++) {
        size_t len = names[i] ? strnlen(names[i], DLOCK_NAME_MAX + 1) : 0;
        if (len == 0 || len > DLOCK_NAME_MAX)
            rc = DLOCK_EINVAL;
        sorted[i] = names[i];
        total += len + 1;
    }
    if (rc == DLOCK_OK) {
        qsort(sorted, n_names, sizeof *sorted, by_name);
        for (size_t i = 1; i < n_names; i++)
            if (!strcmp(sorted[i - 1], sorted[i]))
                rc = DLOCK_EINVAL; /* the same name twice would wait for itself */
    }
    char *joined = rc == DLOCK_OK ? dlock__malloc(total) : NULL;
    if (rc == DLOCK_OK && !joined)
        rc = DLOCK_ENOMEM;
    dlock_lock *set = NULL;
    if (rc == DLOCK_OK) {
        size_t o = 0;
        for (size_t i = 0; i < n_names; i++) {
            size_t len = strlen(sorted[i]);
            memcpy(joined + o, sorted[i], len);
            o += len;
            joined[o++] = i + 1 < n_names ? ' ' : '\0';
        }
        rc = dlock__lock_create(&set, client, joined, opts, 0, 1);
    }
    dlock__free(joined);
    if (rc == DLOCK_OK) {
        /* The names renew themselves; the set has no key to renew. */
        dlock_lock_options name_opts = set->opts;
        name_opts.on_lost = name_lost;
        name_opts.on_lost_arg = set;
        set->opts.flags &= ~(unsigned)DLOCK_AUTO_RENEW;
        set->backend = &dlock__multi_backend;
        set->subs = dlock__calloc(n_names, sizeof *set->subs);
        if (!set->subs)
            rc = DLOCK_ENOMEM;
        for (size_t i = 0; rc == DLOCK_OK && i < n_names; i++) {
            rc = dlock_lock_new(&set->subs[i], client, sorted[i], &name_opts);
            if (rc == DLOCK_OK) {
                set->subs[i]->parent = set;
                set->n_subs++;
            }
        }
        if (rc != DLOCK_OK) {
            dlock_lock_free(set);
            set = NULL;
        }
    }
    dlock__free(sorted);
    *out = set;
    return rc;
}
