/* SPDX-License-Identifier: BSD-3-Clause */
/* A blocking round trip on a connection of its own: how dlock asks a
 * sentinel for the primary and a cluster node for the slot map, outside
 * the fan-out (one command, one server, the caller's thread waits). */
#ifndef DLOCK_ROUNDTRIP_H
#define DLOCK_ROUNDTRIP_H

#include "conn.h"

/* Send one command on c (new, not shared) and wait up to timeout_ms for
 * its reply: 1 with *reply set (caller frees), or a negative code (why in
 * c->err). */
int dlock__conn_roundtrip(dlock__conn *c, int argc, const char **argv, int timeout_ms,
                          redisReply **reply);

#endif
