/* SPDX-License-Identifier: BSD-3-Clause */
/* A node's shared connection on a looped client (pipe.h). */
#include <poll.h>
#include <stdatomic.h>

#include "clock.h"
#include "error.h"
#include "node.h"
#include "pipe.h"

static void pc_ready(dlock__io *io, unsigned events);
static int pc_drain(dlock__pipe_conn *pc, int rc);

/* Each user still waiting for a reply, once per reply expected. */
#define EACH_WAITING(c, u)                                                                     \
    for (size_t i_ = 0; i_ < (c)->q_len; i_++)                                                 \
        if (((u) = (dlock__pipe_user *)(c)->q[((c)->q_head + i_) % (c)->q_cap].tag) &&         \
            (c)->q[((c)->q_head + i_) % (c)->q_cap].kind == DLOCK__R_CALLER)

/* Whether it may be freed: not the current one, nobody listening, no undo
 * owed on it. */
static int pc_unneeded(const dlock__pipe_conn *pc)
{
    return pc->pipe->cur != pc && pc->n_users == 0 && pc->refs == 0;
}

static void pc_free(dlock__pipe_conn *pc)
{
    dlock__pipe *p = pc->pipe;
    for (dlock__pipe_conn **pp = &p->all; *pp; pp = &(*pp)->next)
        if (*pp == pc) {
            *pp = pc->next;
            break;
        }
    if (pc->io_on)
        dlock__io_clear(p->loop, &pc->io);
    /* close() still delivers what was written (an undo queued behind). */
    dlock__conn_free(pc->c);
    dlock__free(pc);
}

static void pc_free_if_unneeded(dlock__pipe_conn *pc)
{
    if (pc_unneeded(pc))
        pc_free(pc);
}

/* No new user joins it. */
static void pc_drop(dlock__pipe_conn *pc)
{
    if (pc->pipe->cur == pc)
        pc->pipe->cur = NULL;
}

/* A new connection to the node (0: a Sentinel primary not known now). */
static int pc_new(dlock__pipe *p, dlock__pipe_conn **out)
{
    dlock__node *n = p->node;
    dlock__pipe_conn *pc = dlock__calloc(1, sizeof *pc);
    *out = NULL;
    if (!pc)
        return 1;
    pc->primary_gen = atomic_load(&n->primary_gen);
    /* As the pool's connections: the scripts loaded and INFO asked (the
     * restart rule, run_id, SET ... NX GET); a Sentinel's primary checked
     * with ROLE first. */
    if (n->sentinel) {
        if (!dlock__node_connect_known(n, 1, 1, &pc->c)) {
            dlock__free(pc);
            return 0;
        }
    } else {
        dlock__conn_config cfg = {&n->url, 1, 1, n->tls_ctx, 0, n->tls_cache};
        pc->c = dlock__conn_new(&cfg);
    }
    if (!pc->c) {
        dlock__free(pc);
        return 1;
    }
    pc->c->shared = pc;
    pc->pipe = p;
    pc->heard_ns = dlock__now_ns();
    pc->io.fd = pc->c->ctx->fd;
    pc->io.ready = pc_ready;
    pc->next = p->all;
    p->all = pc;
    *out = pc;
    return 1;
}

/* Not to be joined: it owes replies and has heard none for
 * DLOCK__PIPE_STALL_MS, or it has been idle and the server closed it
 * meanwhile (the pool's probe, node.h: found now rather than after
 * sending, which would make the next command's outcome unknown). */
static int unusable(dlock__pipe_conn *pc)
{
    dlock__conn *c = pc->c;
    if (pc->n_users == 0 && dlock__conn_pending(c) > 0 && c->state == DLOCK__CS_OPEN &&
        pc_drain(pc, dlock__conn_io(c, POLLIN)) != DLOCK_OK)
        return 1; /* off the loop meanwhile: what came is read now */
    int64_t quiet_ns = dlock__now_ns() - pc->heard_ns;
    if (dlock__conn_pending(c) > 0)
        return quiet_ns > DLOCK__PIPE_STALL_MS * DLOCK__NS_PER_MS;
    return c->state == DLOCK__CS_OPEN && !dlock__conn_has_output(c) &&
           quiet_ns >= DLOCK__PROBE_IDLE_MS * DLOCK__NS_PER_MS && dlock__conn_probe(c) != 0;
}

int dlock__pipe_checkout(dlock__node *n, dlock__loop *l, const dlock__pipe_user_ops *ops,
                         dlock__pipe_conn **out)
{
    dlock__pipe *p = n->pipe;
    *out = NULL;
    if (!p) {
        if (!(p = dlock__calloc(1, sizeof *p)))
            return 1;
        p->node = n;
        p->loop = l;
        p->ops = ops;
        n->pipe = p;
    }
    dlock__pipe_conn *pc = p->cur;
    if (pc && (pc->c->state == DLOCK__CS_BROKEN || unusable(pc) ||
               pc->primary_gen != atomic_load(&n->primary_gen))) {
        pc->retired = pc->c->state != DLOCK__CS_BROKEN;
        pc_drop(pc);
        pc_free_if_unneeded(pc);
        pc = NULL;
    }
    if (pc) {
        *out = pc;
        return 1;
    }
    int r = pc_new(p, out);
    p->cur = *out;
    return r;
}

void dlock__pipe_join(dlock__pipe_conn *pc, dlock__pipe_user *u)
{
    if (dlock__conn_pending(pc->c) == 0)
        pc->heard_ns = dlock__now_ns(); /* silence counts from now */
    pc->n_users++;
    u->mark = pc->c->fmt_bytes;
}

int dlock__pipe_arm(dlock__pipe_conn *pc)
{
    dlock__conn *c = pc->c;
    if (c->state == DLOCK__CS_BROKEN)
        return DLOCK_OK; /* its users are failed from the loop */
    /* Nothing to write and nobody waiting (only replies nobody hears are
     * owed, an undo's): off the loop, which may then end (uv_run returns)
     * while the client lives, as with the pool. The next checkout reads
     * what came meanwhile (pc_catch_up), and its probe finds a close by
     * the server. */
    short ev = dlock__conn_events(c);
    if (pc->n_users == 0 && c->state == DLOCK__CS_OPEN)
        ev &= (short)~POLLIN;
    unsigned want = ((ev & POLLIN) ? DLOCK__IO_READ : 0u) | ((ev & POLLOUT) ? DLOCK__IO_WRITE : 0u);
    if (want == 0) {
        if (pc->io_on)
            dlock__io_clear(pc->pipe->loop, &pc->io);
        pc->io_on = 0;
        return DLOCK_OK;
    }
    if (pc->io_on && pc->io.want == want)
        return DLOCK_OK;
    pc->io.want = want;
    int rc = dlock__io_set(pc->pipe->loop, &pc->io);
    pc->io_on = rc == DLOCK_OK;
    return rc;
}

static int drain_rounds(dlock__pipe_conn *pc, int rc, int64_t now);

/* Every reply buffered (and with TLS, what OpenSSL still holds, which the
 * loop cannot see) to its user. DLOCK_OK or the connection's failure. */
static int pc_drain(dlock__pipe_conn *pc, int rc)
{
    dlock__conn *c = pc->c;
    int64_t now = dlock__now_ns(); /* once: a read's replies came together */
    size_t owed = dlock__conn_pending(c);
    rc = drain_rounds(pc, rc, now);
    /* Any reply counts against a stall, the handshake's and those nobody
     * hears included. */
    if (dlock__conn_pending(c) < owed)
        pc->heard_ns = now;
    return rc;
}

static int drain_rounds(dlock__pipe_conn *pc, int rc, int64_t now)
{
    dlock__conn *c = pc->c;
    for (int round = 0;; round++) {
        while (rc == DLOCK_OK) {
            redisReply *r = NULL;
            uint32_t idx = 0;
            dlock__conn_tag *tag = NULL;
            int got = dlock__conn_take_tagged(c, &r, &idx, &tag);
            if (got <= 0) {
                rc = got;
                break;
            }
            if (!tag) {
                freeReplyObject(r); /* an undo's, or a gone user's */
                continue;
            }
            dlock__pipe_user *u = DLOCK__OWNER(tag, dlock__pipe_user, tag);
            pc->pipe->ops->reply(u, r, idx, now);
            if (c->state == DLOCK__CS_BROKEN)
                rc = c->err_code ? c->err_code : DLOCK_EIO;
        }
        if (rc != DLOCK_OK || round == 8 || !c->tls || c->state != DLOCK__CS_OPEN ||
            !dlock__tls_buffered(c->tls))
            return rc;
        rc = dlock__conn_io(c, POLLIN);
    }
}

/* The connection broke: every user hears it with its own code. */
static void pc_broken(dlock__pipe_conn *pc, int code)
{
    dlock__conn *c = pc->c;
    pc_drop(pc);
    if (pc->io_on) {
        dlock__io_clear(pc->pipe->loop, &pc->io);
        pc->io_on = 0;
    }
    if (c->state != DLOCK__CS_BROKEN)
        dlock__conn_fail(c, code, "failed");
    /* Sentinel: a failed connection may mean a failover (as the pool's
     * check-in says). */
    if (c->err_code != DLOCK_ENOMEM)
        dlock__node_stale(pc->pipe->node);
    /* A user's failure may end its run, but runs end (and leave) from a
     * later turn (fanout_run.c), and nothing is appended to a broken
     * connection: the ring holds still while it is walked. */
    dlock__pipe_user *u;
    EACH_WAITING(c, u) {
        int ucode = c->err_code;
        if (ucode == DLOCK_EIO || ucode == DLOCK_EUNKNOWN || ucode == 0)
            ucode = dlock__pipe_sent(pc, u) ? DLOCK_EUNKNOWN : DLOCK_EIO;
        pc->pipe->ops->failed(u, ucode);
    }
}

static void pc_became_ready(dlock__pipe_conn *pc)
{
    dlock__conn *c = pc->c;
    dlock__node *n = pc->pipe->node;
    if (!pc->noted && c->server_start_ns) {
        atomic_store(&n->server_start_ns, c->server_start_ns);
        pc->noted = 1;
    }
    dlock__node_note_run_id(n, c);
    dlock__pipe_user *u;
    EACH_WAITING(c, u)
        pc->pipe->ops->ready(u);
}

static int conn_ready(const dlock__conn *c)
{
    return c->state == DLOCK__CS_OPEN && c->checks_pending == 0;
}

static void pc_ready(dlock__io *io, unsigned events)
{
    dlock__pipe_conn *pc = DLOCK__OWNER(io, dlock__pipe_conn, io);
    dlock__conn *c = pc->c;
    int was_ready = conn_ready(c);
    short revents = (short)(((events & DLOCK__IO_READ) ? POLLIN : 0) |
                            ((events & DLOCK__IO_WRITE) ? POLLOUT : 0) |
                            ((events & DLOCK__IO_ERROR) ? POLLERR : 0));
    int rc = pc_drain(pc, dlock__conn_io(c, revents));
    if (rc == DLOCK_OK && !was_ready && conn_ready(c))
        pc_became_ready(pc);
    if (rc != DLOCK_OK || c->state == DLOCK__CS_BROKEN)
        pc_broken(pc, rc != DLOCK_OK ? rc : DLOCK_EIO);
    else if (dlock__pipe_arm(pc) != DLOCK_OK)
        pc_broken(pc, dlock__conn_fail(c, DLOCK_ENOMEM, "out of memory"));
    pc_free_if_unneeded(pc);
}

void dlock__pipe_retire(dlock__pipe_conn *pc)
{
    pc->retired = 1;
    pc_drop(pc);
}

void dlock__pipe_leave(dlock__pipe_conn *pc, dlock__pipe_user *u)
{
    dlock__conn_abandon_tag(pc->c, &u->tag);
    pc->n_users--;
    if (pc_unneeded(pc))
        pc_free(pc);
    else if (pc->n_users == 0 && dlock__pipe_arm(pc) != DLOCK_OK)
        dlock__conn_fail(pc->c, DLOCK_ENOMEM, "out of memory"); /* nobody to tell */
}

void dlock__pipe_ref(dlock__pipe_conn *pc)
{
    pc->refs++;
}

void dlock__pipe_unref(dlock__pipe_conn *pc)
{
    pc->refs--;
    /* The undo queued behind is written now, as the pool's was: a client
     * freed before the loop turns again still sends it (what the socket
     * takes; the rest goes when the loop finds it writable). */
    if (pc->c->state == DLOCK__CS_OPEN)
        (void)dlock__conn_io(pc->c, POLLOUT);
    if (pc_unneeded(pc))
        pc_free(pc);
    else if (dlock__pipe_arm(pc) != DLOCK_OK)
        dlock__conn_fail(pc->c, DLOCK_ENOMEM, "out of memory");
}

void dlock__pipe_free(dlock__pipe *p, int forked)
{
    if (!p)
        return;
    while (p->all) {
        dlock__pipe_conn *pc = p->all;
        p->all = pc->next;
        if (pc->io_on && !forked)
            dlock__io_clear(p->loop, &pc->io);
        /* What the socket takes now (an undo still queued) goes out with
         * the close; a forked child sends nothing. */
        if (!forked && pc->c->state == DLOCK__CS_OPEN)
            (void)dlock__conn_io(pc->c, POLLOUT);
        dlock__conn_free(pc->c);
        dlock__free(pc);
    }
    dlock__free(p);
}
