/* SPDX-License-Identifier: BSD-3-Clause */
/* Waiting on one connection without poll(): the blocking read of a single
 * awaited reply, and the liveness probe of a pooled connection. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "conn.h"

int dlock__conn_read_blocking(dlock__conn *c, int io_timeout_ms)
{
    if (c->state != DLOCK__CS_OPEN || c->tls)
        return DLOCK_EIO;
    if (c->rcvtimeo_ms != io_timeout_ms) {
        /* Once per connection: the socket turns blocking (every other
         * call on it passes MSG_DONTWAIT) with the I/O timeout as its
         * receive timeout, so one recv() waits for the reply that poll()
         * and a read used to take two system calls for. */
        struct timeval tv = {io_timeout_ms / 1000, (io_timeout_ms % 1000) * 1000};
        int fl = fcntl(c->ctx->fd, F_GETFL);
        if (fl < 0 || (fl & O_NONBLOCK && fcntl(c->ctx->fd, F_SETFL, fl & ~O_NONBLOCK) < 0) ||
            setsockopt(c->ctx->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
            return dlock__conn_fail(c, c->caller_sent ? DLOCK_EUNKNOWN : DLOCK_EIO,
                                    "socket setup: %s", strerror(errno));
        c->rcvtimeo_ms = io_timeout_ms;
    }
    return dlock__conn_recv(c, 0);
}

int dlock__conn_probe(dlock__conn *c)
{
    if (c->state != DLOCK__CS_OPEN)
        return c->state == DLOCK__CS_CONNECTING ? 0 : -1;
    char b;
    ssize_t n = recv(c->ctx->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        return -1;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return -1;
    /* A peeked byte starts a TLS record, which may be a session ticket (TLS
     * 1.3 servers send those after the handshake), a stale reply owed to a
     * DISCARD entry, or a close_notify or alert. Reading it through TLS
     * tells them apart: stale replies go to the hiredis reader as usual,
     * and the connection is usable unless a read found the session closed
     * or failed. A few rounds: a read stops after a record with data. */
    for (int i = 0; c->tls && i < 8 && (n > 0 || dlock__tls_buffered(c->tls)); i++) {
        if (dlock__conn_io(c, POLLIN) != DLOCK_OK || c->state != DLOCK__CS_OPEN)
            return -1;
        n = recv(c->ctx->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0)
            return -1;
    }
    return 0;
}
