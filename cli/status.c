/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock status: a read-only look at a lock on every node. Exit status:
 * 0 held (on a majority), 1 free or held on too few nodes, 69 too few
 * nodes answered. */
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"

typedef struct summary {
    size_t n, held, answered, quorum;
    /* "held": on a majority; "free": on no node, and a majority answered;
     * "partial": on some nodes, not a majority (a failed or ending
     * Redlock attempt); "unknown": too few nodes answered to tell. */
    const char *state;
} summary;

static summary summarize(const dlock_node_status *st, size_t n)
{
    summary s = {n, 0, 0, n / 2 + 1, "unknown"};
    for (size_t i = 0; i < n; i++) {
        if (st[i].error != DLOCK_OK)
            continue;
        s.answered++;
        s.held += st[i].held != 0;
    }
    if (s.held >= s.quorum)
        s.state = "held";
    else if (s.answered >= s.quorum)
        s.state = s.held ? "partial" : "free";
    return s;
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
                       const summary *s, FILE *f)
{
    fputs("{\"name\":", f);
    json_string(name, f);
    fprintf(f, ",\"state\":\"%s\",\"held\":%s,\"nodes_held\":%zu,\"quorum\":%zu,\"nodes\":[",
            s->state, s->held >= s->quorum ? "true" : "false", s->held, s->quorum);
    for (size_t i = 0; i < s->n; i++) {
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
                       const summary *s, FILE *f)
{
    char esc[4096];
    fprintf(f, "\"%s\": %s", cli_escape(name, esc, sizeof esc), s->state);
    if (s->n > 1)
        fprintf(f, " (held on %zu of %zu nodes, %zu needed)", s->held, s->n, s->quorum);
    fputc('\n', f);
    for (size_t i = 0; i < s->n; i++) {
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
    int src = dlock_client_status(c, name, st, n);
    if (src == DLOCK_EINVAL) {
        dlock_client_free(c);
        return cli_usage_error(argv[0], "the lock name must be 1..%d bytes", DLOCK_NAME_MAX);
    }
    summary s = summarize(st, n);
    if (json)
        print_json(c, name, st, &s, stdout);
    else
        print_text(c, name, st, &s, stdout);
    /* As test(1) and flock(1): 0 "yes, held", 1 "no"; 69 when too few
     * nodes answered to tell. */
    if (s.held >= s.quorum)
        rc = 0;
    else if (s.answered >= s.quorum)
        rc = CLI_EXIT_CONFLICT;
    else
        rc = CLI_EXIT_UNAVAILABLE;
    if (fflush(stdout) != 0)
        rc = CLI_EXIT_OSERR;
    if (src != DLOCK_OK) {
        char nodes[512];
        cli_msg("\"%s\": no node answered (%s): %s", name, cli_nodes(c, nodes, sizeof nodes),
                dlock_strerror(src));
        rc = cli_exit_for(src);
    }
    dlock_client_free(c);
    return rc;
}
