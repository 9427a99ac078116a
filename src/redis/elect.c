/* SPDX-License-Identifier: BSD-3-Clause */
/* An election's calls on Redis (backend.h, "elections"; the design is
 * src/engine/election.c's): the value beside the term's lock, in a hash
 * KEY NUL "value" in the lock key's slot, written by elect_write.lua on
 * every node (a Redlock's write counts on a majority) and read by
 * elect_leader.c; an observer's wake-ups on the wake-up thread
 * (wakeup.h): the lock's channel, where a resign's release publishes, and
 * the election's channel (keys.h), where every value write publishes, as
 * the waiter's inbox, so that a write wakes the observers only and not
 * the standbys waiting in line. The wake-up thread subscribes on every
 * node, so a message from any node of a Redlock wakes the observer. */
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "election.h"
#include "error.h"
#include "fanout.h"
#include "fanout_run.h"
#include "handle.h"
#include "keys.h"
#include "kind_steps.h"
#include "op.h"
#include "quorum.h"
#include "redis_backend.h"
#include "restore_stamp.h"
#include "scripts.h"
#include "wakeup.h"

/* A value write (elect_write.lua): its arguments, copied, so that a
 * started write needs nothing of the handle nor of the caller's value
 * (an election freed meanwhile, election.c), and its tally. The script
 * goes to every node (a Redlock's: each node where our token holds the
 * key writes it) and counts as an extend does (quorum.c): written on a
 * majority, or "not ours" on a majority, else no majority. */
typedef struct write_rec {
    dlock__tally t;
    dlock__errbuf detail; /* the nodes' part of the message */
    char *vkey, *ch, *copy; /* copy: name, token, value, one block */
    const char *args[7];
    size_t lens[7];
    char fence[24], seq[24];
    dlock__req req;
    dlock__fanout_opts fo;
    dlock__fan fan; /* a started write's run (elect_write_start) */
    dlock__op *op;
    dlock__errbuf *err; /* its message's */
    /* A Redlock's: the write's stamp as a key put back carries it
     * (lib/stamp_batch.lua), set on the handle's restore stamp once a
     * majority took the write; the stamp is counted, as the handle may be
     * freed before a started write ends. */
    dlock__restore_stamp *stamp;
    char *stamp_bytes;
    size_t stamp_len;
} write_rec;

static void write_clear(write_rec *w)
{
    dlock__free(w->vkey);
    dlock__free(w->ch);
    dlock__free(w->copy);
    dlock__free(w->stamp_bytes);
    dlock__restore_stamp_unref(w->stamp, 0);
    dlock__err_free(&w->detail);
}

/* stamp_batch.lua's stamp of the write in w: '!', then the value hash's
 * key, the token, the fence, the value and the sequence, each as its
 * length, ':' and its bytes (the token: a stamp of an earlier term of the
 * handle's, kept until its new term's first write, is put back nowhere). Only where keys are put back (restore_batch.lua: a
 * Redlock, not a Cluster) and the handle has a stamp (an election's).
 * DLOCK_OK or DLOCK_ENOMEM. */
static int stamp_prepare(write_rec *w, dlock_lock *l)
{
    dlock_client *c = l->client;
    if (c->n_nodes < 2 || dlock__client_cluster(c) || !l->renewal.stamp)
        return DLOCK_OK;
    enum { VKEY = 1, TOKEN = 2, FENCE = 3, VAL = 4, SEQ = 6 }; /* in w->args */
    static const int part[5] = {VKEY, TOKEN, FENCE, VAL, SEQ};
    size_t cap = 1;
    for (int k = 0; k < 5; k++)
        cap += w->lens[part[k]] + 24;
    char *at = w->stamp_bytes = dlock__malloc(cap);
    if (!at)
        return DLOCK_ENOMEM;
    *at++ = '!';
    for (int k = 0; k < 5; k++) {
        size_t n = w->lens[part[k]];
        at += snprintf(at, 24, "%zu:", n);
        if (n)
            memcpy(at, w->args[part[k]], n);
        at += n;
    }
    w->stamp_len = (size_t)(at - w->stamp_bytes);
    w->stamp = dlock__restore_stamp_ref(l->renewal.stamp);
    return DLOCK_OK;
}

/* A write a majority took is what a key put back carries from now on. */
static void stamp_commit(write_rec *w, int rc)
{
    if (rc != DLOCK_OK || !w->stamp)
        return;
    dlock__restore_stamp_set(w->stamp, w->stamp_bytes, w->stamp_len);
    w->stamp_bytes = NULL;
}

/* The script's request for l's hold and value, into w: DLOCK_OK or
 * DLOCK_ENOMEM (w cleared). The write's sequence is the writer's
 * monotonic clock: a leader's writes go one after another, so where
 * nodes hold different writes of one term (one missed a proclaim) the
 * reader takes the newest (elect_leader.c). */
static int write_prepare(write_rec *w, dlock_lock *l, const char *value, size_t len)
{
    dlock_client *c = l->client;
    size_t vlen = 0, clen = 0, off = 0;
    memset(w, 0, sizeof *w);
    w->vkey = dlock__helper_key(c, l->name, l->name_len, "value", 5, &vlen);
    w->ch = dlock__elect_channel_for(c, l->name, l->name_len, &clen, &off);
    w->copy = dlock__malloc(l->name_len + l->token_len + len + 1);
    if (!w->vkey || !w->ch || !w->copy) {
        write_clear(w);
        return DLOCK_ENOMEM;
    }
    char *name = w->copy, *token = name + l->name_len, *val = token + l->token_len;
    memcpy(name, l->name, l->name_len);
    memcpy(token, l->token, l->token_len);
    if (len)
        memcpy(val, value, len);
    int flen = snprintf(w->fence, sizeof w->fence, "%llu", (unsigned long long)l->fence);
    int slen = snprintf(w->seq, sizeof w->seq, "%lld", (long long)dlock__now_ns());
    const char *args[7] = {name, w->vkey, token, w->fence, val, w->ch, w->seq};
    size_t lens[7] = {l->name_len, vlen, l->token_len, (size_t)flen, len, clen, (size_t)slen};
    memcpy(w->args, args, sizeof args);
    memcpy(w->lens, lens, sizeof lens);
    w->req = (dlock__req){.script = dlock__script_get(DLOCK__S_ELECT_WRITE), .numkeys = 2,
                          .nargs = 7, .args = w->args, .arglens = w->lens};
    w->fo = (dlock__fanout_opts){.io_timeout_ms = c->opts.io_timeout_ms,
                                 .deadline_ns = INT64_MAX, .grace_ms = DLOCK__DECIDED_GRACE_MS};
    dlock__tally_init(&w->t, c, &w->detail);
    if (stamp_prepare(w, l) != DLOCK_OK) {
        write_clear(w);
        return DLOCK_ENOMEM;
    }
    return DLOCK_OK;
}

/* The write's code from the run's rc and the tally, with the handle's
 * message (err) set for it. */
static int write_verdict(write_rec *w, int rc, dlock__errbuf *err)
{
    if (rc == DLOCK_OK)
        rc = dlock__tally_owner_code(&w->t);
    if (rc == DLOCK_EEXPIRED)
        dlock__err_set(err, "the election's value was not written: the term's lease had "
                            "run out");
    else if (rc == DLOCK_ENOTOWNER)
        dlock__err_set(err, "the election's value was not written: another candidate "
                            "holds the term");
    else if (rc != DLOCK_OK)
        dlock__err_set(err, "the election's value was not written: %s",
                       w->detail.msg ? w->detail.msg : dlock_strerror(rc));
    return rc;
}

int dlock__redis_elect_write(dlock_lock *l, const char *value, size_t len)
{
    write_rec w;
    int rc = write_prepare(&w, l, value, len);
    if (rc != DLOCK_OK)
        return rc;
    rc = dlock__fanout(l->client, &w.req, 1, &w.fo, dlock__owner_cb, &w.t);
    rc = write_verdict(&w, rc, &l->err);
    stamp_commit(&w, rc);
    write_clear(&w);
    return rc;
}

static void written(dlock__fan *f)
{
    write_rec *w = DLOCK__OWNER(f, write_rec, fan);
    dlock__op *op = w->op;
    /* The message goes to the starter's: the handle may be gone
     * (backend.h, elect_write_start). */
    op->v.code = write_verdict(w, f->rc, w->err);
    stamp_commit(w, op->v.code);
    write_clear(w);
    dlock__free(w);
    dlock__op_complete(op);
}

int dlock__redis_elect_write_start(dlock_lock *l, const char *value, size_t len, dlock__op *op,
                                   dlock__errbuf *err)
{
    write_rec *w = dlock__malloc(sizeof *w);
    if (!w || write_prepare(w, l, value, len) != DLOCK_OK) {
        dlock__free(w);
        return DLOCK_ENOMEM;
    }
    w->op = op;
    w->err = err;
    dlock__fan_init(&w->fan, l->client, &w->req, 1, &w->fo, dlock__owner_cb, &w->t);
    dlock__fan_start(&w->fan, op->loop, written);
    return DLOCK_OK;
}

/* The observer's waiter record and the channel names it points to. */
typedef struct elect_rec {
    dlock__waiter w;
    char *channel, *elect;
    int canceled; /* never set: dlock_election_cancel() wakes the observer itself */
} elect_rec;

/* Called by the wake-up thread under the waiter's mu (the watch's): a
 * message, or a subscription confirmed again after a broken connection
 * (dlock__chan_poke_all, which signals nothing itself). The observer may
 * be asleep on the condition with no timeout: it is woken here. */
static void bump(void *arg)
{
    dlock__elect_watch *ew = arg;
    ew->woken++;
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&ew->cond));
}

static void rec_free(elect_rec *r)
{
    dlock__free(r->channel);
    dlock__free(r->elect);
    dlock__free(r);
}

int dlock__redis_elect_watch(dlock_client *c, const char *key, size_t klen,
                             dlock__elect_watch *ew)
{
    elect_rec *r = dlock__calloc(1, sizeof *r);
    size_t clen = 0, elen = 0, off = 0;
    if (r) {
        r->channel = dlock__wake_channel_for(c, key, klen, &clen);
        r->elect = dlock__elect_channel_for(c, key, klen, &elen, &off);
    }
    if (!r || !r->channel || !r->elect) {
        if (r)
            rec_free(r);
        return DLOCK_ENOMEM;
    }
    r->w = (dlock__waiter){.channel = r->channel, .channel_len = clen,
                           .inbox = r->elect + off, .inbox_len = elen - off,
                           .mu = &ew->mu, .cond = &ew->cond, .canceled = &r->canceled,
                           .wake = bump, .wake_arg = ew};
    int rc = dlock__wakeup_watch_start(c, &r->w);
    if (rc != DLOCK_OK) {
        rec_free(r);
        return rc;
    }
    /* Until a node confirms the subscriptions a change may go unseen: the
     * first look comes after that (or after the I/O timeout: a node that
     * cannot subscribe now still answers the looks at lease ends). */
    int ready = dlock__wakeup_watch_ready(c, &r->w,
                                          dlock__deadline_after_ms(c->opts.io_timeout_ms));
    if (ready < 0) { /* pub/sub refused: no pushes to observe by */
        dlock__wakeup_unwatch(c, &r->w);
        rec_free(r);
        return DLOCK_EREFUSED;
    }
    ew->rec = r;
    return DLOCK_OK;
}

void dlock__redis_elect_unwatch(dlock_client *c, dlock__elect_watch *ew)
{
    elect_rec *r = ew->rec;
    if (!r)
        return;
    dlock__wakeup_unwatch(c, &r->w);
    rec_free(r);
    ew->rec = NULL;
}
