/* SPDX-License-Identifier: BSD-3-Clause */
/* A node's shared connection on a looped client (pipe.h). */
#include <poll.h>
#include <stdatomic.h>

#include "clock.h"
#include "error.h"
#include "node.h"
#include "pipe.h"

static void pc_ready(dlock__io *io, unsigned events);

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

static dlock__pipe_conn *pc_new(dlock__pipe *p)
{
    dlock__node *n = p->node;
    dlock__pipe_conn *pc = dlock__calloc(1, sizeof *pc);
    if (!pc)
        return NULL;
    /* As the pool's connections: the scripts loaded and INFO asked (the
     * restart rule, run_id, SET ... NX GET). */
    dlock__conn_config cfg = {&n->url, 1, 1, n->tls_ctx, 0, n->tls_cache};
    if (!(pc->c = dlock__conn_new(&cfg))) {
        dlock__free(pc);
        return NULL;
    }
    pc->c->shared = pc;
    pc->pipe = p;
    pc->heard_ns = dlock__now_ns();
    pc->io.fd = pc->c->ctx->fd;
    pc->io.ready = pc_ready;
    pc->next = p->all;
    p->all = pc;
    return pc;
}

/* Not to be joined: it owes replies and has heard none for
 * DLOCK__PIPE_STALL_MS, or it has been idle and the server closed it
 * meanwhile (the pool's probe, node.h: found now rather than after
 * sending, which would make the next command's outcome unknown). */
static int unusable(dlock__pipe_conn *pc)
{
    dlock__conn *c = pc->c;
    int64_t quiet_ns = dlock__now_ns() - pc->heard_ns;
    if (dlock__conn_pending(c) > 0)
        return quiet_ns > DLOCK__PIPE_STALL_MS * DLOCK__NS_PER_MS;
    return c->state == DLOCK__CS_OPEN && !dlock__conn_has_output(c) &&
           quiet_ns >= DLOCK__PROBE_IDLE_MS * DLOCK__NS_PER_MS && dlock__conn_probe(c) != 0;
}

dlock__pipe_conn *dlock__pipe_checkout(dlock__node *n, dlock__loop *l,
                                       const dlock__pipe_user_ops *ops)
{
    dlock__pipe *p = n->pipe;
    if (!p) {
        if (!(p = dlock__calloc(1, sizeof *p)))
            return NULL;
        p->node = n;
        p->loop = l;
        p->ops = ops;
        n->pipe = p;
    }
    dlock__pipe_conn *pc = p->cur;
    if (pc && (pc->c->state == DLOCK__CS_BROKEN || unusable(pc))) {
        pc->retired = pc->c->state != DLOCK__CS_BROKEN;
        pc_drop(pc);
        pc_free_if_unneeded(pc);
        pc = NULL;
    }
    if (!pc && (pc = pc_new(p)))
        p->cur = pc;
    return pc;
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
    /* Nothing owed and nothing to write: off the loop, which may then end
     * (uv_run returns) while the client lives, as with the pool. A close
     * by the server meanwhile is found by the next checkout's probe. */
    short ev = dlock__conn_events(c);
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

/* Every reply buffered (and with TLS, what OpenSSL still holds, which the
 * loop cannot see) to its user. DLOCK_OK or the connection's failure. */
static int pc_drain(dlock__pipe_conn *pc, int rc)
{
    dlock__conn *c = pc->c;
    int64_t now = dlock__now_ns(); /* once: a read's replies came together */
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
            pc->heard_ns = now;
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
    pc_free_if_unneeded(pc);
}

void dlock__pipe_ref(dlock__pipe_conn *pc)
{
    pc->refs++;
}

void dlock__pipe_unref(dlock__pipe_conn *pc)
{
    pc->refs--;
    if (!pc_unneeded(pc)) {
        if (dlock__pipe_arm(pc) != DLOCK_OK)
            dlock__conn_fail(pc->c, DLOCK_ENOMEM, "out of memory");
        return;
    }
    /* Going: what the socket takes now is what the node will run. */
    if (pc->c->state == DLOCK__CS_OPEN)
        (void)dlock__conn_io(pc->c, POLLOUT);
    pc_free(pc);
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
        dlock__conn_free(pc->c);
        dlock__free(pc);
    }
    dlock__free(p);
}
