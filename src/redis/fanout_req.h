/* SPDX-License-Identifier: BSD-3-Clause */
/* What a fan-out writes on a node's connection: a request, with the WAIT
 * for replica acknowledgement behind it when it needs one, each tagged
 * with the index its reply goes back to the run under. */
#ifndef DLOCK_FANOUT_REQ_H
#define DLOCK_FANOUT_REQ_H

#include <stdint.h>

#include "conn.h"
#include "fanout.h"

/* A request's WAIT goes back to the run as its own index with this bit
 * set, never seen by the callback. */
#define DLOCK__FANOUT_ACK_BIT UINT32_C(0x80000000)
/* Cluster: the reply to the ASKING before a request sent after ASK. */
#define DLOCK__FANOUT_ASKING_BIT UINT32_C(0x40000000)

/* Whether request r waits for replica acknowledgement (a WAIT behind it). */
int dlock__fanout_wants_acks(const struct dlock_client *client, const dlock__req *r);

/* Queue request r as index idx on c (as EVAL with use_eval, else EVALSHA
 * for a script), and its WAIT when it wants one. DLOCK_OK or a negative
 * code (dlock__conn_append). */
int dlock__fanout_append(const struct dlock_client *client, dlock__conn *c, const dlock__req *r,
                         uint32_t idx, int use_eval);

#endif
