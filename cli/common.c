/* Messages, exit codes, option values and opening the client: what every
 * command needs. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* One line per message, written with one call so that lines from dlock and
 * from the program it runs do not interleave mid-line. */
static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "dlock: %s", prefix);
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", line);
}

void cli_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg("", fmt, ap);
    va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char prefix[64] = "";
    va_list ap;
    if (cmd)
        snprintf(prefix, sizeof prefix, "%s: ", cmd);
    va_start(ap, fmt);
    vmsg(prefix, fmt, ap);
    va_end(ap);
    cli_synopsis(cmd, stderr);
    fprintf(stderr, "Try 'dlock%s%s --help' for more information.\n", cmd ? " " : "",
            cmd ? cmd : "");
    return CLI_EXIT_USAGE;
}

int cli_bad_option(const char *cmd, int c, int optopt_value, char **argv, int ind)
{
    const char *arg = ind > 0 ? argv[ind - 1] : "?";
    if (c == ':')
        return cli_usage_error(cmd, "option '%s' needs a value", arg);
    /* getopt leaves optopt at the letter for an unknown short option, and
     * at 0 (or a long option's value >= 256) otherwise. */
    if (optopt_value > 0 && optopt_value < 128)
        return cli_usage_error(cmd, "unknown option '-%c'", optopt_value);
    return cli_usage_error(cmd, "unknown option '%s'", arg);
}

int cli_parse_duration(const char *cmd, const char *opt, const char *text, int64_t *out_ms)
{
    if (dlock_duration_parse(out_ms, text) != DLOCK_OK)
        return cli_usage_error(cmd, "%s: invalid duration '%s' (use 250ms, 30s, 5m, 1h, or seconds such as 1.5)",
                               opt, text);
    return 0;
}

int cli_parse_ttl(const char *cmd, const char *text, int64_t *out_ms)
{
    int rc = cli_parse_duration(cmd, "-t", text, out_ms);
    if (rc == 0 && (*out_ms < 1 || *out_ms > DLOCK_TTL_MAX_MS))
        return cli_usage_error(cmd, "-t: the TTL must be between 1ms and %" PRId64 "ms, not '%s'",
                               DLOCK_TTL_MAX_MS, text);
    return rc;
}

int cli_parse_exit_code(const char *cmd, const char *text, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < 0 || v > 255)
        return cli_usage_error(cmd, "-E: the exit code must be 0..255, not '%s'", text);
    *out = (int)v;
    return 0;
}

/* -t, -w, -n, -E and --fair mean the same for `run` and `acquire`.
 * Returns 0 when handled, 64 on a bad value, -1 for another option. */
int cli_lock_option(const char *cmd, int c, const char *arg, cli_lock_opts *o)
{
    switch (c) {
    case 't':
        return cli_parse_ttl(cmd, arg, &o->ttl_ms);
    case 'w':
    case 'n': {
        int64_t w = 0;
        if (c == 'w' && cli_parse_duration(cmd, "-w", arg, &w))
            return CLI_EXIT_USAGE;
        if (o->wait_given && o->wait_ms != w)
            return cli_usage_error(cmd, "-w and -n contradict each other");
        o->wait_ms = w;
        o->wait_given = 1;
        return 0;
    }
    case 'E':
        return cli_parse_exit_code(cmd, arg, &o->conflict_exit);
    case CLI_OPT_FAIR:
        o->fair = 1;
        return 0;
    default:
        return -1;
    }
}

int64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *cli_nodes(const dlock_client *c, char *buf, size_t len)
{
    size_t n = dlock_client_node_count(c), used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s", i ? "," : "",
                         dlock_client_node_name(c, i));
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return buf;
}

/* URLs come from -r, else from DLOCK_REDIS (comma-separated), else the
 * local default. */
static int collect_urls(cli_global *g)
{
    if (g->n_urls > 0)
        return 0;
    const char *env = getenv("DLOCK_REDIS");
    if (!env || !*env) {
        g->urls[g->n_urls++] = CLI_DEFAULT_URL;
        return 0;
    }
    g->env_urls = strdup(env);
    if (!g->env_urls) {
        cli_msg("out of memory");
        return CLI_EXIT_OSERR;
    }
    char *s = g->env_urls;
    for (;;) {
        char *comma = strchr(s, ',');
        if (comma)
            *comma = '\0';
        if (!*s)
            return cli_usage_error(NULL, "DLOCK_REDIS has an empty URL: '%s'", env);
        if (g->n_urls == CLI_MAX_URLS)
            return cli_usage_error(NULL, "DLOCK_REDIS: at most %d URLs", CLI_MAX_URLS);
        g->urls[g->n_urls++] = s;
        if (!comma)
            return 0;
        s = comma + 1;
    }
}

int cli_open_client(cli_global *g, dlock_client **out)
{
    char err[256] = "";
    int rc = collect_urls(g);
    if (rc)
        return rc;
    rc = dlock_client_new(out, g->urls, g->n_urls, &g->copts, err, sizeof err);
    if (rc == DLOCK_OK)
        return 0;
    if (rc == DLOCK_EINVAL)
        return cli_usage_error(NULL, "%s", *err ? err : "invalid Redis URL");
    cli_msg("cannot use %s%s: %s", g->urls[0], g->n_urls > 1 ? " (and others)" : "",
            *err ? err : dlock_strerror(rc));
    return cli_exit_for(rc);
}

int cli_open_lock(dlock_client *c, const char *name, const dlock_lock_options *lo,
                  dlock_lock **out)
{
    int rc = dlock_lock_new(out, c, name, lo);
    if (rc == DLOCK_OK)
        return 0;
    if (rc == DLOCK_ENOTSUP && lo && (lo->flags & DLOCK_FAIR)) {
        cli_msg("\"%s\": --fair is not supported by this libdlock%s", name,
                dlock_client_node_count(c) > 1 ? " with several Redis nodes" : "");
        return CLI_EXIT_UNAVAILABLE;
    }
    if (rc == DLOCK_EINVAL) {
        if (!*name || strlen(name) > DLOCK_NAME_MAX)
            return cli_usage_error(NULL, "the lock name must be 1..%d bytes", DLOCK_NAME_MAX);
        return cli_usage_error(NULL, "\"%s\": invalid lock options", name);
    }
    cli_msg("\"%s\": %s", name, dlock_strerror(rc));
    return cli_exit_for(rc);
}

int cli_exit_for(int rc)
{
    switch (rc) {
    case DLOCK_OK:
        return 0;
    case DLOCK_ENOTACQUIRED:
    case DLOCK_ETIMEDOUT:
    case DLOCK_ENOTOWNER:
    case DLOCK_EEXPIRED:
    case DLOCK_ENOTHELD:
    case DLOCK_ELOST:
        return CLI_EXIT_CONFLICT;
    case DLOCK_EINVAL:
        return CLI_EXIT_USAGE;
    default:
        /* Unreachable, refused, no quorum, unsupported: Redis cannot give
         * an answer now; a later try may. */
        return CLI_EXIT_UNAVAILABLE;
    }
}

void cli_report(dlock_client *c, dlock_lock *lock, int rc, const char *doing)
{
    const char *detail = lock ? dlock_lock_errmsg(lock) : "";
    const char *name = lock ? dlock_lock_name(lock) : "?";
    char nodes[512];
    if (*detail)
        cli_msg("\"%s\": %s failed: %s (%s)", name, doing, detail, dlock_errname(rc));
    else
        cli_msg("\"%s\": %s failed on %s: %s (%s)", name, doing, cli_nodes(c, nodes, sizeof nodes),
                dlock_strerror(rc), dlock_errname(rc));
}
