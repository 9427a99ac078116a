/* SPDX-License-Identifier: BSD-3-Clause */
/* Several names at once (set.h): a composite above single locks.
 *
 * Why handles and not one script: every name keeps its own key, token,
 * lease, fencing counter and kind (a set of shared locks works as a set of
 * exclusive ones), and on several masters each name is a Redlock lock of
 * its own. All or nothing: a failed acquire gives back what it took before
 * it returns. No deadlock: every set takes its names in one order (bytewise
 * sorted), so no two callers each hold a name the other waits for.
 *
 * The names are driven through the engine (engine.h), never the public
 * verbs, so nothing below lock.c calls back up. The set's handle has no
 * kind, backend or key: its state, validity, token and fence are kept
 * here from its names'. Its validity is the least of its names': each
 * name's watch (handle.h) tells the set, on the watchdog's thread, when a
 * renewal moved the name's validity or found the name lost. Mutex order:
 * the set's, then a name's, never the other way (the watch takes no
 * name's mutex while it holds the set's). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "backend.h"
#include "engine.h"
#include "fsm.h"
#include "handle.h"
#include "set.h"

struct dlock__set {
    size_t n;
    dlock_lock *names[]; /* sorted: the order they are taken in */
};

static int64_t name_end_ns(dlock_lock *n)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&n->mu));
    int64_t end = n->state == DLOCK_STATE_HELD ? n->valid_until_ns : 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&n->mu));
    return end;
}

/* The least lease end of the names (0 if one is not held). */
static int64_t names_end_ns(const struct dlock__set *s)
{
    int64_t end = INT64_MAX;
    for (size_t i = 0; i < s->n; i++) {
        int64_t e = name_end_ns(s->names[i]);
        if (e < end)
            end = e;
    }
    return end;
}

/* A name's watch (handle.h; the watchdog's thread): a renewal moved its
 * validity, so the set's is the least of its names' again; or it was lost,
 * so the set is: the one lost path (handle.h), on_lost of the set once. */
static void name_moved(void *arg, int lost)
{
    dlock_lock *set = arg;
    if (lost) {
        dlock__engine_renew_lost(set, lost);
        return;
    }
    int64_t end = names_end_ns(set->set);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&set->mu));
    if (set->state == DLOCK_STATE_HELD && end > 0)
        set->valid_until_ns = end;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&set->mu));
}

/* The set's message names the name a verb failed on. */
static void name_failed(dlock_lock *set, dlock_lock *n)
{
    dlock__err_set(&set->err, "\"%s\": %s", n->name + n->prefix_len, dlock__err_str(&n->err));
}

/* Give back the first n names (best effort), the last first; the first
 * failure's code. */
static int give_back(dlock_lock *set, size_t n)
{
    struct dlock__set *s = set->set;
    int rc = DLOCK_OK;
    for (size_t i = n; i-- > 0;) {
        if (dlock__lock_get_state(s->names[i]) == DLOCK_STATE_UNLOCKED)
            continue;
        int r = dlock__engine_release(s->names[i]);
        if (rc == DLOCK_OK && r != DLOCK_OK) {
            rc = r;
            name_failed(set, s->names[i]);
        }
    }
    return rc;
}

/* The set lets go of every name it still holds (or its next acquire would
 * find them held) and holds nothing. */
static void drop(dlock_lock *set)
{
    (void)give_back(set, set->set->n);
    set->holds = 0;
    dlock__fsm_fire(set, DLOCK__EV_LET_GO, 0);
}

/* One pass: every name in order, each waiting up to the deadline (or
 * trying once when wait_ms is 0). */
static int take_all(dlock_lock *set, int64_t wait_ms, int64_t deadline_ns)
{
    struct dlock__set *s = set->set;
    for (size_t i = 0; i < s->n; i++) {
        int64_t w = wait_ms;
        if (wait_ms > 0) {
            int64_t left = (deadline_ns - dlock__now_ns()) / DLOCK__NS_PER_MS;
            w = left > 0 ? left : 0;
        }
        int rc = dlock__engine_acquire(s->names[i], w);
        if (rc == DLOCK_ENOTACQUIRED && wait_ms != 0)
            rc = DLOCK_ETIMEDOUT; /* the deadline came while taking this name */
        if (rc != DLOCK_OK) {
            name_failed(set, s->names[i]);
            give_back(set, i);
            return rc;
        }
    }
    return DLOCK_OK;
}

/* The names are all held, each lease ending after `end`: the set is. */
static void hold(dlock_lock *set, int64_t end)
{
    dlock_lock *first = set->set->names[0];
    set->holds = 1;
    set->fence = first->fence;
    /* The set's token is its first name's; one too long for the inline
     * buffer (none is today: 32 hex digits and an inbox tag) reads as
     * empty rather than as a cut one. */
    size_t len = first->token_len;
    if (len >= sizeof set->token_inline)
        len = 0;
    memcpy(set->token_inline, first->token, len);
    set->token_inline[len] = '\0';
    set->token = set->token_inline;
    set->token_len = len;
    dlock__fsm_fire(set, DLOCK__EV_GRANTED, end);
    dlock__err_clear(&set->err);
}

int dlock__set_acquire(dlock_lock *set, int64_t wait_ms)
{
    struct dlock__set *s = set->set;
    dlock_lock_state st = dlock__lock_get_state(set);
    if (st == DLOCK_STATE_LOST) {
        drop(set); /* the loss was reported; the set starts over */
    } else if (st == DLOCK_STATE_HELD) {
        dlock__err_set(&set->err, "this handle already holds \"%s\"", set->name);
        return DLOCK_EINVAL;
    }
    /* A cancel of the set reaches its names (dlock__set_cancel()): one left
     * on a name from an earlier call is not for this one. Cleared before
     * the set's own flag is read, so a cancel in between is seen there. */
    for (size_t i = 0; i < s->n; i++) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&s->names[i]->mu));
        s->names[i]->canceled = 0;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&s->names[i]->mu));
    }
    int rc = dlock__lock_begin_acquire(set, wait_ms); /* a cancel that came before */
    if (rc != DLOCK_OK)
        return rc;
    int64_t deadline_ns = dlock__deadline_after_ms(wait_ms);
    for (;;) {
        rc = take_all(set, wait_ms, deadline_ns);
        if (rc == DLOCK_ECANCELED)
            dlock__lock_take_cancel(set); /* this wait used the set's cancel */
        if (rc != DLOCK_OK)
            return rc;
        int64_t end = names_end_ns(s);
        if (end > dlock__now_ns()) {
            hold(set, end);
            return DLOCK_OK;
        }
        /* The first names' leases ran out while later ones were waited
         * for: no validity left for the set. Give all back, try again. */
        give_back(set, s->n);
        if (wait_ms == 0 || dlock__now_ns() >= deadline_ns) {
            dlock__err_set(&set->err, "the names' leases ran out before all of them were held");
            return wait_ms == 0 ? DLOCK_ENOTACQUIRED : DLOCK_ETIMEDOUT;
        }
    }
}

int dlock__set_release(dlock_lock *set)
{
    dlock_lock_state st = dlock__lock_get_state(set);
    dlock__err_clear(&set->err);
    if (st == DLOCK_STATE_UNLOCKED) {
        dlock__err_set(&set->err, "this handle does not hold \"%s\"", set->name);
        return DLOCK_ENOTHELD;
    }
    if (st == DLOCK_STATE_LOST) {
        drop(set); /* a lost name's release takes its token out */
        dlock__err_set(&set->err, "\"%s\" was lost before this release", set->name);
        return DLOCK_ELOST;
    }
    int rc = give_back(set, set->set->n);
    if (rc != DLOCK_OK && dlock__lock_get_state(set) == DLOCK_STATE_LOST) {
        rc = DLOCK_ELOST; /* a round found a name lost meanwhile */
        dlock__err_set(&set->err, "\"%s\" was lost before this release", set->name);
    }
    set->holds = 0;
    dlock__fsm_fire(set, DLOCK__EV_LET_GO, 0);
    return rc;
}

int dlock__set_extend(dlock_lock *set, int64_t ttl_ms)
{
    struct dlock__set *s = set->set;
    if (ttl_ms == 0)
        ttl_ms = set->opts.ttl_ms;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&set->mu));
    dlock_lock_state st = set->state;
    int64_t old_end = set->valid_until_ns;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&set->mu));
    if (st == DLOCK_STATE_LOST) {
        dlock__err_set(&set->err, "\"%s\" was lost", set->name);
        return DLOCK_ELOST;
    }
    if (st != DLOCK_STATE_HELD) {
        dlock__err_set(&set->err, "this handle does not hold \"%s\"", set->name);
        return DLOCK_ENOTHELD;
    }
    if (dlock__now_ns() >= old_end) {
        /* Too late, as for one name (engine.c): nothing is sent, and the
         * set lets go of every name. */
        drop(set);
        dlock__err_set(&set->err, "the lease on \"%s\" had already ended", set->name);
        return DLOCK_EEXPIRED;
    }
    for (size_t i = 0; i < s->n; i++) { /* each name checks its own lease */
        int rc = dlock__engine_extend(s->names[i], ttl_ms);
        if (rc == DLOCK_OK)
            continue;
        name_failed(set, s->names[i]);
        if (rc == DLOCK_ENOTOWNER || rc == DLOCK_EEXPIRED || rc == DLOCK_ELOST) {
            drop(set); /* the set is gone: all of it */
            return rc == DLOCK_ELOST ? DLOCK_EEXPIRED : rc;
        }
        return rc; /* the lease stays as it was */
    }
    if (dlock__now_ns() >= old_end) {
        dlock__err_set(&set->err, "majority confirmed only after the lease had ended");
        if (set->client->n_nodes > 1)
            return DLOCK_ENOQUORUM;
        drop(set);
        return DLOCK_EEXPIRED;
    }
    dlock__fsm_fire(set, DLOCK__EV_RENEWED, names_end_ns(s));
    dlock__err_clear(&set->err);
    return DLOCK_OK;
}

int dlock__set_adopt(dlock_lock *set)
{
    dlock__err_set(&set->err, "adopt needs a 1..%d byte token, a handle of a single name that "
                   "is not reentrant and holds nothing", DLOCK_TOKEN_MAX);
    return DLOCK_EINVAL;
}

int dlock__set_forget(dlock_lock *set)
{
    struct dlock__set *s = set->set;
    for (size_t i = 0; i < s->n; i++) /* every name, nothing sent */
        (void)dlock__engine_forget(s->names[i]);
    return dlock__engine_forget_local(set, dlock__lock_get_state(set));
}

void dlock__set_cancel(dlock_lock *set)
{
    struct dlock__set *s = set->set;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&set->mu));
    set->canceled = 1; /* for a waiting acquire not begun yet */
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&set->mu));
    /* ...and the name being waited for, whichever it is: every name (an
     * acquire clears what its names did not use). */
    for (size_t i = 0; i < s->n; i++)
        dlock__engine_cancel(s->names[i]);
}

void dlock__set_free(dlock_lock *set)
{
    struct dlock__set *s = set->set;
    /* Every name out of the watchdog and let go first (letting go waits
     * for a round in flight): a round renewing a later name reads all the
     * names (its watch, name_moved()), so none is freed while one may
     * still be renewed. In a fork child nothing is let go. */
    if (!dlock__client_forked(set->client))
        for (size_t i = s->n; i-- > 0;)
            dlock__engine_let_go(s->names[i]);
    for (size_t i = 0; i < s->n; i++)
        dlock__lock_destroy(s->names[i]);
    dlock__free(s);
    dlock__lock_destroy(set);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names checked and sorted into *sorted, and joined with spaces (for
 * the set's name) into *joined. */
static int sort_names(const char *const *names, size_t n_names, const char ***sorted,
                      char **joined)
{
    const char **v = dlock__calloc(n_names, sizeof *v);
    if (!v)
        return DLOCK_ENOMEM;
    size_t total = 0;
    int rc = DLOCK_OK;
    for (size_t i = 0; i < n_names && rc == DLOCK_OK; i++) {
        size_t len = names[i] ? strnlen(names[i], DLOCK_NAME_MAX + 1) : 0;
        if (len == 0 || len > DLOCK_NAME_MAX)
            rc = DLOCK_EINVAL;
        v[i] = names[i];
        total += len + 1;
    }
    if (rc == DLOCK_OK) {
        qsort(v, n_names, sizeof *v, by_name);
        for (size_t i = 1; i < n_names; i++)
            if (!strcmp(v[i - 1], v[i]))
                rc = DLOCK_EINVAL; /* the same name twice would wait for itself */
    }
    char *j = rc == DLOCK_OK ? dlock__malloc(total) : NULL;
    if (rc == DLOCK_OK && !j)
        rc = DLOCK_ENOMEM;
    if (rc != DLOCK_OK) {
        dlock__free(v);
        return rc;
    }
    size_t o = 0;
    for (size_t i = 0; i < n_names; i++) {
        size_t len = strlen(v[i]);
        memcpy(j + o, v[i], len);
        o += len;
        j[o++] = i + 1 < n_names ? ' ' : '\0';
    }
    *sorted = v;
    *joined = j;
    return DLOCK_OK;
}

/* The set's own handle: no kind, backend or key; its options are the
 * first name's (checked, of this version), without auto-renew (the names
 * renew themselves). Takes `joined` (not when it returns NULL). */
static dlock_lock *set_handle(dlock_client *client, char *joined, const dlock_lock *first,
                              struct dlock__set *s)
{
    dlock_lock *set = dlock__calloc(1, sizeof *set);
    if (!set)
        return NULL;
    set->client = client;
    set->wake_fd = -1; /* dlock__lock_destroy() closes it */
    set->backend = client->backend; /* its lock_clear() frees nothing: no store part */
    atomic_fetch_add(&client->live_handles, 1); /* dlock__lock_destroy() takes it back */
    set->opts = first->opts;
    set->opts.flags &= ~(unsigned)DLOCK_AUTO_RENEW;
    set->name = joined;
    set->name_len = strlen(joined);
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&set->mu, NULL));
    dlock__cond_init_monotonic(&set->cond);
    set->holder_ttl_ms = -1;
    set->cancel_fd[0] = set->cancel_fd[1] = -1;
    set->token = set->token_inline;
    set->set = s;
    return set;
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
    const char **sorted = NULL;
    char *joined = NULL;
    int rc = sort_names(names, n_names, &sorted, &joined);
    if (rc != DLOCK_OK)
        return rc;
    struct dlock__set *s = dlock__calloc(1, sizeof *s + n_names * sizeof s->names[0]);
    rc = s ? DLOCK_OK : DLOCK_ENOMEM;
    /* The first name checks the options; the others get its copy, without
     * the caller's on_lost: a name's loss reaches the set (its watch). */
    dlock_lock_options name_opts;
    for (size_t i = 0; rc == DLOCK_OK && i < n_names; i++) {
        rc = dlock__lock_create(&s->names[i], client, sorted[i], i ? &name_opts : opts, 0);
        if (rc != DLOCK_OK)
            break;
        s->n++;
        if (i == 0) {
            name_opts = s->names[0]->opts;
            name_opts.on_lost = NULL;
            name_opts.on_lost_arg = NULL;
        }
        if (!client->backend->sets)
            rc = DLOCK_ENOTSUP; /* not on etcd (docs/primitives.md) */
    }
    dlock_lock *set = rc == DLOCK_OK ? set_handle(client, joined, s->names[0], s) : NULL;
    if (rc == DLOCK_OK && !set)
        rc = DLOCK_ENOMEM;
    if (rc == DLOCK_OK) {
        for (size_t i = 0; i < s->n; i++) {
            s->names[i]->opts.on_lost = NULL;
            s->names[i]->opts.on_lost_arg = NULL;
            s->names[i]->watch = (dlock__watch){name_moved, set};
        }
    } else {
        for (size_t i = 0; s && i < s->n; i++)
            dlock__lock_destroy(s->names[i]);
        dlock__free(s);
        if (!set)
            dlock__free(joined);
    }
    dlock__free(sorted);
    *out = set;
    return rc;
}
