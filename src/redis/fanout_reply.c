/* SPDX-License-Identifier: BSD-3-Clause */
/* A fan-out slot's replies: MOVED/ASK followed to another connection,
 * NOSCRIPT answered with the script's body, a reply held for its WAIT,
 * Sentinel's READONLY, and the rest reported to the run's callback; from
 * its own connection (dlock__fan_drain) or from its node's shared one
 * (dlock__fan_pipe_ops). */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "error.h"
#include "fanout_req.h"
#include "fanout_run.h"
#include "stats.h"

#define ACK_BIT DLOCK__FANOUT_ACK_BIT
#define ASKING_BIT DLOCK__FANOUT_ASKING_BIT
/* Redirects one run follows for a node before it gives up (DLOCK_EIO,
 * retried by a wait): more means the map keeps changing under us. */
#define MAX_REDIRECTS 5

typedef dlock__fan fan;
typedef dlock__fan_slot slot;
#define after_ms dlock__fan_after_ms

/* One request of the slot answered (or failed its WAIT). */
static void count_answer(fan *f, slot *s, int64_t now)
{
    s->answered++;
    if (s->answered == f->nreqs)
        s->state = SLOT_ANSWERED;
    /* The I/O timeout bounds silence, not a whole pipeline: a node that
     * keeps answering a long batch (a watchdog round of many chunks)
     * keeps its slot alive. */
    s->deadline_ns = after_ms(now, f->io_ms, f->cap_ns);
}

static int is_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && r->len >= 8 &&
           !memcmp(r->str, "NOSCRIPT", 8);
}

static int is_readonly(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && r->len >= 8 && !memcmp(r->str, "READONLY", 8);
}

/* The server refused a request (OOM, a replica's READONLY, LOADING,
 * BUSY, an ACL's NOPERM): a node error for the observer. A script's own
 * answer (WRONGTYPE: another kind's key) is the lock's, not the node's. */
static void note_refusal(fan *f, const slot *s, const redisReply *r)
{
    int code = dlock__map_redis_error(r->str, r->len);
    if (code == DLOCK_EREFUSED || code == DLOCK_EBUSY || code == DLOCK_EAUTH)
        dlock__stats_node_refused(&f->client->obs, f->client->nodes[s->node].name, code);
}

/* Cluster: if r is MOVED or ASK, move the slot to the connection of the
 * master named and send its unanswered requests there again (after
 * ASKING for ASK): a redirected command did not run. Returns 0 if r is no
 * redirect (left to the caller), 1 when followed (r freed), or a negative
 * code (r freed; the connection is broken). */
static int follow_redirect(fan *f, slot *s, redisReply *r)
{
    dlock__node *n = &f->client->nodes[s->node];
    int ask = 0, port = 0;
    unsigned rslot = 0;
    char host[256];
    if (!dlock__cluster_redirect(r, &ask, &rslot, host, sizeof host, &port))
        return 0;
    char what[200];
    snprintf(what, sizeof what, "%.190s", r->str);
    freeReplyObject(r);
    if (!ask)
        dlock__cluster_moved(n->cluster, rslot, host, port);
    if (++s->redirects > MAX_REDIRECTS)
        return dlock__conn_fail(s->conn, DLOCK_EIO, "too many cluster redirects (last: %s)", what);
    dlock__conn *nc = dlock__cluster_checkout_addr(n->cluster, &n->url, n->tls_ctx, host, port, 1, 0);
    if (!nc)
        return dlock__conn_fail(s->conn, DLOCK_ENOMEM, "out of memory");
    /* What the old connection still owes (the rest of the pipeline, all
     * redirected too) is dropped with it. */
    dlock__conn_abandon(s->conn);
    dlock__node_checkin(n, s->conn);
    s->conn = nc;
    if (s->held) {
        /* A reply waiting for its WAIT on the old connection: its
         * acknowledgement is lost with it, so its outcome is unknown. */
        freeReplyObject(s->held);
        s->held = NULL;
        uint32_t j = s->answered++;
        f->stop = f->cb(f->arg, s->node, j, DLOCK_EUNKNOWN, NULL,
                        "acknowledgement lost to a cluster redirect", 0);
        if (s->answered == f->nreqs)
            s->state = SLOT_ANSWERED;
        if (f->stop || s->state != SLOT_LIVE)
            return 1;
    }
    s->drop_acks = 0;
    int rc = DLOCK_OK;
    for (uint32_t j = s->answered; j < f->nreqs && rc == DLOCK_OK; j++) {
        if (ask) {
            const char *argv[1] = {"ASKING"};
            rc = dlock__conn_append(nc, 1, argv, NULL, j | ASKING_BIT);
        }
        if (rc == DLOCK_OK)
            rc = dlock__fanout_append(f->client, nc, &f->reqs[j], j, 0);
    }
    if (rc != DLOCK_OK)
        return dlock__conn_fail(nc, rc, "cannot send after %s", what);
    return 1;
}

/* The reply of a WAIT behind request idx. Returns the request's held
 * reply, now to be reported, or NULL when the WAIT was consumed here
 * (dropped, or too few replicas: reported as DLOCK_ENOREPLICAS). */
static redisReply *take_ack(fan *f, slot *s, redisReply *r, uint32_t idx, int64_t now)
{
    const struct dlock_client *client = f->client;
    if (s->drop_acks > 0 || !s->held) {
        s->drop_acks -= s->drop_acks > 0;
        freeReplyObject(r);
        return NULL;
    }
    redisReply *held = s->held;
    s->held = NULL;
    long long acks = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    if (acks >= client->opts.min_replicas || held->type == REDIS_REPLY_ERROR)
        return held;
    /* The write (if any) stands on the primary alone: the caller undoes it. */
    char detail[160];
    snprintf(detail, sizeof detail, "%lld of %d replicas acknowledged within %d ms (WAIT)",
             acks < 0 ? 0 : acks, client->opts.min_replicas,
             client->opts.min_replicas_timeout_ms);
    freeReplyObject(held);
    count_answer(f, s, now);
    f->stop = f->cb(f->arg, s->node, idx, DLOCK_ENOREPLICAS, NULL, detail, 0) && !f->graced;
    if (f->stop)
        f->stop = dlock__fan_begin_grace(f, now);
    return NULL;
}

int dlock__fan_push(slot *s)
{
    if (s->pc)
        return dlock__pipe_arm(s->pc);
    return dlock__conn_io(s->conn, POLLOUT);
}

/* One reply (r, under index idx) taken from the slot's connection.
 * DLOCK_OK to go on reading, or the code of a failure. */
int dlock__fan_reply(fan *f, slot *s, redisReply *r, uint32_t idx, int64_t now)
{
    dlock__node *node = &f->client->nodes[s->node];
    if (idx & ASKING_BIT) {
        freeReplyObject(r); /* +OK to ASKING */
        return DLOCK_OK;
    }
    int rc;
    if (node->cluster && (rc = follow_redirect(f, s, r)) != 0) {
        /* r was a redirect (freed); the slot has another connection. */
        if (rc < 0)
            return rc;
        s->deadline_ns = after_ms(now, dlock__fan_conn_ready(s->conn) ? f->io_ms : f->connect_ms,
                                  f->cap_ns);
        return s->conn->state == DLOCK__CS_OPEN ? dlock__conn_io(s->conn, POLLOUT) : DLOCK_OK;
    }
    if (idx & ACK_BIT) {
        idx &= ~ACK_BIT;
        if (!(r = take_ack(f, s, r, idx, now)))
            return DLOCK_OK;
    } else if (is_noscript(r) && f->reqs[idx].script) {
        /* SCRIPT FLUSH or a restart emptied the script cache: send the
         * body once; EVAL caches it again. */
        freeReplyObject(r);
        if (dlock__fanout_wants_acks(f->client, &f->reqs[idx]))
            s->drop_acks++;
        s->conn->tag = s->pc ? &s->pu.tag : NULL;
        rc = dlock__fanout_append(f->client, s->conn, &f->reqs[idx], idx, 1);
        s->conn->tag = NULL;
        return rc == DLOCK_OK ? dlock__fan_push(s) : rc;
    } else if (dlock__fanout_wants_acks(f->client, &f->reqs[idx]) && !is_readonly(r)) {
        /* Held until its WAIT says how many replicas have it. */
        if (s->held)
            freeReplyObject(s->held);
        s->held = r;
        s->deadline_ns = after_ms(now, f->io_ms, f->cap_ns);
        return DLOCK_OK;
    }
    if (is_readonly(r) && node->sentinel) {
        /* Sentinel: the primary was demoted under us. A replica ran none
         * of it: not sent, as far as the caller is concerned; the next
         * connection asks the sentinels where the primary is now. */
        dlock__conn_fail(s->conn, DLOCK_EIO, "primary moved (%.100s)", r->str);
        freeReplyObject(r);
        dlock__node_stale(node);
        return DLOCK_EIO;
    }
    count_answer(f, s, now);
    if (r->type == REDIS_REPLY_ERROR)
        note_refusal(f, s, r);
    /* The handshake's INFO came before this reply: let the callback see
     * which server answered (Redlock counts each server once). */
    dlock__node_note_run_id(node, s->conn);
    f->stop = f->cb(f->arg, s->node, idx, DLOCK_OK, r, r->type == REDIS_REPLY_ERROR ? r->str : "",
                    s->conn->server_start_ns) &&
              !f->graced;
    freeReplyObject(r);
    /* Decided with replies of this node still in its buffer (a pipeline of
     * several requests): they are read now, in the grace, not after it
     * (the loop would not see them). */
    if (f->stop)
        f->stop = dlock__fan_begin_grace(f, now);
    return DLOCK_OK;
}

/* Every reply the slot's connection holds, and with TLS the decrypted
 * bytes it still buffers (SSL_pending), which the loop cannot see. */
int dlock__fan_drain(fan *f, slot *s, int rc, int64_t now)
{
    /* A TLS read stops once nothing is buffered, so one more round is
     * rare; the bound only keeps a misbehaving session from spinning. */
    for (int round = 0;; round++) {
        while (rc == DLOCK_OK && s->state == SLOT_LIVE && !f->stop) {
            redisReply *r = NULL;
            uint32_t idx = 0;
            int got = dlock__conn_take(s->conn, &r, &idx);
            if (got < 0)
                return got;
            if (got == 0)
                break;
            rc = dlock__fan_reply(f, s, r, idx, now);
        }
        dlock__conn *c = s->conn;
        if (rc != DLOCK_OK || s->state != SLOT_LIVE || f->stop || round == 8 || !c->tls ||
            c->state != DLOCK__CS_OPEN || !dlock__tls_buffered(c->tls))
            return rc;
        rc = dlock__conn_io(c, POLLIN);
    }
}

/* ---- a slot on its node's shared connection (pipe.h) ---- */

static void slot_heard(dlock__pipe_user *u, redisReply *r, uint32_t idx, int64_t now)
{
    slot *s = DLOCK__OWNER(u, slot, pu);
    fan *f = s->fan;
    if (f->ending || f->stop || s->state != SLOT_LIVE) {
        freeReplyObject(r); /* as a slot's own connection's drain stops */
        return;
    }
    dlock__fan_after(f, s, dlock__fan_reply(f, s, r, idx, now), now);
}

static void slot_lost(dlock__pipe_user *u, int code)
{
    slot *s = DLOCK__OWNER(u, slot, pu);
    fan *f = s->fan;
    if (f->ending || f->stop || s->state != SLOT_LIVE)
        return;
    dlock__fan_after(f, s, code, dlock__now_ns());
}

static void slot_conn_ready(dlock__pipe_user *u)
{
    slot *s = DLOCK__OWNER(u, slot, pu);
    fan *f = s->fan;
    if (f->ending || s->state != SLOT_LIVE)
        return;
    int64_t now = dlock__now_ns();
    s->deadline_ns = after_ms(now, f->io_ms, f->cap_ns);
    dlock__fan_after(f, s, DLOCK_OK, now);
}

const dlock__pipe_user_ops dlock__fan_pipe_ops = {slot_heard, slot_lost, slot_conn_ready};
