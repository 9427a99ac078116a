/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock list: the held lock names matching a pattern, one line (or one
 * JSON object) per name, from dlock_client_list(). Exit status: 0 (even
 * when nothing matched), 64 a bad pattern, 69 too few nodes answered,
 * 76/77 as elsewhere. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"

typedef struct list_out {
    int json;
    size_t count;
    FILE *f;
} list_out;

/* The holder identity of an entry (version 2 and later), or NULL. */
static const char *identity_of(const dlock_list_entry *e)
{
    return e->version >= 2 && e->identity && e->identity[0] ? e->identity : NULL;
}

static int print_entry(void *arg, const dlock_list_entry *e)
{
    list_out *o = arg;
    FILE *f = o->f;
    if (o->json) {
        fputs(o->count ? ",\n{" : "[{", f);
        cli_json_name(e->name, f);
        fprintf(f,
                ",\"held\":%s,\"mode\":\"%s\",\"holders\":%zu,\"ttl_ms\":%" PRId64
                ",\"waiters\":%zu,\"fence\":%" PRIu64 ",\"nodes_held\":%zu,\"quorum\":%zu",
                e->state == DLOCK_STATUS_HELD ? "true" : "false", cli_mode_name(e->mode),
                e->holders, e->ttl_ms, e->waiters, e->fence, e->held_on, e->quorum);
        if (e->mode == DLOCK_HOLD_SEMAPHORE)
            fprintf(f, ",\"permits\":%u", e->permits);
        fputs(",\"identity\":", f);
        if (identity_of(e))
            cli_json_string(e->identity, f);
        else
            fputs("null", f);
        fputc('}', f);
    } else {
        char esc[4096], ttl[32];
        if (e->ttl_ms >= 0)
            snprintf(ttl, sizeof ttl, "%.1fs", (double)e->ttl_ms / 1000.0);
        else
            snprintf(ttl, sizeof ttl, "none");
        fprintf(f, "\"%s\" %s", cli_escape(e->name, esc, sizeof esc), cli_mode_name(e->mode));
        if (e->mode == DLOCK_HOLD_SEMAPHORE)
            fprintf(f, " %zu/%u", e->holders, e->permits);
        fprintf(f, "  holders %zu  ttl %s  waiters %zu  fence %" PRIu64, e->holders, ttl,
                e->waiters, e->fence);
        if (e->nodes > 1)
            fprintf(f, "  %s on %zu of %zu nodes", e->state == DLOCK_STATUS_HELD ? "held" : "partial",
                    e->held_on, e->nodes);
        if (identity_of(e)) /* last: it holds spaces */
            fprintf(f, "  identity %s", cli_escape(e->identity, esc, sizeof esc));
        fputc('\n', f);
    }
    o->count++;
    return 0;
}

int cli_cmd_list(cli_global *g, int argc, char **argv)
{
    static const struct option longopts[] = {{"json", no_argument, NULL, CLI_OPT_JSON},
                                             {"verbose", no_argument, NULL, 'v'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    list_out out = {0, 0, stdout};
    int c;
    while ((c = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
        if (c == ':' || c == '?')
            return cli_bad_option(argv[0], c, optopt, argv, optind);
        if (c == 'v')
            g->verbose = 1;
        else if (c == 'h')
            exit(cli_help(argv[0]));
        else
            out.json = 1;
    }
    if (argc - optind > 1)
        return cli_usage_error(argv[0], "unexpected argument '%s'", argv[optind + 1]);
    const char *pattern = optind < argc ? argv[optind] : "*";
    dlock_client *cl = NULL;
    int rc = cli_open_client(g, &cl);
    if (rc)
        return rc;
    int lrc = dlock_client_list(cl, pattern, print_entry, &out);
    if (lrc == DLOCK_EINVAL) {
        dlock_client_free(cl);
        return cli_usage_error(argv[0], "the pattern must be 1..%d bytes", DLOCK_NAME_MAX);
    }
    rc = 0;
    if (lrc == DLOCK_OK && out.json)
        fputs(out.count ? "]\n" : "[]\n", stdout);
    if (fflush(stdout) != 0)
        rc = CLI_EXIT_OSERR;
    if (lrc == DLOCK_EBUSY) {
        cli_msg("list: the cluster's slot map moved a master during the listing (%s); "
                "list again", dlock_errname(lrc));
        rc = cli_exit_for(lrc, NULL, 0);
    } else if (lrc != DLOCK_OK) {
        char nodes[512];
        cli_msg("list: too few nodes could be listed (%s): %s (%s)%s",
                cli_nodes(cl, nodes, sizeof nodes), dlock_strerror(lrc), dlock_errname(lrc),
                cli_hint(lrc, ""));
        rc = cli_exit_for(lrc, NULL, 0);
    }
    dlock_client_free(cl);
    return rc;
}
