/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock --help and the synopses that usage errors print: text only, so
 * that messages (common.c) and dispatch (main.c) both use it without
 * depending on each other. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct command_help {
    const char *name;
    const char *synopsis; /* one or more lines, each without "usage: " */
    const char *help;     /* what follows the synopsis in --help */
} command_help;

#define LOCK_OPTS_HELP                                                         \
    "  -t, --ttl=D          lease length (default 30s)\n"                      \
    "  -w, --wait=D         give up after D (default: wait forever); also\n"  \
    "                       --timeout=D, as flock(1) spells it\n"              \
    "  -n, --nonblock       do not wait (same as -w 0)\n"                      \
    "  -E, --conflict-exit-code=N\n"                                           \
    "                       exit status when the lock is not acquired (1)\n"   \
    "      --fair           serve waiters in arrival order (one node only)\n"  \
    "      --fence          keep a fencing counter for NAME (a key that stays\n" \
    "                       forever; readers, -s, hold no token but raise it,\n" \
    "                       which guards a break); --no-fence (the default)\n" \
    "                       keeps none\n"                                      \
    "      --lock-delay=D   after a hold ends without a release (its holder\n" \
    "                       died), keep NAME from everyone for D more (every\n" \
    "                       user of NAME gives the same D; default 0: none)\n" \
    "  -q, --quiet          no message when the lock is busy (exit status only)\n" \
    "  -v, --verbose        report progress on stderr\n"

static const command_help commands[] = {
    {"run",
     "dlock [GLOBAL] run [OPTIONS] NAME... -- PROGRAM [ARG]...\n"
     "dlock [GLOBAL] run [OPTIONS] NAME... -c 'SHELL COMMAND'\n"
     "dlock [GLOBAL] run [OPTIONS] -- NAME... -- PROGRAM [ARG]...  (NAME may start with -)\n",
     "Take the lock NAME, run PROGRAM while renewing the lease, release it when\n"
     "PROGRAM ends, and exit with PROGRAM's status. PROGRAM gets DLOCK_NAME,\n"
     "DLOCK_TOKEN and DLOCK_FENCE (0 without --fence) and never a password.\n"
     "Several NAMEs are taken together, all or none, in sorted order.\n\n" LOCK_OPTS_HELP
     "  -s, --shared         shared: many -s holders at once, none beside a writer;\n"
     "                       a waiting writer keeps new readers back\n"
     "  -x, -e, --exclusive  exclusive (the default; -e as in flock(1))\n"
     "      --permits=N      a semaphore: at most N holders of NAME at once (every\n"
     "                       user of NAME gives the same N; one node only)\n"
     "  -c, --command=CMD    run CMD with /bin/sh -c instead of PROGRAM\n"
     "      --on-lost=WHAT   if the lock is lost: term (SIGTERM, then SIGKILL after\n"
     "                       --grace; default), kill (SIGKILL), ignore (only report)\n"
     "      --grace=D        time between SIGTERM and SIGKILL (default 5s)\n"},
    {"acquire",
     "dlock [GLOBAL] acquire [-t TTL] [-w WAIT | -n] [-E CODE] [-q] [--fair] [--fence | --print-fence]\n"
     "              [--lock-delay D] NAME\n",
     "Take the lock NAME and print its owner token. Nothing renews it: it ends\n"
     "after TTL, or earlier with 'dlock release NAME TOKEN'.\n\n" LOCK_OPTS_HELP
     "      --print-fence    print 'TOKEN FENCE' (implies --fence)\n"},
    {"release", "dlock [GLOBAL] release NAME TOKEN\n",
     "Release the lock NAME if TOKEN still owns it. Exits 1 if it does not.\n"},
    {"extend", "dlock [GLOBAL] extend [-t TTL] [--lock-delay D] NAME TOKEN\n",
     "Set the remaining lease of NAME to TTL (default 30s) if TOKEN still owns\n"
     "it. Exits 1 if it does not.\n\n"
     "  -t, --ttl=D          new lease length (default 30s)\n"
     "      --lock-delay=D   the delay the lock was acquired with: it moves with\n"
     "                       the new lease (without it, it keeps the old one's end)\n"},
    {"status", "dlock [GLOBAL] status [--json] NAME\n",
     "Show whether NAME is held, its remaining TTL and fencing token, per node,\n"
     "and how long a lock-delay still keeps it (a hold that ended unreleased).\n"
     "Exits 0 when held, 1 when free (or held on too few nodes), 69 when too few\n"
     "nodes answered, 76 when the key is not a lock (a list, ...: as run on it).\n\n"
     "      --json           print one JSON object\n"},
    {"list", "dlock [GLOBAL] list [--json] [PATTERN]\n",
     "List the held lock names that match PATTERN (a Redis glob on the name,\n"
     "default *), one line each: mode, holders, TTL, waiters, fencing token.\n"
     "Read-only; SCAN in batches of 1000 keys, so cheap on a big keyspace. With\n"
     "several nodes, says on how many each name is held; on a Cluster, walks\n"
     "every master; on etcd, ranges of 1000 keys. Exits 0 (even if nothing\n"
     "matched), 64 bad pattern, 69 too few nodes answered.\n\n"
     "      --json           print one JSON array\n"},
    {"break", "dlock [GLOBAL] break [--force] [--json] NAME\n",
     "Remove every hold of NAME, whoever holds it: for a holder that is gone for\n"
     "good. Shows what holds it and asks on the terminal first. The fencing\n"
     "counter stays (the next holder's token is larger) and waiters keep their\n"
     "places and are woken; a broken holder loses the lock at its next renewal\n"
     "('dlock run' then exits 75). A holder that took the lock after it was\n"
     "shown is not broken. Exits 0 broken (or free), 1 not confirmed (or taken\n"
     "again since), 64 usage (also without --force when stdin is not a\n"
     "terminal), 69 too few nodes answered, 76 the key is not a lock.\n\n"
     "  -f, --force          do not ask\n"
     "      --json           print one JSON object\n"},
    {"elect",
     "dlock [GLOBAL] elect [OPTIONS] NAME [--value TEXT] [--again] -- PROGRAM [ARG]...\n"
     "dlock [GLOBAL] elect [OPTIONS] NAME [--value TEXT] [--again] -c 'SHELL COMMAND'\n",
     "Campaign in the election NAME (standbys wait in line, in arrival order;\n"
     "on a Redlock they contend), run PROGRAM while leading, resign when it ends\n"
     "(a standby leads at once) and exit with its status. A leader that dies is\n"
     "replaced within TTL. PROGRAM gets DLOCK_NAME, DLOCK_TOKEN, DLOCK_FENCE (the\n"
     "term's fencing token, which grows from term to term) and\n"
     "DLOCK_LEADER_VALUE. Signals, loss and exit codes as for run.\n\n"
     "  -t, --ttl=D          a term's lease (default 30s)\n"
     "  -w, --wait=D         stand by at most D (default: forever)\n"
     "  -n, --nonblock       do not stand by: lead now or exit 1\n"
     "  -E, --conflict-exit-code=N  exit status when not leading (1)\n"
     "      --value=TEXT     what 'dlock leader' shows (default: the host name)\n"
     "      --again          campaign again after each term, until a signal\n"
     "      --lock-delay=D   after a term that ends without a resign, nobody leads\n"
     "                       for D more (Redis only)\n"
     "  -c, --command=CMD    run CMD with /bin/sh -c instead of PROGRAM\n"
     "      --on-lost=WHAT   term (default), kill or ignore, as for run\n"
     "      --grace=D        time between SIGTERM and SIGKILL (default 5s)\n"
     "  -q, --quiet          no message when another candidate leads (with -n)\n"
     "  -v, --verbose        report progress on stderr\n"},
    {"leader", "dlock [GLOBAL] leader [--watch] [--json] NAME\n",
     "Print the leader of the election NAME: 'FENCE VALUE', or '0' when nobody\n"
     "leads (exit 1). With --watch, one line at once and one per change (a new\n"
     "term, a new value, nobody leading), pushed by the store, until killed.\n\n"
     "      --watch          follow the changes\n"
     "      --json           one JSON object per line: name, leader, fence, value\n"},
    {"doctor", "dlock [GLOBAL] doctor [--json] [--ttl D] [URL]...\n",
     "Check a deployment (the -r URLs, DLOCK_REDIS, or the URLs given here) and\n"
     "say what is unsafe or slow, each finding with why and how to fix it: server\n"
     "and version, scripting, the user's ACL rights, eviction policy, persistence\n"
     "and the restart rule, replicas and WAIT, Cluster slots (--cluster), clocks\n"
     "and round trips across Redlock nodes, TLS certificate expiry, etcd members\n"
     "and the lease minimum. Exits 0 all ok, 1 warnings only, 2 a check failed,\n"
     "69 no node answered.\n\n"
     "      --ttl=D          the longest lease you use (default 30s): the drift\n"
     "                       allowance, per-node timeout and lease checks use it\n"
     "      --json           print one JSON object\n"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const char global_help[] =
    "Distributed locks and leader elections on Redis (Redlock with several nodes),\n"
    "etcd or ZooKeeper.\n\n"
    "Commands: run, acquire, release, extend, elect, leader, status, list, break,\n"
    "doctor "
    "('dlock COMMAND --help').\n"
    "Check a deployment: dlock doctor ('dlock doctor --help').\n\n"
    "Global options:\n"
    "  -r, --redis=URL          a Redis node: redis://, rediss:// (TLS), unix:// or\n"
    "                           redis-sentinel://HOST:PORT[,...]/MASTER; repeat for\n"
    "                           Redlock over several nodes; or etcd://HOST:PORT[,...]\n"
    "                           for an etcd cluster (etcds:// over TLS); or\n"
    "                           zk://HOST:PORT[,...][/CHROOT] for ZooKeeper\n"
    "                           (default: $DLOCK_REDIS, else redis://127.0.0.1:6379)\n"
    CLI_TLS_HELP
    CLI_DEPLOY_HELP
    "      --connect-timeout=D  connect timeout per node (default 1s)\n"
    "      --io-timeout=D       reply timeout per node (default 1s)\n"
    "      --min-node-uptime=D  Redlock restart rule: ignore nodes up for less\n"
    "                           than D (set to your longest TTL; default off)\n"
    "      --user=USER          ACL user for every node (overrides the URLs')\n"
    "  -a, --pass=PASSWORD      password for every node (visible in ps until read:\n"
    "                           prefer DLOCK_PASSWORD or --password-file)\n"
    "      --password-file=FILE read the password from the first line of FILE\n"
    "      --no-auth-warning    no warning for -a\n"
    "      --prefix=PREFIX      key namespace: lock NAME is the key PREFIX+NAME\n"
    "      --identity=TEXT      the holder identity kept beside each lock taken\n"
    "                           (default: host=HOST pid=PID prog=dlock)\n"
    "      --no-identity        keep none (status and list then show none)\n"
    "  -q, --quiet              no message when the lock is busy\n"
    "  -v, --verbose            report progress on stderr\n"
    "  -h, --help               show this help\n"
    "  -V, --version            show the version\n\n"
    "Environment: DLOCK_REDIS (URLs, comma-separated), DLOCK_PASSWORD (else\n"
    "REDISCLI_AUTH; Redis only: etcd:// URLs carry their own credentials),\n"
    "DLOCK_TLS, DLOCK_CACERT, DLOCK_CACERTDIR, DLOCK_CERT, DLOCK_KEY, DLOCK_SNI,\n"
    "DLOCK_INSECURE.\n"
    "Durations: 250ms, 30s, 5m, 1h, 1d, or seconds (1.5).\n"
    "Exit status: the program's (run); 1 lock busy (-E) or status free; 64 usage;\n"
    "66 password file unreadable; 69 Redis unreachable or no quorum, or TLS\n"
    "verification failed; 71 system error (fork, pipe, thread); 75 lock lost;\n"
    "76 Redis refused the command; 77 authentication or ACL refused;\n"
    "126/127 program not runnable/not found; 128+N killed by signal N.\n"
    "See dlock(1).\n";

static const command_help *find_command(const char *name)
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
    const command_help *c = find_command(cmd);
    if (c) {
        print_synopsis(c->synopsis, f);
        return;
    }
    print_synopsis("dlock [-r URL]... [--user U] [-a PASS | --password-file F] [--prefix P]\n"
                   "      [--identity T | --no-identity] [-q] [-v]\n"
                   "      [--connect-timeout D] [--io-timeout D] [--min-node-uptime D] COMMAND ...\n", f);
}

int cli_help(const char *cmd)
{
    const command_help *c = find_command(cmd);
    cli_synopsis(cmd, stdout);
    fputc('\n', stdout);
    fputs(c ? c->help : global_help, stdout);
    if (c)
        fputs("\nGLOBAL options come before the command: see 'dlock --help'.\n", stdout);
    return fflush(stdout) == 0 ? 0 : CLI_EXIT_OSERR;
}

