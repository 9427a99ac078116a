/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock: the command line. Parses the options that come before the command
 * and hands the rest to the command. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "doctor.h"

/* The commands (their help lives in help.c). */
typedef struct command {
    const char *name;
    int (*fn)(cli_global *g, int argc, char **argv);
} command;

static const command commands[] = {
    {"run", cli_cmd_run},         {"acquire", cli_cmd_acquire}, {"release", cli_cmd_release},
    {"extend", cli_cmd_extend},   {"status", cli_cmd_status},   {"list", cli_cmd_list},
    {"break", cli_cmd_break},     {"doctor", cli_cmd_doctor},   {"elect", cli_cmd_elect},
    {"leader", cli_cmd_leader},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const command *find_command(const char *name)
{
    for (size_t i = 0; name && i < N_COMMANDS; i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

static int timeout_option(const char *opt, const char *arg, int *out_ms)
{
    int64_t ms;
    if (cli_parse_duration(NULL, opt, arg, &ms))
        return CLI_EXIT_USAGE;
    if (ms < 1 || ms > INT_MAX)
        return cli_usage_error(NULL, "%s: must be between 1ms and %dms", opt, INT_MAX);
    *out_ms = (int)ms;
    return 0;
}

/* Take the secret at argv[i] + start (len bytes) out of what ps shows:
 * it becomes "***" (or "*"), and the rest of the argument area moves left
 * over what is left of it, so that not even its length shows. The
 * strings of argv lie end to end in one area on Linux; where they do not,
 * the secret is starred out in place instead. Arguments before i keep
 * their addresses; argv[] is updated for those after it. */
static void hide_secret(int argc, char **argv, int i, size_t start, size_t len)
{
    const char *stars = len >= 3 ? "***" : "*";
    size_t keep = strlen(stars), cut = len - keep;
    int contiguous = 1;
    for (int k = i; k + 1 < argc && contiguous; k++)
        contiguous = argv[k + 1] == argv[k] + strlen(argv[k]) + 1;
    char *s = argv[i] + start;
    if (!contiguous || cut == 0) {
        memset(s, '*', len);
        return;
    }
    char *end = argv[argc - 1] + strlen(argv[argc - 1]) + 1; /* the area's end */
    memcpy(s, stars, keep);
    memmove(s + keep, s + len, (size_t)(end - (s + len)));
    memset(end - cut, '\0', cut);
    for (int k = i + 1; k < argc; k++)
        argv[k] -= cut;
}

static int parse_global(cli_global *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"redis", required_argument, NULL, 'r'},
        CLI_TLS_LONGOPTS
        CLI_DEPLOY_LONGOPTS
        {"connect-timeout", required_argument, NULL, CLI_OPT_CONNECT_TIMEOUT},
        {"io-timeout", required_argument, NULL, CLI_OPT_IO_TIMEOUT},
        {"min-node-uptime", required_argument, NULL, CLI_OPT_MIN_UPTIME},
        {"user", required_argument, NULL, CLI_OPT_USER},
        {"pass", required_argument, NULL, 'a'},
        {"password-file", required_argument, NULL, CLI_OPT_PASSWORD_FILE},
        {"no-auth-warning", no_argument, NULL, CLI_OPT_NO_AUTH_WARNING},
        {"prefix", required_argument, NULL, CLI_OPT_PREFIX},
        {"identity", required_argument, NULL, CLI_OPT_IDENTITY},
        {"no-identity", no_argument, NULL, CLI_OPT_NO_IDENTITY},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    int c, rc = 0;

    opterr = 0;
    /* '+': stop at the command; its options are its own. */
    while (rc == 0 && (c = getopt_long(argc, argv, "+:r:a:qvhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'r': {
            if (g->n_urls == CLI_MAX_URLS)
                return cli_usage_error(NULL, "at most %d -r options", CLI_MAX_URLS);
            /* A password in the URL: keep a copy, take it out of argv as
             * for -a (and warn as for -a, below). */
            size_t start = 0, n = cli_password_span(optarg, &start);
            if (n > 0) {
                char *copy = strdup(optarg);
                if (!copy || g->n_url_copies == CLI_MAX_URLS) {
                    free(copy);
                    cli_msg("out of memory");
                    return CLI_EXIT_OSERR;
                }
                g->url_copies[g->n_url_copies++] = copy;
                hide_secret(argc, argv, optind - 1, (size_t)(optarg - argv[optind - 1]) + start, n);
                g->url_pass_in_argv = 1;
                optarg = copy;
            }
            g->urls[g->n_urls++] = optarg;
            break;
        }
        case CLI_OPT_CONNECT_TIMEOUT:
            rc = timeout_option("--connect-timeout", optarg, &g->copts.connect_timeout_ms);
            break;
        case CLI_OPT_IO_TIMEOUT:
            rc = timeout_option("--io-timeout", optarg, &g->copts.io_timeout_ms);
            break;
        case CLI_OPT_MIN_UPTIME: {
            int64_t ms;
            if (cli_parse_duration(NULL, "--min-node-uptime", optarg, &ms))
                return CLI_EXIT_USAGE;
            g->copts.min_node_uptime_ms = ms;
            break;
        }
        case CLI_OPT_USER:
            g->copts.username = optarg;
            break;
        case 'a':
            /* Keep a copy and blank the argument, so that ps shows it only
             * for the moment before this line (hence still the warning). */
            free(g->pass_copy);
            if (!(g->pass_copy = strdup(optarg))) {
                cli_msg("out of memory");
                return CLI_EXIT_OSERR;
            }
            if (*optarg)
                hide_secret(argc, argv, optind - 1, (size_t)(optarg - argv[optind - 1]),
                            strlen(optarg));
            g->pass = g->pass_copy;
            break;
        case CLI_OPT_PASSWORD_FILE:
            g->pass_file = optarg;
            break;
        case CLI_OPT_NO_AUTH_WARNING:
            g->no_auth_warning = 1;
            break;
        case CLI_OPT_PREFIX:
            if (strlen(optarg) > DLOCK_KEY_PREFIX_MAX)
                return cli_usage_error(NULL, "--prefix: at most %d bytes", DLOCK_KEY_PREFIX_MAX);
            g->copts.key_prefix = optarg;
            break;
        case CLI_OPT_IDENTITY: /* the library checks the text */
            g->copts.identity = 1;
            g->copts.identity_text = optarg;
            break;
        case CLI_OPT_NO_IDENTITY:
            g->copts.identity = 0;
            g->copts.identity_text = NULL;
            break;
        case 'q':
            g->quiet = 1;
            break;
        case 'v':
            g->verbose = 1;
            break;
        case 'h':
            exit(cli_help(NULL));
        case 'V':
            printf("dlock %s (libdlock %s)\n", DLOCK_VERSION_STRING, dlock_version());
            exit(fflush(stdout) == 0 ? 0 : CLI_EXIT_OSERR);
        default:
            if (cli_tls_option(g, c, optarg) == 0)
                break;
            if ((rc = cli_deploy_option(g, c, optarg)) >= 0)
                break;
            return cli_bad_option(NULL, c, optopt, argv, optind);
        }
    }
    return rc;
}

/* Keep descriptors 0, 1 and 2 taken. Were stdout closed, the library's
 * first Redis socket would become descriptor 1, and `acquire` would print
 * the token into the Redis connection. /dev/null opened read-only keeps
 * writes failing as they would on the closed descriptor. */
static int occupy_std_fds(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        int n = open("/dev/null", O_RDONLY);
        if (n != fd) {
            if (n >= 0)
                close(n);
            return -1;
        }
    }
    return 0;
}

/* The library's messages for a person (pub/sub refused, ...), once each. */
static void on_log(dlock_log_level level, const char *msg, void *arg)
{
    (void)level;
    (void)arg;
    cli_msg("%s", msg);
}

int main(int argc, char **argv)
{
    cli_global g;
    int rc;

    /* A closed stdout or stderr must not kill us before the lock is
     * released: writes fail with EPIPE instead. */
    signal(SIGPIPE, SIG_IGN);
    if (occupy_std_fds() != 0)
        return CLI_EXIT_OSERR;
    memset(&g, 0, sizeof g);
    if (dlock_client_options_init(&g.copts, DLOCK_CLIENT_OPTIONS_VERSION) != DLOCK_OK) {
        fprintf(stderr, "dlock: libdlock %s does not match this dlock\n", dlock_version());
        return CLI_EXIT_UNAVAILABLE;
    }
    g.copts.on_log = on_log;
    /* Who holds what (dlock status, dlock list): the CLI says who it is
     * unless told not to (--no-identity); the library's default is off. */
    g.copts.identity = 1;
    cli_tls_env(&g);
    rc = parse_global(&g, argc, argv);
    if (rc)
        return rc;
    if ((g.pass || g.url_pass_in_argv) && !g.no_auth_warning) /* redis-cli's words */
        fprintf(stderr, "Warning: Using a password with '-a' or '-u' option on the command line "
                        "interface may not be safe.\n");
    if (optind >= argc)
        return cli_usage_error(NULL, "missing command (run, acquire, release, extend, status, list, break, doctor)");
    const command *cmd = find_command(argv[optind]);
    if (!cmd)
        return cli_usage_error(NULL, "unknown command '%s'", argv[optind]);
    /* The command parses its own arguments; argv[0] becomes its name.
     * optind = 0 makes glibc's getopt start afresh. */
    argc -= optind;
    argv += optind;
    optind = 0;
    rc = cmd->fn(&g, argc, argv);
    free(g.env_urls);
    for (size_t i = 0; i < g.n_url_copies; i++) {
        memset(g.url_copies[i], 0, strlen(g.url_copies[i]));
        free(g.url_copies[i]);
    }
    if (g.pass_copy)
        memset(g.pass_copy, 0, strlen(g.pass_copy));
    free(g.pass_copy);
    if (g.file_pass)
        memset(g.file_pass, 0, strlen(g.file_pass));
    free(g.file_pass);
    return rc;
}
