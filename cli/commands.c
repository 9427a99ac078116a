/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock acquire, release and extend: the lock in separate steps, with its
 * owner token carried between processes by the caller. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Whether a command whose short options are `shorts` takes option c.
 * getopt_long() hands back every long option's value, taken or not. */
static int takes(int c, const char *shorts, int json)
{
    if (c == CLI_OPT_JSON)
        return json;
    if (c == CLI_OPT_PERMITS) /* a permit's release needs its kind: run only */
        return 0;
    if (c == CLI_OPT_FAIR || c == CLI_OPT_FENCE || c == CLI_OPT_NO_FENCE ||
        c == CLI_OPT_PRINT_FENCE)
        return strchr(shorts, 'n') != NULL; /* the commands that wait */
    if (c == CLI_OPT_LOCK_DELAY) /* the commands that set a lease: acquire, extend */
        return strchr(shorts, 't') != NULL;
    return c > 0 && c < 256 && c != ':' && strchr(shorts, c) != NULL;
}

int cli_parse_simple(const char *cmd, int argc, char **argv, cli_global *g, const char *shorts,
                     cli_lock_opts *o, int *json, int n_args, const char **args)
{
    static const struct option longopts[] = {
        CLI_LOCK_LONGOPTS
        {"print-fence", no_argument, NULL, CLI_OPT_PRINT_FENCE},
        {"json", no_argument, NULL, CLI_OPT_JSON},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    static const char *const what[] = {"NAME", "TOKEN"};
    int c;
    while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        if (c == ':' || c == '?')
            return cli_bad_option(cmd, c, optopt, argv, optind);
        if (c == CLI_OPT_PERMITS || ((c == 's' || c == 'x') && !takes(c, shorts, 0)))
            return cli_usage_error(cmd, "-s, -x and --permits work with 'dlock run' only");
        if (!takes(c, shorts, json != NULL))
            return cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
        if (c == 'v')
            g->verbose = 1;
        else if (c == 'h')
            exit(cli_help(cmd));
        else if (c == CLI_OPT_JSON)
            *json = 1;
        else if (cli_lock_option(cmd, c, optarg, o))
            return CLI_EXIT_USAGE;
    }
    if (argc - optind < n_args)
        return cli_usage_error(cmd, "missing %s", what[argc - optind]);
    if (argc - optind > n_args)
        return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind + n_args]);
    for (int i = 0; i < n_args; i++)
        args[i] = argv[optind + i];
    return 0;
}

/* A zk:// lock is its client's ZooKeeper session's: it ends when this
 * process does, so a hold that outlives the command, and a token another
 * process acts on, cannot be had there (docs/backends.md, "ZooKeeper"). */
static int session_bound(const cli_global *g, const char *cmd)
{
    for (size_t i = 0; i < g->n_urls; i++) {
        if (strncmp(g->urls[i], "zk://", 5) == 0) {
            cli_msg("%s: a zk:// lock lives as long as its process's ZooKeeper session, so it "
                    "cannot outlive this command nor be used by another process; hold it "
                    "with 'dlock run NAME -- COMMAND'", cmd);
            return 1;
        }
    }
    return 0;
}

int cli_cmd_acquire(cli_global *g, int argc, char **argv)
{
    cli_lock_opts o = CLI_LOCK_OPTS_INIT;
    const char *name = NULL;
    dlock_client *c = NULL;
    dlock_lock *lock = NULL;
    cli_sigwatch sw;
    sigset_t mask;
    int rc = cli_parse_simple(argv[0], argc, argv, g, ":t:w:nE:qvh", &o, NULL, 1, &name);
    if (rc)
        return rc;
    cli_block_signals(&mask); /* before the library starts any thread */
    if ((rc = cli_open_client(g, &c)) != 0)
        return rc;
    if (session_bound(g, argv[0])) {
        dlock_client_free(c);
        return CLI_EXIT_UNAVAILABLE;
    }
    dlock_lock_options lo = cli_lock_options(&o, 0);
    if ((rc = cli_open_lock(c, name, &lo, &lock)) != 0 ||
        (rc = cli_sigwatch_start(&sw, lock, -1)) != 0) {
        dlock_client_free(c);
        return rc;
    }
    int arc = cli_acquire(g, c, lock, &o);
    int sig = cli_sigwatch_finish(&sw);
    cli_sigwatch_stop(&sw);
    if (arc == DLOCK_OK && !sig) {
        if (o.print_fence)
            printf("%s %" PRIu64 "\n", dlock_lock_token(lock), dlock_lock_fence(lock));
        else
            printf("%s\n", dlock_lock_token(lock));
        if (fflush(stdout) == 0) {
            /* The lock outlives this process on purpose: forget it rather
             * than let dlock_lock_free() release it. */
            dlock_lock_forget(lock);
            dlock_lock_free(lock);
            dlock_client_free(c);
            return 0;
        }
        cli_msg("cannot print the token of \"%s\": %s; releasing it", name, strerror(errno));
        rc = CLI_EXIT_OSERR;
    } else {
        /* Interrupted (take nothing), not acquired (-E), or failed. An
         * acquire taken after a signal with no signal noted cannot be. */
        rc = cli_exit_for(arc == DLOCK_OK ? DLOCK_ECANCELED : arc, &o, sig);
    }
    dlock_lock_free(lock); /* releases it if an interrupt came just too late */
    dlock_client_free(c);
    return rc;
}

/* Shared by release and extend: a handle acting with the caller's token,
 * with lock_delay_ms (docs/lock-delay.md): extend's --lock-delay, which
 * moves the delay with the new lease; a release (lock_delay_ms -1) always
 * takes the token's delay out where the store keeps delays (any delay
 * does: a release only removes it), so that a hold taken with
 * --lock-delay and given back by `dlock release` is not kept as if its
 * holder had died. */
static int adopt(cli_global *g, const char *cmd, const char *name, const char *token,
                 int64_t lock_delay_ms, dlock_client **c, dlock_lock **lock)
{
    int rc = cli_open_client(g, c);
    if (rc)
        return rc;
    if (session_bound(g, cmd))
        return CLI_EXIT_UNAVAILABLE;
    /* Release and extend never touch the fencing counter. */
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.flags = DLOCK_NO_FENCE;
    lo.lock_delay_ms = lock_delay_ms < 0 ? 1 : lock_delay_ms;
    if (lock_delay_ms < 0 && dlock_lock_new(lock, *c, name, &lo) == DLOCK_ENOTSUP)
        lo.lock_delay_ms = 0; /* ZooKeeper: no delays to take out */
    if (!*lock && (rc = cli_open_lock(*c, name, &lo, lock)) != 0)
        return rc;
    if (dlock_lock_adopt(*lock, token) != DLOCK_OK)
        return cli_usage_error(cmd, "invalid TOKEN (1..%d bytes)", DLOCK_TOKEN_MAX);
    return 0;
}

static int owner_error(dlock_client *c, dlock_lock *lock, int rc, const char *doing)
{
    const char *name = dlock_lock_name(lock);
    char nodes[512];
    if (rc == DLOCK_ENOTOWNER)
        cli_msg("\"%s\" is held by another owner on %s; not %s", name,
                cli_nodes(c, nodes, sizeof nodes), doing);
    else if (rc == DLOCK_EEXPIRED)
        cli_msg("\"%s\" is not held on %s (expired or released); not %s", name,
                cli_nodes(c, nodes, sizeof nodes), doing);
    else
        cli_report(c, lock, rc, doing[0] == 'r' ? "release" : "extend");
    return cli_exit_for(rc, NULL, 0);
}

int cli_cmd_release(cli_global *g, int argc, char **argv)
{
    const char *args[2];
    dlock_client *c = NULL;
    dlock_lock *lock = NULL;
    int rc = cli_parse_simple(argv[0], argc, argv, g, ":vh", NULL, NULL, 2, args);
    if (rc == 0 && (rc = adopt(g, argv[0], args[0], args[1], -1, &c, &lock)) == 0) {
        int lrc = dlock_lock_release(lock);
        if (lrc == DLOCK_OK && g->verbose)
            cli_msg("released \"%s\"", args[0]);
        rc = lrc == DLOCK_OK ? 0 : owner_error(c, lock, lrc, "released");
    }
    /* After any release the handle holds nothing: freeing it is safe. */
    dlock_lock_free(lock);
    dlock_client_free(c);
    return rc;
}

int cli_cmd_extend(cli_global *g, int argc, char **argv)
{
    cli_lock_opts o = CLI_LOCK_OPTS_INIT;
    o.wait_ms = 0;
    const char *args[2];
    dlock_client *c = NULL;
    dlock_lock *lock = NULL;
    int rc = cli_parse_simple(argv[0], argc, argv, g, ":t:vh", &o, NULL, 2, args);
    if (rc == 0 &&
        (rc = adopt(g, argv[0], args[0], args[1], o.lock_delay_ms, &c, &lock)) == 0) {
        int lrc = dlock_lock_extend(lock, o.ttl_ms);
        if (lrc == DLOCK_OK && g->verbose)
            cli_msg("extended \"%s\" to %.1fs", args[0], (double)o.ttl_ms / 1000.0);
        rc = lrc == DLOCK_OK ? 0 : owner_error(c, lock, lrc, "extended");
    }
    /* An extended lock stays held for its owner: forget, do not release. */
    if (lock && dlock_lock_state_get(lock) == DLOCK_STATE_HELD)
        dlock_lock_forget(lock);
    dlock_lock_free(lock);
    dlock_client_free(c);
    return rc;
}
