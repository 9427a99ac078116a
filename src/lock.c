/* SPDX-License-Identifier: BSD-3-Clause */
/* The lock handle: acquire (try once or wait), release, extend, adopt.
 *
 * One code path serves one node and N nodes: every Redis step is a fan-out
 * (fanout.c) of one script to all nodes, and the outcome is decided by
 * majority (a majority of one is that node). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "error.h"
#include "fanout.h"
#include "lock.h"
#include "rand.h"
#include "scripts.h"
#include "wakeup.h"
#include "watchdog.h"

#define KNOWN_FLAGS (DLOCK_REENTRANT | DLOCK_AUTO_RENEW | DLOCK_FAIR | DLOCK_NO_FENCE)
#define WAKE_PREFIX "dlock:wake:"
/* How long a release or extend that a majority decided still listens for
 * the other nodes (see dlock__fanout_opts.grace_ms). */
#define DECIDED_GRACE_MS 100

int dlock_lock_options_init(dlock_lock_options *opts, unsigned int version)
{
    if (!opts || version != DLOCK_LOCK_OPTIONS_VERSION)
        return DLOCK_EINVAL;
    dlock_lock_options d = DLOCK_LOCK_OPTIONS_INIT;
    *opts = d;
    return DLOCK_OK;
}

char *dlock__derived_key(const char *key, size_t len, const char *kind,
                         size_t kind_len, size_t *out_len)
{
    /* KEY NUL KIND (docs/design.md, "Key layout"). A lock key comes from C
     * strings and never holds a NUL byte, so no lock key is ever a helper
     * key, and the first NUL tells which lock a helper key belongs to: the
     * mapping is injective. The helper starts with the lock key, so an ACL
     * key pattern or a prefix that covers the lock covers its helpers, and
     * as KIND has no brace it shares the lock key's {hash tag}, if any. */
    size_t n = len + 1 + kind_len;
    char *k = dlock__malloc(n + 1);
    if (!k)
        return NULL;
    memcpy(k, key, len);
    k[len] = '\0';
    memcpy(k + len + 1, kind, kind_len);
    k[n] = '\0';
    *out_len = n;
    return k;
}

char *dlock__fence_key(const char *key, size_t len, size_t *out_len)
{
    return dlock__derived_key(key, len, "fence", 5, out_len);
}

char *dlock__lock_key(const dlock_client *client, const char *name, size_t len,
                      size_t *out_len)
{
    const char *pfx = client->opts.key_prefix ? client->opts.key_prefix : "";
    size_t plen = strlen(pfx);
    char *k = dlock__malloc(plen + len + 1);
    if (!k)
        return NULL;
    memcpy(k, pfx, plen);
    memcpy(k + plen, name, len);
    k[plen + len] = '\0';
    *out_len = plen + len;
    return k;
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
    dlock_lock_options defaults = DLOCK_LOCK_OPTIONS_INIT;
    if (out)
        *out = NULL;
    if (!out || !client || !name || dlock__client_forked(client))
        return DLOCK_EINVAL;
    size_t len = strnlen(name, DLOCK_NAME_MAX + 1);
    if (len == 0 || len > DLOCK_NAME_MAX)
        return DLOCK_EINVAL;
    if (!opts)
        opts = &defaults;
    if (opts->version != DLOCK_LOCK_OPTIONS_VERSION || opts->ttl_ms <= 0 ||
        opts->ttl_ms > DLOCK_TTL_MAX_MS || (opts->flags & ~(unsigned)KNOWN_FLAGS) ||
        opts->renew_interval_ms < 0 || opts->renew_interval_ms >= opts->ttl_ms ||
        opts->retry_min_ms < 1 || opts->retry_min_ms > 60000 ||
        opts->retry_max_ms < opts->retry_min_ms || opts->retry_max_ms > 60000)
        return DLOCK_EINVAL;
    /* Fair mode keeps its queue in one node's memory; a queue shared by
     * independent masters would need an agreement protocol of its own
     * (docs/waiting.md). Fair counted locks are not offered either. */
    if ((opts->flags & DLOCK_FAIR) &&
        (client->n_nodes > 1 || (opts->flags & DLOCK_REENTRANT)))
        return DLOCK_ENOTSUP;

    dlock_lock *l = dlock__calloc(1, sizeof *l);
    if (!l)
        return DLOCK_ENOMEM;
    l->client = client;
    l->opts = *opts;
    l->ttl_s_len = (size_t)snprintf(l->ttl_s, sizeof l->ttl_s, "%" PRId64, opts->ttl_ms);
    /* l->name is the Redis key: the client's key_prefix + the name. */
    l->name = dlock__lock_key(client, name, len, &l->name_len);
    l->prefix_len = l->name ? l->name_len - len : 0;
    l->channel_len = sizeof WAKE_PREFIX - 1 + l->name_len;
    l->channel = dlock__malloc(l->channel_len + 1);
    int ok = l->name && l->channel;
    if (ok && !(opts->flags & DLOCK_NO_FENCE))
        ok = (l->fence_key = dlock__fence_key(l->name, l->name_len, &l->fence_len)) != NULL;
    if (ok && (opts->flags & DLOCK_FAIR)) {
        l->queue_key = dlock__derived_key(l->name, l->name_len, "q", 1, &l->queue_len);
        l->live_prefix = dlock__derived_key(l->name, l->name_len, "w\0", 2, &l->live_prefix_len);
        ok = l->queue_key && l->live_prefix;
    }
    if (!ok) {
        dlock__free(l->name);
        dlock__free(l->channel);
        dlock__free(l->fence_key);
        dlock__free(l->queue_key);
        dlock__free(l->live_prefix);
        dlock__free(l);
        return DLOCK_ENOMEM;
    }
    memcpy(l->channel, WAKE_PREFIX, sizeof WAKE_PREFIX - 1);
    memcpy(l->channel + sizeof WAKE_PREFIX - 1, l->name, l->name_len + 1);
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&l->mu, NULL));
    dlock__cond_init_monotonic(&l->cond);
    l->holder_ttl_ms = -1;
    l->cancel_fd[0] = l->cancel_fd[1] = -1;
    static _Atomic unsigned long long next_hid = 1;
    l->hid_len = (size_t)snprintf(l->hid, sizeof l->hid, "%llx", atomic_fetch_add(&next_hid, 1));
    l->renew_ttl_ms = opts->ttl_ms;
    l->token = l->token_inline;
    *out = l;
    return DLOCK_OK;
}

static void set_state(dlock_lock *l, dlock_lock_state st, int64_t valid_until)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    l->state = st;
    l->valid_until_ns = valid_until;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
}

static dlock_lock_state get_state(dlock_lock *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    dlock_lock_state st = l->state;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return st;
}

int dlock__lock_mark_lost(dlock_lock *l)
{
    int was_held;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    was_held = l->state == DLOCK_STATE_HELD;
    if (was_held)
        l->state = DLOCK_STATE_LOST;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return was_held;
}

static int is_reentrant(const dlock_lock *l)
{
    return (l->opts.flags & DLOCK_REENTRANT) != 0;
}

/* The drift allowance of the Redlock algorithm: clocks of the nodes and of
 * this client may run at slightly different rates during one TTL, so the
 * validity is shortened by ttl * drift_factor plus 2 ms (for the granularity
 * of Redis' expiry). With one node there is one clock (the server's) and
 * the expiry is checked against it directly: no allowance. */
static int64_t drift_ns(const dlock_lock *l, int64_t ttl_ms)
{
    if (l->client->n_nodes == 1)
        return 0;
    return (int64_t)((double)ttl_ms * l->client->opts.drift_factor * 1e6) +
           2 * DLOCK__NS_PER_MS;
}

static int64_t node_timeout_ms(const dlock_lock *l, int64_t ttl_ms)
{
    int64_t io = l->client->opts.io_timeout_ms;
    if (l->client->n_nodes == 1)
        return io;
    /* Redlock: a node that answers after a good part of the TTL is gone is
     * not worth waiting for. */
    return DLOCK__MIN(io, DLOCK__MAX(1, ttl_ms / 10));
}

/* Point the token back at the inline buffer (dropping a long adopted one). */
static void inline_token(dlock_lock *l)
{
    if (l->token != l->token_inline) {
        dlock__free(l->token);
        l->token = l->token_inline;
    }
}

/* Owner id of the calling thread for reentrant locks. */
static _Atomic unsigned long next_thread_no = 1;
static _Thread_local unsigned long thread_no;

/* Reentrant operations (acquire attempts and releases) are numbered per
 * thread, hence per owner (client x thread): the scripts record the
 * newest number, so an undo names the attempt it takes back (never
 * another handle's hold of the same owner), and a release whose reply was
 * lost can be sent again without dropping two holds. */
static _Thread_local uint64_t attempt_no;

static void make_owner_id(dlock_lock *l)
{
    if (thread_no == 0)
        thread_no = atomic_fetch_add(&next_thread_no, 1);
    inline_token(l);
    l->token_len = (size_t)snprintf(l->token, sizeof l->token_inline, "%s:%lu",
                                    l->client->id, thread_no);
}

/* ---- tallying one fan-out by majority ----------------------------------- */

enum { V_NONE, V_YES, V_NO, V_ERR };

typedef struct tally {
    dlock_lock *lock;
    size_t n, quorum;
    size_t yes, no, err;
    uint8_t vote[DLOCK__MAX_NODES];
    uint8_t maybe_ours[DLOCK__MAX_NODES]; /* may hold our token now */
    int node_err[DLOCK__MAX_NODES];
    int64_t min_pttl;   /* among "taken" answers */
    uint64_t holder[DLOCK__MAX_NODES]; /* hash of the holder a "taken" answer
                                          named (0: not named) */
    uint64_t max_fence; /* among grants */
    size_t at_max;      /* grants whose counter returned max_fence */
    long long count;    /* reentrant hold count from a grant */
    int all_err;        /* the error code if every failure had the same */
    int fatal_err;      /* some node failed in a way waiting cannot mend */
    int other_owner;    /* release/extend: some node had another token */
    int quiet;          /* add nothing to the handle's detail message */
    int gone;           /* release/extend: some node had no key */
    int kind;           /* which script */
    int same_server;    /* two nodes turned out to be one server */
} tally;

static void tally_init(tally *t, dlock_lock *l, int kind)
{
    memset(t, 0, sizeof *t);
    t->lock = l;
    t->n = l->client->n_nodes;
    t->quorum = l->client->quorum;
    t->min_pttl = -1;
    t->kind = kind;
}

static void note_error(tally *t, size_t node, int code, const char *detail)
{
    t->err++;
    t->vote[node] = V_ERR;
    t->node_err[node] = code;
    t->all_err = (t->err == 1 || t->all_err == code) ? code : DLOCK_ENOQUORUM;
    /* Unreachable, busy or silent nodes may come back while we wait;
     * refusals, bad credentials and wrong types will not. */
    if (code != DLOCK_EIO && code != DLOCK_EBUSY && code != DLOCK_EUNKNOWN)
        t->fatal_err = 1;
    if (t->quiet)
        return;
    /* The node and what it said; the code's own text only when there is
     * nothing more specific (callers print dlock_strerror() themselves). */
    dlock__err_append(&t->lock->err, "%s: %.200s", t->lock->client->nodes[node].name,
                      detail && *detail ? detail : dlock_strerror(code));
}

/* A round is decided when a majority said yes, or "no" (held by another),
 * or failed. A mix of "no" and failures is not: the nodes still to answer
 * tell a busy lock (DLOCK_ENOTACQUIRED, wait for the release) from a
 * majority out of reach (DLOCK_ENOQUORUM), so they are waited for (up to
 * the per-node timeout). Stopping there made one dead node of three plus a
 * held lock read as "no quorum" (issue 15). */
static int decided(const tally *t)
{
    size_t minority = t->n - t->quorum;
    return t->yes >= t->quorum || t->no > minority || t->err > minority;
}

/* FNV-1a of a holder's token: tells "the same owner on a majority" from
 * a split vote without keeping the tokens. Never 0 (0 = not named). */
static uint64_t holder_hash(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ? h : 1;
}

/* Most "taken" answers that named one and the same holder. */
static size_t max_same_holder(const tally *t)
{
    size_t best = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (!t->holder[i])
            continue;
        size_t k = 0;
        for (size_t j = 0; j < t->n; j++)
            k += t->holder[j] == t->holder[i];
        if (k > best)
            best = k;
    }
    return best;
}

static int64_t int_elem(const redisReply *r, size_t i, int *ok)
{
    if (r->type != REDIS_REPLY_ARRAY || i >= r->elements ||
        r->element[i]->type != REDIS_REPLY_INTEGER) {
        *ok = 0;
        return 0;
    }
    return r->element[i]->integer;
}

/* Restart rule: a node that restarted less than min_node_uptime_ms ago may
 * have forgotten locks it granted before (no persistence), so its vote does
 * not count. */
static int vote_counts(tally *t, size_t node, int64_t start_ns)
{
    int64_t min_up = t->lock->client->opts.min_node_uptime_ms;
    if (min_up <= 0)
        return 1;
    if (start_ns == 0) {
        dlock__err_append(&t->lock->err, "%s: uptime unknown (INFO refused?); vote not counted",
                          t->lock->client->nodes[node].name);
        return 0;
    }
    int64_t up_ms = (dlock__now_ns() - start_ns) / DLOCK__NS_PER_MS;
    if (up_ms >= min_up)
        return 1;
    dlock__err_append(&t->lock->err, "%s: restarted %" PRId64 " ms ago (< %" PRId64
                      " ms); vote not counted", t->lock->client->nodes[node].name, up_ms, min_up);
    return 0;
}

static int acquire_cb(void *arg, size_t node, uint32_t idx, int err,
                      const redisReply *r, const char *detail, int64_t start_ns)
{
    tally *t = arg;
    (void)idx;
    if (err < 0) {
        /* Sent but unanswered: the key may be ours there. */
        t->maybe_ours[node] = err == DLOCK_EUNKNOWN;
        note_error(t, node, err, detail);
    } else if (r->type == REDIS_REPLY_ERROR) {
        note_error(t, node, dlock__map_redis_error(r->str, r->len), r->str);
    } else {
        int ok = 1;
        int64_t granted = int_elem(r, 0, &ok), v = int_elem(r, 1, &ok);
        if (!ok) {
            note_error(t, node, DLOCK_EPROTO, "acquire script gave an unexpected reply");
        } else if (granted == 1) {
            t->maybe_ours[node] = 1;
            char msg[8];
            if (t->n > 1 && dlock__client_check_distinct(t->lock->client, msg, sizeof msg)) {
                /* Its vote may be a second one from one server. */
                t->same_server = 1;
                return 1;
            }
            if (vote_counts(t, node, start_ns)) {
                t->yes++;
                t->vote[node] = V_YES;
                if ((uint64_t)v > t->max_fence) {
                    t->max_fence = (uint64_t)v;
                    t->at_max = 0;
                }
                if ((uint64_t)v == t->max_fence)
                    t->at_max++;
                if (r->elements > 2)
                    t->count = int_elem(r, 2, &ok);
            } else {
                t->err++;
                t->vote[node] = V_ERR;
                t->node_err[node] = DLOCK_EBUSY;
                t->all_err = (t->err == 1 || t->all_err == DLOCK_EBUSY) ? DLOCK_EBUSY : DLOCK_ENOQUORUM;
            }
        } else {
            t->no++;
            t->vote[node] = V_NO;
            if (v >= 0 && (t->min_pttl < 0 || v < t->min_pttl))
                t->min_pttl = v;
            if (r->elements > 2 && r->element[2]->type == REDIS_REPLY_STRING)
                t->holder[node] = holder_hash(r->element[2]->str, r->element[2]->len);
        }
    }
    return decided(t);
}

/* Release or extend replies: 1 done, 0 gone, -1 another owner; reentrant
 * release gives {code, holds left}. */
static int release_cb(void *arg, size_t node, uint32_t idx, int err,
                      const redisReply *r, const char *detail, int64_t start_ns)
{
    tally *t = arg;
    (void)idx;
    (void)start_ns;
    if (err < 0) {
        note_error(t, node, err, detail);
        return 0;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        note_error(t, node, dlock__map_redis_error(r->str, r->len), r->str);
        return 0;
    }
    long long code;
    int ok = 1;
    if (r->type == REDIS_REPLY_INTEGER) {
        code = r->integer;
        if (code == 2) /* fair release: released and handed over */
            code = 1;
    } else {
        code = int_elem(r, 0, &ok);
        if (ok && code == 1)
            t->count = int_elem(r, 1, &ok);
    }
    if (!ok || code < -1 || code > 1) {
        note_error(t, node, DLOCK_EPROTO, "unexpected reply");
    } else if (code == 1) {
        t->yes++;
        t->vote[node] = V_YES;
    } else {
        t->no++;
        t->vote[node] = V_NO;
        if (code == 0) {
            t->gone++;
            if (!t->quiet)
                dlock__err_append(&t->lock->err, "%s: key gone", t->lock->client->nodes[node].name);
        } else {
            t->other_owner++;
            if (!t->quiet)
                dlock__err_append(&t->lock->err, "%s: held by another owner",
                              t->lock->client->nodes[node].name);
        }
    }
    /* Release and extend decide at a majority either way; the fan-out's
     * grace lets the other nodes that answer at once be heard too, but a
     * silent node does not hold the caller up (issue 15). */
    return decided(t);
}

/* The code for a fan-out that did not reach a majority of successes. */
static int failure_code(const tally *t)
{
    if (t->n == 1)
        return t->err ? t->all_err : DLOCK_EPROTO;
    return DLOCK_ENOQUORUM;
}

static int is_fair(const dlock_lock *l)
{
    return (l->opts.flags & DLOCK_FAIR) != 0;
}

/* Send the release script for our current token to the nodes in `mask`
 * (all if NULL), waiting up to timeout_ms per node, and fill t. An undo
 * (of an attempt's partial grant) adds nothing to the detail message and
 * publishes no wake-up: it frees only keys of this attempt, which no waiter
 * counts on, and its message would wake this very waiter (and every other)
 * into another attempt and another undo: a storm while the lock is held on
 * a majority but not on every node (issue 15). */
static void send_release(dlock_lock *l, const uint8_t *mask, int64_t timeout_ms, int undo,
                         tally *t)
{
    const char *args[7];
    size_t lens[7];
    char rel_seq[24], rel_n[16];
    dlock__req req;
    int wake = !undo && (l->client->opts.wakeups || is_fair(l));
    if (is_fair(l)) {
        /* KEYS lock, queue[, fence]; ARGV token, channel, liveness prefix */
        int k = 0;
        args[k] = l->name, lens[k++] = l->name_len;
        args[k] = l->queue_key, lens[k++] = l->queue_len;
        if (l->fence_key)
            args[k] = l->fence_key, lens[k++] = l->fence_len;
        int nkeys = k;
        args[k] = l->token, lens[k++] = l->token_len;
        args[k] = l->channel, lens[k++] = l->channel_len;
        args[k] = l->live_prefix, lens[k++] = l->live_prefix_len;
        req = (dlock__req){dlock__script_get(DLOCK__S_FAIR_RELEASE), nkeys, k, args, lens};
    } else {
        args[0] = l->name, lens[0] = l->name_len;
        args[1] = l->token, lens[1] = l->token_len;
        args[2] = wake ? l->channel : "", lens[2] = wake ? l->channel_len : 0;
        args[3] = l->ttl_s, lens[3] = l->ttl_s_len;
        if (is_reentrant(l)) {
            args[4] = rel_seq, lens[4] = (size_t)snprintf(rel_seq, sizeof rel_seq, "%" PRIu64,
                                                            l->rel_seq);
            args[5] = rel_n, lens[5] = (size_t)snprintf(rel_n, sizeof rel_n, "%u", l->rel_n);
            args[6] = l->hid, lens[6] = l->hid_len;
        }
        req = (dlock__req){dlock__script_get(is_reentrant(l) ? DLOCK__S_RRELEASE : DLOCK__S_RELEASE),
                           1, is_reentrant(l) ? 7 : 3, args, lens};
    }
    dlock__fanout_opts fo = {timeout_ms, INT64_MAX, mask, DECIDED_GRACE_MS};
    tally_init(t, l, DLOCK__S_RELEASE);
    t->quiet = undo;
    if (dlock__fanout(l->client, &req, 1, &fo, release_cb, t) != DLOCK_OK)
        note_error(t, 0, DLOCK_ENOMEM, "");
}

/* Reentrant mode: note which nodes have not answered the release just
 * sent (an error or no reply: it may not have run there). */
static void note_release_pending(dlock_lock *l, const tally *t, const uint8_t *mask)
{
    l->rel_pending = 0;
    for (size_t i = 0; i < t->n; i++) {
        l->rel_nodes[i] = (!mask || mask[i]) && t->vote[i] != V_YES && t->vote[i] != V_NO;
        l->rel_pending |= l->rel_nodes[i];
    }
}

/* Send the pending release again (same number: applied at most once),
 * then the holds dropped after it failed. Returns 1 while some node has
 * not answered. */
static int flush_release(dlock_lock *l, int64_t timeout_ms)
{
    while (l->rel_pending) {
        uint8_t mask[DLOCK__MAX_NODES];
        memcpy(mask, l->rel_nodes, sizeof mask);
        tally t;
        send_release(l, mask, timeout_ms, 1, &t);
        note_release_pending(l, &t, mask);
        if (l->rel_pending)
            return 1;
        if (l->rel_extra) {
            l->rel_seq = ++attempt_no;
            l->rel_n = l->rel_extra;
            l->rel_extra = 0;
            memset(l->rel_nodes, 1, sizeof l->rel_nodes);
            l->rel_pending = 1;
        }
    }
    return 0;
}

static int fence_cb(void *arg, size_t node, uint32_t idx, int err,
                    const redisReply *r, const char *detail, int64_t start_ns)
{
    tally *t = arg;
    (void)idx;
    (void)start_ns;
    if (err < 0)
        note_error(t, node, err, detail);
    else if (r->type == REDIS_REPLY_ERROR)
        note_error(t, node, dlock__map_redis_error(r->str, r->len), r->str);
    else if (r->type == REDIS_REPLY_INTEGER && (uint64_t)r->integer >= t->max_fence)
        t->yes++;
    else
        note_error(t, node, DLOCK_EPROTO, "fence_sync gave an unexpected reply");
    return decided(t);
}

/* Redlock fencing: raise the counter to `fence` on a majority before the
 * grant is reported, so every later majority sees at least this value
 * (docs/fencing.md). */
static int sync_fence(dlock_lock *l, uint64_t fence, int64_t deadline_ns)
{
    char v[24];
    snprintf(v, sizeof v, "%" PRIu64, fence);
    const char *args[2] = {l->fence_key, v};
    size_t lens[2] = {l->fence_len, strlen(v)};
    dlock__req req = {dlock__script_get(DLOCK__S_FENCE_SYNC), 1, 2, args, lens};
    dlock__fanout_opts fo = {node_timeout_ms(l, l->opts.ttl_ms), deadline_ns, NULL, 0};
    tally t;
    tally_init(&t, l, DLOCK__S_FENCE_SYNC);
    t.max_fence = fence;
    if (dlock__fanout(l->client, &req, 1, &fo, fence_cb, &t) != DLOCK_OK)
        return DLOCK_ENOMEM;
    return t.yes >= t.quorum ? DLOCK_OK : DLOCK_ENOQUORUM;
}


static int undo_cb(void *arg, size_t node, uint32_t idx, int err,
                   const redisReply *r, const char *detail, int64_t start_ns)
{
    uint8_t *left = arg;
    (void)idx;
    (void)detail;
    (void)start_ns;
    /* 1 (taken back) or 0 (nothing to take back) settle the attempt there;
     * no answer or an error leaves it pending. */
    if (err == DLOCK_OK && r->type == REDIS_REPLY_INTEGER)
        left[node] = 0;
    return 0;
}

/* Send reentrant_undo.lua for the pending attempt to the nodes that have
 * not answered it yet. Returns 1 while some node still has not. */
static int send_undo(dlock_lock *l, int64_t timeout_ms)
{
    char seq[24];
    int wake = l->client->opts.wakeups;
    snprintf(seq, sizeof seq, "%" PRIu64, l->undo_seq);
    const char *args[5] = {l->name, l->token, seq, wake ? l->channel : "", l->hid};
    size_t lens[5] = {l->name_len, l->token_len, strlen(seq), wake ? l->channel_len : 0,
                      l->hid_len};
    dlock__req req = {dlock__script_get(DLOCK__S_RUNDO), 1, 5, args, lens};
    uint8_t mask[DLOCK__MAX_NODES];
    memcpy(mask, l->undo_nodes, sizeof mask);
    dlock__fanout_opts fo = {timeout_ms, INT64_MAX, mask, 0};
    (void)dlock__fanout(l->client, &req, 1, &fo, undo_cb, l->undo_nodes);
    l->undo_pending = 0;
    for (size_t i = 0; i < l->client->n_nodes; i++)
        l->undo_pending |= l->undo_nodes[i];
    return l->undo_pending;
}

/* The cancel that stopped a round trip in flight is used up. */
static void take_cancel(dlock_lock *l)
{
    char b[16];
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    l->canceled = 0;
    while (l->cancel_fd[0] >= 0 && read(l->cancel_fd[0], b, sizeof b) > 0)
        ;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
}

/* A cancel stopped an acquire attempt in flight: queue its undo behind it
 * on the very connections that carry it, so the node runs the undo right
 * after the attempt whenever it gets to them, and return without waiting
 * for either (issue 22 item 8). */
static void cancel_behind(dlock_lock *l, dlock__conn **kept, uint64_t seq_no, tally *t)
{
    int wake = l->client->opts.wakeups;
    char seq[24];
    const char *args[5];
    size_t lens[5];
    dlock__req req;
    take_cancel(l);
    if (is_reentrant(l)) {
        snprintf(seq, sizeof seq, "%" PRIu64, seq_no);
        args[0] = l->name, lens[0] = l->name_len;
        args[1] = l->token, lens[1] = l->token_len;
        args[2] = seq, lens[2] = strlen(seq);
        args[3] = wake ? l->channel : "", lens[3] = wake ? l->channel_len : 0;
        args[4] = l->hid, lens[4] = l->hid_len;
        req = (dlock__req){dlock__script_get(DLOCK__S_RUNDO), 1, 5, args, lens};
        l->in_doubt = 1;
        /* The queued undo's answer is never read: the next attempt sends
         * it again (a no-op if it ran) before anything else. */
        l->undo_seq = seq_no;
        for (size_t i = 0; i < t->n; i++)
            l->undo_nodes[i] = t->maybe_ours[i] || t->vote[i] == V_NONE || t->node_err[i] != 0;
        l->undo_pending = 1;
    } else {
        args[0] = l->name, lens[0] = l->name_len;
        args[1] = l->token, lens[1] = l->token_len;
        args[2] = wake ? l->channel : "", lens[2] = wake ? l->channel_len : 0;
        req = (dlock__req){dlock__script_get(DLOCK__S_RELEASE), 1, 3, args, lens};
    }
    dlock__fanout_send_behind(l->client, kept, &req, 1);
    dlock__err_set(&l->err, "cancelled while an attempt on \"%s\" was in flight (its undo is "
                   "queued behind it)", l->name);
}

/* One attempt. *retry is set when waiting longer could help. */
static int attempt(dlock_lock *l, int *retry)
{
    int reentrant = is_reentrant(l);
    int fresh = !reentrant || l->holds == 0;
    int64_t ttl = l->opts.ttl_ms;
    tally t;
    char seq[24];

    *retry = 0;
    if (!reentrant && l->rel_pending) {
        /* The last release's outcome was unknown: send it again with its
         * token (compare-and-delete: harmless if it ran) before the token
         * changes; if the node still does not answer, the key ends with
         * its TTL, as before. */
        flush_release(l, node_timeout_ms(l, l->opts.ttl_ms));
        l->rel_pending = 0;
    }
    if (reentrant && l->rel_pending && flush_release(l, node_timeout_ms(l, l->opts.ttl_ms))) {
        /* A newer operation would make the old release's resend look
         * stale: none before the node answered it. */
        dlock__err_set(&l->err, "an earlier release of \"%s\" has an unknown outcome and "
                       "is not answered yet", l->name);
        *retry = 1;
        return DLOCK_EUNKNOWN;
    }
    if (reentrant && l->undo_pending &&
        send_undo(l, node_timeout_ms(l, l->opts.ttl_ms))) {
        /* A newer attempt could run before the old one's undo and leave
         * the undo nothing it may take back: no new attempt until the
         * nodes answered the undo. */
        dlock__err_set(&l->err, "an earlier attempt on \"%s\" has an unknown outcome and "
                       "its undo is not answered yet", l->name);
        *retry = 1;
        return DLOCK_EUNKNOWN;
    }
    if (reentrant) {
        /* A re-entry through this handle keeps the owner id it holds with. */
        if (fresh)
            make_owner_id(l);
    } else {
        inline_token(l);
        int rc = dlock__token_hex(l->token);
        if (rc != DLOCK_OK) {
            dlock__err_set(&l->err, "getrandom failed");
            return rc;
        }
        l->token_len = DLOCK_TOKEN_HEX_LEN;
    }
    const char *args[6];
    size_t lens[6];
    int nkeys = 0, nargs;
    args[nkeys] = l->name;
    lens[nkeys++] = l->name_len;
    if (l->fence_key) {
        args[nkeys] = l->fence_key;
        lens[nkeys++] = l->fence_len;
    }
    nargs = nkeys;
    args[nargs] = l->token;
    lens[nargs++] = l->token_len;
    args[nargs] = l->ttl_s;
    lens[nargs++] = l->ttl_s_len;
    uint64_t seq_no = 0;
    if (reentrant) {
        seq_no = ++attempt_no;
        args[nargs] = seq;
        lens[nargs++] = (size_t)snprintf(seq, sizeof seq, "%" PRIu64, seq_no);
        args[nargs] = l->hid;
        lens[nargs++] = l->hid_len;
        l->touched = 1;
    }
    dlock__req req = {dlock__script_get(reentrant ? DLOCK__S_RACQUIRE : DLOCK__S_ACQUIRE),
                      nkeys, nargs, args, lens};
    tally_init(&t, l, DLOCK__S_ACQUIRE);
    dlock__err_clear(&l->err);

    /* Validity is counted from before the first byte is sent. */
    int64_t t0 = dlock__now_ns();
    int64_t lease_end = t0 + ttl * DLOCK__NS_PER_MS - drift_ns(l, ttl);
    dlock__fanout_opts fo = {node_timeout_ms(l, ttl), lease_end, NULL, 0};
    dlock__conn *kept[DLOCK__MAX_NODES] = {0};
    int frc = dlock__fanout_cancellable(l->client, &req, 1, &fo, l->cancel_fd[0], kept,
                                        acquire_cb, &t);
    if (frc == DLOCK_ECANCELED) {
        cancel_behind(l, kept, seq_no, &t);
        return DLOCK_ECANCELED;
    }
    if (frc != DLOCK_OK) {
        dlock__err_set(&l->err, "out of memory");
        return DLOCK_ENOMEM;
    }
    l->holder_ttl_ms = t.min_pttl;
    /* A split vote: this attempt won some nodes and no other owner was
     * seen on a majority, so nobody may hold the lock and nobody will
     * publish a release; the waiter retries after a short random backoff
     * rather than the holder's TTL. */
    l->split_vote = t.yes > 0 && max_same_holder(&t) < t.quorum;

    int rc = DLOCK_OK;
    char same[300];
    if (t.same_server || (l->client->n_nodes > 1 &&
                          dlock__client_check_distinct(l->client, same, sizeof same) != DLOCK_OK)) {
        dlock__client_check_distinct(l->client, same, sizeof same);
        /* Two URLs reach one server (its run_id, learned on connecting):
         * its votes counted twice. Nothing here is a grant; undo all. */
        dlock__err_set(&l->err, "%s", same);
        rc = DLOCK_EINVAL;
        for (size_t i = 0; i < t.n; i++)
            t.maybe_ours[i] = 1;
    } else if (t.yes >= t.quorum && dlock__now_ns() < lease_end) {
        uint64_t fence = t.max_fence;
        /* A re-entry that found the key gone made a new hold (count 1):
         * the earlier holds ended with the lease, and this is a new grant
         * with a new fencing token. */
        if (reentrant && !fresh && t.count == 1) {
            fresh = 1;
            l->holds = 0;
        }
        if (reentrant && t.count == 1 && !l->undo_pending && !l->rel_pending)
            l->in_doubt = 0; /* a new key: none of our old operations is in it */
        /* The write-back only has to leave a majority with a counter >=
         * fence; when a majority returned fence itself (counters in step,
         * the usual case) that is already so, and the round trip is
         * skipped (docs/fencing.md). */
        if (l->client->n_nodes > 1 && l->fence_key && fresh && t.at_max < t.quorum)
            rc = sync_fence(l, fence, lease_end);
        if (rc == DLOCK_OK && dlock__now_ns() < lease_end) {
            if (fresh)
                l->fence = fence;
            l->holds = reentrant ? l->holds + 1 : 1;
            set_state(l, DLOCK_STATE_HELD, lease_end);
            dlock__err_clear(&l->err);
            return DLOCK_OK;
        }
        dlock__err_append(&l->err, "fencing token not confirmed by a majority in time");
        rc = DLOCK_ENOQUORUM;
        *retry = 1;
    } else if (t.yes >= t.quorum) {
        dlock__err_append(&l->err, "the lease ran out before a majority answered");
        rc = l->client->n_nodes > 1 ? DLOCK_ENOQUORUM : DLOCK_EUNKNOWN;
        *retry = 1;
    } else if (t.no > 0 && t.err <= t.n - t.quorum) {
        /* Some node said "held by another" and the failed or silent nodes
         * are a minority: a majority is there, the lock is busy or being
         * fought over. A missing vote is not a verdict; DLOCK_ENOQUORUM is
         * for when no majority can be reached at all (issue 15). */
        rc = DLOCK_ENOTACQUIRED;
        *retry = 1;
    } else {
        rc = failure_code(&t);
        *retry = !t.fatal_err;
    }

    /* Undo what this attempt may have taken: nodes that granted, answered
     * too late to count, or whose answer was lost. Nodes that were never
     * heard from (the fan-out stopped at a decision) may hold it too. */
    uint8_t mask[DLOCK__MAX_NODES] = {0};
    int any = 0;
    for (size_t i = 0; i < t.n; i++) {
        mask[i] = t.maybe_ours[i] || t.vote[i] == V_NONE;
        any |= mask[i];
    }
    if (any && reentrant) {
        /* Re-entries too: an unknown re-entry may have raised the count.
         * The undo names this attempt, so it takes back this attempt's
         * hold at most, never the one another handle of the same owner
         * (same owner id) holds. */
        l->undo_seq = seq_no;
        memcpy(l->undo_nodes, mask, sizeof l->undo_nodes);
        l->in_doubt = 1;
        send_undo(l, node_timeout_ms(l, l->opts.ttl_ms));
    } else if (any && fresh) {
        tally rt;
        send_release(l, mask, node_timeout_ms(l, l->opts.ttl_ms), 1, &rt);
    }
    if (rc == DLOCK_ENOTACQUIRED) {
        if (t.min_pttl >= 0)
            dlock__err_set(&l->err, "\"%s\" is held by another owner (ttl %.1fs)", l->name,
                           (double)t.min_pttl / 1000.0);
        else
            dlock__err_set(&l->err, "\"%s\" is held by another owner", l->name);
    }
    return rc;
}

/* Sleep until wake_at, a cancel, a release message (woken moves on), or a
 * hand-over to us. Returns 1 if cancelled (and clears the cancel). */
static int sleep_until(dlock_lock *l, unsigned woken, int64_t wake_at)
{
    struct timespec ts = dlock__timespec_of(wake_at);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    while (!l->canceled && !l->handed_over && l->woken == woken &&
           dlock__now_ns() < wake_at) {
        int w = pthread_cond_timedwait(&l->cond, &l->mu, &ts);
        if (w != 0 && w != ETIMEDOUT)
            DLOCK__CHECK_PTHREAD(w);
    }
    int canceled = l->canceled;
    l->canceled = 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return canceled;
}

static unsigned woken_now(dlock_lock *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    unsigned w = l->woken;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return w;
}

/* A waiter whose subscription broke without a message still gets a look
 * at least this often. */
#define SAFETY_POLL_MS 1000

static int acquire_wait(dlock_lock *l, int64_t wait_ms, int64_t deadline)
{
    int watching = 0;
    unsigned attempts = 0;
    int rc;
    for (;;) {
        unsigned woken = woken_now(l);
        int retry;
        rc = attempt(l, &retry);
        if (rc == DLOCK_OK || wait_ms == 0 || !retry)
            break;
        int64_t now = dlock__now_ns();
        if (now >= deadline) {
            if (rc == DLOCK_ENOTACQUIRED) {
                rc = DLOCK_ETIMEDOUT;
                dlock__err_append(&l->err, "gave up after %" PRId64 " ms", wait_ms);
            }
            break;
        }
        /* Subscribe before the next attempt, so that a release between
         * that attempt and the sleep still wakes us. */
        if (!watching && l->client->opts.wakeups && rc == DLOCK_ENOTACQUIRED) {
            watching = dlock__wakeup_watch(l->client, l) == DLOCK_OK;
            if (watching)
                continue;
        }
        int64_t sleep_ms;
        if (rc == DLOCK_ENOTACQUIRED && l->split_vote)
            sleep_ms = dlock__backoff_ms(attempts++, l->opts.retry_min_ms, l->opts.retry_max_ms);
        else if (watching && l->holder_ttl_ms >= 0)
            /* The release message comes first; the holder's expiry is the
             * latest we need to look (a crashed holder never publishes). */
            sleep_ms = DLOCK__MIN(l->holder_ttl_ms + 1, SAFETY_POLL_MS);
        else {
            sleep_ms = dlock__backoff_ms(attempts++, l->opts.retry_min_ms, l->opts.retry_max_ms);
            if (l->holder_ttl_ms >= 0 && l->holder_ttl_ms + 1 < sleep_ms)
                sleep_ms = l->holder_ttl_ms + 1;
        }
        if (sleep_until(l, woken, DLOCK__MIN(deadline, now + sleep_ms * DLOCK__NS_PER_MS))) {
            rc = DLOCK_ECANCELED;
            dlock__err_set(&l->err, "cancelled while waiting for \"%s\"", l->name);
            break;
        }
    }
    if (watching)
        dlock__wakeup_unwatch(l->client, l);
    return rc;
}

/* Fair mode: one fair_acquire.lua call per look; between looks the waiter
 * sleeps until the release script hands the lock to its token (then one
 * more call confirms the claim), a release message, the holder's expiry,
 * its liveness refresh, or the deadline. */
static int fair_call(dlock_lock *l, int script, const char *live_ttl,
                     int64_t *out_pttl, uint64_t *out_fence)
{
    const char *args[8];
    size_t lens[8];
    size_t me_len = l->live_prefix_len + l->token_len;
    char *me = dlock__malloc(me_len + 1);
    if (!me)
        return DLOCK_ENOMEM;
    memcpy(me, l->live_prefix, l->live_prefix_len);
    memcpy(me + l->live_prefix_len, l->token, l->token_len + 1);
    int k = 0;
    args[k] = l->name, lens[k++] = l->name_len;
    args[k] = l->queue_key, lens[k++] = l->queue_len;
    args[k] = me, lens[k++] = me_len;
    if (l->fence_key)
        args[k] = l->fence_key, lens[k++] = l->fence_len;
    int nkeys = k;
    args[k] = l->token, lens[k++] = l->token_len;
    args[k] = l->ttl_s, lens[k++] = l->ttl_s_len;
    if (script == DLOCK__S_FAIR_ACQUIRE) {
        args[k] = live_ttl, lens[k++] = strlen(live_ttl);
        args[k] = l->live_prefix, lens[k++] = l->live_prefix_len;
    }
    dlock__req req = {dlock__script_get((dlock__script_id)script), nkeys, k, args, lens};
    dlock__fanout_opts fo = {l->client->opts.io_timeout_ms, INT64_MAX, NULL, 0};
    tally t;
    tally_init(&t, l, DLOCK__S_ACQUIRE);
    dlock__err_clear(&l->err);
    dlock__conn *kept[DLOCK__MAX_NODES] = {0};
    int rc = dlock__fanout_cancellable(l->client, &req, 1, &fo,
                                       script == DLOCK__S_FAIR_ACQUIRE ? l->cancel_fd[0] : -1,
                                       kept, acquire_cb, &t);
    if (rc == DLOCK_ECANCELED) {
        /* Cancelled in flight: behind the call, on the same connection,
         * leave the line and release the lock if the call took it (handing
         * it on), without waiting for any of it (issue 22 item 8). */
        const char *rargs[6];
        size_t rlens[6];
        int rk = 0;
        rargs[rk] = l->name, rlens[rk++] = l->name_len;
        rargs[rk] = l->queue_key, rlens[rk++] = l->queue_len;
        if (l->fence_key)
            rargs[rk] = l->fence_key, rlens[rk++] = l->fence_len;
        int rnkeys = rk;
        rargs[rk] = l->token, rlens[rk++] = l->token_len;
        rargs[rk] = l->channel, rlens[rk++] = l->channel_len;
        rargs[rk] = l->live_prefix, rlens[rk++] = l->live_prefix_len;
        dlock__req undo[2] = {
            {dlock__script_get(DLOCK__S_FAIR_LEAVE), nkeys, nkeys + 2, args, lens},
            {dlock__script_get(DLOCK__S_FAIR_RELEASE), rnkeys, rk, rargs, rlens}};
        dlock__fanout_send_behind(l->client, kept, undo, 2);
        take_cancel(l);
        dlock__free(me);
        dlock__err_set(&l->err, "cancelled while waiting in line for \"%s\"", l->name);
        return DLOCK_ECANCELED;
    }
    dlock__free(me);
    if (rc != DLOCK_OK)
        return rc;
    if (t.yes) {
        *out_fence = t.max_fence;
        return DLOCK_OK;
    }
    if (t.no) {
        *out_pttl = t.min_pttl;
        return DLOCK_ENOTACQUIRED;
    }
    return failure_code(&t);
}

static void send_release(dlock_lock *l, const uint8_t *mask, int64_t timeout_ms, int quiet,
                         tally *t);

/* Fair mode, after an acquire whose last word from the node was lost: the
 * script may have run, leaving our token in the line or in the lock key
 * for the full TTL while the next waiter waits. Leave the line by our
 * token, and if the lock turns out to be ours, release it, which hands it
 * to the next live waiter. Returns 1 while the node has not answered (the
 * handle tries again on its next acquire or free). */
static int fair_cleanup(dlock_lock *l)
{
    int64_t dummy;
    uint64_t fence;
    dlock__errbuf keep = l->err; /* the caller's message stays */
    l->err = (dlock__errbuf){0};
    int rc = fair_call(l, DLOCK__S_FAIR_LEAVE, NULL, &dummy, &fence);
    if (rc == DLOCK_OK) {
        tally t;
        send_release(l, NULL, l->client->opts.io_timeout_ms, 1, &t);
        rc = t.err ? t.all_err : DLOCK_OK;
    }
    dlock__err_free(&l->err);
    l->err = keep;
    l->fair_cleanup_pending = rc == DLOCK_EUNKNOWN || rc == DLOCK_EIO || rc == DLOCK_EBUSY;
    return l->fair_cleanup_pending;
}

static int acquire_fair(dlock_lock *l, int64_t wait_ms, int64_t deadline)
{
    if (l->fair_cleanup_pending && fair_cleanup(l)) {
        dlock__err_set(&l->err, "an earlier acquire of \"%s\" has an unknown outcome and its "
                       "cleanup is not answered yet", l->name);
        return DLOCK_EUNKNOWN;
    }
    if (l->rel_pending) { /* as in attempt(): the old token's release again */
        flush_release(l, l->client->opts.io_timeout_ms);
        l->rel_pending = 0;
    }
    /* One token for the whole wait: it is our place in the line. */
    inline_token(l);
    int rc = dlock__token_hex(l->token);
    if (rc != DLOCK_OK)
        return rc;
    l->token_len = DLOCK_TOKEN_HEX_LEN;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    l->handed_over = 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));

    /* Refresh our place often enough that the liveness key (3 refreshes
     * long) never lapses while we wait. A hand-over gives us a claim lease
     * of the rest of that key's life plus one refresh; we confirm it with
     * the next fair_acquire.lua call, so a waiter that died lets the line
     * go on after at most 4 refresh periods (docs/waiting.md). */
    int64_t refresh_ms = DLOCK__MAX(50, DLOCK__MIN(1000, l->opts.ttl_ms / 4));
    char live_ttl[24];
    snprintf(live_ttl, sizeof live_ttl, "%" PRId64, wait_ms == 0 ? 0 : 3 * refresh_ms);
    int watching = 0;
    if (wait_ms != 0 && l->client->opts.wakeups)
        watching = dlock__wakeup_watch(l->client, l) == DLOCK_OK;

    uint64_t fence = 0;
    int leave_unknown = 0;
    for (;;) {
        unsigned woken = woken_now(l);
        int64_t t_sent = dlock__now_ns(), pttl = -1;
        rc = fair_call(l, DLOCK__S_FAIR_ACQUIRE, live_ttl, &pttl, &fence);
        if (rc == DLOCK_OK) {
            /* Taken now, or a hand-over confirmed: either way the script
             * set the full TTL after t_sent. */
            set_state(l, DLOCK_STATE_HELD, t_sent + l->opts.ttl_ms * DLOCK__NS_PER_MS);
            break;
        }
        /* A node that is down, busy or silent may come back before the
         * deadline (a restart): ride it out like a default-mode waiter;
         * the next look joins the line again if the restart emptied it. */
        if (rc != DLOCK_ENOTACQUIRED && rc != DLOCK_EBUSY && rc != DLOCK_EUNKNOWN &&
            !(rc == DLOCK_EIO && wait_ms != 0))
            break;
        l->holder_ttl_ms = pttl >= 0 ? pttl : -1;
        int64_t now = dlock__now_ns();
        int canceled = 0;
        if (wait_ms != 0 && now < deadline) {
            int64_t sleep_ms = refresh_ms;
            if (pttl >= 0)
                sleep_ms = DLOCK__MIN(sleep_ms, pttl + 1);
            canceled = sleep_until(l, woken, DLOCK__MIN(deadline, now + sleep_ms * DLOCK__NS_PER_MS));
            /* A hand-over message only makes us look (and confirm) now. */
            DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
            l->handed_over = 0;
            DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
            if (!canceled && dlock__now_ns() < deadline)
                continue;
        }
        if (wait_ms == 0)
            break;
        /* Deadline or cancel: leave the line, unless it was handed to us
         * (then fair_leave.lua confirms the claim). */
        int64_t dummy, t_leave = dlock__now_ns();
        int lrc = fair_call(l, DLOCK__S_FAIR_LEAVE, NULL, &dummy, &fence);
        leave_unknown = lrc == DLOCK_EUNKNOWN;
        if (lrc == DLOCK_OK) {
            set_state(l, DLOCK_STATE_HELD, t_leave + l->opts.ttl_ms * DLOCK__NS_PER_MS);
            rc = DLOCK_OK;
        } else {
            rc = canceled ? DLOCK_ECANCELED : (rc == DLOCK_ENOTACQUIRED ? DLOCK_ETIMEDOUT : rc);
            dlock__err_set(&l->err, canceled ? "cancelled while waiting in line for \"%s\""
                                             : "\"%s\": gave up waiting in line", l->name);
        }
        break;
    }
    if (watching)
        dlock__wakeup_unwatch(l->client, l);
    if (rc == DLOCK_EUNKNOWN || (rc != DLOCK_OK && leave_unknown)) {
        /* The outcome of the last call is unknown: clean up by our token
         * now rather than leave the next waiter a lock nobody holds for
         * the whole TTL (issue 15 item 7). */
        fair_cleanup(l);
    }
    if (rc == DLOCK_OK) {
        l->fence = fence;
        l->holds = 1;
        dlock__err_clear(&l->err);
    } else if (rc == DLOCK_ENOTACQUIRED) {
        dlock__err_set(&l->err, "\"%s\" is held by another owner", l->name);
        if (l->holder_ttl_ms >= 0)
            dlock__err_append(&l->err, "ttl %.1fs", (double)l->holder_ttl_ms / 1000.0);
    }
    return rc;
}

int dlock_lock_acquire(dlock_lock *l, int64_t wait_ms)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
    if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER) {
        dlock__err_set(&l->err, "wait_ms must be >= 0 or DLOCK_WAIT_FOREVER");
        return DLOCK_EINVAL;
    }
    dlock_lock_state st = get_state(l);
    if (st == DLOCK_STATE_LOST) {
        /* The loss was reported; the handle starts over. */
        dlock__watchdog_remove(l->client, l);
        l->holds = 0;
        set_state(l, DLOCK_STATE_UNLOCKED, 0);
    } else if (st == DLOCK_STATE_HELD && !is_reentrant(l)) {
        dlock__err_set(&l->err, "this handle already holds \"%s\"", l->name);
        return DLOCK_EINVAL;
    }
    if (wait_ms != 0) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
        int canceled = l->canceled;
        l->canceled = 0;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
        if (canceled) {
            dlock__err_set(&l->err, "cancelled");
            return DLOCK_ECANCELED;
        }
    }
    if ((l->opts.flags & DLOCK_AUTO_RENEW) && dlock__watchdog_start(l->client) != DLOCK_OK) {
        dlock__err_set(&l->err, "could not start the watchdog thread");
        return DLOCK_ENOMEM;
    }
    int64_t deadline = dlock__deadline_after_ms(wait_ms);
    int pfd[2] = {-1, -1};
    if (wait_ms != 0 && pipe(pfd) == 0) {
        /* Without it (out of descriptors) a cancel still ends the wait,
         * after the round trip in flight. */
        for (int i = 0; i < 2; i++) {
            (void)fcntl(pfd[i], F_SETFD, FD_CLOEXEC);
            (void)fcntl(pfd[i], F_SETFL, O_NONBLOCK);
        }
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
        l->cancel_fd[0] = pfd[0];
        l->cancel_fd[1] = pfd[1];
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    }
    int rc = is_fair(l) ? acquire_fair(l, wait_ms, deadline) : acquire_wait(l, wait_ms, deadline);
    if (pfd[0] >= 0) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
        l->cancel_fd[0] = l->cancel_fd[1] = -1;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
        close(pfd[0]);
        close(pfd[1]);
    }
    if (rc == DLOCK_OK && (l->opts.flags & DLOCK_AUTO_RENEW) && l->holds == 1) {
        l->renew_ttl_ms = l->opts.ttl_ms; /* a new hold: no extend yet */
        dlock__watchdog_add(l->client, l, 0);
    }
    return rc;
}

/* Map a release/extend tally to a code. */
static int owner_code(const tally *t)
{
    if (t->yes >= t->quorum)
        return DLOCK_OK;
    /* "Not ours" only when a majority says so. A node that never had the
     * key (the grant was decided without it) answers "gone"; with one
     * confirmation and one failed node beside it, the lease may still hold
     * on a majority, and calling it expired would make extend drop a lock
     * it holds: that is a majority not reached. */
    if (t->no > t->n - t->quorum)
        return t->other_owner > 0 ? DLOCK_ENOTOWNER : DLOCK_EEXPIRED;
    return failure_code(t);
}

int dlock_lock_release(dlock_lock *l)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
    dlock_lock_state st = get_state(l);
    dlock__err_clear(&l->err);
    if (st == DLOCK_STATE_UNLOCKED) {
        dlock__err_set(&l->err, "this handle does not hold \"%s\"", l->name);
        return DLOCK_ENOTHELD;
    }
    int last_hold = !is_reentrant(l) || l->holds <= 1;
    if (last_hold) {
        dlock__watchdog_remove(l->client, l);
        /* A round in flight may have found the lock lost (and run on_lost)
         * while we waited for it: read the state it left. */
        st = get_state(l);
    }
    if (st == DLOCK_STATE_LOST) {
        l->holds = 0;
        set_state(l, DLOCK_STATE_UNLOCKED, 0);
        dlock__err_set(&l->err, "\"%s\" was lost before this release", l->name);
        return DLOCK_ELOST;
    }
    if (st == DLOCK_STATE_UNLOCKED) { /* on_lost released it meanwhile */
        dlock__err_set(&l->err, "this handle does not hold \"%s\"", l->name);
        return DLOCK_ENOTHELD;
    }
    tally t;
    if (is_reentrant(l)) {
        if (l->rel_pending) /* an older release first (best effort) */
            flush_release(l, l->client->opts.io_timeout_ms);
        l->rel_seq = ++attempt_no;
        l->rel_n = 1;
        l->rel_extra = 0;
    }
    send_release(l, NULL, l->client->opts.io_timeout_ms, 0, &t);
    int rc = owner_code(&t);
    /* Where it may not have run, it is sent again before the handle's next
     * acquire, or on free: a lost release no longer keeps the key (and a
     * fair line) for the whole TTL when the node answers again. */
    note_release_pending(l, &t, NULL);
    if (is_reentrant(l)) {
        /* ... and with it the holds this handle drops below if it failed. */
        l->in_doubt |= l->rel_pending;
        if (rc != DLOCK_OK && l->rel_pending && l->holds > 1)
            l->rel_extra = l->holds - 1;
    }
    if (rc == DLOCK_OK && is_reentrant(l) && l->holds > 1) {
        l->holds--;
        return DLOCK_OK;
    }
    if (rc != DLOCK_OK && get_state(l) == DLOCK_STATE_LOST) {
        /* A non-last release raced a round that found the lock lost. */
        rc = DLOCK_ELOST;
        dlock__err_set(&l->err, "\"%s\" was lost before this release", l->name);
    }
    if (!last_hold)
        /* A failed non-last release drops every hold of the handle: one
         * that holds nothing must never have anything renewed, or the key
         * would outlive the handle for as long as the process runs. */
        dlock__watchdog_remove(l->client, l);
    l->holds = 0;
    set_state(l, DLOCK_STATE_UNLOCKED, 0);
    if (rc == DLOCK_OK)
        dlock__err_clear(&l->err);
    return rc;
}

int dlock_lock_extend(dlock_lock *l, int64_t ttl_ms)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
    dlock__err_clear(&l->err);
    if (ttl_ms == 0)
        ttl_ms = l->opts.ttl_ms;
    if (ttl_ms < 0 || ttl_ms > DLOCK_TTL_MAX_MS) {
        dlock__err_set(&l->err, "ttl_ms must be 1..%" PRId64 " (or 0 for the lock's TTL)",
                       DLOCK_TTL_MAX_MS);
        return DLOCK_EINVAL;
    }
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
        dlock__watchdog_remove(l->client, l);
        l->holds = 0;
        set_state(l, DLOCK_STATE_UNLOCKED, 0);
        dlock__err_set(&l->err, "the lease on \"%s\" had already ended", l->name);
        return DLOCK_EEXPIRED;
    }
    /* Auto-renew: take the lock out of the watchdog for the extend, so no
     * round in flight sets the old TTL after ours; it goes back with the
     * new TTL as its renewal TTL for the rest of the hold. */
    int renewed = (l->opts.flags & DLOCK_AUTO_RENEW) && dlock__watchdog_remove(l->client, l);
    if (renewed) {
        if (get_state(l) == DLOCK_STATE_LOST) { /* that round found it lost */
            dlock__err_set(&l->err, "\"%s\" was lost", l->name);
            return DLOCK_ELOST;
        }
    }
    char ttl_s[24];
    snprintf(ttl_s, sizeof ttl_s, "%" PRId64, ttl_ms);
    const char *args[3] = {l->name, l->token, ttl_s};
    size_t lens[3] = {l->name_len, l->token_len, strlen(ttl_s)};
    dlock__req req = {dlock__script_get(is_reentrant(l) ? DLOCK__S_REXTEND : DLOCK__S_EXTEND),
                      1, 3, args, lens};
    int64_t t0 = dlock__now_ns();
    /* A confirmation after the current lease ended proves nothing: the key
     * may have expired and been taken in between. */
    int64_t deadline = old_end == INT64_MIN ? INT64_MAX : old_end;
    dlock__fanout_opts fo = {node_timeout_ms(l, ttl_ms), deadline, NULL, DECIDED_GRACE_MS};
    tally t;
    tally_init(&t, l, DLOCK__S_EXTEND);
    int rc = dlock__fanout(l->client, &req, 1, &fo, release_cb, &t) != DLOCK_OK
                 ? DLOCK_ENOMEM
                 : owner_code(&t);
    if (rc == DLOCK_OK && old_end != INT64_MIN && dlock__now_ns() >= old_end) {
        dlock__err_set(&l->err, "majority confirmed only after the lease had ended");
        rc = l->client->n_nodes > 1 ? DLOCK_ENOQUORUM : DLOCK_EEXPIRED;
    }
    if (rc == DLOCK_OK) {
        set_state(l, DLOCK_STATE_HELD, t0 + ttl_ms * DLOCK__NS_PER_MS - drift_ns(l, ttl_ms));
        dlock__err_clear(&l->err);
        l->renew_ttl_ms = ttl_ms;
    }
    if (renewed && (rc == DLOCK_OK || (rc != DLOCK_ENOTOWNER && rc != DLOCK_EEXPIRED)))
        /* Renewal goes on (a failed extend leaves the lease as it was). */
        dlock__watchdog_add(l->client, l, rc != DLOCK_OK);
    if (rc == DLOCK_ENOTOWNER || rc == DLOCK_EEXPIRED) {
        /* Not ours any more: the handle lets go. */
        dlock__watchdog_remove(l->client, l);
        l->holds = 0;
        set_state(l, DLOCK_STATE_UNLOCKED, 0);
    }
    return rc;
}

int dlock_lock_adopt(dlock_lock *l, const char *token)
{
    if (!l || !token || forked(l))
        return DLOCK_EINVAL;
    if (l->rel_pending && get_state(l) == DLOCK_STATE_UNLOCKED) {
        flush_release(l, l->client->opts.io_timeout_ms); /* before the token changes */
        l->rel_pending = 0;
    }
    size_t n = strnlen(token, DLOCK_TOKEN_MAX + 1);
    if (n == 0 || n > DLOCK_TOKEN_MAX || is_reentrant(l) || get_state(l) != DLOCK_STATE_UNLOCKED) {
        dlock__err_set(&l->err, "adopt needs a 1..%d byte token, a plain-mode handle that holds nothing",
                       DLOCK_TOKEN_MAX);
        return DLOCK_EINVAL;
    }
    inline_token(l);
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
    set_state(l, DLOCK_STATE_HELD, INT64_MIN);
    dlock__err_clear(&l->err);
    return DLOCK_OK;
}

int dlock_lock_forget(dlock_lock *l)
{
    if (!l || forked(l))
        return DLOCK_EINVAL;
    dlock__watchdog_remove(l->client, l);
    dlock_lock_state st = get_state(l);
    l->holds = 0;
    set_state(l, DLOCK_STATE_UNLOCKED, 0);
    if (st == DLOCK_STATE_UNLOCKED) {
        dlock__err_set(&l->err, "this handle does not hold \"%s\"", l->name);
        return DLOCK_ENOTHELD;
    }
    dlock__err_clear(&l->err);
    return DLOCK_OK;
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
    /* ...and a wait for a silent node to confirm our subscription. */
    dlock__wakeup_kick(l->client);
}

void dlock_lock_free(dlock_lock *l)
{
    if (!l)
        return;
    if (dlock__client_forked(l->client))
        goto free_memory; /* release nothing: the parent's lock is the parent's */
    dlock__watchdog_remove(l->client, l);
    if (l->undo_pending) /* best effort, as the releases below */
        send_undo(l, l->client->opts.io_timeout_ms);
    if (l->rel_pending)
        flush_release(l, l->client->opts.io_timeout_ms);
    if (l->touched && !l->undo_pending && !l->rel_pending && !l->in_doubt &&
        get_state(l) != DLOCK_STATE_HELD) {
        /* The key may outlive this handle (other handles of the owner
         * hold it): take this handle's bookkeeping out of it. */
        const char *args[3] = {l->name, l->token, l->hid};
        size_t lens[3] = {l->name_len, l->token_len, l->hid_len};
        dlock__req req = {dlock__script_get(DLOCK__S_RFORGET), 1, 2, args, lens};
        dlock__fanout_opts fo = {l->client->opts.io_timeout_ms, INT64_MAX, NULL, 0};
        tally t;
        tally_init(&t, l, DLOCK__S_RELEASE);
        (void)dlock__fanout(l->client, &req, 1, &fo, release_cb, &t);
    }
    if (l->fair_cleanup_pending)
        fair_cleanup(l);
    if (get_state(l) == DLOCK_STATE_HELD) {
        /* Let go of every hold this handle has (a counted lock's other
         * handles keep theirs). */
        unsigned n = is_reentrant(l) ? l->holds : 1;
        for (unsigned i = 0; i < n; i++) {
            tally t;
            l->rel_seq = ++attempt_no;
            l->rel_n = 1;
            send_release(l, NULL, l->client->opts.io_timeout_ms, 0, &t);
            if (t.yes < t.quorum)
                break;
        }
    }
    DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&l->cond));
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&l->mu));
free_memory: /* in a child of fork(), the mutex may be held by a thread not copied */
    dlock__free(l->name);
    dlock__free(l->fence_key);
    dlock__free(l->channel);
    dlock__free(l->queue_key);
    dlock__free(l->live_prefix);
    if (l->token != l->token_inline)
        dlock__free(l->token);
    dlock__err_free(&l->err);
    dlock__free(l);
}

dlock_lock_state dlock_lock_state_get(dlock_lock *l)
{
    return l && !dlock__client_forked(l->client) ? get_state(l) : DLOCK_STATE_UNLOCKED;
}

int64_t dlock_lock_validity_ms(dlock_lock *l)
{
    if (!l || dlock__client_forked(l->client))
        return 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    dlock_lock_state st = l->state;
    int64_t end = l->valid_until_ns;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    if (st != DLOCK_STATE_HELD)
        return 0;
    if (end == INT64_MIN)
        return -1;
    int64_t left = end - dlock__now_ns();
    return left > 0 ? left / DLOCK__NS_PER_MS : 0;
}

const char *dlock_lock_token(const dlock_lock *l)
{
    return l && l->holds > 0 && !dlock__client_forked(l->client) ? l->token : NULL;
}

uint64_t dlock_lock_fence(const dlock_lock *l)
{
    return l && l->holds > 0 && !dlock__client_forked(l->client) ? l->fence : 0;
}

const char *dlock_lock_name(const dlock_lock *l)
{
    return l ? l->name + l->prefix_len : NULL;
}

unsigned dlock_lock_hold_count(const dlock_lock *l)
{
    return l && !dlock__client_forked(l->client) ? l->holds : 0;
}

int64_t dlock_lock_holder_ttl_ms(const dlock_lock *l)
{
    return l ? l->holder_ttl_ms : -1;
}

const char *dlock_lock_errmsg(const dlock_lock *l)
{
    return l ? dlock__err_str(&l->err) : "NULL lock handle";
}
