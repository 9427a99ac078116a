/* SPDX-License-Identifier: BSD-3-Clause */
/* One renewal round on the wire (renew_round.h): a chain of fan-outs on
 * the watchdog's loop. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "fanout.h"
#include "quorum.h"
#include "renew_round.h"
#include "replies.h"
#include "restore_stamp.h"
#include "scripts.h"

#define RENEW_CHUNK 1000

typedef dlock__renew_round rnd;
#define RND_OF(f) DLOCK__OWNER(f, rnd, fan)

/* A gone key that will be put back counts as a yes for ending the round
 * early (the restore step then settles it), else as a no. */
static int item_decided(const rnd *r, const item *it)
{
    size_t yes = it->yes + (it->restorable ? it->n_gone : 0);
    size_t no = it->no + (it->restorable ? 0 : it->n_gone);
    return dlock__quorum_decided(r->c->n_nodes, r->c->quorum, yes, no, it->err);
}

static int round_cb(void *arg, size_t node, uint32_t idx, int err,
                    const redisReply *reply, const char *detail, int64_t start_ns)
{
    rnd *r = arg;
    (void)detail;
    (void)start_ns;
    size_t first = r->first[idx];
    size_t n = r->first[idx + 1] - first;
    for (size_t i = 0; i < n; i++) {
        item *it = &r->items[first + i];
        int was = item_decided(r, it);
        int gone, v = dlock__decode_renew(err, reply, n, i, &gone);
        if (v < 0) {
            it->err++;
        } else if (v == 1) {
            it->yes++;
        } else if (gone) {
            it->n_gone++;
            it->gone |= UINT64_C(1) << node;
        } else {
            it->no++;
        }
        if (!was && item_decided(r, it)) {
            r->undecided--;
            if (r->renewed && it->rec && it->yes >= r->c->quorum && !it->n_gone && r->undecided)
                r->renewed(r, it);
        }
    }
    /* A round is over once a majority decided every lock: a stalled
     * minority must not keep it waiting while the leases run out. */
    return r->undecided == 0;
}

/* A record's own renewal answered: one vote, a majority of one. The
 * round is over with its last one. */
static void own_renewed(dlock__renew_req *q, int v)
{
    item *it = DLOCK__OWNER(q, item, own);
    rnd *r = it->round;
    it->yes = v == 1;
    it->no = v == 0;
    it->err = v < 0;
    if (--r->own_pending == 0)
        r->done(r);
}

/* A round of records that renew themselves (renewal_ops.renew_start):
 * each one's request on the loop, all in flight at once. 1 if any
 * started (their completions end the round), else 0. */
static int start_own_round(rnd *r)
{
    r->own_pending = 1; /* none ends the round inside its start */
    for (size_t i = 0; i < r->n; i++) {
        item *it = &r->items[i];
        dlock__renewal *l = it->rec;
        it->lease_end_ns = l->ops->lease_end_ns(l->owner);
        it->round = r;
        it->own.done = own_renewed;
        int v;
        if (l->ops->renew_start(l->owner, it->lease_end_ns, r->loop, &it->own, &v)) {
            r->own_pending++;
        } else {
            it->yes = v == 1;
            it->no = v == 0;
            it->err = v < 0;
        }
    }
    r->counts.rounds++;
    r->counts.calls += r->n;
    return --r->own_pending > 0;
}

/* Whether an item's gone keys may be put back (restore_batch.lua says
 * why): a plain lock over several masters (a cluster keeps one copy).
 * Fixed at the round's start, with the lease still running then; the
 * round's answers may then end it early counting a gone key as a yes. */
static int may_restore(const dlock_client *c, const item *it)
{
    return c->n_nodes > 1 && !dlock__client_cluster(c) &&
           (it->mode[0] == 'p' || it->mode[0] == 'P' /* with a lock-delay */) &&
           dlock__now_ns() < it->lease_end_ns;
}

/* After the round's answers: still held somewhere (a key deleted
 * everywhere is lost, as documented), gone on fewer nodes than a majority,
 * and either renewed by a majority in this round or still within the
 * lease, during which nobody else can hold a majority. Within the lease a
 * key expires on no node, so a key gone on a majority was deleted there
 * (dlock break, a flush): anyone may take that majority now, and putting
 * it back would undo the break. Never for a record its owner has let go
 * of meanwhile (it is being released). */
static int can_restore(const dlock_client *c, const item *it)
{
    return it->rec && it->restorable && it->n_gone > 0 && it->yes > 0 &&
           it->n_gone < c->quorum &&
           (it->yes >= c->quorum || dlock__now_ns() < it->lease_end_ns);
}

static void ended_later(dlock__timer *t)
{
    rnd *r = DLOCK__OWNER(t, rnd, defer);
    r->done(r);
}

/* Over inside the start: done() at the loop's next turn. */
static void end_later(rnd *r)
{
    r->defer.fire = ended_later;
    dlock__defer(r->loop, &r->defer);
}

static int restore_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *reply,
                      const char *detail, int64_t start_ns)
{
    rnd *r = arg;
    (void)node, (void)idx, (void)detail, (void)start_ns;
    for (size_t k = 0; k < r->m; k++) {
        int gone, v = dlock__decode_renew(err, reply, r->m, k, &gone);
        item *it = &r->items[r->first[k]];
        it->n_gone--;
        if (v == 1)
            it->yes++;
        else if (v == 0)
            it->no++;
        else
            it->err++;
    }
    return 0;
}

static void restore_next(rnd *r);

/* The restore's mode of the m items sel[]: a record's stamp
 * (restore_stamp.h: an election's value, lib/stamp_batch.lua) in front
 * of its mode, copied now (the owner may replace it meanwhile) into the
 * round's buffer, each in one hold of the stamp's mutex (measured and
 * copied together: a proclaim in between cannot make it miss); the mode
 * alone without one, or out of memory (the key still comes back). The
 * buffer may move as it grows, so the arguments point into it once all
 * are in (in sel's order, by their lengths). */
static void stamp_modes(rnd *r, const size_t *sel, size_t m)
{
    size_t at = 0;
    for (size_t k = 0; k < m; k++) {
        const item *it = &r->items[sel[k]];
        size_t n = it->rec->stamp ? dlock__restore_stamp_append(it->rec->stamp, &r->stamps,
                                                                &r->cap_stamps, at, it->mode,
                                                                it->mode_len)
                                  : 0;
        if (n) {
            r->args[m + 3 * k + 2] = NULL; /* in r->stamps: pointed at below */
            r->lens[m + 3 * k + 2] = n;
            at += n;
        }
    }
    at = 0;
    for (size_t k = 0; k < m; k++)
        if (!r->args[m + 3 * k + 2]) {
            r->args[m + 3 * k + 2] = r->stamps + at;
            at += r->lens[m + 3 * k + 2];
        }
}

static void restored(dlock__fan *f)
{
    rnd *r = RND_OF(f);
    if (f->rc != DLOCK_OK)
        for (size_t k = 0; k < r->m; k++) {
            r->items[r->first[k]].n_gone--;
            r->items[r->first[k]].err++;
        }
    r->counts.restores += r->m;
    restore_next(r);
}

/* The restore step: put the gone keys back, node by node, and settle
 * every gone answer as a yes (put back) or a no. Inside the round, so a
 * release from another thread (which waits for the round) is never
 * overtaken by it, and a yes counts from the round's start like any other
 * (the key put back lives longer). The usual round, nothing gone, costs
 * nothing. */
static void restore_next(rnd *r)
{
    dlock_client *c = r->c;
    item *items = r->items;
    size_t n = r->n;
    while (r->node < c->n_nodes && !(r->restore_nodes >> r->node & 1))
        r->node++;
    if (r->node >= c->n_nodes) {
        /* What was not put back is what it said: gone, not ours. */
        for (size_t i = 0; i < n; i++) {
            items[i].no += items[i].n_gone;
            items[i].n_gone = 0;
        }
        r->done(r);
        return;
    }
    size_t node = r->node++;
    /* KEYS first, then the ARGV triples (the mode names the identity's
     * key, as in the renew step) and the identity text; past
     * RENEW_CHUNK, the next round takes the rest. */
    size_t cap = n < RENEW_CHUNK ? n : RENEW_CHUNK, m = 0;
    size_t *sel = r->first;
    for (size_t i = 0; i < n && m < cap; i++)
        if (items[i].restorable && items[i].rec && (items[i].gone >> node & 1))
            sel[m++] = i;
    for (size_t k = 0; k < m; k++) {
        const item *it = &items[sel[k]];
        r->args[k] = it->key;
        r->lens[k] = it->key_len;
        r->args[m + 3 * k] = it->token;
        r->lens[m + 3 * k] = it->token_len;
        r->args[m + 3 * k + 1] = it->ttl;
        r->lens[m + 3 * k + 1] = it->ttl_len;
        r->args[m + 3 * k + 2] = it->mode;
        r->lens[m + 3 * k + 2] = it->mode_len;
    }
    stamp_modes(r, sel, m);
    size_t nargs = 4 * m;
    if (c->identity) { /* a key put back names its holder again */
        r->args[nargs] = c->identity;
        r->lens[nargs++] = strlen(c->identity);
    }
    r->m = m;
    memset(r->only, 0, sizeof r->only);
    r->only[node] = 1;
    r->reqs[0] = (dlock__req){.script = dlock__script_get(DLOCK__S_RESTORE), .numkeys = (int)m,
                              .nargs = (int)nargs, .args = r->args, .arglens = r->lens};
    r->fo = (dlock__fanout_opts){.io_timeout_ms = c->opts.io_timeout_ms,
                                 .deadline_ns = r->deadline_ns, .only = r->only};
    dlock__fan_init(&r->fan, c, r->reqs, 1, &r->fo, restore_cb, r);
    dlock__fan_start(&r->fan, r->loop, restored);
}

/* The renew step is over: on to the restore step, for the items that may
 * have a key put back. */
static void renewed(dlock__fan *f)
{
    rnd *r = RND_OF(f);
    uint64_t nodes = 0;
    if (f->rc != DLOCK_OK)
        for (size_t i = 0; i < r->n; i++)
            r->items[i].err = r->c->n_nodes;
    for (size_t i = 0; i < r->n; i++) {
        r->items[i].restorable = can_restore(r->c, &r->items[i]);
        nodes |= r->items[i].restorable ? r->items[i].gone : 0;
    }
    r->restore_nodes = nodes;
    r->node = 0;
    restore_next(r);
}

int dlock__renew_round_reserve(rnd *r, size_t n)
{
    if (n <= r->cap_items)
        return 1;
    item *it = dlock__realloc(r->items, n * sizeof *it);
    if (it)
        r->items = it;
    size_t *first = it ? dlock__realloc(r->first, (n + 1) * sizeof *first) : NULL;
    if (first)
        r->first = first;
    dlock__req *reqs = first ? dlock__realloc(r->reqs, n * sizeof *reqs) : NULL;
    if (reqs)
        r->reqs = reqs;
    /* Four per lock (a key and three arguments), and the restore step's
     * identity text. */
    const char **args = reqs ? dlock__realloc((void *)r->args, (4 * n + 1) * sizeof *args) : NULL;
    if (args)
        r->args = args;
    size_t *lens = args ? dlock__realloc(r->lens, (4 * n + 1) * sizeof *lens) : NULL;
    if (lens)
        r->lens = lens;
    if (!lens)
        return 0;
    r->cap_items = n;
    return 1;
}

void dlock__renew_round_free(rnd *r)
{
    dlock__free(r->items);
    dlock__free(r->first);
    dlock__free(r->reqs);
    dlock__free((void *)r->args);
    dlock__free(r->lens);
    dlock__free(r->copy);
    dlock__free(r->stamps);
}

/* renew_batch.lua's mode argument: "p", "r" or "z", then the identity's
 * key when the lock keeps one (ident.lua); with a lock-delay the letter
 * is upper case and the delay's part comes first (delay_batch.lua). */
static size_t mode_len(const dlock__renewal *l)
{
    return l->mode_len ? l->mode_len : 1;
}

/* Copy each item's key and token into the round (item.key, item.token):
 * the watchdog may let a record go while its round is in flight, and the
 * fan-out resends its requests after a MOVED. 0 out of memory. */
static int copy_names(rnd *r)
{
    size_t need = 0;
    for (size_t i = 0; i < r->n; i++)
        need += r->items[i].rec->key_len + r->items[i].rec->token_len +
                mode_len(r->items[i].rec);
    if (need > r->cap_copy) {
        char *p = dlock__realloc(r->copy, need);
        if (!p)
            return 0;
        r->copy = p;
        r->cap_copy = need;
    }
    char *at = r->copy;
    for (size_t i = 0; i < r->n; i++) {
        item *it = &r->items[i];
        const dlock__renewal *l = it->rec;
        memcpy(at, l->key, l->key_len);
        it->key = at;
        it->key_len = l->key_len;
        at += l->key_len;
        memcpy(at, l->token, l->token_len);
        it->token = at;
        it->token_len = l->token_len;
        at += l->token_len;
        memcpy(at, l->mode, mode_len(l));
        it->mode = at;
        it->mode_len = mode_len(l);
        at += it->mode_len;
        it->lease_end_ns = l->ops->lease_end_ns(l->owner);
    }
    return 1;
}

/* The renew step's calls of up to RENEW_CHUNK locks; on a cluster a call
 * holds one hash slot's locks (a script's keys must share a slot), and the
 * calls of a round, all for one master, go out pipelined on one
 * connection. */
static void build_calls(rnd *r)
{
    dlock_client *c = r->c;
    item *items = r->items;
    size_t n = r->n, *first = r->first, nchunks = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || i - first[nchunks - 1] == RENEW_CHUNK ||
            (dlock__client_cluster(c) && items[i].slot != items[i - 1].slot))
            first[nchunks++] = i;
    first[nchunks] = n;
    r->nchunks = nchunks;
    for (size_t k = 0; k < nchunks; k++) {
        size_t f = first[k], m = first[k + 1] - f;
        const char **a = r->args + f * 4;
        size_t *al = r->lens + f * 4;
        /* KEYS first, then the ARGV triples. */
        for (size_t i = 0; i < m; i++) {
            const item *it = &items[f + i];
            a[i] = it->key;
            al[i] = it->key_len;
            a[m + 3 * i] = it->token;
            al[m + 3 * i] = it->token_len;
            a[m + 3 * i + 1] = it->ttl;
            al[m + 3 * i + 1] = it->ttl_len;
            a[m + 3 * i + 2] = it->mode;
            al[m + 3 * i + 2] = it->mode_len;
        }
        r->reqs[k] = (dlock__req){.script = dlock__script_get(DLOCK__S_RENEW), .numkeys = (int)m,
                                  .nargs = (int)(4 * m), .args = a, .arglens = al};
    }
}

void dlock__renew_round_start(rnd *r, dlock_client *c, dlock__loop *loop,
                              void (*done)(rnd *r))
{
    r->c = c;
    r->loop = loop;
    r->done = done;
    if (r->n == 0 || r->items[0].rec->ops->renew_start) {
        if (!start_own_round(r))
            end_later(r);
        return;
    }
    if (!copy_names(r)) {
        for (size_t i = 0; i < r->n; i++) {
            r->items[i].lease_end_ns = INT64_MAX;
            r->items[i].err = c->n_nodes;
        }
        end_later(r);
        return;
    }
    /* No answer helps after the last lease in the round has ended. The
     * grace for the nodes still to answer once a majority decided is a
     * tenth of the shortest TTL at most (as an acquire's per-node wait):
     * the next round starts after this one ends, and a 100 ms grace on a
     * 150 ms lease renewed every 50 ms let that lease end first. */
    r->deadline_ns = INT64_MIN;
    int64_t grace_ms = DLOCK__DECIDED_GRACE_MS;
    for (size_t i = 0; i < r->n; i++) {
        r->items[i].restorable = may_restore(c, &r->items[i]);
        r->deadline_ns = DLOCK__MAX(r->deadline_ns, r->items[i].lease_end_ns);
        grace_ms = DLOCK__MIN(grace_ms, DLOCK__MAX(r->items[i].rec->ttl_ms / 10, 1));
    }
    build_calls(r);
    r->undecided = r->n;
    r->fo = (dlock__fanout_opts){.io_timeout_ms = c->opts.io_timeout_ms,
                                 .deadline_ns = r->deadline_ns,
                                 .grace_ms = grace_ms};
    r->counts.rounds++;
    r->counts.calls += r->nchunks * c->n_nodes;
    dlock__fan_init(&r->fan, c, r->reqs, (uint32_t)r->nchunks, &r->fo, round_cb, r);
    dlock__fan_start(&r->fan, loop, renewed);
}
