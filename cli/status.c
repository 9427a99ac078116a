/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock status: a read-only look at a lock on every node. Exit status:
 * 0 held (on a majority), 1 free or held on too few nodes, 69 too few
 * nodes answered. */
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

/* JSON string: the lock name is arbitrary bytes; control characters are
 * escaped, other bytes pass through (valid JSON for UTF-8 names). */
static void json_string(const char *s, FILE *f)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void print_json(dlock_client *c, const char *name, const dlock_node_status *st,
                       const dlock_lock_status *s, FILE *f)
{
    fputs("{\"name\":", f);
    json_string(name, f);
    fprintf(f, ",\"state\":\"%s\",\"held\":%s,\"nodes_held\":%zu,\"quorum\":%zu,\"nodes\":[",
            state_name(s->state), s->state == DLOCK_STATUS_HELD ? "true" : "false", s->held_on,
            s->quorum);
    for (size_t i = 0; i < s->nodes; i++) {
        fputs(i ? ",{\"node\":" : "{\"node\":", f);
        json_string(dlock_client_node_name(c, i), f);
        if (st[i].error != DLOCK_OK)
            fprintf(f, ",\"error\":\"%s\",\"message\":\"%s\"}", dlock_errname(st[i].error),
                    dlock_strerror(st[i].error));
        else
            fprintf(f, ",\"held\":%s,\"ttl_ms\":%" PRId64 ",\"fence\":%" PRIu64 "}",
                    st[i].held ? "true" : "false", st[i].ttl_ms, st[i].fence);
    }
    fputs("]}\n", f);
}

static void print_text(dlock_client *c, const char *name, const dlock_node_status *st,
                       const dlock_lock_status *s, FILE *f)
{
    char esc[4096];
    fprintf(f, "\"%s\": %s", cli_escape(name, esc, sizeof esc), state_name(s->state));
    if (s->nodes > 1)
        fprintf(f, " (held on %zu of %zu nodes, %zu needed)", s->held_on, s->nodes, s->quorum);
    fputc('\n', f);
    for (size_t i = 0; i < s->nodes; i++) {
        fprintf(f, "  %-24s ", dlock_client_node_name(c, i));
        if (st[i].error != DLOCK_OK)
            fprintf(f, "error: %s (%s)\n", dlock_strerror(st[i].error),
                    dlock_errname(st[i].error));
        else if (st[i].held && st[i].ttl_ms >= 0)
            fprintf(f, "held  ttl %.1fs  fence %" PRIu64 "\n", (double)st[i].ttl_ms / 1000.0,
                    st[i].fence);
        else if (st[i].held)
            fprintf(f, "held  no ttl  fence %" PRIu64 "\n", st[i].fence);
        else
            fprintf(f, "free  fence %" PRIu64 "\n", st[i].fence);
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
    if (json)
        print_json(c, name, st, &s, stdout);
    else
        print_text(c, name, st, &s, stdout);
    /* As test(1) and flock(1): 0 "yes, held", 1 "no"; 69 when too few
     * nodes answered to tell. */
    if (s.state == DLOCK_STATUS_HELD)
        rc = 0;
    else if (s.state != DLOCK_STATUS_UNKNOWN)
        rc = CLI_EXIT_CONFLICT;
    else
        rc = CLI_EXIT_UNAVAILABLE;
    if (fflush(stdout) != 0)
        rc = CLI_EXIT_OSERR;
    if (src != DLOCK_OK) {
        char nodes[512];
        cli_msg("\"%s\": no node answered (%s): %s", name, cli_nodes(c, nodes, sizeof nodes),
                dlock_strerror(src));
        rc = cli_exit_for(src, NULL, 0);
    }
    dlock_client_free(c);
    return rc;
}
