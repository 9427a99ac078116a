/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock break: remove every hold of a stuck lock (dlock_client_break()),
 * after showing what holds it and asking on the terminal, or at once with
 * --force. Exit status: 0 broken (or nothing held), 1 not confirmed, 64
 * usage (also: no --force and no terminal to ask on), 69 too few nodes
 * answered, 76 the key is not a lock, 77 refused; 1 also when the lock
 * was taken again after it was shown (nothing broken). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define SHOW_HOLDERS 8

/* What holds the name now, on stderr: the question's context. Returns
 * the fence shown (the highest over the nodes; 0: none), which the break
 * then takes as its guard: a holder that took the lock while the operator
 * read the question is not broken. */
static uint64_t show(dlock_client *cl, const char *name)
{
    char esc[4096];
    dlock_node_status st[64];
    dlock_lock_status sum;
    size_t n = dlock_client_node_count(cl);
    if (n > 64 || dlock_client_status(cl, name, n, st, &sum) != DLOCK_OK) {
        fprintf(stderr, "\"%s\": its status could not be read\n", cli_escape(name, esc, sizeof esc));
        return 0;
    }
    uint64_t fence = 0;
    for (size_t i = 0; i < n; i++)
        if (st[i].error == DLOCK_OK && st[i].fence > fence)
            fence = st[i].fence;
    fprintf(stderr, "\"%s\" is %s on %zu of %zu node(s)", cli_escape(name, esc, sizeof esc),
            sum.held_on ? "held" : "free", sum.held_on, sum.nodes);
    for (size_t i = 0; i < n; i++) {
        if (st[i].error == DLOCK_OK && st[i].held) {
            fprintf(stderr, ", ttl %.1fs, fence %" PRIu64, (double)st[i].ttl_ms / 1000.0,
                    st[i].fence);
            break;
        }
    }
    fputc('\n', stderr);
    dlock_holders_info info;
    dlock_holder h[SHOW_HOLDERS];
    if (dlock_client_holders(cl, name, 0, &info, h, SHOW_HOLDERS) != DLOCK_OK)
        return fence;
    fprintf(stderr, "  %s, %zu holder(s)%s\n", cli_mode_name(info.mode), info.count,
            info.count > SHOW_HOLDERS ? " (the first shown)" : "");
    for (size_t i = 0; i < info.count && i < SHOW_HOLDERS; i++)
        fprintf(stderr, "  token %s  ttl %.1fs\n", cli_escape(h[i].token, esc, sizeof esc),
                (double)h[i].ttl_ms / 1000.0);
    return fence;
}

static int confirmed(void)
{
    fputs("Break it? Its holders lose it at their next renewal. [y/N] ", stderr);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 0;
    return !strcmp(line, "y\n") || !strcmp(line, "yes\n") || !strcmp(line, "Y\n");
}

static void print_result(const char *name, const dlock_break_result *r, int json)
{
    char esc[4096];
    if (json) {
        fputc('{', stdout);
        cli_json_name(name, stdout);
        printf(",\"removed\":%zu,\"mode\":\"%s\",\"fence\":%" PRIu64
               ",\"nodes_removed\":%zu,\"answered\":%zu,\"nodes\":%zu,\"quorum\":%zu}\n",
               r->removed, cli_mode_name(r->mode), r->fence, r->removed_on, r->answered,
               r->nodes, r->quorum);
    } else if (r->removed == 0) {
        printf("\"%s\" was free: nothing removed\n", cli_escape(name, esc, sizeof esc));
    } else {
        printf("broke \"%s\": removed %zu %s hold(s) on %zu of %zu node(s); the fence was %" PRIu64
               ", the next holder's is larger\n",
               cli_escape(name, esc, sizeof esc), r->removed, cli_mode_name(r->mode),
               r->removed_on, r->nodes, r->fence);
    }
}

int cli_cmd_break(cli_global *g, int argc, char **argv)
{
    static const struct option longopts[] = {{"force", no_argument, NULL, 'f'},
                                             {"json", no_argument, NULL, CLI_OPT_JSON},
                                             {"verbose", no_argument, NULL, 'v'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    int force = 0, json = 0, c;
    while ((c = getopt_long(argc, argv, ":fvh", longopts, NULL)) != -1) {
        if (c == ':' || c == '?')
            return cli_bad_option(argv[0], c, optopt, argv, optind);
        if (c == 'f')
            force = 1;
        else if (c == 'v')
            g->verbose = 1;
        else if (c == 'h')
            exit(cli_help(argv[0]));
        else
            json = 1;
    }
    if (optind >= argc)
        return cli_usage_error(argv[0], "missing NAME");
    if (argc - optind > 1)
        return cli_usage_error(argv[0], "unexpected argument '%s'", argv[optind + 1]);
    const char *name = argv[optind];
    size_t len = strlen(name);
    if (len == 0 || len > DLOCK_NAME_MAX)
        return cli_usage_error(argv[0], "NAME must be 1..%d bytes", DLOCK_NAME_MAX);
    if (!force && !isatty(STDIN_FILENO))
        return cli_usage_error(argv[0], "refusing without --force: no terminal to ask on");
    dlock_client *cl = NULL;
    int rc = cli_open_client(g, &cl);
    if (rc)
        return rc;
    uint64_t seen = 0; /* --force: whoever holds it */
    if (!force) {
        seen = show(cl, name);
        if (!confirmed()) {
            fputs("not broken\n", stderr);
            dlock_client_free(cl);
            return CLI_EXIT_CONFLICT;
        }
    }
    dlock_break_result r;
    int brc = dlock_client_break(cl, name, seen, &r);
    rc = 0;
    if (brc == DLOCK_OK) {
        print_result(name, &r, json);
        if (fflush(stdout) != 0)
            rc = CLI_EXIT_OSERR;
    } else {
        char nodes[512];
        cli_msg("break: %s (%s)%s; nodes: %s", dlock_strerror(brc), dlock_errname(brc),
                cli_hint(brc, ""), cli_nodes(cl, nodes, sizeof nodes));
        if (brc == DLOCK_ENOTOWNER && r.removed_on == 0)
            cli_msg("break: \"%s\" was taken again since it was shown (fence %" PRIu64
                    " now): nothing broken; look again", name, r.fence);
        else if (brc == DLOCK_ENOTOWNER)
            cli_msg("break: \"%s\" was taken again on some node while it was broken: holds "
                    "were removed on %zu of %zu node(s); look again", name, r.removed_on,
                    r.nodes);
        if (brc == DLOCK_ENOQUORUM)
            cli_msg("break: holds may be gone from the %zu node(s) that answered; run it again "
                    "once a majority is up", r.answered);
        rc = cli_exit_for(brc, NULL, 0);
    }
    dlock_client_free(cl);
    return rc;
}
