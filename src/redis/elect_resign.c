/* SPDX-License-Identifier: BSD-3-Clause */
/* A resign's word to an election's observers on Redis (backend.h,
 * elect_resigned): "x" published on the election's channel (keys.h;
 * SPUBLISH on a Cluster, as lib/wake.lua sends it) on every node.
 *
 * A resign is the term lock's fair release, which hands the term to the
 * next standby with a message to that standby alone (fair_release.lua,
 * its inbox); the observers hear of the new term from the new leader's
 * value write. A standby that is stopped or dead when the term is handed
 * to it writes nothing, and observers went on showing the resigned leader
 * until its lease's end. This message makes them read at once: the
 * holder is then a term with no value yet, shown as no leader. */
#include <string.h>

#include "client.h"
#include "cluster.h"
#include "fanout.h"
#include "fanout_run.h"
#include "handle.h"
#include "keys.h"
#include "op.h"
#include "redis_backend.h"

typedef struct announce {
    char *ch;
    const char *args[3];
    size_t lens[3];
    dlock__req req;
    dlock__fanout_opts fo;
} announce;

/* A started one: its run (a blocking resign's is dlock__fanout()'s, on
 * its stack, so it keeps no second one). */
typedef struct announcing {
    announce a;
    size_t left; /* answers still wanted (ignore_reply) */
    dlock__fan fan;
    dlock__op *op;
} announcing;

/* A node's answer, whatever it is: the word is out once a majority
 * answered (the rest get it all the same, heard for the fan-out's grace
 * only: a stalled node must not hold the resign for the I/O timeout). */
static int ignore_reply(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                        const char *detail, int64_t start_ns)
{
    size_t *left = arg;
    (void)node, (void)idx, (void)err, (void)r, (void)detail, (void)start_ns;
    return *left > 0 && --*left == 0;
}

/* The PUBLISH for l's election, into a (its own copy of the channel):
 * DLOCK_OK or DLOCK_ENOMEM. */
static int announce_prepare(announce *a, dlock_lock *l)
{
    dlock_client *c = l->client;
    size_t clen = 0, off = 0;
    memset(a, 0, sizeof *a);
    a->ch = dlock__elect_channel_for(c, l->name, l->name_len, &clen, &off);
    if (!a->ch)
        return DLOCK_ENOMEM;
    int sharded = off > 0; /* a Cluster's: the channel lives in the key's slot */
    const char *args[3] = {sharded ? "SPUBLISH" : "PUBLISH", a->ch + off, "x"};
    size_t lens[3] = {strlen(args[0]), clen - off, 1};
    memcpy(a->args, args, sizeof args);
    memcpy(a->lens, lens, sizeof lens);
    a->req = (dlock__req){.nargs = 3, .args = a->args, .arglens = a->lens};
    a->fo = (dlock__fanout_opts){.io_timeout_ms = c->opts.io_timeout_ms,
                                 .deadline_ns = INT64_MAX, .grace_ms = DLOCK__DECIDED_GRACE_MS,
                                 .cluster_slot = sharded ? 1 + dlock__cluster_keyslot(
                                                                   a->ch + off, clen - off)
                                                         : 0};
    return DLOCK_OK;
}

void dlock__redis_elect_resigned(dlock_lock *l)
{
    announce a;
    if (announce_prepare(&a, l) != DLOCK_OK)
        return; /* best effort: observers look again at the lease's end */
    size_t left = l->client->quorum;
    (void)dlock__fanout(l->client, &a.req, 1, &a.fo, ignore_reply, &left);
    dlock__free(a.ch);
}

static void announced(dlock__fan *f)
{
    announcing *s = DLOCK__OWNER(f, announcing, fan);
    dlock__op *op = s->op;
    dlock__free(s->a.ch);
    dlock__free(s);
    op->v.code = DLOCK_OK;
    dlock__op_complete(op);
}

int dlock__redis_elect_resigned_start(dlock_lock *l, dlock__op *op)
{
    announcing *s = dlock__malloc(sizeof *s);
    if (!s || announce_prepare(&s->a, l) != DLOCK_OK) {
        dlock__free(s);
        return DLOCK_ENOMEM;
    }
    s->op = op;
    s->left = l->client->quorum;
    dlock__fan_init(&s->fan, l->client, &s->a.req, 1, &s->a.fo, ignore_reply, &s->left);
    dlock__fan_start(&s->fan, op->loop, announced);
    return DLOCK_OK;
}
