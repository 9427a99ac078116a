/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock status: a read-only look at a lock on every node. Exit status:
 * 0 held (on a majority), 1 free or held on too few nodes, 69 too few
 * nodes answered, 76 the key is not a lock (as `run` on it). */
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"

static const char *state_name(dlock_status_state st)
{
    switch (st) {
    case DLOCK_STATUS_HELD:
        return "held";
    case DLOCK_STATUS_FREE:
        return "free";
    case DLOCK_STATUS_PARTIAL:
        return "partial";
    default:
        return "unknown";
    }
}

#define MAX_LISTED 64

/* Who holds the name on one node (shared holders, permits): what
 * dlock_client_holders() says, with each listed holder's identity
 * (dlock_client_holder_identity(): "" none); info->mode DLOCK_HOLD_FREE if
 * it failed. */
typedef struct node_holders {
    dlock_holders_info info;
    dlock_holder list[MAX_LISTED];
    char ids[MAX_LISTED][DLOCK_IDENTITY_READ_MAX + 1];
} node_holders;

static int several(const node_holders *h)
{
    return h->info.mode == DLOCK_HOLD_SHARED || h->info.mode == DLOCK_HOLD_SEMAPHORE;
}

static void holders_of(dlock_client *c, const char *name, size_t i, node_holders *h)
{
    int rc = dlock_client_holders(c, name, i, &h->info, h->list, MAX_LISTED);
    if (rc == DLOCK_ENOTSUP) /* etcd: exclusive locks only, holders not listed */
        h->info = (dlock_holders_info){DLOCK_HOLD_EXCLUSIVE, 0, 1, -1};
    else if (rc != DLOCK_OK)
        h->info = (dlock_holders_info){DLOCK_HOLD_FREE, 0, 0, -1};
    for (size_t k = 0; several(h) && k < h->info.count && k < MAX_LISTED; k++)
        if (dlock_client_holder_identity(c, name, i, h->list[k].token, h->ids[k],
                                         sizeof h->ids[k]) != DLOCK_OK)
            h->ids[k][0] = '\0'; /* best effort, as the node's identity */
}

/* A node whose key is not a lock (DLOCK_HOLD_FOREIGN): its Redis type. */
static const char *foreign_type(size_t i);

static void json_holders(const node_holders *h, FILE *f)
{
    fprintf(f, ",\"mode\":\"%s\"", cli_mode_name(h->info.mode));
    if (h->info.mode != DLOCK_HOLD_SHARED && h->info.mode != DLOCK_HOLD_SEMAPHORE)
        return;
    if (h->info.mode == DLOCK_HOLD_SEMAPHORE)
        fprintf(f, ",\"permits\":%u", h->info.permits);
    fprintf(f, ",\"writer_waiting_ms\":%" PRId64 ",\"holders_count\":%zu,\"holders\":[",
            h->info.writer_waiting_ms, h->info.count);
    for (size_t k = 0; k < h->info.count && k < MAX_LISTED; k++) {
        fputs(k ? ",{\"token\":" : "{\"token\":", f);
        cli_json_string(h->list[k].token, f);
        fprintf(f, ",\"ttl_ms\":%" PRId64 ",\"identity\":", h->list[k].ttl_ms);
        if (h->ids[k][0])
            cli_json_string(h->ids[k], f);
        else
            fputs("null", f);
        fputc('}', f);
    }
    fputc(']', f);
}

static void text_holders(const node_holders *h, FILE *f)
{
    char esc[1024];
    if (h->info.mode == DLOCK_HOLD_SHARED)
        fprintf(f, "%26sshared by %zu", "", h->info.count);
    else if (h->info.mode == DLOCK_HOLD_SEMAPHORE)
        fprintf(f, "%26spermits in use %zu of %u", "", h->info.count, h->info.permits);
    else
        return;
    if (h->info.writer_waiting_ms >= 0)
        fprintf(f, "  (a writer waits, mark %.1fs)", (double)h->info.writer_waiting_ms / 1000.0);
    fputc('\n', f);
    for (size_t k = 0; k < h->info.count && k < MAX_LISTED; k++) {
        fprintf(f, "%28s%s  lease %.1fs", "", cli_escape(h->list[k].token, esc, sizeof esc),
                (double)h->list[k].ttl_ms / 1000.0);
        if (h->ids[k][0]) /* last: it holds spaces */
            fprintf(f, "  identity %s", cli_escape(h->ids[k], esc, sizeof esc));
        fputc('\n', f);
    }
    if (h->info.count > MAX_LISTED)
        fprintf(f, "%28s... and %zu more\n", "", h->info.count - MAX_LISTED);
}

static node_holders holders[CLI_MAX_URLS];
/* Each node's holder identity (dlock_client_identity()): "" none. */
static char identities[CLI_MAX_URLS][DLOCK_IDENTITY_READ_MAX + 1];
static size_t n_foreign; /* nodes whose key is not a lock */
/* Each node's lock-delay left (dlock_client_lock_delay()): -1 unknown. */
static int64_t delays[CLI_MAX_URLS];

static const char *foreign_type(size_t i)
{
    return holders[i].info.mode == DLOCK_HOLD_FOREIGN ? holders[i].list[0].token : NULL;
}

static void print_json(dlock_client *c, const char *name, const dlock_node_status *st,
                       const dlock_lock_status *s, FILE *f)
{
    fputc('{', f);
    cli_json_name(name, f);
    fprintf(f, ",\"state\":\"%s\",\"held\":%s,\"nodes_held\":%zu,\"quorum\":%zu,\"nodes\":[",
            n_foreign ? "wrongtype" : state_name(s->state),
            s->state == DLOCK_STATUS_HELD && !n_foreign ? "true" : "false",
            s->held_on - n_foreign, s->quorum);
    for (size_t i = 0; i < s->nodes; i++) {
        fputs(i ? ",{\"node\":" : "{\"node\":", f);
        cli_json_string(dlock_client_node_name(c, i), f);
        if (foreign_type(i)) {
            fputs(",\"error\":\"DLOCK_EWRONGTYPE\",\"message\":\"not a lock: the key holds a "
                  "Redis ", f);
            fputs(foreign_type(i), f);
            fputs("\",\"type\":", f);
            cli_json_string(foreign_type(i), f);
            fputc('}', f);
        } else if (st[i].error != DLOCK_OK)
            fprintf(f, ",\"error\":\"%s\",\"message\":\"%s\"}", dlock_errname(st[i].error),
                    dlock_strerror(st[i].error));
        else
        {
            fprintf(f, ",\"held\":%s,\"ttl_ms\":%" PRId64 ",\"fence\":%" PRIu64,
                    st[i].held ? "true" : "false", st[i].ttl_ms, st[i].fence);
            if (delays[i] >= 0)
                fprintf(f, ",\"lock_delay_ms\":%" PRId64, delays[i]);
            json_holders(&holders[i], f);
            if (st[i].held) {
                fputs(",\"identity\":", f);
                if (identities[i][0])
                    cli_json_string(identities[i], f);
                else
                    fputs("null", f);
            }
            fputc('}', f);
        }
    }
    fputs("]}\n", f);
}

static void print_text(dlock_client *c, const char *name, const dlock_node_status *st,
                       const dlock_lock_status *s, FILE *f)
{
    char esc[4096];
    fprintf(f, "\"%s\": %s", cli_escape(name, esc, sizeof esc),
            n_foreign ? "not a lock" : state_name(s->state));
    if (s->nodes > 1 && !n_foreign)
        fprintf(f, " (held on %zu of %zu nodes, %zu needed)", s->held_on, s->nodes, s->quorum);
    fputc('\n', f);
    for (size_t i = 0; i < s->nodes; i++) {
        fprintf(f, "  %-24s ", dlock_client_node_name(c, i));
        if (foreign_type(i))
            fprintf(f, "error: not a lock: the key holds a Redis %s (DLOCK_EWRONGTYPE)\n",
                    foreign_type(i));
        else if (st[i].error != DLOCK_OK)
            fprintf(f, "error: %s (%s)\n", dlock_strerror(st[i].error),
                    dlock_errname(st[i].error));
        else if (st[i].held && st[i].ttl_ms >= 0)
            fprintf(f, "held  ttl %.1fs  fence %" PRIu64 "\n", (double)st[i].ttl_ms / 1000.0,
                    st[i].fence);
        else if (st[i].held)
            fprintf(f, "held  no ttl  fence %" PRIu64 "\n", st[i].fence);
        else
            fprintf(f, "free  fence %" PRIu64 "\n", st[i].fence);
        if (st[i].error == DLOCK_OK && !foreign_type(i))
            text_holders(&holders[i], f);
        if (st[i].error == DLOCK_OK && delays[i] > 0)
            fprintf(f, "%26sdelayed %.1fs (lock-delay: a hold ended without a release)\n", "",
                    (double)delays[i] / 1000.0);
        /* Several holders show theirs on their own lines (text_holders). */
        if (st[i].error == DLOCK_OK && st[i].held && identities[i][0] && !several(&holders[i]))
            fprintf(f, "%26sidentity %s\n", "", cli_escape(identities[i], esc, sizeof esc));
    }
}

int cli_cmd_status(cli_global *g, int argc, char **argv)
{
    static dlock_node_status st[CLI_MAX_URLS];
    const char *name = NULL;
    dlock_client *c = NULL;
    int json = 0;
    int rc = cli_parse_simple(argv[0], argc, argv, g, ":vh", NULL, &json, 1, &name);
    if (rc || (rc = cli_open_client(g, &c)) != 0)
        return rc;
    size_t n = dlock_client_node_count(c);
    dlock_lock_status s = {DLOCK_STATUS_UNKNOWN, n, 0, 0, 0};
    int src = dlock_client_status(c, name, n, st, &s);
    if (src == DLOCK_EINVAL) {
        dlock_client_free(c);
        return cli_usage_error(argv[0], "the lock name must be 1..%d bytes", DLOCK_NAME_MAX);
    }
    for (size_t i = 0; i < n; i++) {
        holders[i].info.mode = DLOCK_HOLD_FREE;
        identities[i][0] = '\0';
        if (st[i].error == DLOCK_OK && st[i].held) {
            holders_of(c, name, i, &holders[i]);
            /* Best effort: none shown when it cannot be read (etcd). */
            if (dlock_client_identity(c, name, i, identities[i], sizeof identities[i]) !=
                DLOCK_OK)
                identities[i][0] = '\0';
        }
        n_foreign += foreign_type(i) != NULL;
        /* Best effort too: none shown where it cannot be read (etcd). */
        if (st[i].error != DLOCK_OK || foreign_type(i) ||
            dlock_client_lock_delay(c, name, i, &delays[i]) != DLOCK_OK)
            delays[i] = -1;
    }
    if (json)
        print_json(c, name, st, &s, stdout);
    else
        print_text(c, name, st, &s, stdout);
    /* As test(1) and flock(1): 0 "yes, held", 1 "no"; 69 when too few
     * nodes answered to tell. */
    if (n_foreign) /* as `run` on it: DLOCK_EWRONGTYPE */
        rc = cli_exit_for(DLOCK_EWRONGTYPE, NULL, 0);
    else if (s.state == DLOCK_STATUS_HELD)
        rc = 0;
    else if (s.state != DLOCK_STATUS_UNKNOWN)
        rc = CLI_EXIT_CONFLICT;
    else
        rc = CLI_EXIT_UNAVAILABLE;
    if (fflush(stdout) != 0)
        rc = CLI_EXIT_OSERR;
    if (src != DLOCK_OK) {
        char nodes[512];
        cli_msg("\"%s\": no node answered (%s): %s (%s)%s", name,
                cli_nodes(c, nodes, sizeof nodes), dlock_strerror(src), dlock_errname(src),
                cli_hint(src, ""));
        rc = cli_exit_for(src, NULL, 0);
    }
    dlock_client_free(c);
    return rc;
}
