/* SPDX-License-Identifier: BSD-3-Clause */
/* The fan-out run (fanout_run.h): its slots' routing, steps, deadlines,
 * grace and cancel, on the loop it is started on, and its end. */
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
#define conn_ready dlock__fan_conn_ready

/* Whether the slot's next read may be one blocking recv() with the I/O
 * timeout as the socket's receive timeout: an open plain connection with
 * all its output written, only a reply to wait for, and time enough that
 * the receive timeout ends neither past the run's deadline nor more than
 * 2 ms past the slot's own (a late first read, or one after a signal,
 * goes through poll() with the exact deadline). */
static int can_read_blocking(const slot *s, int64_t io_ms, int64_t cap_ns)
{
    const dlock__conn *c = s->conn;
    if (s->pc || c->state != DLOCK__CS_OPEN || c->checks_pending > 0 || c->tls || io_ms <= 0 ||
        io_ms > INT32_MAX / 2 || dlock__conn_events(c) != POLLIN)
        return 0;
    int64_t now = dlock__now_ns(), io_ns = io_ms * DLOCK__NS_PER_MS;
    return cap_ns - now >= io_ns && s->deadline_ns - now >= io_ns - 2 * DLOCK__NS_PER_MS;
}

static void slot_due(dlock__timer *t);
static int slot_alone(dlock__io *io, int64_t until_ns);

/* The slot's io record and timer follow its connection and deadline; a
 * slot that is no longer LIVE leaves the loop. Only a record's first
 * io_set can fail (the poll loop's fixed fd slots), which slot_send
 * handles. */
static int slot_arm(fan *f, slot *s)
{
    dlock__loop *l = f->loop;
    if (s->state == SLOT_DISCOVERING && f->graced) {
        /* A discovery is not waited for past the grace (slot_due). */
        dlock__io_clear(l, &s->io);
        s->timer.fire = slot_due;
        s->timer.due_ns = f->cap_ns;
        return dlock__timer_set(l, &s->timer);
    }
    if (s->state != SLOT_LIVE) {
        dlock__io_clear(l, &s->io);
        dlock__timer_clear(l, &s->timer);
        return DLOCK_OK;
    }
    if (s->pc) {
        /* The pipe watches the shared socket; the slot keeps its timer. */
        if (s->timer.due_ns != s->deadline_ns || !s->timer.link.next) {
            s->timer.due_ns = s->deadline_ns;
            (void)dlock__timer_set(l, &s->timer);
        }
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
        if (s->state == SLOT_LIVE)
            s->deadline_ns = DLOCK__MIN(s->deadline_ns, f->cap_ns);
        if (s->state == SLOT_LIVE || s->state == SLOT_DISCOVERING)
            (void)slot_arm(f, s);
    }
    return 0;
}

/* Report every unanswered request of the slot as failed with err. */
int dlock__fan_fail_node(fan *f, slot *s, int err, slot_state to)
{
    int stop = 0;
    /* A shared connection's text is its own failure's, if any: the slot's
     * timeout or cancel is the slot's. */
    const char *detail = s->pc && s->conn->state != DLOCK__CS_BROKEN
                             ? (to == SLOT_TIMED_OUT ? "reply timed out" : "given up waiting")
                         : s->conn                    ? s->conn->err
                         : s->disc && s->disc->err[0] ? s->disc->err
                                                      : "out of memory";
    s->state = to;
    /* A cancel's cut is the caller's doing, not a node error (nor is our
     * own ENOMEM: stats.c). */
    if (!f->cancel.raised)
        dlock__stats_node_error(&f->client->obs, f->client->nodes[s->node].name, err,
                                to == SLOT_TIMED_OUT);
    /* Replies arrive in request order, so the unanswered ones are the tail. */
    for (uint32_t j = s->answered; j < f->nreqs && !stop; j++)
        stop = f->cb(f->arg, s->node, j, err, NULL, detail, 0);
    s->answered = f->nreqs;
    return stop;
}


static void discovered(dlock__discover *d);

/* The relearn after a master failed is over (rc): the failure's code. */
static int relearned(slot *s, int rc)
{
    if (rc != DLOCK_OK)
        return s->fail_code;
    size_t len = strlen(s->conn->err);
    snprintf(s->conn->err + len, sizeof s->conn->err - len,
             "; the cluster answers: slot %u's master is failing over", s->cslot);
    return DLOCK_EBUSY;
}

/* Start (or restart) the slot's discovery: 1 when it waits for it, else
 * the code of a failure to start it (DLOCK_ENOMEM, DLOCK_EIO), or 0 when
 * nothing is left to learn. */
static int discover(fan *f, slot *s)
{
    if (!s->disc && !(s->disc = dlock__calloc(1, sizeof *s->disc)))
        return DLOCK_ENOMEM;
    s->disc->arg = s;
    int r = dlock__discover_start(s->disc, &f->client->nodes[s->node], s->cslot, f->loop,
                                  f->cap_ns, discovered);
    if (r == 1)
        s->state = SLOT_DISCOVERING;
    else if (r < 0)
        snprintf(s->disc->err, sizeof s->disc->err, "%s",
                 r == DLOCK_ENOMEM ? "out of memory" : "cannot wait for another thread's discovery");
    return r;
}

/* Cluster: the slot's master could not be reached and nothing was sent
 * (refused, reset, or silent before the first command). The map is learned
 * again now from the other nodes, this master asked last (the slot waits
 * in DISCOVERING); if one answers, the cluster is up and the slot is
 * between masters (a failover in flight, which the cluster itself will
 * report as CLUSTERDOWN once it notices): DLOCK_EBUSY, like CLUSTERDOWN,
 * which a wait rides out and the dlock command waits for (issue 19 item
 * 3). If no node answers, the cluster is unreachable: DLOCK_EIO stays.
 * Any other failure is reported now. Returns the run's new "stop" as
 * fail_node does (0 while the relearn runs). */
static int fail_slot(fan *f, slot *s, int code, slot_state to)
{
    dlock__node *n = &f->client->nodes[s->node];
    dlock__conn *c = s->conn;
    if (!n->cluster || code != DLOCK_EIO || !c || c->caller_sent || !c->route ||
        c->state != DLOCK__CS_BROKEN)
        return dlock__fan_fail_node(f, s, code, to);
    dlock__cluster_failed(n->cluster, c);
    s->relearn = 1;
    s->fail_code = code;
    s->fail_to = to;
    int r = discover(f, s);
    if (r == 1)
        return 0;
    s->relearn = 0;
    return dlock__fan_fail_node(f, s, r == 0 ? relearned(s, DLOCK_OK) : code, to);
}

/* The slot's deadline passed: the connection is closed (a node that
 * answers late must not answer the next command), or, for an attempt whose
 * requests were sent, kept for the undo queued behind it. */
static int time_out(fan *f, slot *s)
{
    dlock__conn *c = s->conn;
    int code = !dlock__fan_sent(s) || (!s->pc && c->state == DLOCK__CS_CONNECTING)
                   ? DLOCK_EIO
                   : DLOCK_EUNKNOWN;
    if (s->pc) {
        /* The others on the shared connection keep their own deadlines;
         * new requests go on a new one. An attempt's undo still goes
         * behind what was sent (kept, run_finish). */
        dlock__pipe_retire(s->pc);
        s->kept = code == DLOCK_EUNKNOWN && f->keep_timed_out && f->kept;
    } else if (code == DLOCK_EUNKNOWN && f->keep_timed_out && f->kept) {
        /* Still open: the caller queues its undo behind, then it is
         * closed (dlock__fanout_send_behind). */
        s->kept = 1;
        c->retire = 1;
        snprintf(c->err, sizeof c->err, "%s timed out", dlock__conn_phase(c));
    } else {
        dlock__conn_fail(c, code, "%s timed out", dlock__conn_phase(c));
    }
    return fail_slot(f, s, code, SLOT_TIMED_OUT) && !f->graced;
}

/* A step of a LIVE slot: rc is what its I/O gave (DLOCK_OK when its timer
 * fired). Its replies go to the callback, then a failure or its deadline
 * ends it, else it waits on. */
static void slot_step(fan *f, slot *s, int rc, int was_ready)
{
    int64_t now = dlock__now_ns();
    if (rc == DLOCK_OK && !was_ready && conn_ready(s->conn))
        s->deadline_ns = after_ms(now, f->io_ms, f->cap_ns);
    /* A shared connection's replies come through its pipe (slot_heard),
     * never by a slot's own read. */
    if (!s->pc)
        rc = dlock__fan_drain(f, s, rc, now);
    if (rc < 0 && s->state == SLOT_LIVE && !f->stop)
        f->stop = fail_slot(f, s, rc, SLOT_FAILED) && !f->graced;
    else if (s->state == SLOT_LIVE && !f->stop && now >= s->deadline_ns)
        f->stop = time_out(f, s);
    if (f->stop)
        f->stop = dlock__fan_begin_grace(f, now);
    (void)slot_arm(f, s);
}

static void slot_ready(dlock__io *io, unsigned events)
{
    slot *s = DLOCK__OWNER(io, slot, io);
    if (s->fan->ending) /* over at this turn: the rest is not heard */
        return;
    int was_ready = conn_ready(s->conn);
    short revents = (short)(((events & DLOCK__IO_READ) ? POLLIN : 0) |
                            ((events & DLOCK__IO_WRITE) ? POLLOUT : 0) |
                            ((events & DLOCK__IO_ERROR) ? POLLERR : 0));
    slot_step(s->fan, s, dlock__conn_io(s->conn, revents), was_ready);
    dlock__fan_check(s->fan);
}

static void slot_due(dlock__timer *t)
{
    slot *s = DLOCK__OWNER(t, slot, timer);
    fan *f = s->fan;
    if (f->ending)
        return;
    if (s->state != SLOT_DISCOVERING) {
        slot_step(f, s, DLOCK_OK, 1);
        dlock__fan_check(f);
        return;
    }
    /* The grace ended before the node's map or primary was learned. */
    dlock__discover_stop(s->disc);
    snprintf(s->disc->err, sizeof s->disc->err, "%s timed out",
             f->client->nodes[s->node].cluster ? "learning the cluster's slot map"
                                               : "asking the sentinels for the primary");
    if (s->relearn)
        (void)dlock__fan_fail_node(f, s, s->fail_code, s->fail_to);
    else
        (void)dlock__fan_fail_node(f, s, DLOCK_EIO, SLOT_TIMED_OUT);
    (void)slot_arm(f, s);
    dlock__fan_check(f);
}

/* The slot has its connection (s->conn): queue the requests and push them
 * out now (a pooled connection is writable, and starting every node's
 * write before any wait is what makes the round parallel). */
static void slot_send(fan *f, slot *s)
{
    struct dlock_client *client = f->client;
    if (!s->conn) {
        f->stop = dlock__fan_fail_node(f, s, DLOCK_ENOMEM, SLOT_FAILED) && !f->graced;
        return;
    }
    s->state = SLOT_LIVE;
    if (s->pc) {
        dlock__pipe_join(s->pc, &s->pu);
        s->conn->tag = &s->pu.tag;
    }
    int rc = DLOCK_OK;
    for (uint32_t j = 0; j < f->nreqs && rc == DLOCK_OK; j++)
        rc = dlock__fanout_append(client, s->conn, &f->reqs[j], j, 0);
    s->conn->tag = NULL;
    if (rc != DLOCK_OK) {
        /* A connection that failed before sending keeps its reason
         * (Sentinel: no sentinel knows the master, say). */
        if (rc != DLOCK_ENOMEM && s->conn->err_code)
            rc = s->conn->err_code;
        rc = rc == DLOCK_ENOMEM ? DLOCK_ENOMEM : rc == DLOCK_EUNKNOWN ? DLOCK_EIO : rc;
        if (s->pc && s->pu.tag.owed > 0)
            rc = DLOCK_EUNKNOWN; /* on a shared one, what was appended goes out */
        f->stop = fail_slot(f, s, rc, SLOT_FAILED) && !f->graced;
        return;
    }
    /* The clock starts after the checkout: a checkout may have waited for
     * a Cluster's slot map or the Sentinels' answer, which can take a
     * timeout of its own when a node stalls, and a deadline taken before
     * it would expire a healthy node's reply before it could come (issue
     * 19, a stalled master breaking the healthy ones). */
    int64_t now = dlock__now_ns();
    s->deadline_ns = !conn_ready(s->conn) ? after_ms(now, f->connect_ms, f->o->deadline_ns)
                                          : after_ms(now, f->io_ms, f->o->deadline_ns);
    if (f->graced)
        s->deadline_ns = DLOCK__MIN(s->deadline_ns, f->cap_ns);
    /* A shared connection writes when the loop finds it writable, with
     * every request queued meanwhile (one send for many). */
    if (s->pc ? (rc = dlock__pipe_arm(s->pc)) < 0
              : s->conn->state == DLOCK__CS_OPEN && (rc = dlock__conn_io(s->conn, POLLOUT)) < 0) {
        f->stop = fail_slot(f, s, rc, SLOT_FAILED) && !f->graced;
        return;
    }
    s->io.ready = slot_ready;
    s->io.alone = slot_alone;
    s->timer.fire = slot_due;
    if (slot_arm(f, s) != DLOCK_OK) {
        dlock__conn_fail(s->conn, DLOCK_ENOMEM, "out of memory");
        f->stop = dlock__fan_fail_node(f, s, DLOCK_ENOMEM, SLOT_FAILED) && !f->graced;
        (void)slot_arm(f, s);
    }
}

/* The slot's discovery is over (from the run's loop): a relearn gives the
 * failure it waited for its code; otherwise the slot checks its
 * connection out with what was learned and goes on. */
static void discovered(dlock__discover *d)
{
    slot *s = d->arg;
    fan *f = s->fan;
    if (f->ending)
        return;
    if (s->relearn) {
        s->relearn = 0;
        f->stop = dlock__fan_fail_node(f, s, relearned(s, d->rc), s->fail_to) && !f->graced;
    } else if (!dlock__discover_checkout(d, &s->conn)) {
        /* Forgotten again meanwhile (a failover): learn it again. */
        int r = discover(f, s);
        if (r == 0 && !dlock__discover_checkout(d, &s->conn))
            r = DLOCK_EIO;
        if (r < 0) {
            snprintf(d->err, sizeof d->err, "the primary moved while it was being asked for");
            f->stop = dlock__fan_fail_node(f, s, r, SLOT_FAILED) && !f->graced;
        } else if (r == 0) {
            slot_send(f, s);
        }
    } else {
        slot_send(f, s);
    }
    if (f->stop)
        f->stop = dlock__fan_begin_grace(f, dlock__now_ns());
    (void)slot_arm(f, s);
    dlock__fan_check(f);
}

/* The client's own loop shares one connection per node among its runs
 * (pipe.h); a Cluster's connection follows its map and stays on the pool,
 * as does a blocking call's private loop, and a run that waits for
 * replicas (a WAIT holds its connection up: the next run's WAIT would
 * start only after it, test_uv_pipe). */
static int pipe_fits(const fan *f, const dlock__node *node)
{
    return f->client->loop && f->loop == f->client->loop && !node->cluster && !f->acks;
}

/* After the slot heard from its shared connection (fanout_run.h). */
void dlock__fan_after(fan *f, slot *s, int rc, int64_t now)
{
    if (rc < 0 && s->state == SLOT_LIVE && !f->stop)
        f->stop = fail_slot(f, s, rc, SLOT_FAILED) && !f->graced;
    if (f->stop)
        f->stop = dlock__fan_begin_grace(f, now);
    (void)slot_arm(f, s);
    dlock__fan_check(f);
}


/* ROUTING: check the node's connection out, or learn its Cluster map or
 * Sentinel primary first (DISCOVERING). */
static void slot_route(fan *f, slot *s)
{
    dlock__node *node = &f->client->nodes[s->node];
    const dlock__req *reqs = f->reqs;
    s->state = SLOT_ROUTING;
    /* A cluster routes by the first key: the keys of one run (one lock's,
     * with its helper keys) share a hash slot. Only a cluster needs the
     * slot (its CRC16 is no cost to put on every call). */
    s->cslot = !node->cluster       ? 0
               : f->o->cluster_slot ? f->o->cluster_slot - 1
               : f->nreqs ? dlock__cluster_req_slot(reqs[0].numkeys, reqs[0].args, reqs[0].arglens)
                          : 0;
    if (pipe_fits(f, node) && dlock__pipe_checkout(node, f->loop, &dlock__fan_pipe_ops, &s->pc)) {
        s->conn = s->pc ? s->pc->c : NULL;
        slot_send(f, s);
        return;
    }
    if (!dlock__node_checkout_ready(node, s->cslot, &s->conn)) {
        int r = discover(f, s);
        if (r == 1)
            return;
        if (r < 0) {
            f->stop = dlock__fan_fail_node(f, s, r, SLOT_FAILED);
            return;
        }
        /* Learned by another thread meanwhile. */
        if (!dlock__node_checkout_ready(node, s->cslot, &s->conn)) {
            f->stop = dlock__fan_fail_node(f, s, DLOCK_EIO, SLOT_FAILED);
            return;
        }
    }
    slot_send(f, s);
}

/* The single LIVE slot, when it is the only thing to wait for and may be
 * read with one blocking recv() (can_read_blocking); else NULL. */
static slot *lone_slot(const fan *f)
{
    slot *one = NULL;
    for (size_t i = 0; i < f->n; i++) {
        if (f->slots[i].state == SLOT_DISCOVERING)
            return NULL;
        if (f->slots[i].state != SLOT_LIVE)
            continue;
        if (one)
            return NULL;
        one = (slot *)&f->slots[i];
    }
    return one && f->cancel_fd < 0 && can_read_blocking(one, f->io_ms, f->cap_ns) ? one : NULL;
}


/* The loop offers the slot's socket to wait alone (loop.h): one node, one
 * socket, nothing to cancel and nothing else due before the slot's
 * deadline take one blocking recv() instead of poll() + read(). */
static int slot_alone(dlock__io *io, int64_t until_ns)
{
    slot *s = DLOCK__OWNER(io, slot, io);
    fan *f = s->fan;
    if (f->ending || until_ns < s->deadline_ns || lone_slot(f) != s)
        return 0;
    slot_step(f, s, dlock__conn_read_blocking(s->conn, (int)f->io_ms), 1);
    dlock__fan_check(f);
    return 1;
}

static void cancel_raised(dlock__fd_flag *flag)
{
    dlock__fan_check(DLOCK__OWNER(flag, fan, cancel));
}

void dlock__fan_init(fan *f, struct dlock_client *client, const dlock__req *reqs,
                     uint32_t nreqs, const dlock__fanout_opts *o, dlock__on_reply cb, void *arg)
{
    memset(f, 0, offsetof(fan, slots)); /* only the first n slots are used */
    f->client = client;
    f->reqs = reqs;
    f->nreqs = nreqs;
    f->o = o;
    f->cancel_fd = -1;
    f->cb = cb;
    f->arg = arg;
    f->n = client->n_nodes;
    memset(f->slots, 0, f->n * sizeof *f->slots);
}

void dlock__fan_start(fan *f, dlock__loop *l, void (*done)(fan *f))
{
    struct dlock_client *client = f->client;
    const dlock__fanout_opts *o = f->o;
    f->loop = l;
    f->done = done;
    f->cap_ns = o->deadline_ns;
    f->connect_ms = client->opts.connect_timeout_ms;
    /* A WAIT may hold the reply back for its whole timeout. */
    f->io_ms = o->io_timeout_ms;
    for (uint32_t j = 0; j < f->nreqs; j++)
        if (dlock__fanout_wants_acks(client, &f->reqs[j])) {
            f->acks = 1;
            f->io_ms += client->opts.min_replicas_timeout_ms;
            break;
        }
    /* Before the slots' records: on a loop that turns records in the
     * order they were set (the poll loop), a cancel is seen before the
     * replies of the same turn. An empty private loop has room for it. */
    (void)dlock__fd_flag_watch(l, &f->cancel, f->cancel_fd);
    f->cancel.on_raise = cancel_raised;
    for (size_t i = 0; i < f->n && !f->stop; i++) {
        f->slots[i].fan = f;
        f->slots[i].node = i;
        if (!o->only || o->only[i])
            slot_route(f, &f->slots[i]);
    }
    /* A failure while routing that stops the run stops it at once. */
    dlock__fan_check(f);
}
