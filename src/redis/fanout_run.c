/* SPDX-License-Identifier: BSD-3-Clause */
/* The fan-out run (fanout_run.h): its slots' routing, steps, deadlines,
 * grace and cancel, on the run's private loop. */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "error.h"
#include "fanout_req.h"
#include "fanout_run.h"

typedef dlock__fan fan;
typedef dlock__fan_slot slot;
typedef dlock__fan_slot_state slot_state;
#define after_ms dlock__fan_after_ms

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

/* The slot's io record and timer follow its connection and deadline; a
 * slot that is no longer LIVE leaves the loop. Only a record's first
 * io_set can fail (the poll loop's fixed fd slots), which run_setup
 * handles. */
static int slot_arm(fan *f, slot *s)
{
    dlock__loop *l = &f->lp.loop;
    if (s->state != SLOT_LIVE) {
        dlock__io_clear(l, &s->io);
        dlock__timer_clear(l, &s->timer);
        return DLOCK_OK;
    }
    short ev = dlock__conn_events(s->conn);
    s->io.fd = s->conn->ctx->fd;
    s->io.want = ((ev & POLLIN) ? DLOCK__IO_READ : 0u) | ((ev & POLLOUT) ? DLOCK__IO_WRITE : 0u);
    if (s->timer.due_ns != s->deadline_ns || !s->timer.link.next) {
        s->timer.due_ns = s->deadline_ns;
        (void)dlock__timer_set(l, &s->timer);
    }
    return dlock__io_set(l, &s->io);
}

/* The callback decided the run: with a grace (opts.grace_ms), the nodes
 * still to answer get that much longer (a release or renewal should reach
 * every node that answers at once), but a silent one is not waited for:
 * their timers move to the grace's end. From then on the callback's
 * verdict no longer stops the run. Returns the new "stop": 1 without a
 * grace, else 0. */
int dlock__fan_begin_grace(fan *f, int64_t now)
{
    if (f->o->grace_ms <= 0)
        return 1;
    f->graced = 1;
    f->cap_ns = after_ms(now, f->o->grace_ms, f->cap_ns);
    for (size_t j = 0; j < f->n; j++) {
        slot *s = &f->slots[j];
        if (s->state == SLOT_LIVE) {
            s->deadline_ns = DLOCK__MIN(s->deadline_ns, f->cap_ns);
            (void)slot_arm(f, s);
        }
    }
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
static int cluster_failure(fan *f, slot *s, int code)
{
    dlock__node *n = &f->client->nodes[s->node];
    dlock__conn *c = s->conn;
    if (!n->cluster || code != DLOCK_EIO || !c || c->caller_sent || !c->route ||
        c->state != DLOCK__CS_BROKEN)
        return code;
    if (dlock__cluster_relearn(n->cluster, &n->url, n->tls_ctx, c, f->cancel_fd, f->cap_ns) !=
        DLOCK_OK)
        return code;
    size_t len = strlen(c->err);
    snprintf(c->err + len, sizeof c->err - len,
             "; the cluster answers: slot %u's master is failing over", s->cslot);
    return DLOCK_EBUSY;
}

/* Report every unanswered request of the slot as failed with err. */
static int fail_node(fan *f, slot *s, int err, slot_state to)
{
    int stop = 0;
    const char *detail = s->conn ? s->conn->err : "out of memory";
    s->state = to;
    /* Replies arrive in request order, so the unanswered ones are the tail. */
    for (uint32_t j = s->answered; j < f->nreqs && !stop; j++)
        stop = f->cb(f->arg, s->node, j, err, NULL, detail, 0);
    s->answered = f->nreqs;
    return stop;
}


/* The slot's deadline passed: the connection is closed (a node that
 * answers late must not answer the next command), or, for an attempt whose
 * requests were sent, kept for the undo queued behind it. */
static int time_out(fan *f, slot *s)
{
    dlock__conn *c = s->conn;
    int code = c->state == DLOCK__CS_CONNECTING || !c->caller_sent ? DLOCK_EIO : DLOCK_EUNKNOWN;
    if (code == DLOCK_EUNKNOWN && f->keep_timed_out && f->kept) {
        /* Still open: the caller queues its undo behind, then it is
         * closed (dlock__fanout_send_behind). */
        s->kept = 1;
        c->retire = 1;
        snprintf(c->err, sizeof c->err, "%s timed out", dlock__conn_phase(c));
    } else {
        dlock__conn_fail(c, code, "%s timed out", dlock__conn_phase(c));
    }
    return fail_node(f, s, cluster_failure(f, s, code), SLOT_TIMED_OUT) && !f->graced;
}

/* A step of a LIVE slot: rc is what its I/O gave (DLOCK_OK when its timer
 * fired). Its replies go to the callback, then a failure or its deadline
 * ends it, else it waits on. */
static void slot_step(fan *f, slot *s, int rc, int was_connecting)
{
    int64_t now = dlock__now_ns();
    if (rc == DLOCK_OK && was_connecting && s->conn->state == DLOCK__CS_OPEN)
        s->deadline_ns = after_ms(now, f->io_ms, f->cap_ns);
    rc = dlock__fan_drain(f, s, rc, now);
    if (rc < 0 && s->state == SLOT_LIVE && !f->stop)
        f->stop = fail_node(f, s, cluster_failure(f, s, rc), SLOT_FAILED) && !f->graced;
    else if (s->state == SLOT_LIVE && !f->stop && now >= s->deadline_ns)
        f->stop = time_out(f, s);
    if (f->stop)
        f->stop = dlock__fan_begin_grace(f, now);
    (void)slot_arm(f, s);
}

static void slot_ready(dlock__io *io, unsigned events)
{
    slot *s = DLOCK__OWNER(io, slot, io);
    int was_connecting = s->conn->state == DLOCK__CS_CONNECTING;
    short revents = (short)(((events & DLOCK__IO_READ) ? POLLIN : 0) |
                            ((events & DLOCK__IO_WRITE) ? POLLOUT : 0) |
                            ((events & DLOCK__IO_ERROR) ? POLLERR : 0));
    slot_step(s->fan, s, dlock__conn_io(s->conn, revents), was_connecting);
}

static void slot_due(dlock__timer *t)
{
    slot *s = DLOCK__OWNER(t, slot, timer);
    slot_step(s->fan, s, DLOCK_OK, 0);
}

/* ROUTING: check the node's connection out, queue the requests and push
 * them out now (a pooled connection is writable, and starting every
 * node's write before any wait is what makes the round parallel). */
static void slot_route(fan *f, slot *s)
{
    struct dlock_client *client = f->client;
    dlock__node *node = &client->nodes[s->node];
    const dlock__req *reqs = f->reqs;
    s->state = SLOT_ROUTING;
    /* A cluster routes by the first key: the keys of one run (one lock's,
     * with its helper keys) share a hash slot. Only a cluster needs the
     * slot (its CRC16 is no cost to put on every call). */
    s->cslot = f->nreqs && node->cluster
                   ? dlock__cluster_req_slot(reqs[0].numkeys, reqs[0].args, reqs[0].arglens)
                   : 0;
    s->conn = dlock__node_checkout_slot(node, s->cslot, f->cancel_fd, f->cap_ns);
    if (!s->conn) {
        f->stop = fail_node(f, s, DLOCK_ENOMEM, SLOT_FAILED);
        return;
    }
    s->state = SLOT_LIVE;
    int rc = DLOCK_OK;
    for (uint32_t j = 0; j < f->nreqs && rc == DLOCK_OK; j++)
        rc = dlock__fanout_append(client, s->conn, &reqs[j], j, 0);
    if (rc != DLOCK_OK) {
        /* A connection that failed before sending keeps its reason
         * (Sentinel: no sentinel knows the master, say). */
        if (rc != DLOCK_ENOMEM && s->conn->err_code)
            rc = s->conn->err_code;
        rc = rc == DLOCK_ENOMEM ? DLOCK_ENOMEM : rc == DLOCK_EUNKNOWN ? DLOCK_EIO : rc;
        f->stop = fail_node(f, s, cluster_failure(f, s, rc), SLOT_FAILED);
        return;
    }
    /* The clock starts after the checkout: a checkout may learn a
     * Cluster's slot map or ask Sentinels first, which can take a timeout
     * of its own when a node stalls, and a deadline taken before it would
     * expire a healthy node's reply before it could come (issue 19, a
     * stalled master breaking the healthy ones). */
    int64_t now = dlock__now_ns();
    s->deadline_ns = s->conn->state == DLOCK__CS_CONNECTING
                         ? after_ms(now, f->connect_ms, f->o->deadline_ns)
                         : after_ms(now, f->io_ms, f->o->deadline_ns);
    if (s->conn->state == DLOCK__CS_OPEN && (rc = dlock__conn_io(s->conn, POLLOUT)) < 0) {
        f->stop = fail_node(f, s, cluster_failure(f, s, rc), SLOT_FAILED);
        return;
    }
    s->io.ready = slot_ready;
    s->timer.fire = slot_due;
    if (slot_arm(f, s) != DLOCK_OK) {
        dlock__conn_fail(s->conn, DLOCK_ENOMEM, "out of memory");
        f->stop = fail_node(f, s, DLOCK_ENOMEM, SLOT_FAILED);
        (void)slot_arm(f, s);
    }
}

/* The single LIVE slot, when it is the only thing to wait for and may be
 * read with one blocking recv() (can_read_blocking); else NULL. */
static slot *lone_slot(const fan *f)
{
    slot *one = NULL;
    for (size_t i = 0; i < f->n; i++) {
        if (f->slots[i].state != SLOT_LIVE)
            continue;
        if (one)
            return NULL;
        one = (slot *)&f->slots[i];
    }
    return one && f->cancel_fd < 0 && can_read_blocking(one, f->io_ms, f->cap_ns) ? one : NULL;
}

static int any_live(const fan *f)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->slots[i].state == SLOT_LIVE)
            return 1;
    return 0;
}

/* The loop returns to run_drive when the run is over, cancelled, or down
 * to one slot that a blocking read serves. */
static int loop_done(void *arg)
{
    const fan *f = arg;
    return f->stop || f->cancel.raised || !any_live(f) || lone_slot(f);
}

static void run_drive(fan *f)
{
    while (!f->stop && !f->cancel.raised) {
        slot *one = lone_slot(f);
        if (one) {
            /* One node, one socket, nothing to cancel: one blocking recv()
             * instead of poll() + read(). */
            slot_step(f, one, dlock__conn_read_blocking(one->conn, (int)f->io_ms), 0);
            continue;
        }
        if (!any_live(f))
            return;
        dlock__loop_poll_run(&f->lp, loop_done, f, INT64_MAX);
    }
    if (!f->cancel.raised)
        return;
    /* Cancelled: stop waiting now. What was sent may still run; the caller
     * queues its undo behind it on the same connections
     * (dlock__fanout_send_behind). */
    for (size_t i = 0; i < f->n && !f->stop; i++) {
        slot *s = &f->slots[i];
        if (s->state == SLOT_LIVE)
            f->stop = fail_node(f, s, s->conn->caller_sent ? DLOCK_EUNKNOWN : DLOCK_EIO,
                                SLOT_FAILED);
    }
}

/* Every connection goes back to its node's pool, or to the caller (kept). */
static void run_finish(fan *f)
{
    int canceled = f->cancel.raised;
    dlock__fd_flag_clear(&f->lp.loop, &f->cancel);
    dlock__loop_poll_close(&f->lp);
    for (size_t i = 0; i < f->n; i++) {
        slot *s = &f->slots[i];
        dlock__conn *c = s->conn;
        if (s->held)
            freeReplyObject(s->held);
        if (!c)
            continue;
        if (f->kept && c->state == DLOCK__CS_OPEN && c->caller_sent && (canceled || s->kept)) {
            f->kept[i] = c;
            continue;
        }
        if (c->state == DLOCK__CS_OPEN && dlock__conn_has_output(c)) {
            /* Unsent commands must not go out later on a reused connection,
             * out of order with what the caller does next. */
            dlock__conn_fail(c, DLOCK_EIO, "abandoned with unsent output");
        }
        dlock__conn_abandon(c);
        dlock__node_checkin(&f->client->nodes[i], c);
    }
}

static int run(struct dlock_client *client, const dlock__req *reqs, uint32_t nreqs,
               const dlock__fanout_opts *o, int cancel_fd, dlock__conn **kept,
               int keep_timed_out, dlock__on_reply cb, void *arg)
{
    fan f;
    memset(&f, 0, offsetof(fan, slots)); /* only the first n slots are used */
    f.client = client;
    f.reqs = reqs;
    f.nreqs = nreqs;
    f.o = o;
    f.cancel_fd = cancel_fd;
    f.kept = kept;
    f.keep_timed_out = keep_timed_out;
    f.cb = cb;
    f.arg = arg;
    f.n = client->n_nodes;
    f.cap_ns = o->deadline_ns;
    f.connect_ms = client->opts.connect_timeout_ms;
    /* A WAIT may hold the reply back for its whole timeout. */
    f.io_ms = o->io_timeout_ms;
    for (uint32_t j = 0; j < nreqs; j++)
        if (dlock__fanout_wants_acks(client, &reqs[j])) {
            f.io_ms += client->opts.min_replicas_timeout_ms;
            break;
        }
    memset(f.slots, 0, f.n * sizeof *f.slots);
    dlock__loop_poll_init(&f.lp);
    /* First in the loop's list: a cancel is seen before the replies of the
     * same turn. An empty loop has room for it. */
    (void)dlock__fd_flag_watch(&f.lp.loop, &f.cancel, cancel_fd);
    for (size_t i = 0; i < f.n && !f.stop; i++) {
        f.slots[i].fan = &f;
        f.slots[i].node = i;
        if (!o->only || o->only[i])
            slot_route(&f, &f.slots[i]);
    }
    /* A failure while routing that stops the run stops it at once. */
    if (!f.stop)
        run_drive(&f);
    run_finish(&f);
    return f.cancel.raised ? DLOCK_ECANCELED : DLOCK_OK;
}

int dlock__fanout(struct dlock_client *client, const dlock__req *reqs,
                  uint32_t nreqs, const dlock__fanout_opts *o,
                  dlock__on_reply cb, void *arg)
{
    return dlock__fanout_cancellable(client, reqs, nreqs, o, -1, NULL, cb, arg);
}

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
