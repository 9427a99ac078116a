/* SPDX-License-Identifier: BSD-3-Clause */
/* One command on a connection of its own, on a loop (exchange.h). */
#include <poll.h>
#include <string.h>

#include "exchange.h"

static int arm(dlock__exchange *x)
{
    short ev = dlock__conn_events(x->conn);
    x->io.fd = x->conn->ctx->fd;
    x->io.want = ((ev & POLLIN) ? DLOCK__IO_READ : 0u) | ((ev & POLLOUT) ? DLOCK__IO_WRITE : 0u);
    return dlock__io_set(x->loop, &x->io);
}

static void finish(dlock__exchange *x, int rc, redisReply *r)
{
    dlock__io_clear(x->loop, &x->io);
    dlock__timer_clear(x->loop, &x->timer);
    x->done(x, rc, r);
}

/* The reply if it came, else what the connection waits for now. */
static void step(dlock__exchange *x, int rc)
{
    dlock__conn *c = x->conn;
    if (rc == DLOCK_OK) {
        redisReply *r = NULL;
        uint32_t idx;
        int got = dlock__conn_take(c, &r, &idx);
        if (got != 0) {
            finish(x, got, r);
            return;
        }
        if (c->state == DLOCK__CS_BROKEN || !dlock__conn_events(c))
            rc = dlock__conn_fail(c, DLOCK_EIO, "connection failed");
        else if (arm(x) != DLOCK_OK)
            rc = dlock__conn_fail(c, DLOCK_ENOMEM, "out of memory");
    }
    if (rc < 0)
        finish(x, rc, NULL);
}

static void ready(dlock__io *io, unsigned events)
{
    dlock__exchange *x = DLOCK__OWNER(io, dlock__exchange, io);
    short revents = (short)(((events & DLOCK__IO_READ) ? POLLIN : 0) |
                            ((events & DLOCK__IO_WRITE) ? POLLOUT : 0) |
                            ((events & DLOCK__IO_ERROR) ? POLLERR : 0));
    step(x, dlock__conn_io(x->conn, revents));
}

static void due(dlock__timer *t)
{
    dlock__exchange *x = DLOCK__OWNER(t, dlock__exchange, timer);
    finish(x, dlock__conn_fail(x->conn, DLOCK_EIO, "%s timed out", dlock__conn_phase(x->conn)),
           NULL);
}

int dlock__exchange_start(dlock__exchange *x, dlock__loop *l, dlock__conn *c, int argc,
                          const char **argv, int64_t until_ns)
{
    memset(&x->io, 0, sizeof x->io);
    memset(&x->timer, 0, sizeof x->timer);
    x->conn = c;
    x->loop = l;
    x->io.ready = ready;
    x->timer.fire = due;
    x->timer.due_ns = until_ns;
    if (c->state == DLOCK__CS_BROKEN)
        return c->err_code ? c->err_code : DLOCK_EIO;
    int rc = dlock__conn_append(c, argc, argv, NULL, 0);
    if (rc == DLOCK_OK && (c->state == DLOCK__CS_BROKEN || !dlock__conn_events(c)))
        rc = dlock__conn_fail(c, DLOCK_EIO, "connection failed");
    if (rc == DLOCK_OK && arm(x) != DLOCK_OK)
        rc = DLOCK_ENOMEM;
    if (rc == DLOCK_OK && until_ns != INT64_MAX)
        rc = dlock__timer_set(l, &x->timer);
    if (rc != DLOCK_OK)
        dlock__io_clear(l, &x->io);
    return rc;
}

void dlock__exchange_stop(dlock__exchange *x)
{
    if (x->loop) {
        dlock__io_clear(x->loop, &x->io);
        dlock__timer_clear(x->loop, &x->timer);
    }
    dlock__conn_free(x->conn);
    x->conn = NULL;
}
