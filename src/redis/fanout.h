/* SPDX-License-Identifier: BSD-3-Clause */
/* Send the same pipelined commands to every node of a client in parallel and
 * collect the replies as they arrive, from the calling thread (non-blocking
 * sockets on a loop; no helper threads). These blocking calls turn a private
 * loop per call; a request starts the same run on its own loop
 * (dlock__fan_start, fanout_run.h). The caller decides from each reply
 * whether it has heard enough (a Redlock majority, say) and can stop early;
 * slow nodes are not waited for, their late replies are discarded when their
 * connection is next used. */
#ifndef DLOCK_FANOUT_H
#define DLOCK_FANOUT_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "scripts.h"

struct dlock_client;

/* One command: a script (EVALSHA, falling back to EVAL on NOSCRIPT) or,
 * with script == NULL, a plain command whose name is args[0]. */
typedef struct dlock__req {
    const dlock__script *script;
    int numkeys;
    int nargs;
    const char **args;
    const size_t *arglens; /* NULL: strlen() of each */
    int acks;              /* with min_replicas: WAIT behind it (kinds.h, acks_*) */
} dlock__req;

/* Called once per (node, request): with reply != NULL and err == DLOCK_OK
 * when the node replied (an error reply included: reply->type ==
 * REDIS_REPLY_ERROR), or with reply == NULL and err < 0 when the node failed
 * or timed out before replying (detail says why). `start_ns` is the server
 * start time the connection learned (0 if unknown). Return nonzero to stop
 * waiting for everything else. */
typedef int (*dlock__on_reply)(void *arg, size_t node, uint32_t idx, int err,
                               const redisReply *reply, const char *detail,
                               int64_t start_ns);

/* How long a run that the callback decided still listens for the nodes yet
 * to answer (dlock__fanout_opts.grace_ms) in acquires, releases, extends
 * and renewals: a node that answers at once is heard (and one that
 * answered NOSCRIPT gets the script's body), a silent one is not waited
 * for. */
#define DLOCK__DECIDED_GRACE_MS 100

typedef struct dlock__fanout_opts {
    int64_t io_timeout_ms;  /* per node: longest silence, from connect (or
                               send, or the previous reply) to a reply */
    int64_t deadline_ns;    /* absolute; INT64_MAX for none */
    const uint8_t *only;    /* if set: only nodes with only[i] != 0 */
    int64_t grace_ms;       /* once the callback stopped the run, nodes
                               still to answer get this much longer (their
                               replies still reach the callback, whose
                               verdict then no longer matters); 0: none */
    unsigned cluster_slot;  /* Cluster: 1 + the hash slot whose master the
                               run goes to (a SCAN has no key; a listing's
                               reads go to the master the SCAN walked);
                               0: the first request's key's slot */
} dlock__fanout_opts;

/* Returns DLOCK_OK once every node answered or failed, or the callback
 * stopped it; DLOCK_ENOMEM if it could not even start. Every request of
 * every selected node is reported to the callback exactly once, unless the
 * callback stopped the run. */
int dlock__fanout(struct dlock_client *client, const dlock__req *reqs,
                  uint32_t nreqs, const dlock__fanout_opts *opts,
                  dlock__on_reply cb, void *arg);

/* dlock__fanout() that a waiting acquire's cancel can stop: when cancel_fd
 * becomes readable, the run stops at once: unanswered requests are
 * reported as failed (DLOCK_EUNKNOWN if sent, else DLOCK_EIO), the
 * connection of every node whose requests were sent is handed back in
 * kept[node] (client->n_nodes entries, NULL for the others) instead of
 * being pooled, and it returns DLOCK_ECANCELED. */
int dlock__fanout_cancellable(struct dlock_client *client, const dlock__req *reqs,
                              uint32_t nreqs, const dlock__fanout_opts *opts, int cancel_fd,
                              struct dlock__conn **kept, dlock__on_reply cb, void *arg);

/* dlock__fanout_cancellable() for an acquire attempt: a node whose sent
 * requests timed out is reported DLOCK_EUNKNOWN as usual, but its
 * connection is handed back in kept[] too (whatever the return value)
 * rather than closed, so the caller queues its undo behind the attempt
 * (dlock__fanout_send_behind) instead of waiting for the silent node a
 * second time. Every kept[] entry must go to dlock__fanout_send_behind(). */
int dlock__fanout_attempt(struct dlock_client *client, const dlock__req *reqs,
                          uint32_t nreqs, const dlock__fanout_opts *opts, int cancel_fd,
                          struct dlock__conn **kept, dlock__on_reply cb, void *arg);

/* After a cancelled run: queue `reqs` (as EVAL, so it needs no script cache)
 * behind what each kept connection already carries, write what the socket
 * takes now, and pool the connection without waiting for any reply (a
 * connection kept because it timed out is closed instead: close() still
 * delivers what was written, and the node runs it when it answers). Redis
 * runs one connection's commands in order, so the command runs right after
 * the cancelled one, whenever the node gets to it: how a cancelled acquire
 * undoes itself without making the cancel wait. Clears kept[]. With
 * nreqs == 0 it only pools the kept connections. */
void dlock__fanout_send_behind(struct dlock_client *client, struct dlock__conn **kept,
                               const dlock__req *reqs, uint32_t nreqs);

#endif
