/* SPDX-License-Identifier: BSD-3-Clause */
/* An election on a looped client (dlock.h, dlock_election_campaign_start):
 * the same campaign as election.c's, as requests on the client's loop.
 *   campaign = the term lock's acquire_start (async.c), then, where the
 *     grant does not write the value itself (backend.h,
 *     elect_value_at_grant), the backend's elect_write_start; a write
 *     that fails resigns the term (release_start) before the caller
 *     hears the write's code, as the blocking campaign does;
 *   resign = the term lock's release_start.
 * One record per pending verb (dlock__campaign), so that the election may
 * be freed while the value's write is on the wire: the write copied what
 * it needed, and the record, no longer the election's, keeps the client
 * from ending (client.h, closing) until the write answers. */
#include <string.h>

#include "backend.h"
#include "client.h"
#include "election.h"
#include "engine.h"
#include "error.h"
#include "handle.h"
#include "op.h"

typedef struct dlock__campaign {
    dlock_election *e; /* NULL once the election was freed (a write in flight) */
    dlock_client *client;
    dlock_election_done_fn cb;
    void *arg;
    int writing;  /* the value's write is in flight */
    int write_rc; /* a failed write's code, while its term is resigned */
    dlock__op op;
    dlock__errbuf err; /* the write's message */
} campaign;

static int begin(dlock_election *e, dlock_election_done_fn cb, void *arg, campaign **out)
{
    *out = NULL;
    if (!e || !cb || !e->client->loop || dlock__client_forked(e->client))
        return DLOCK_EINVAL;
    if (e->pending)
        return DLOCK_EBUSY;
    campaign *k = dlock__calloc(1, sizeof *k);
    if (!k)
        return DLOCK_ENOMEM;
    *k = (campaign){.e = e, .client = e->client, .cb = cb, .arg = arg};
    *out = k;
    return DLOCK_OK;
}

/* The verb's end: the caller hears rc. Nothing of the record or the
 * election is touched after: the callback may free the election. */
static void finish(campaign *k, int rc)
{
    dlock_election *e = k->e;
    dlock_election_done_fn cb = k->cb;
    void *arg = k->arg;
    e->pending = NULL;
    dlock__err_free(&k->err);
    dlock__free(k);
    cb(e, rc, arg);
}

/* A failed write's term is resigned: the caller hears the write's code,
 * with its message. */
static void term_resigned(dlock_lock *l, int rc, void *arg)
{
    campaign *k = arg;
    (void)rc;
    dlock__err_set(&l->err, "%s", dlock__err_str(&k->err));
    finish(k, k->write_rc);
}

static void term_over(campaign *k, int rc)
{
    k->write_rc = rc;
    if (dlock_lock_release_start(k->e->lock, term_resigned, k) != DLOCK_OK)
        term_resigned(k->e->lock, DLOCK_OK, k); /* (on the loop already) */
}

static void written(dlock__op *op)
{
    campaign *k = DLOCK__OWNER(op, campaign, op);
    k->writing = 0;
    if (!k->e) { /* freed meanwhile: nobody to tell */
        dlock_client *c = k->client;
        dlock__err_free(&k->err);
        dlock__free(k);
        dlock__client_closed(c);
        return;
    }
    if (op->v.code == DLOCK_OK)
        finish(k, DLOCK_OK);
    else
        term_over(k, op->v.code);
}

static void acquired(dlock_lock *l, int rc, void *arg)
{
    campaign *k = arg;
    const dlock__backend *b = l->backend;
    if (rc != DLOCK_OK || b->elect_value_at_grant) {
        finish(k, rc);
        return;
    }
    dlock_election *e = k->e;
    dlock__op_begin(&k->op, l, e->client->loop, written);
    k->writing = 1;
    if (b->elect_write_start(l, e->value, e->value_len, &k->op, &k->err) != DLOCK_OK) {
        k->writing = 0;
        dlock__err_set(&k->err, "the election's value was not written: out of memory");
        term_over(k, DLOCK_ENOMEM);
    }
}

int dlock_election_campaign_start(dlock_election *e, const char *value, int64_t wait_ms,
                                  dlock_election_done_fn cb, void *arg)
{
    if (!value)
        return DLOCK_EINVAL;
    campaign *k;
    int rc = begin(e, cb, arg, &k);
    if (rc != DLOCK_OK)
        return rc;
    size_t len = dlock__election_value_length(value);
    if (len == SIZE_MAX || dlock_lock_state_get(e->lock) == DLOCK_STATE_HELD)
        rc = DLOCK_EINVAL;
    else if (!e->client->backend->elect_value_at_grant && !e->client->backend->elect_write_start)
        rc = DLOCK_ENOTSUP;
    else
        rc = dlock__election_keep_value(e, value, len);
    if (rc == DLOCK_OK)
        rc = dlock_lock_acquire_start(e->lock, wait_ms, acquired, k);
    if (rc != DLOCK_OK) {
        dlock__free(k);
        return rc;
    }
    e->pending = k;
    return DLOCK_OK;
}

/* A resign's word to the observers (backend.h, elect_resigned_start),
 * on its own after the resign answered: the client waits for it
 * (closing), the election does not. */
typedef struct resign_word {
    dlock__op op;
    dlock_client *client;
} resign_word;

static void word_said(dlock__op *op)
{
    resign_word *w = DLOCK__OWNER(op, resign_word, op);
    dlock_client *c = w->client;
    dlock__free(w);
    dlock__client_closed(c);
}

static void say_resigned(dlock_lock *l)
{
    resign_word *w = dlock__calloc(1, sizeof *w);
    if (!w)
        return; /* best effort: observers look again at the lease's end */
    w->client = l->client;
    dlock__op_begin(&w->op, l, l->client->loop, word_said);
    if (l->backend->elect_resigned_start(l, &w->op) != DLOCK_OK) {
        dlock__free(w);
        return;
    }
    w->client->closing++;
}

static void resigned(dlock_lock *l, int rc, void *arg)
{
    if (rc == DLOCK_OK && l->backend->elect_resigned_start)
        say_resigned(l);
    finish(arg, rc);
}

int dlock_election_resign_start(dlock_election *e, dlock_election_done_fn cb, void *arg)
{
    campaign *k;
    int rc = begin(e, cb, arg, &k);
    if (rc == DLOCK_OK && (rc = dlock_lock_release_start(e->lock, resigned, k)) != DLOCK_OK)
        dlock__free(k);
    if (rc == DLOCK_OK)
        e->pending = k;
    return rc;
}

void dlock__election_loop_free(dlock_election *e)
{
    campaign *k = e->pending;
    if (!k || !k->writing)
        return; /* a wait or a resign ends in the term lock's free (ECANCELED) */
    /* The write goes on without us: the caller hears of the campaign
     * now, the term is let go with the lock, and the client waits for
     * the write's end. */
    dlock_election_done_fn cb = k->cb;
    void *arg = k->arg;
    k->e = NULL;
    e->pending = NULL;
    k->client->closing++;
    cb(e, DLOCK_ECANCELED, arg);
}

void dlock__election_loop_cancel(dlock_election *e)
{
    /* A wait ends; a write in flight is a round trip, not a wait. */
    if (e->pending && !e->pending->writing)
        dlock__engine_cancel(e->lock);
}
