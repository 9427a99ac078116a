/* SPDX-License-Identifier: BSD-3-Clause */
/* One command on a connection of its own, as a sub-request on a loop
 * (loop.h): how dlock asks a sentinel for the primary and a cluster node
 * for the slot map. The connection's socket is one io record and its time
 * limit one timer on the loop the exchange was started on; nothing waits
 * inside a call. */
#ifndef DLOCK_EXCHANGE_H
#define DLOCK_EXCHANGE_H

#include <stdint.h>

#include "conn.h"
#include "loop.h"

typedef struct dlock__exchange {
    dlock__conn *conn; /* owned: freed by dlock__exchange_stop */
    dlock__loop *loop;
    dlock__io io;
    dlock__timer timer; /* at the exchange's time limit */
    /* From the loop, once: rc 1 with the reply r (the callee frees it), or
     * a negative code (why in x->conn->err). The records are cleared
     * before; the callee may stop (and reuse) x. */
    void (*done)(struct dlock__exchange *x, int rc, redisReply *r);
} dlock__exchange;

/* Send argv on c (new, not shared; x owns it from now on, whatever the
 * result) and wait on loop l until its reply or until_ns. DLOCK_OK: done
 * will be called from the loop, unless dlock__exchange_stop comes first.
 * Else a negative code and done is never called: the connection failed
 * already (why in c->err) or DLOCK_ENOMEM (the loop has no room). */
int dlock__exchange_start(dlock__exchange *x, dlock__loop *l, dlock__conn *c, int argc,
                          const char **argv, int64_t until_ns);

/* Leave the loop and free the connection; any time, finished or not. */
void dlock__exchange_stop(dlock__exchange *x);

#endif
