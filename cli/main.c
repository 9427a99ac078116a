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

typedef struct command {
    const char *name;
    int (*fn)(cli_global *g, int argc, char **argv);
    const char *synopsis; /* one or more lines, each without "usage: " */
    const char *help;     /* what follows the synopsis in --help */
} command;

#define LOCK_OPTS_HELP                                                         \
    "  -t, --ttl=D          lease length (default 30s)\n"                      \
    "  -w, --wait=D         give up after D (default: wait forever)\n"         \
    "  -n, --nonblock       do not wait (same as -w 0)\n"                      \
    "  -E, --conflict-exit-code=N\n"                                           \
    "                       exit status when the lock is not acquired (1)\n"   \
    "      --fair           serve waiters in arrival order (one node only)\n"  \
    "      --fence          keep a fencing counter for NAME (a key that stays\n" \
    "                       forever); --no-fence (the default) keeps none\n"   \
    "  -q, --quiet          no message when the lock is busy (exit status only)\n" \
    "  -v, --verbose        report progress on stderr\n"

static const command commands[] = {
    {"run", cli_cmd_run,
     "dlock [GLOBAL] run [OPTIONS] NAME -- PROGRAM [ARG]...\n"
     "dlock [GLOBAL] run [OPTIONS] NAME -c 'SHELL COMMAND'\n",
     "Take the lock NAME, run PROGRAM while renewing the lease, release it when\n"
     "PROGRAM ends, and exit with PROGRAM's status. PROGRAM gets DLOCK_NAME,\n"
     "DLOCK_TOKEN and DLOCK_FENCE (0 without --fence) and never a password.\n\n" LOCK_OPTS_HELP
     "  -c, --command=CMD    run CMD with /bin/sh -c instead of PROGRAM\n"
     "      --on-lost=WHAT   if the lock is lost: term (SIGTERM, then SIGKILL after\n"
     "                       --grace; default), kill (SIGKILL), ignore (only report)\n"
     "      --grace=D        time between SIGTERM and SIGKILL (default 5s)\n"},
    {"acquire", cli_cmd_acquire,
     "dlock [GLOBAL] acquire [-t TTL] [-w WAIT | -n] [-E CODE] [-q] [--fair] [--fence | --print-fence] NAME\n",
     "Take the lock NAME and print its owner token. Nothing renews it: it ends\n"
     "after TTL, or earlier with 'dlock release NAME TOKEN'.\n\n" LOCK_OPTS_HELP
     "      --print-fence    print 'TOKEN FENCE' (implies --fence)\n"},
    {"release", cli_cmd_release, "dlock [GLOBAL] release NAME TOKEN\n",
     "Release the lock NAME if TOKEN still owns it. Exits 1 if it does not.\n"},
    {"extend", cli_cmd_extend, "dlock [GLOBAL] extend [-t TTL] NAME TOKEN\n",
     "Set the remaining lease of NAME to TTL (default 30s) if TOKEN still owns\n"
     "it. Exits 1 if it does not.\n\n"
     "  -t, --ttl=D          new lease length (default 30s)\n"},
    {"status", cli_cmd_status, "dlock [GLOBAL] status [--json] NAME\n",
     "Show whether NAME is held, its remaining TTL and fencing token, per node.\n"
     "Exits 0 when held, 1 when free (or held on too few nodes), 69 when too few\n"
     "nodes answered.\n\n"
     "      --json           print one JSON object\n"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const char global_help[] =
    "Distributed locks on Redis (Redlock with several nodes).\n\n"
    "Commands: run, acquire, release, extend, status ('dlock COMMAND --help').\n\n"
    "Global options:\n"
    "  -r, --redis=URL          a Redis node; repeat for Redlock over several nodes\n"
    "                           (default: $DLOCK_REDIS, else redis://127.0.0.1:6379)\n"
    CLI_TLS_HELP
    "      --connect-timeout=D  connect timeout per node (default 1s)\n"
    "      --io-timeout=D       reply timeout per node (default 1s)\n"
    "      --min-node-uptime=D  Redlock restart rule: ignore nodes up for less\n"
    "                           than D (set to your longest TTL; default off)\n"
    "      --user=USER          ACL user for every node (overrides the URLs')\n"
    "  -a, --pass=PASSWORD      password for every node (visible in ps: prefer\n"
    "                           DLOCK_PASSWORD or --password-file)\n"
    "      --password-file=FILE read the password from the first line of FILE\n"
    "      --no-auth-warning    no warning for -a\n"
    "      --prefix=PREFIX      key namespace: lock NAME is the key PREFIX+NAME\n"
    "  -q, --quiet              no message when the lock is busy\n"
    "  -v, --verbose            report progress on stderr\n"
    "  -h, --help               show this help\n"
    "  -V, --version            show the version\n\n"
    "Environment: DLOCK_REDIS (URLs, comma-separated), DLOCK_PASSWORD,\n"
    "DLOCK_TLS, DLOCK_CACERT, DLOCK_CACERTDIR, DLOCK_CERT, DLOCK_KEY, DLOCK_SNI,\n"
    "DLOCK_INSECURE.\n"
    "Durations: 250ms, 30s, 5m, 1h, 1d, or seconds (1.5).\n"
    "Exit status: the program's (run); 1 lock busy (-E) or status free; 64 usage;\n"
    "66 password file unreadable; 69 Redis unreachable or no quorum, or TLS\n"
    "verification failed; 75 lock lost;\n"
    "76 Redis refused the command; 77 authentication or ACL refused;\n"
    "128+N killed by signal N. See dlock(1).\n";

static const command *find_command(const char *name)
{
    for (size_t i = 0; name && i < N_COMMANDS; i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

/* Print each line of a synopsis after "usage: " (or its indentation). */
static void print_synopsis(const char *text, FILE *f)
{
    const char *lead = "usage: ";
    while (*text) {
        const char *nl = strchr(text, '\n');
        size_t n = nl ? (size_t)(nl - text) : strlen(text);
        fprintf(f, "%s%.*s\n", lead, (int)n, text);
        lead = "       ";
        text += n + (nl ? 1 : 0);
    }
}

void cli_synopsis(const char *cmd, FILE *f)
{
    const command *c = find_command(cmd);
    if (c) {
        print_synopsis(c->synopsis, f);
        return;
    }
    print_synopsis("dlock [-r URL]... [--user U] [-a PASS | --password-file F] [--prefix P] [-q] [-v]\n"
                   "      [--connect-timeout D] [--io-timeout D] [--min-node-uptime D] COMMAND ...\n", f);
}

int cli_help(const char *cmd)
{
    const command *c = find_command(cmd);
    cli_synopsis(cmd, stdout);
    fputc('\n', stdout);
    fputs(c ? c->help : global_help, stdout);
    if (c)
        fputs("\nGLOBAL options come before the command: see 'dlock --help'.\n", stdout);
    return fflush(stdout) == 0 ? 0 : CLI_EXIT_OSERR;
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

static int parse_global(cli_global *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"redis", required_argument, NULL, 'r'},
        CLI_TLS_LONGOPTS
        {"connect-timeout", required_argument, NULL, CLI_OPT_CONNECT_TIMEOUT},
        {"io-timeout", required_argument, NULL, CLI_OPT_IO_TIMEOUT},
        {"min-node-uptime", required_argument, NULL, CLI_OPT_MIN_UPTIME},
        {"user", required_argument, NULL, CLI_OPT_USER},
        {"pass", required_argument, NULL, 'a'},
        {"password-file", required_argument, NULL, CLI_OPT_PASSWORD_FILE},
        {"no-auth-warning", no_argument, NULL, CLI_OPT_NO_AUTH_WARNING},
        {"prefix", required_argument, NULL, CLI_OPT_PREFIX},
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
        case 'r':
            if (g->n_urls == CLI_MAX_URLS)
                return cli_usage_error(NULL, "at most %d -r options", CLI_MAX_URLS);
            g->urls[g->n_urls++] = optarg;
            break;
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
            memset(optarg, '*', strlen(optarg));
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
    cli_tls_env(&g);
    rc = parse_global(&g, argc, argv);
    if (rc)
        return rc;
    if (g.pass && !g.no_auth_warning) /* the words redis-cli uses */
        fprintf(stderr, "Warning: Using a password with '-a' or '-u' option on the command line "
                        "interface may not be safe.\n");
    if (optind >= argc)
        return cli_usage_error(NULL, "missing command (run, acquire, release, extend, status)");
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
    if (g.pass_copy)
        memset(g.pass_copy, 0, strlen(g.pass_copy));
    free(g.pass_copy);
    if (g.file_pass)
        memset(g.file_pass, 0, strlen(g.file_pass));
    free(g.file_pass);
    return rc;
}
