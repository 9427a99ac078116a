/* SPDX-License-Identifier: BSD-3-Clause */
/* Waking waiters on release.
 *
 * One background thread per client (started on first use) keeps one
 * subscriber connection per node. A waiting acquire starts a watch of its
 * lock's channel (dlock__wakeup_watch_start()) and holds its next attempt
 * until a node confirmed the SUBSCRIBE (dlock__wakeup_watch_ready()), so a
 * release published after that attempt cannot be missed. Release scripts PUBLISH on the
 * channel: "r" (released: every waiter may try), "w ID" (released: the
 * waiter the lock's waiter list knows as ID may try; the other listed
 * waiters sleep on until their next look, docs/waiting.md) or "g TOKEN
 * FENCE" (fair mode handed the lock to the waiter whose token that is;
 * nobody else needs to wake). On one node, the last two come on the
 * waiting client's inbox for the lock (keys.h) when the id or token names
 * one, so Redis delivers them to that process alone; every other message
 * comes on the lock's channel, and the thread delivers both alike.
 *
 * A channel stays subscribed for LINGER_MS after its last watcher leaves, so
 * a process that waits on the same name again and again subscribes once.
 * When a subscriber connection breaks, every watcher is woken (it may have
 * missed a message) and the thread reconnects with backoff and subscribes
 * again. All channel state is under wk->mu; the connections are touched by
 * the thread only.
 *
 * The thread is a client loop thread (loop_thread.h): a subscriber is an
 * io record, reconnects, lingers and confirmation deadlines are one loop
 * timer at the earliest, and watch/unwatch post a look at the channels.
 * This file owns the thread and its subscriber connections (connect,
 * subscribe, linger, reconnect) and the watch API; what each frame read
 * on a subscriber does is wakeup_frames.c's, and the record both share is
 * wakeup_thread.h. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "cluster.h"
#include "conn.h"
#include "loop_thread.h"
#include "rand.h"
#include "stats.h"
#include "wakeup.h"
#include "wakeup_chan.h"
#include "wakeup_frames.h"
#include "wakeup_thread.h"

#define LINGER_MS 2000
/* After a learning of the slot map that failed or left a watched
 * channel's slot without a master, the next one waits this long (as the
 * lock path's relearn of an uncovered slot, cluster.h). */
#define LEARN_RETRY_MS 100
/* The loop has a slot for each subscriber: one per node, or per master. */
_Static_assert(DLOCK__LOOP_POLL_FDS >= DLOCK__MAX_NODES &&
               DLOCK__MAX_NODES >= DLOCK__CLUSTER_MAX_MASTERS, "a loop slot per subscriber");

/* Another thread changed the channel table: the loop thread looks. */
static void poke(dlock__wakeup *wk)
{
    dlock__loop_thread_post(&wk->lt, &wk->look_post);
}

/* Subscriber connections: one per node, or on a cluster one per master
 * (index in the cluster's master table), opened for the channels routed
 * there. */
static size_t n_subs(const dlock_client *c)
{
    return dlock__client_cluster(c) ? DLOCK__CLUSTER_MAX_MASTERS : c->n_nodes;
}

/* The channel a waiter names, without the byte that tells the scripts to
 * SPUBLISH on a cluster (src/redis/keys.c): the name Redis knows. */
static void chan_name(const dlock_client *c, const dlock__waiter *l, const char **name,
                      size_t *len)
{
    int shard = dlock__client_cluster(c) && l->channel_len > 0 && l->channel[0] == '\1';
    *name = l->channel + shard;
    *len = l->channel_len - (size_t)shard;
}

static void node_down(dlock__wakeup *wk, size_t i)
{
    dlock__io_clear(dlock__loop_thread_loop(&wk->lt), &wk->io[i].io);
    wk->io[i].conn = NULL;
    dlock__conn_free(wk->sub[i]);
    wk->sub[i] = NULL;
    wk->due_ns[i] = 0;
    unsigned f = wk->failures[i] < 6 ? wk->failures[i]++ : 6;
    wk->retry_at[i] = dlock__now_ns() + (int64_t)(50u << f) * DLOCK__NS_PER_MS;
    for (dlock__chan *ch = wk->chans; ch; ch = ch->next) {
        ch->sent[i] = ch->confirmed[i] = 0;
        dlock__chan_wake_all(ch); /* it may have missed a message: look again */
    }
}

/* Subscriber i failed (timed_out: its connect or confirmation deadline
 * passed): an observer's node event, then down. Our own ENOMEM is no
 * node's doing (stats.c). wk->mu held: hooks may not act on locks
 * (dlock.h, dlock_observer). */
static void sub_failed(dlock__wakeup *wk, size_t i, int timed_out)
{
    dlock_client *c = wk->c;
    const dlock__conn *s = wk->sub[i];
    int code = !s ? DLOCK_ENOMEM : s->err_code ? s->err_code : DLOCK_EIO;
    char name[300];
    if (dlock__client_cluster(c))
        dlock__cluster_master_name(dlock__client_cluster(c), (int)i, name, sizeof name);
    else
        snprintf(name, sizeof name, "%s", c->nodes[i].name);
    dlock__stats_node_error(&c->obs, name, code, timed_out);
    node_down(wk, i);
}

static void append_sub(dlock__conn *c, const char *verb, const dlock__chan *ch)
{
    const char *argv[2] = {verb, ch->name};
    size_t lens[2] = {strlen(verb), ch->len};
    /* Subscriber traffic bypasses the reply queue: after the handshake,
     * everything on this connection is pub/sub frames. */
    if (dlock__conn_append_raw(c, 2, argv, lens) != DLOCK_OK)
        dlock__conn_fail(c, DLOCK_ENOMEM, "out of memory");
}

/* Bring connections and subscriptions in line with the channel table.
 * Called by the thread with wk->mu held. Returns the next time it wants to
 * run again (reconnect or linger expiry). */
static int64_t reconcile(dlock_client *c, dlock__wakeup *wk)
{
    int64_t now = dlock__now_ns(), next = INT64_MAX;
    dlock__cluster *cl = dlock__client_cluster(c);
    uint8_t needed[DLOCK__MAX_NODES];
    memset(needed, !cl, sizeof needed);
    wk->unrouted = 0;
    wk->unknown = 0;
    for (dlock__chan *ch = wk->chans; cl && ch; ch = ch->next) {
        /* Route by the slot map the lock path keeps up to date; a channel
         * whose slot moved (failover, resharding) is subscribed again on
         * its new master (its watchers were woken when it was lost). */
        int m = dlock__cluster_master_of(cl, ch->slot);
        if (m != ch->master && ch->master >= 0) {
            if (wk->sub[ch->master] && ch->sent[ch->master])
                append_sub(wk->sub[ch->master], "SUNSUBSCRIBE", ch);
            ch->sent[ch->master] = ch->confirmed[ch->master] = 0;
        }
        ch->master = m;
        if (m >= 0)
            needed[m] = 1;
        else if (ch->watchers && !wk->unrouted) {
            wk->unrouted = 1; /* look() has the map learned */
            wk->unrouted_slot = ch->slot;
        }
    }
    for (size_t i = 0; i < n_subs(c); i++) {
        /* A master entry reused for another address: that subscriber
         * talks to a server that no longer serves our channels. */
        if (cl && wk->sub[i] && wk->sub_gen[i] != dlock__cluster_master_gen(cl, (int)i))
            node_down(wk, i);
        if (!wk->sub[i] && wk->chans && needed[i]) {
            if (now >= wk->retry_at[i]) {
                if (cl)
                    wk->sub_gen[i] = dlock__cluster_master_gen(cl, (int)i);
                if (cl)
                    wk->sub[i] = dlock__cluster_connect_master(cl, &c->nodes[0].url,
                                                               c->nodes[0].tls_ctx, (int)i);
                else if (!c->nodes[i].sentinel)
                    wk->sub[i] = dlock__node_connect(&c->nodes[i], 0, 0);
                else if (!dlock__node_connect_known(&c->nodes[i], 0, 0, &wk->sub[i])) {
                    /* The primary's address is to be asked first: by
                     * look(), on the loop, never blocking the thread (or
                     * an application's loop) for the sentinels. */
                    if (!wk->unknown)
                        wk->unknown = i + 1;
                    continue;
                }
                wk->due_ns[i] = now + (int64_t)(c->opts.connect_timeout_ms +
                                                c->opts.io_timeout_ms) * DLOCK__NS_PER_MS;
                if (!wk->sub[i] || wk->sub[i]->state == DLOCK__CS_BROKEN)
                    sub_failed(wk, i, 0);
            }
            if (!wk->sub[i] && wk->retry_at[i] < next)
                next = wk->retry_at[i];
        }
    }
    dlock__chan **pp = &wk->chans;
    while (*pp) {
        dlock__chan *ch = *pp;
        int expired = !ch->watchers && ch->idle_since_ns &&
                      now - ch->idle_since_ns >= LINGER_MS * DLOCK__NS_PER_MS;
        for (size_t i = 0; i < n_subs(c); i++) {
            if (!wk->sub[i] || (cl && (int)i != ch->master))
                continue;
            if (expired && ch->sent[i])
                append_sub(wk->sub[i], cl ? "SUNSUBSCRIBE" : "UNSUBSCRIBE", ch);
            else if (!expired && !ch->sent[i] && !(ch->inbox && wk->no_inbox)) {
                append_sub(wk->sub[i], cl ? "SSUBSCRIBE" : "SUBSCRIBE", ch);
                ch->sent[i] = 1;
                if (!wk->due_ns[i])
                    wk->due_ns[i] = now + (int64_t)c->opts.io_timeout_ms * DLOCK__NS_PER_MS;
            }
        }
        if (expired) {
            *pp = ch->next;
            dlock__free(ch->name);
            dlock__free(ch);
            continue;
        }
        if (!ch->watchers && ch->idle_since_ns) {
            int64_t at = ch->idle_since_ns + LINGER_MS * DLOCK__NS_PER_MS;
            if (at < next)
                next = at;
        }
        pp = &ch->next;
    }
    for (size_t i = 0; i < n_subs(c); i++)
        if (wk->sub[i] && wk->due_ns[i] && wk->due_ns[i] < next)
            next = wk->due_ns[i];
    return next;
}

/* Drop the subscribers that missed their due time. wk->mu held. */
static void drop_overdue(dlock_client *c, dlock__wakeup *wk)
{
    int64_t now = dlock__now_ns();
    for (size_t i = 0; i < n_subs(c); i++)
        if (wk->sub[i] && wk->due_ns[i] && now >= wk->due_ns[i] && !wk->refused)
            sub_failed(wk, i, 1); /* (a refusal is not mended by reconnecting) */
}

/* Watch each subscriber for what it waits for now. wk->mu held, on the
 * thread. */
static void watch_subs(dlock__wakeup *wk)
{
    dlock__loop *loop = dlock__loop_thread_loop(&wk->lt);
    for (size_t i = 0; i < n_subs(wk->c); i++) {
        dlock__sub_io *r = &wk->io[i];
        dlock__conn *s = wk->sub[i];
        if (r->conn != s) {
            dlock__io_clear(loop, &r->io);
            r->conn = NULL;
        }
        if (!s)
            continue;
        r->conn = s;
        r->io.fd = s->ctx->fd;
        /* Always read: pub/sub messages come unasked. */
        r->io.want = DLOCK__IO_READ | ((dlock__conn_events(s) & POLLOUT) ? DLOCK__IO_WRITE : 0u);
        (void)dlock__io_set(loop, &r->io); /* cannot fail: see the assertion above */
    }
}

static void look(dlock__wakeup *wk);

static void learned(dlock__discover *d)
{
    dlock__wakeup *wk = d->arg;
    wk->learning = 0;
    if (d->rc != DLOCK_OK)
        wk->learn_after_ns = dlock__now_ns() + LEARN_RETRY_MS * DLOCK__NS_PER_MS;
    look(wk);
}

/* A watched channel's slot has no master in the map (n NULL: learn the
 * map), or Sentinel node n's primary is not known (ask its sentinels): as a
 * sub-request on the thread's loop (a watch never blocks for it), unless
 * one is in flight or failed a moment ago. Returns when to look again
 * for it (INT64_MAX: its done will). On the thread, wk->mu not held. */
static int64_t learn(dlock__wakeup *wk, dlock__node *n, unsigned slot)
{
    dlock_client *c = wk->c;
    int64_t now = dlock__now_ns();
    if (wk->learning)
        return INT64_MAX;
    if (now < wk->learn_after_ns)
        return wk->learn_after_ns;
    if (!n) {
        if (!wk->learn_node.cluster)
            dlock__discover_cluster_node(&wk->learn_node, dlock__client_cluster(c),
                                         &c->nodes[0].url, c->nodes[0].tls_ctx);
        n = &wk->learn_node;
    }
    wk->learn.arg = wk;
    int64_t deadline =
        now + (int64_t)(c->opts.connect_timeout_ms + c->opts.io_timeout_ms) * DLOCK__NS_PER_MS;
    int r = dlock__discover_start(&wk->learn, n, slot, dlock__loop_thread_loop(&wk->lt),
                                  deadline, learned);
    if (r == 1) {
        wk->learning = 1;
        return INT64_MAX;
    }
    /* Nothing to learn (the map was learned since, or says the slot has
     * no master and was relearned a moment ago), or no way to wait for
     * it: look again a little later. */
    wk->learn_after_ns = now + LEARN_RETRY_MS * DLOCK__NS_PER_MS;
    return wk->learn_after_ns;
}

/* Bring connections, subscriptions and the io records in line with the
 * channel table, and set the timer for the next look. On the thread. */
static void look(dlock__wakeup *wk)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wk->mu));
    drop_overdue(wk->c, wk);
    int64_t next = reconcile(wk->c, wk);
    watch_subs(wk);
    int unrouted = wk->unrouted;
    unsigned slot = wk->unrouted_slot;
    size_t unknown = wk->unknown;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wk->mu));
    if (unrouted || unknown) {
        int64_t again = learn(wk, unknown ? &wk->c->nodes[unknown - 1] : NULL, slot);
        next = again < next ? again : next;
    }
    wk->tick.due_ns = next;
    if (next == INT64_MAX)
        dlock__timer_clear(dlock__loop_thread_loop(&wk->lt), &wk->tick);
    else /* a poll loop's timers cannot fail */
        (void)dlock__timer_set(dlock__loop_thread_loop(&wk->lt), &wk->tick);
}

static void sub_ready(dlock__io *io, unsigned events)
{
    dlock__sub_io *r = DLOCK__OWNER(io, dlock__sub_io, io);
    dlock__wakeup *wk = r->wk;
    size_t i = (size_t)(r - wk->io);
    short revents = (short)(((events & DLOCK__IO_READ) ? POLLIN : 0) |
                            ((events & DLOCK__IO_WRITE) ? POLLOUT : 0) |
                            ((events & DLOCK__IO_ERROR) ? POLLERR : 0));
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wk->mu));
    int rc = dlock__conn_io(wk->sub[i], revents);
    if (rc == DLOCK_OK)
        rc = dlock__wakeup_read_frames(wk->c, wk, i);
    if (rc != DLOCK_OK || wk->sub[i]->state == DLOCK__CS_BROKEN)
        sub_failed(wk, i, 0);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wk->mu));
    look(wk);
}

static void tick_fire(dlock__timer *t) { look(DLOCK__OWNER(t, dlock__wakeup, tick)); }

static void look_posted(dlock__post *p) { look(DLOCK__OWNER(p, dlock__wakeup, look_post)); }

/* The client's wake-up thread, or NULL if none was started. */
static dlock__wakeup *started(dlock_client *c)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->bg_mu));
    dlock__wakeup *wk = c->wakeup;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->bg_mu));
    return wk;
}

static const dlock__bg_ops bg_ops = {dlock__wakeup_stop, dlock__wakeup_forget};

static dlock__wakeup *get_or_start(dlock_client *c)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->bg_mu));
    dlock__wakeup *wk = c->wakeup;
    if (!wk && (wk = dlock__calloc(1, sizeof *wk))) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_init(&wk->mu, NULL));
        dlock__cond_init_monotonic(&wk->confirmed);
        wk->c = c;
        wk->look_post.run = look_posted;
        wk->tick.fire = tick_fire;
        for (size_t i = 0; i < DLOCK__MAX_NODES; i++) {
            wk->io[i].wk = wk;
            wk->io[i].io.fd = -1;
            wk->io[i].io.ready = sub_ready;
        }
        c->wakeup = wk;
        c->wakeup_ops = &bg_ops;
        /* Out of threads or fds is a resource limit, not a bug. */
        if (dlock__loop_thread_start(&wk->lt, c->loop) != DLOCK_OK) {
            c->wakeup = NULL;
            DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&wk->confirmed));
            DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&wk->mu));
            dlock__free(wk);
            wk = NULL;
        }
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->bg_mu));
    return wk;
}

/* Node i confirmed the lock's channel and, if the waiter has one, its
 * inbox: both come on one connection. wk->mu held. */
static int confirmed_on_a_node(const dlock_client *c, const dlock__chan *ch, const dlock__chan *in)
{
    for (size_t i = 0; i < n_subs(c); i++)
        if (ch->confirmed[i] && (!in || in->confirmed[i]))
            return 1;
    return 0;
}

int dlock__wakeup_watch_start(dlock_client *c, dlock__waiter *l)
{
    dlock__wakeup *wk = get_or_start(c);
    dlock__watcher *w = dlock__calloc(1, sizeof *w);
    dlock__watcher *wi = l->inbox ? dlock__calloc(1, sizeof *wi) : NULL;
    if (!wk || !w || (l->inbox && !wi)) {
        dlock__free(w);
        dlock__free(wi);
        return DLOCK_ENOMEM;
    }
    w->lock = l;
    if (wi)
        wi->lock = l;
    const char *cname;
    size_t clen;
    chan_name(c, l, &cname, &clen);
    /* On a Cluster the thread routes the channel by the slot map, and
     * learns the map itself when it names no master for its slot. */
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wk->mu));
    if (wk->refused) {
        /* Pub/sub was refused once: do not wait connect + I/O timeout for
         * another refusal on every acquire; the caller polls. */
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wk->mu));
        dlock__free(w);
        dlock__free(wi);
        return DLOCK_EREFUSED;
    }
    int made = 0, made_in = 0;
    if (wk->no_inbox) { /* see dlock__wakeup_inbox_off() */
        dlock__free(wi);
        wi = NULL;
    }
    dlock__chan *ch = dlock__chan_join(&wk->chans, cname, clen, 0, w, &made);
    dlock__chan *in = ch && wi ? dlock__chan_join(&wk->chans, l->inbox, l->inbox_len, 1, wi,
                                                  &made_in)
                               : NULL;
    if (made || made_in)
        poke(wk); /* the thread subscribes */
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wk->mu));
    if (!ch || (wi && !in)) {
        if (!ch)
            dlock__free(w);
        dlock__free(wi); /* on no channel here: in is NULL */
        dlock__wakeup_unwatch(c, l);
        return DLOCK_ENOMEM;
    }
    return DLOCK_OK;
}

/* Is the waiter's subscription confirmed? 1 yes, 0 not yet, -1 never (a
 * refusal, or its channels gone). wk->mu held. */
static int confirmed(const dlock_client *c, dlock__wakeup *wk, const dlock__waiter *l)
{
    if (wk->refused)
        return -1;
    const char *cname;
    size_t clen;
    chan_name(c, l, &cname, &clen);
    const dlock__chan *ch = dlock__chan_find(wk->chans, cname, clen);
    const dlock__chan *in = l->inbox && !wk->no_inbox
                                ? dlock__chan_find(wk->chans, l->inbox, l->inbox_len)
                                : NULL;
    if (!ch || (l->inbox && !wk->no_inbox && !in))
        return -1;
    return confirmed_on_a_node(c, ch, in);
}

int dlock__wakeup_watch_ready(dlock_client *c, dlock__waiter *l, int64_t until_ns)
{
    dlock__wakeup *wk = started(c);
    if (!wk)
        return -1;
    struct timespec ts = dlock__timespec_of(until_ns);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wk->mu));
    int ok;
    for (;;) {
        ok = confirmed(c, wk, l);
        if (ok || dlock__now_ns() >= until_ns)
            break;
        /* A cancel must not wait for a silent node's confirmation
         * (dlock__wakeup_kick() wakes us). wk->mu before l->mu, as in
         * deliver(). */
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(l->mu));
        int canceled = *l->canceled;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(l->mu));
        if (canceled)
            break;
        int rc = pthread_cond_timedwait(&wk->confirmed, &wk->mu, &ts);
        if (rc != 0 && rc != ETIMEDOUT)
            DLOCK__CHECK_PTHREAD(rc);
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wk->mu));
    return ok;
}

int dlock__wakeup_inbox_off(dlock_client *c)
{
    dlock__wakeup *wk = started(c);
    if (!wk)
        return 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wk->mu));
    int off = wk->no_inbox;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wk->mu));
    return off;
}

void dlock__wakeup_kick(dlock_client *c)
{
    dlock__wakeup *wk = started(c);
    if (!wk)
        return;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wk->mu));
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&wk->confirmed));
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wk->mu));
}

void dlock__wakeup_unwatch(dlock_client *c, dlock__waiter *l)
{
    dlock__wakeup *wk = started(c);
    if (!wk)
        return;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&wk->mu));
    const char *cname;
    size_t clen;
    chan_name(c, l, &cname, &clen);
    int idle = dlock__chan_leave(wk->chans, cname, clen, l);
    if (l->inbox)
        idle |= dlock__chan_leave(wk->chans, l->inbox, l->inbox_len, l);
    if (idle)
        poke(wk); /* the thread unsubscribes after the linger */
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&wk->mu));
}

static void free_wakeup(dlock_client *c, dlock__wakeup *wk);

int dlock__wakeup_stop(dlock_client *c)
{
    dlock__wakeup *wk = c->wakeup;
    if (!wk)
        return 1;
    if (dlock__loop_thread_stop(&wk->lt) != DLOCK_OK)
        dlock__misuse("dlock_client_free() on the client's own wake-up thread");
    dlock__discover_stop(&wk->learn); /* the thread is gone: its loop is ours */
    /* Off the loop: a looped client's is the application's, which goes on. */
    dlock__loop *loop = dlock__loop_thread_loop(&wk->lt);
    for (size_t i = 0; i < DLOCK__MAX_NODES; i++)
        dlock__io_clear(loop, &wk->io[i].io);
    dlock__timer_clear(loop, &wk->tick);
    dlock__loop_thread_free(&wk->lt);
    free_wakeup(c, wk);
    DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&wk->confirmed));
    DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&wk->mu));
    dlock__free(wk);
    c->wakeup = NULL;
    return 1;
}

void dlock__wakeup_forget(dlock_client *c)
{
    if (!c->wakeup)
        return;
    dlock__loop_thread_forget(&c->wakeup->lt);
    free_wakeup(c, c->wakeup);
    dlock__free(c->wakeup);
    c->wakeup = NULL;
}

/* Close the subscriber connections; free the channels. */
static void free_wakeup(dlock_client *c, dlock__wakeup *wk)
{
    for (size_t i = 0; i < n_subs(c); i++)
        dlock__conn_free(wk->sub[i]);
    dlock__chan_free_all(&wk->chans);
}
