/* SPDX-License-Identifier: BSD-3-Clause */
#include <poll.h>
#include <stdio.h>

#include "client.h"
#include "error.h"
#include "fanout_req.h"
#include "pipe.h"

/* Replica acknowledgement (dlock_client_options.min_replicas) applies to
 * the requests that grant or lengthen a lease, as the kind's steps say
 * (kind_steps.c, acks): every kind's acquire but fair
 * mode's, and every extend. Releases need no acknowledgement (a lost
 * release only leaves a key to expire); renewals are left out
 * (docs/deployment.md). */
int dlock__fanout_wants_acks(const struct dlock_client *client, const dlock__req *r)
{
    return client->opts.min_replicas > 0 && r->script && r->acks;
}

/* WAIT right behind the request on the same connection: it waits for the
 * replication offset of this connection's last write, which is the
 * request's own. */
static int append_wait(const struct dlock_client *client, dlock__conn *c, uint32_t idx)
{
    char n[16], ms[16];
    snprintf(n, sizeof n, "%d", client->opts.min_replicas);
    snprintf(ms, sizeof ms, "%d", client->opts.min_replicas_timeout_ms);
    const char *argv[3] = {"WAIT", n, ms};
    return dlock__conn_append(c, 3, argv, NULL, idx | DLOCK__FANOUT_ACK_BIT);
}

static int send_req(dlock__conn *c, const dlock__req *r, uint32_t idx,
                    int use_eval)
{
    if (r->script)
        return dlock__conn_append_script(c, r->script, r->numkeys, r->nargs,
                                         r->args, r->arglens, use_eval, idx);
    return dlock__conn_append(c, r->nargs, r->args, r->arglens, idx);
}

int dlock__fanout_append(const struct dlock_client *client, dlock__conn *c, const dlock__req *r,
                         uint32_t idx, int use_eval)
{
    int rc = send_req(c, r, idx, use_eval);
    if (rc == DLOCK_OK && dlock__fanout_wants_acks(client, r))
        rc = append_wait(client, c, idx);
    return rc;
}

void dlock__fanout_send_behind(struct dlock_client *client, dlock__conn **kept,
                               const dlock__req *reqs, uint32_t nreqs)
{
    for (size_t i = 0; i < client->n_nodes; i++) {
        dlock__conn *c = kept[i];
        if (!c)
            continue;
        kept[i] = NULL;
        /* Unsent bytes left after this write go out with the next command
         * on this connection, still in order; the replies are discarded. */
        int rc = DLOCK_OK;
        for (uint32_t j = 0; j < nreqs && rc == DLOCK_OK; j++)
            rc = send_req(c, &reqs[j], j, 1);
        if (c->shared) {
            /* A shared connection (pipe.h): appended with no tag, so
             * nobody hears the replies; the pipe writes it out. */
            dlock__pipe_unref(c->shared);
            continue;
        }
        if (rc == DLOCK_OK && dlock__conn_io(c, POLLOUT) == DLOCK_OK && !c->retire) {
            dlock__conn_abandon(c);
            dlock__node_checkin(&client->nodes[i], c);
        } else {
            dlock__conn_free(c);
        }
    }
}
