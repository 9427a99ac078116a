/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock elect: run a program while this process leads an election
 * (docs/elections.md), with `run`'s loss handling, signals and exit codes
 * (run.h); and dlock leader: who leads, once or at every change.
 *
 * Threads: as for run (run.c): the main thread campaigns and supervises
 * the program, the signal thread (wait.c) cancels the campaign's wait or
 * forwards signals, the watchdog renews the term. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "run.h"

enum { OPT_VALUE = 700, OPT_AGAIN, OPT_WATCH };

typedef struct elect_opts {
    run_opts run;
    const char *value; /* --value; default: the host's name */
    int again;         /* --again: campaign again after each term */
    char host[256];
} elect_opts;

static int parse_elect(const char *cmd, int argc, char **argv, elect_opts *o, cli_global *g)
{
    static const struct option longopts[] = {
        {"ttl", required_argument, NULL, 't'},
        {"wait", required_argument, NULL, 'w'},
        {"timeout", required_argument, NULL, 'w'},
        {"nonblock", no_argument, NULL, 'n'},
        {"conflict-exit-code", required_argument, NULL, 'E'},
        {"quiet", no_argument, NULL, 'q'},
        {"lock-delay", required_argument, NULL, CLI_OPT_LOCK_DELAY},
        {"value", required_argument, NULL, OPT_VALUE},
        {"again", no_argument, NULL, OPT_AGAIN},
        {"on-lost", required_argument, NULL, CLI_OPT_ON_LOST},
        {"grace", required_argument, NULL, CLI_OPT_GRACE},
        {"command", required_argument, NULL, 'c'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    run_opts *r = &o->run;
    const char *shell_cmd = NULL;
    int c;
    /* '-': NAME comes back in order (as 1), so options may follow it;
     * "--" ends them and what follows is the program. */
    while ((c = getopt_long(argc, argv, "-:t:w:nE:qc:vh", longopts, NULL)) != -1) {
        int rc = cli_lock_option(cmd, c, optarg, &r->lk);
        if (rc < 0)
            rc = cli_run_option(cmd, c, optarg, r, &shell_cmd, g);
        if (rc >= 0) {
            if (rc)
                return rc;
            continue;
        }
        switch (c) {
        case 1:
            if (r->n_names)
                return cli_usage_error(cmd, "one election NAME only, not '%s' too (the "
                                       "program follows '--')", optarg);
            r->names[r->n_names++] = optarg;
            break;
        case OPT_VALUE:
            o->value = optarg;
            break;
        case OPT_AGAIN:
            o->again = 1;
            break;
        case 'h':
            exit(cli_help(cmd));
        default:
            return cli_bad_option(cmd, c, optopt, argv, optind);
        }
    }
    if (!r->n_names)
        return cli_usage_error(cmd, "missing election NAME");
    if (shell_cmd && optind < argc)
        return cli_usage_error(cmd, "unexpected '%s' after -c: the command is one argument",
                               argv[optind]);
    if (shell_cmd) {
        cli_run_shell(r, shell_cmd);
    } else if (optind < argc) {
        r->prog = argv + optind;
    } else {
        return cli_usage_error(cmd, "missing '-- PROGRAM' or -c 'COMMAND'");
    }
    if (!o->value) {
        if (gethostname(o->host, sizeof o->host - 1) != 0)
            snprintf(o->host, sizeof o->host, "pid-%ld", (long)getpid());
        o->value = o->host;
    }
    if (strlen(o->value) > DLOCK_ELECTION_VALUE_MAX)
        return cli_usage_error(cmd, "--value: at most %d bytes", DLOCK_ELECTION_VALUE_MAX);
    r->name = r->names[0];
    r->lk.names = r->names;
    r->lk.n_names = 1;
    return 0;
}

/* Campaign (try once first, as run's acquire does, so that an unreachable
 * store is reported at once), with run's messages and exit codes. */
static int campaign(run_state *rs, const elect_opts *o)
{
    const cli_lock_opts *lk = &o->run.lk;
    int64_t start = cli_now_ms();
    int rc = dlock_election_campaign(rs->election, o->value, 0);
    if (rc == DLOCK_ENOTACQUIRED && lk->wait_ms != 0) {
        if (rs->g->verbose)
            cli_msg("standing by for \"%s\"", o->run.name);
        int64_t wait = lk->wait_ms;
        if (wait > 0 && (wait -= cli_now_ms() - start) <= 0)
            wait = 1;
        rc = dlock_election_campaign(rs->election, o->value, wait);
    }
    if (rc == DLOCK_OK && rs->g->verbose)
        cli_msg("leading \"%s\" as \"%s\" after %.1fs (fence %" PRIu64 ")", o->run.name,
                o->value, (double)(cli_now_ms() - start) / 1000.0,
                dlock_election_fence(rs->election));
    else if (rc != DLOCK_OK && !(rc == DLOCK_ENOTACQUIRED && (rs->g->quiet || lk->quiet)))
        cli_report(rs->client, rs->lock, rc, "campaign");
    return rc;
}

/* A new term's supervision state; 0, or the signal that arrived (the
 * campaign loop ends). */
static int next_term(run_state *rs)
{
    CLI_CHECK(pthread_mutex_lock(&rs->sw.mu));
    int sig = rs->sw.signo;
    if (!sig) {
        rs->sw.phase = CLI_PHASE_WAIT;
        rs->sw.pgid = 0;
    }
    CLI_CHECK(pthread_mutex_unlock(&rs->sw.mu));
    atomic_store(&rs->lost_reason, 0);
    rs->lost_seen = rs->status = rs->guard_died = rs->signalled = 0;
    rs->kill_at = -1;
    memset(&rs->ch, 0, sizeof rs->ch);
    return sig;
}

/* The signal that came, or 0, after ms of sleep in short steps (the
 * signal thread notes it; this thread has them blocked). */
static int pause_for(run_state *rs, int64_t ms)
{
    for (int64_t end = cli_now_ms() + ms; cli_now_ms() < end;) {
        CLI_CHECK(pthread_mutex_lock(&rs->sw.mu));
        int sig = rs->sw.signo;
        CLI_CHECK(pthread_mutex_unlock(&rs->sw.mu));
        if (sig)
            return sig;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static int elect_terms(run_state *rs, elect_opts *o, const sigset_t *mask)
{
    int64_t backoff_ms = 0;
    for (int terms = 0;; terms++) {
        int rc = campaign(rs, o);
        /* --again after a term: an outage of the store is ridden out,
         * with backoff, until a signal (the first campaign still says at
         * once that the store cannot be reached) */
        if (rc != DLOCK_OK && o->again && terms > 0 && dlock_error_is_transient(rc)) {
            backoff_ms = backoff_ms ? (backoff_ms * 2 > 2000 ? 2000 : backoff_ms * 2) : 100;
            int sig = pause_for(rs, backoff_ms);
            if (sig)
                return 128 + sig;
            terms--; /* not a term: the same campaign again */
            continue;
        }
        backoff_ms = 0;
        if (rc != DLOCK_OK)
            return cli_exit_for(rc, &o->run.lk, cli_sigwatch_finish(&rs->sw));
        rc = cli_run_program(rs, mask);
        if (!o->again || rs->guard_died)
            return rc;
        int sig = next_term(rs);
        if (sig)
            return 128 + sig;
        if (rs->g->verbose)
            cli_msg("term ended (status %d); campaigning again", rc);
    }
}

int cli_cmd_elect(cli_global *g, int argc, char **argv)
{
    static elect_opts o = {{CLI_LOCK_OPTS_INIT, LOST_TERM, 5000, NULL, {NULL}, 0, NULL,
                            {NULL, NULL, NULL, NULL}},
                           NULL, 0, ""};
    run_state rs;
    sigset_t mask;
    int rc = parse_elect(argv[0], argc, argv, &o, g);
    if (rc)
        return rc;
    rc = cli_run_begin(&rs, g, &o.run, &mask);
    if (rc)
        return rc;
    rs.leader_value = o.value;
    rc = cli_open_client(g, &rs.client);
    if (rc)
        goto out;
    dlock_election_options eo = DLOCK_ELECTION_OPTIONS_INIT;
    eo.ttl_ms = o.run.lk.ttl_ms;
    eo.lock_delay_ms = o.run.lk.lock_delay_ms;
    eo.on_lost = cli_run_on_lost;
    eo.on_lost_arg = &rs;
    int lrc = dlock_election_new(&rs.election, rs.client, o.run.name, &eo);
    if (lrc != DLOCK_OK) {
        cli_report(rs.client, NULL, lrc, "election");
        rc = cli_exit_for(lrc, NULL, 0);
        goto out;
    }
    rs.lock = dlock_election_lock(rs.election);
    rc = cli_sigwatch_start(&rs.sw, rs.lock, rs.ev[1]);
    if (rc)
        goto out;
    rc = elect_terms(&rs, &o, &mask);
    cli_sigwatch_stop(&rs.sw);
out:
    cli_run_end(&rs);
    return rc;
}

/* ---- dlock leader ------------------------------------------------------------ */

typedef struct leader_out {
    const char *name;
    int json;
    int watch;
} leader_out;

static int print_leader(void *arg, uint64_t fence, const char *value, size_t len)
{
    const leader_out *p = arg;
    (void)len;
    if (p->json) {
        printf("{");
        cli_json_name(p->name, stdout);
        printf(",\"leader\":%s,\"fence\":%" PRIu64 ",\"value\":", fence ? "true" : "false",
               fence);
        cli_json_string(fence ? value : "", stdout);
        printf("}\n");
    } else if (fence) {
        /* every byte may become \xNN: a value is never cut (up to
         * DLOCK_ELECTION_VALUE_MAX bytes, too many for the stack) */
        size_t cap = 4 * len + 6;
        char *esc = malloc(cap);
        if (!esc) {
            cli_msg("out of memory");
            return 1;
        }
        printf("%" PRIu64 " %s\n", fence, cli_escape(value, esc, cap));
        free(esc);
    } else {
        printf("0\n");
    }
    fflush(stdout);
    return !p->watch;
}

int cli_cmd_leader(cli_global *g, int argc, char **argv)
{
    static const struct option longopts[] = {{"watch", no_argument, NULL, OPT_WATCH},
                                             {"json", no_argument, NULL, CLI_OPT_JSON},
                                             {"verbose", no_argument, NULL, 'v'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    leader_out p = {NULL, 0, 0};
    int c;
    while ((c = getopt_long(argc, argv, "-:vh", longopts, NULL)) != -1) {
        if (c == 1 && !p.name)
            p.name = optarg;
        else if (c == 1)
            return cli_usage_error(argv[0], "unexpected '%s': one election NAME only", optarg);
        else if (c == OPT_WATCH)
            p.watch = 1;
        else if (c == CLI_OPT_JSON)
            p.json = 1;
        else if (c == 'v')
            g->verbose = 1;
        else if (c == 'h')
            exit(cli_help(argv[0]));
        else
            return cli_bad_option(argv[0], c, optopt, argv, optind);
    }
    if (optind < argc && !p.name)
        p.name = argv[optind++];
    if (!p.name)
        return cli_usage_error(argv[0], "missing election NAME");
    if (optind < argc)
        return cli_usage_error(argv[0], "unexpected '%s'", argv[optind]);
    dlock_client *client = NULL;
    dlock_election *e = NULL;
    int rc = cli_open_client(g, &client);
    if (rc)
        return rc;
    int lrc = dlock_election_new(&e, client, p.name, NULL);
    if (lrc == DLOCK_OK && p.watch) {
        lrc = dlock_election_observe(e, DLOCK_WAIT_FOREVER, print_leader, &p);
    } else if (lrc == DLOCK_OK) {
        uint64_t fence = 0;
        char value[DLOCK_ELECTION_VALUE_MAX + 1];
        lrc = dlock_election_leader(e, &fence, value, sizeof value, NULL);
        if (lrc == DLOCK_OK) {
            print_leader(&p, fence, value, strlen(value));
            rc = fence ? 0 : CLI_EXIT_CONFLICT; /* nobody leads */
        }
    }
    if (lrc != DLOCK_OK) {
        cli_report(client, e ? dlock_election_lock(e) : NULL, lrc, "leader");
        rc = cli_exit_for(lrc, NULL, 0);
    }
    dlock_election_free(e);
    dlock_client_free(client);
    return rc;
}
