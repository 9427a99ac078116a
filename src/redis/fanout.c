/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "cluster.h"
#include "clock.h"
#include "conn.h"
#include "error.h"
#include "fanout.h"

typedef struct slot {
    dlock__conn *conn;
    uint32_t answered;
    int active;
    int kept; /* timed out with requests sent: handed back (keep_timed_out) */
    int64_t deadline_ns;
    /* Replica acknowledgement: the reply of a request that waits for its
     * WAIT, and WAIT replies to drop (the WAIT behind an EVALSHA that
     * came back NOSCRIPT; the EVAL sent instead has its own). */
    redisReply *held;
    uint32_t drop_acks;
    int redirects; /* Cluster: MOVED/ASK followed in this run */
    unsigned cslot; /* Cluster: the hash slot of the run's keys */
} slot;

/* A request's WAIT goes back to the caller as its own index with this bit
 * set, never seen by the callback. */
#define ACK_BIT UINT32_C(0x80000000)
/* Cluster: the reply to the ASKING before a request sent after ASK. */
#define ASKING_BIT UINT32_C(0x40000000)
/* Redirects one run follows for a node before it gives up (DLOCK_EIO,
 * retried by a wait): more means the map keeps changing under us. */
#define MAX_REDIRECTS 5

static int64_t after_ms(int64_t now, int64_t ms, int64_t cap)
{
    int64_t d = (ms > (INT64_MAX - now) / DLOCK__NS_PER_MS)
                    ? INT64_MAX
                    : now + ms * DLOCK__NS_PER_MS;
    return d < cap ? d : cap;
}

/* Replica acknowledgement (dlock_client_options.min_replicas) applies to
 * the requests that grant or lengthen a lease, as the kind's steps say
 * (kind_steps.c, acks): every kind's acquire but fair
 * mode's, and every extend. Releases need no acknowledgement (a lost
 * release only leaves a key to expire); renewals are left out
 * (docs/deployment.md). */
static int wants_acks(const struct dlock_client *client, const dlock__req *r)
{
    return client->opts.min_replicas > 0 && r->script && r->acks;
}

/* WAIT right behind the request on the same connection: it waits for the
 * replication offset of this connection's last write, which is the
 * request's own. */
static int append_wait(const struct dlock_client *client, dlock__conn *c, uint32_t idx)
{
    char n[16], ms[16];
    snprintf(n, sizeof n, "%d", client->opts.min_replicas);
    snprintf(ms, sizeof ms, "%d", client->opts.min_replicas_timeout_ms);
    const char *argv[3] = {"WAIT", n, ms};
    return dlock__conn_append(c, 3, argv, NULL, idx | ACK_BIT);
}

static int send_req_acked(const struct dlock_client *client, dlock__conn *c,
                          const dlock__req *r, uint32_t idx, int use_eval)
{
    int rc = r->script ? dlock__conn_append_script(c, r->script, r->numkeys, r->nargs, r->args,
                                                   r->arglens, use_eval, idx)
                       : dlock__conn_append(c, r->nargs, r->args, r->arglens, idx);
    if (rc == DLOCK_OK && wants_acks(client, r))
        rc = append_wait(client, c, idx);
    return rc;
}

/* Whether the slot's next read may be one blocking recv() with the I/O
 * timeout as the socket's receive timeout: an open plain connection with
 * all its output written, only a reply to wait for, and time enough that
 * the receive timeout ends neither past the run's deadline nor more than
 * 2 ms past the slot's own (a late first read, or one after a signal,
 * goes through poll() with the exact deadline). */
static int can_read_blocking(const slot *s, int64_t io_ms, int64_t cap_ns)
{
    const dlock__conn *c = s->conn;
    if (c->state != DLOCK__CS_OPEN || c->tls || io_ms <= 0 || io_ms > INT32_MAX / 2 ||
        dlock__conn_events(c) != POLLIN)
        return 0;
    int64_t now = dlock__now_ns(), io_ns = io_ms * DLOCK__NS_PER_MS;
    return cap_ns - now >= io_ns && s->deadline_ns - now >= io_ns - 2 * DLOCK__NS_PER_MS;
}

static int send_req(dlock__conn *c, const dlock__req *r, uint32_t idx,
                    int use_eval)
{
    if (r->script)
        return dlock__conn_append_script(c, r->script, r->numkeys, r->nargs,
                                         r->args, r->arglens, use_eval, idx);
    return dlock__conn_append(c, r->nargs, r->args, r->arglens, idx);
}

/* The callback decided the run: with a grace (opts.grace_ms), the nodes
 * still to answer get that much longer (a release or renewal should reach
 * every node that answers at once), but a silent one is not waited for;
 * from then on the callback's verdict no longer stops the run. Returns the
 * new "stop": 1 without a grace, else 0. */
static int begin_grace(slot *slots, size_t n, const dlock__fanout_opts *o, int64_t now,
                       int64_t *cap_ns, int *graced)
{
    if (o->grace_ms <= 0)
        return 1;
    *graced = 1;
    *cap_ns = after_ms(now, o->grace_ms, *cap_ns);
    for (size_t j = 0; j < n; j++)
        if (slots[j].active)
            slots[j].deadline_ns = DLOCK__MIN(slots[j].deadline_ns, *cap_ns);
    return 0;
}

/* Cluster: the slot's master could not be reached and nothing was sent
 * (refused, reset, or silent before the first command). The map is learned
 * again now from the other nodes, this master asked last; if one answers,
 * the cluster is up and the slot is between masters (a failover in
 * flight, which the cluster itself will report as CLUSTERDOWN once it
 * notices): DLOCK_EBUSY, like CLUSTERDOWN, which a wait rides out and the
 * dlock command waits for (issue 19 item 3). If no node answers, the
 * cluster is unreachable: DLOCK_EIO stays. */
static int cluster_failure(struct dlock_client *client, size_t i, slot *s, int code, int cancel_fd,
                           int64_t deadline_ns)
{
    dlock__node *n = &client->nodes[i];
    dlock__conn *c = s->conn;
    if (!n->cluster || code != DLOCK_EIO || !c || c->caller_sent || !c->route ||
        c->state != DLOCK__CS_BROKEN)
        return code;
    if (dlock__cluster_relearn(n->cluster, &n->url, n->tls_ctx, c, cancel_fd, deadline_ns) !=
        DLOCK_OK)
        return code;
    size_t len = strlen(c->err);
    snprintf(c->err + len, sizeof c->err - len,
             "; the cluster answers: slot %u's master is failing over", s->cslot);
    return DLOCK_EBUSY;
}

/* Report every unanswered request of node i as failed with err. */
static int fail_node(slot *s, size_t i, uint32_t nreqs, int err,
                     dlock__on_reply cb, void *arg)
{
    int stop = 0;
    const char *detail = s->conn ? s->conn->err : "out of memory";
    s->active = 0;
    /* Replies arrive in request order, so the unanswered ones are the tail. */
    for (uint32_t j = s->answered; j < nreqs && !stop; j++)
        stop = cb(arg, i, j, err, NULL, detail, 0);
    s->answered = nreqs;
    return stop;
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

/* Cluster: if r is MOVED or ASK, move node i's run to the connection of
 * the master named and send its unanswered requests there again (after
 * ASKING for ASK): a redirected command did not run. Returns 0 if r is no
 * redirect (left to the caller), 1 when followed (r freed), or a negative
 * code (r freed; the connection is broken). */
static int follow_redirect(struct dlock_client *client, size_t i, slot *s, redisReply *r,
                           const dlock__req *reqs, uint32_t nreqs, dlock__on_reply cb, void *arg,
                           int *stop)
{
    dlock__node *n = &client->nodes[i];
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
        *stop = cb(arg, i, j, DLOCK_EUNKNOWN, NULL, "acknowledgement lost to a cluster redirect", 0);
        if (s->answered == nreqs)
            s->active = 0;
        if (*stop || !s->active)
            return 1;
    }
    s->drop_acks = 0;
    int rc = DLOCK_OK;
    for (uint32_t j = s->answered; j < nreqs && rc == DLOCK_OK; j++) {
        if (ask) {
            const char *argv[1] = {"ASKING"};
            rc = dlock__conn_append(nc, 1, argv, NULL, j | ASKING_BIT);
        }
        if (rc == DLOCK_OK)
            rc = send_req_acked(client, nc, &reqs[j], j, 0);
    }
    if (rc != DLOCK_OK)
        return dlock__conn_fail(nc, rc, "cannot send after %s", what);
    return 1;
}

int dlock__fanout(struct dlock_client *client, const dlock__req *reqs,
                  uint32_t nreqs, const dlock__fanout_opts *o,
                  dlock__on_reply cb, void *arg)
{
    return dlock__fanout_cancellable(client, reqs, nreqs, o, -1, NULL, cb, arg);
}

static int run(struct dlock_client *client, const dlock__req *reqs, uint32_t nreqs,
               const dlock__fanout_opts *o, int cancel_fd, dlock__conn **kept,
               int keep_timed_out, dlock__on_reply cb, void *arg);

int dlock__fanout_cancellable(struct dlock_client *client, const dlock__req *reqs,
                              uint32_t nreqs, const dlock__fanout_opts *o, int cancel_fd,
                              dlock__conn **kept, dlock__on_reply cb, void *arg)
{
    return run(client, reqs, nreqs, o, cancel_fd, kept, 0, cb, arg);
}

int dlock__fanout_attempt(struct dlock_client *client, const dlock__req *reqs,
                          uint32_t nreqs, const dlock__fanout_opts *o, int cancel_fd,
                          dlock__conn **kept, dlock__on_reply cb, void *arg)
{
    return run(client, reqs, nreqs, o, cancel_fd, kept, 1, cb, arg);
}

static int run(struct dlock_client *client, const dlock__req *reqs, uint32_t nreqs,
               const dlock__fanout_opts *o, int cancel_fd, dlock__conn **kept,
               int keep_timed_out, dlock__on_reply cb, void *arg)
{
    size_t n = client->n_nodes;
    slot slots[DLOCK__MAX_NODES];
    struct pollfd pfd[DLOCK__MAX_NODES + 1];
    size_t pidx[DLOCK__MAX_NODES];
    int stop = 0, graced = 0;
    int64_t now = dlock__now_ns();
    int64_t cap_ns = o->deadline_ns; /* no slot waits past this */
    int64_t connect_ms = client->opts.connect_timeout_ms;
    /* A WAIT may hold the reply back for its whole timeout. */
    int64_t io_ms = o->io_timeout_ms;
    for (uint32_t j = 0; j < nreqs; j++)
        if (wants_acks(client, &reqs[j])) {
            io_ms += client->opts.min_replicas_timeout_ms;
            break;
        }

    memset(slots, 0, n * sizeof *slots); /* only the first n are used */
    for (size_t i = 0; i < n && !stop; i++) {
        slot *s = &slots[i];
        if (o->only && !o->only[i])
            continue;
        /* A cluster routes by the first key: the keys of one run (one
         * lock's, with its helper keys) share a hash slot. Only a cluster
         * needs the slot (its CRC16 is no cost to put on every call). */
        s->cslot = nreqs && client->nodes[i].cluster
                       ? dlock__cluster_req_slot(reqs[0].numkeys, reqs[0].args, reqs[0].arglens)
                       : 0;
        s->conn = dlock__node_checkout_slot(&client->nodes[i], s->cslot, cancel_fd, cap_ns);
        if (!s->conn) {
            stop = fail_node(s, i, nreqs, DLOCK_ENOMEM, cb, arg);
            continue;
        }
        s->active = 1;
        int rc = DLOCK_OK;
        for (uint32_t j = 0; j < nreqs && rc == DLOCK_OK; j++)
            rc = send_req_acked(client, s->conn, &reqs[j], j, 0);
        if (rc != DLOCK_OK) {
            /* A connection that failed before sending keeps its reason
             * (Sentinel: no sentinel knows the master, say). */
            if (rc != DLOCK_ENOMEM && s->conn->err_code)
                rc = s->conn->err_code;
            rc = rc == DLOCK_ENOMEM ? DLOCK_ENOMEM : rc == DLOCK_EUNKNOWN ? DLOCK_EIO : rc;
            stop = fail_node(s, i, nreqs, cluster_failure(client, i, s, rc, cancel_fd, cap_ns),
                             cb, arg);
            continue;
        }
        /* The clock starts after the checkout: a checkout may learn a
         * Cluster's slot map or ask Sentinels first, which can take a
         * timeout of its own when a node stalls, and a deadline taken
         * before it would expire a healthy node's reply before it could
         * come (issue 19, a stalled master breaking the healthy ones). */
        now = dlock__now_ns();
        s->deadline_ns = s->conn->state == DLOCK__CS_CONNECTING
                             ? after_ms(now, connect_ms, o->deadline_ns)
                             : after_ms(now, io_ms, o->deadline_ns);
        /* Push the bytes out now: a pooled connection is writable, and
         * starting every node's write before any wait is what makes the
         * round parallel. */
        if (s->conn->state == DLOCK__CS_OPEN &&
            (rc = dlock__conn_io(s->conn, POLLOUT)) < 0)
            stop = fail_node(s, i, nreqs, cluster_failure(client, i, s, rc, cancel_fd, cap_ns),
                             cb, arg);
    }

    int canceled = 0;
    while (!stop) {
        size_t k = 0;
        int64_t next = INT64_MAX;
        for (size_t i = 0; i < n; i++) {
            if (!slots[i].active)
                continue;
            pfd[k].fd = slots[i].conn->ctx->fd;
            pfd[k].events = dlock__conn_events(slots[i].conn);
            pfd[k].revents = 0;
            pidx[k++] = i;
            if (slots[i].deadline_ns < next)
                next = slots[i].deadline_ns;
        }
        if (k == 0)
            break;
        int pr, fast_rc = DLOCK_OK, fast = k == 1 && cancel_fd < 0 &&
                                          can_read_blocking(&slots[pidx[0]], io_ms, cap_ns);
        size_t kc = k;
        if (fast) {
            /* One node, one socket, nothing to cancel: one blocking recv()
             * instead of poll() + read(). */
            fast_rc = dlock__conn_read_blocking(slots[pidx[0]].conn, (int)io_ms);
            pr = 0;
        } else if (cancel_fd >= 0) {
            pfd[kc].fd = cancel_fd;
            pfd[kc].events = POLLIN;
            pfd[kc].revents = 0;
            kc++;
        }
        if (!fast)
            pr = poll(pfd, (nfds_t)kc, dlock__ms_until(next));
        if (pr > 0 && kc > k && pfd[k].revents) {
            /* Cancelled: stop waiting now. What was sent may still run;
             * the caller queues its undo behind it on the same
             * connections (dlock__fanout_send_behind). */
            canceled = 1;
            for (size_t m = 0; m < k && !stop; m++) {
                slot *s = &slots[pidx[m]];
                stop = fail_node(s, pidx[m], nreqs,
                                 s->conn->caller_sent ? DLOCK_EUNKNOWN : DLOCK_EIO, cb, arg);
            }
            break;
        }
        if (pr < 0 && errno != EINTR) {
            for (size_t m = 0; m < k && !stop; m++) {
                dlock__conn_fail(slots[pidx[m]].conn, DLOCK_EIO, "poll: %s", strerror(errno));
                stop = fail_node(&slots[pidx[m]], pidx[m], nreqs, DLOCK_EIO, cb, arg);
            }
            break;
        }
        now = dlock__now_ns();
        for (size_t m = 0; m < k && !stop; m++) {
            size_t i = pidx[m];
            slot *s = &slots[i];
            dlock__conn *c = s->conn;
            int was_connecting = c->state == DLOCK__CS_CONNECTING;
            int rc = DLOCK_OK;
            if (fast)
                rc = fast_rc;
            else if (pr > 0 && pfd[m].revents)
                rc = dlock__conn_io(c, pfd[m].revents);
            if (rc == DLOCK_OK && was_connecting && c->state == DLOCK__CS_OPEN)
                s->deadline_ns = after_ms(now, io_ms, cap_ns);
            while (rc == DLOCK_OK && s->active && !stop) {
                redisReply *r = NULL;
                uint32_t idx = 0;
                int got = dlock__conn_take(c, &r, &idx);
                if (got <= 0) {
                    rc = got;
                    break;
                }
                if (idx & ASKING_BIT) {
                    freeReplyObject(r); /* +OK to ASKING */
                    continue;
                }
                if (client->nodes[i].cluster && (rc = follow_redirect(client, i, s, r, reqs, nreqs,
                                                                      cb, arg, &stop)) != 0) {
                    /* r was a redirect (freed); c may be another connection. */
                    c = s->conn;
                    if (rc > 0) {
                        rc = DLOCK_OK;
                        s->deadline_ns = after_ms(now, c->state == DLOCK__CS_CONNECTING
                                                           ? connect_ms : io_ms, cap_ns);
                        if (c->state == DLOCK__CS_OPEN)
                            rc = dlock__conn_io(c, POLLOUT);
                    }
                    if (rc != DLOCK_OK || stop)
                        break;
                    continue;
                }
                if (idx & ACK_BIT) {
                    /* WAIT for the held reply of request idx. */
                    idx &= ~ACK_BIT;
                    if (s->drop_acks > 0 || !s->held) {
                        s->drop_acks -= s->drop_acks > 0;
                        freeReplyObject(r);
                        continue;
                    }
                    redisReply *held = s->held;
                    s->held = NULL;
                    long long acks = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
                    freeReplyObject(r);
                    if (acks < client->opts.min_replicas && held->type != REDIS_REPLY_ERROR) {
                        /* The write (if any) stands on the primary alone:
                         * the caller undoes it. */
                        char detail[160];
                        snprintf(detail, sizeof detail,
                                 "%lld of %d replicas acknowledged within %d ms (WAIT)",
                                 acks < 0 ? 0 : acks, client->opts.min_replicas,
                                 client->opts.min_replicas_timeout_ms);
                        freeReplyObject(held);
                        s->answered++;
                        if (s->answered == nreqs)
                            s->active = 0;
                        s->deadline_ns = after_ms(now, io_ms, cap_ns);
                        stop = cb(arg, i, idx, DLOCK_ENOREPLICAS, NULL, detail, 0) && !graced;
                        if (stop)
                            stop = begin_grace(slots, n, o, now, &cap_ns, &graced);
                        continue;
                    }
                    r = held;
                } else if (is_noscript(r) && reqs[idx].script) {
                    /* SCRIPT FLUSH or a restart emptied the script cache:
                     * send the body once; EVAL caches it again. */
                    freeReplyObject(r);
                    if (wants_acks(client, &reqs[idx]))
                        s->drop_acks++;
                    if ((rc = send_req_acked(client, c, &reqs[idx], idx, 1)) == DLOCK_OK)
                        rc = dlock__conn_io(c, POLLOUT);
                    continue;
                } else if (wants_acks(client, &reqs[idx]) && !is_readonly(r)) {
                    /* Held until its WAIT says how many replicas have it. */
                    if (s->held)
                        freeReplyObject(s->held);
                    s->held = r;
                    s->deadline_ns = after_ms(now, io_ms, cap_ns);
                    continue;
                }
                if (is_readonly(r) && client->nodes[i].sentinel) {
                    /* Sentinel: the primary was demoted under us. A
                     * replica ran none of it: not sent, as far as the
                     * caller is concerned; the next connection asks the
                     * sentinels where the primary is now. */
                    dlock__conn_fail(c, DLOCK_EIO, "primary moved (%.100s)", r->str);
                    freeReplyObject(r);
                    dlock__node_stale(&client->nodes[i]);
                    rc = DLOCK_EIO;
                    break;
                }
                s->answered++;
                if (s->answered == nreqs)
                    s->active = 0;
                /* The I/O timeout bounds silence, not a whole pipeline: a
                 * node that keeps answering a long batch (a watchdog round
                 * of many chunks) keeps its slot alive. */
                s->deadline_ns = after_ms(now, io_ms, cap_ns);
                /* The handshake's INFO came before this reply: let the
                 * callback see which server answered (Redlock counts each
                 * server once). */
                dlock__node_note_run_id(&client->nodes[i], c);
                stop = cb(arg, i, idx, DLOCK_OK, r, r->type == REDIS_REPLY_ERROR ? r->str : "",
                          c->server_start_ns) && !graced;
                freeReplyObject(r);
                /* Decided with replies of this node still in its buffer
                 * (a pipeline of several requests): they are read now,
                 * in the grace, not after it (poll() would not see them). */
                if (stop)
                    stop = begin_grace(slots, n, o, now, &cap_ns, &graced);
            }
            if (rc < 0 && s->active && !stop) {
                stop = fail_node(s, i, nreqs,
                                 cluster_failure(client, i, s, rc, cancel_fd, cap_ns), cb, arg) &&
                       !graced;
            } else if (s->active && !stop && now >= s->deadline_ns) {
                int code = c->state == DLOCK__CS_CONNECTING || !c->caller_sent
                               ? DLOCK_EIO
                               : DLOCK_EUNKNOWN;
                if (code == DLOCK_EUNKNOWN && keep_timed_out && kept) {
                    /* Still open: the caller queues its undo behind,
                     * then it is closed (dlock__fanout_send_behind). */
                    s->kept = 1;
                    c->retire = 1;
                    snprintf(c->err, sizeof c->err, "%s timed out", dlock__conn_phase(c));
                } else {
                    dlock__conn_fail(c, code, "%s timed out", dlock__conn_phase(c));
                }
                stop = fail_node(s, i, nreqs,
                                 cluster_failure(client, i, s, code, cancel_fd, cap_ns), cb, arg) &&
                       !graced;
            }
            if (stop)
                stop = begin_grace(slots, n, o, now, &cap_ns, &graced);
        }
    }

    for (size_t i = 0; i < n; i++) {
        dlock__conn *c = slots[i].conn;
        if (slots[i].held)
            freeReplyObject(slots[i].held);
        if (!c)
            continue;
        if (kept && c->state == DLOCK__CS_OPEN && c->caller_sent && (canceled || slots[i].kept)) {
            kept[i] = c;
            continue;
        }
        if (c->state == DLOCK__CS_OPEN && dlock__conn_has_output(c)) {
            /* Unsent commands must not go out later on a reused connection,
             * out of order with what the caller does next. */
            dlock__conn_fail(c, DLOCK_EIO, "abandoned with unsent output");
        }
        dlock__conn_abandon(c);
        dlock__node_checkin(&client->nodes[i], c);
    }
    return canceled ? DLOCK_ECANCELED : DLOCK_OK;
}

void dlock__fanout_send_behind(struct dlock_client *client, dlock__conn **kept,
                               const dlock__req *reqs, uint32_t nreqs)
{
    for (size_t i = 0; i < client->n_nodes; i++) {
        dlock__conn *c = kept[i];
        if (!c)
            continue;
        kept[i] = NULL;
        /* Unsent bytes left after this write go out with the next command
         * on this connection, still in order; the replies are discarded. */
        int rc = DLOCK_OK;
        for (uint32_t j = 0; j < nreqs && rc == DLOCK_OK; j++)
            rc = send_req(c, &reqs[j], j, 1);
        if (rc == DLOCK_OK && dlock__conn_io(c, POLLOUT) == DLOCK_OK && !c->retire) {
            dlock__conn_abandon(c);
            dlock__node_checkin(&client->nodes[i], c);
        } else {
            dlock__conn_free(c);
        }
    }
}
