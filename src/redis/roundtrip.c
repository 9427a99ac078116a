/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "clock.h"
#include "roundtrip.h"

int dlock__conn_roundtrip(dlock__conn *c, int argc, const char **argv, int timeout_ms,
                          redisReply **reply)
{
    int64_t deadline = dlock__now_ns() + (int64_t)timeout_ms * DLOCK__NS_PER_MS;
    int rc = dlock__conn_append(c, argc, argv, NULL, 0);
    while (rc == DLOCK_OK) {
        uint32_t idx;
        int got = dlock__conn_take(c, reply, &idx);
        if (got != 0)
            return got;
        short ev = dlock__conn_events(c);
        if (c->state == DLOCK__CS_BROKEN || !ev)
            return dlock__conn_fail(c, DLOCK_EIO, "connection failed");
        int left = dlock__ms_until(deadline);
        if (left <= 0)
            return dlock__conn_fail(c, DLOCK_EIO, "%s timed out", dlock__conn_phase(c));
        struct pollfd p = {c->ctx->fd, ev, 0};
        int pr = poll(&p, 1, left);
        if (pr < 0 && errno != EINTR)
            return dlock__conn_fail(c, DLOCK_EIO, "poll: %s", strerror(errno));
        if (pr > 0)
            rc = dlock__conn_io(c, p.revents);
    }
    return rc;
}
