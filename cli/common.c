/* SPDX-License-Identifier: BSD-3-Clause */
/* Messages, exit codes, option values and opening the client: what every
 * command needs. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"

/* One line per message, written with one call so that lines from dlock and
 * from the program it runs do not interleave mid-line. Control characters
 * (from a lock name, say) are escaped: a message is one line and never
 * drives the terminal. */
static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
    char line[1024], out[4096];
    int n = snprintf(line, sizeof line, "dlock: %s", prefix);
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", cli_escape(line, out, sizeof out));
}

const char *cli_mode_name(dlock_hold_mode m)
{
    static const char *const names[] = {"free", "exclusive", "shared", "semaphore", "reentrant"};
    return (unsigned)m < 5 ? names[m] : "?";
}

const char *cli_escape(const char *text, char *buf, size_t len)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p && o + 5 < len; p++) {
        if (*p < 0x20 || *p == 0x7f)
            o += (size_t)snprintf(buf + o, len - o, "\\x%02x", *p);
        else
            buf[o++] = (char)*p;
    }
    buf[o] = '\0';
    return buf;
}

/* Where the password of `url` starts and how long it is; 0 if none.
 * redis://[user[:password]@]host... (no colon: all of it is the password)
 * and unix:///path?...password=P... */
size_t cli_password_span(const char *url, size_t *start)
{
    if (!strncmp(url, "unix://", 7)) {
        const char *q = strchr(url, '?');
        while (q) {
            q++;
            if (!strncmp(q, "password=", 9)) {
                *start = (size_t)(q + 9 - url);
                return strcspn(q + 9, "&");
            }
            q = strchr(q, '&');
        }
        return 0;
    }
    const char *s = strstr(url, "://");
    if (!s)
        return 0;
    s += 3;
    const char *end = s + strcspn(s, "/?#");
    const char *at = NULL;
    for (const char *p = s; p < end; p++)
        if (*p == '@')
            at = p; /* the last '@' before the path ends the userinfo */
    if (!at)
        return 0;
    const char *colon = memchr(s, ':', (size_t)(at - s));
    const char *pw = colon ? colon + 1 : s;
    *start = (size_t)(pw - url);
    return (size_t)(at - pw);
}

const char *cli_redact_url(const char *url, char *buf, size_t len)
{
    size_t start = 0, n = cli_password_span(url, &start);
    if (n == 0)
        snprintf(buf, len, "%s", url);
    else
        snprintf(buf, len, "%.*s***%s", (int)start, url, url + start + n);
    return buf;
}

int cli_env_passes(const char *e)
{
    if (!strncmp(e, "DLOCK_PASSWORD=", 15) || !strncmp(e, "REDISCLI_AUTH=", 14))
        return 0;
    if (!strncmp(e, "DLOCK_REDIS=", 12)) {
        /* Each comma-separated URL; any with a password keeps the whole
         * variable from the program. */
        char one[4096];
        const char *s = e + 12;
        for (;;) {
            size_t n = strcspn(s, ","), start;
            snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one ? n : sizeof one - 1), s);
            if (cli_password_span(one, &start) > 0)
                return 0;
            if (!s[n])
                break;
            s += n + 1;
        }
    }
    return 1;
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
        return cli_usage_error(cmd, "%s: invalid duration '%s' (use 250ms, 30s, 5m, 1h, 1d, or seconds such as 1.5)",
                               opt, text);
    return 0;
}

int cli_parse_ttl(const char *cmd, const char *text, int64_t *out_ms)
{
    int rc = cli_parse_duration(cmd, "-t", text, out_ms);
    if (rc == 0 && *out_ms < CLI_MIN_TTL_MS)
        return cli_usage_error(cmd, "-t: the lease must be at least %dms, not '%s' "
                               "(a shorter lease would be lost before its first renewal)",
                               CLI_MIN_TTL_MS, text);
    if (rc == 0 && *out_ms > DLOCK_TTL_MAX_MS)
        return cli_usage_error(cmd, "-t: the lease must be at most %" PRId64 "ms (about 24.8 "
                               "days: 32-bit milliseconds), not '%s'",
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

/* -t, -w, -n, -E, --fair and --lock-delay mean the same for `run` and `acquire`.
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
    case 'q':
        o->quiet = 1;
        return 0;
    case CLI_OPT_FENCE:
        o->fence = 1;
        return 0;
    case CLI_OPT_NO_FENCE:
        o->fence = 0;
        o->print_fence = 0;
        return 0;
    case CLI_OPT_PRINT_FENCE:
        o->fence = o->print_fence = 1;
        return 0;
    case 's':
        o->shared = 1;
        return 0;
    case 'x':
        o->shared = 0;
        o->exclusive = 1;
        return 0;
    case CLI_OPT_LOCK_DELAY:
        if (cli_parse_duration(cmd, "--lock-delay", arg, &o->lock_delay_ms))
            return CLI_EXIT_USAGE;
        if (o->lock_delay_ms > DLOCK_LOCK_DELAY_MAX_MS)
            return cli_usage_error(cmd, "--lock-delay: at most %dms (one hour), not '%s'",
                                   DLOCK_LOCK_DELAY_MAX_MS, arg);
        return 0;
    case CLI_OPT_PERMITS: {
        char *end;
        errno = 0;
        unsigned long v = strtoul(arg, &end, 10);
        if (errno || end == arg || *end || *arg == '-' || v == 0 || v > DLOCK_PERMITS_MAX)
            return cli_usage_error(cmd, "--permits: the number of permits must be 1..%u, not '%s'",
                                   DLOCK_PERMITS_MAX, arg);
        o->permits = (unsigned)v;
        return 0;
    }
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

/* What the URLs are, for messages: etcd (modes it lacks), plain TCP
 * without --tls (a TLS port answers such a client with silence), and the
 * default URL (no -r, no DLOCK_REDIS). */
static int client_etcd, client_zk, client_plain_tcp, client_default_url;

/* URLs come from -r, else from DLOCK_REDIS (comma-separated), else the
 * local default. */
static int collect_urls(cli_global *g)
{
    if (g->n_urls > 0)
        return 0;
    const char *env = getenv("DLOCK_REDIS");
    if (!env || !*env) {
        g->urls[g->n_urls++] = CLI_DEFAULT_URL;
        client_default_url = 1;
        return 0;
    }
    char red[1024];
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
        /* "URL1, URL2" as people write lists: the spaces are not the URL's. */
        s += strspn(s, " \t");
        for (char *e = s + strlen(s); e > s && (e[-1] == ' ' || e[-1] == '\t');)
            *--e = '\0';
        if (!*s)
            return cli_usage_error(NULL, "DLOCK_REDIS has an empty URL: '%s'",
                                   cli_redact_url(env, red, sizeof red));
        if (g->n_urls == CLI_MAX_URLS)
            return cli_usage_error(NULL, "DLOCK_REDIS: at most %d URLs", CLI_MAX_URLS);
        g->urls[g->n_urls++] = s;
        if (!comma)
            return 0;
        s = comma + 1;
    }
}

/* The first line of FILE, without its line end. */
static int read_password_file(cli_global *g)
{
    FILE *f = fopen(g->pass_file, "r");
    char buf[4096];
    struct stat sb;
    if (!f) {
        cli_msg("--password-file %s: %s", g->pass_file, strerror(errno));
        return CLI_EXIT_NOINPUT;
    }
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        cli_msg("--password-file %s: %s (give the file that holds the password)", g->pass_file,
                strerror(EISDIR));
        return CLI_EXIT_NOINPUT;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    if (err || !buf[0]) {
        cli_msg("--password-file %s: %s", g->pass_file,
                err ? strerror(err) : "no password in it (its first line is empty)");
        return err ? CLI_EXIT_NOINPUT : CLI_EXIT_USAGE;
    }
    g->file_pass = strdup(buf);
    memset(buf, 0, sizeof buf);
    if (!g->file_pass) {
        cli_msg("out of memory");
        return CLI_EXIT_OSERR;
    }
    return 0;
}

int cli_open_client(cli_global *g, dlock_client **out)
{
    char err[256] = "", red[1024];
    int rc = collect_urls(g);
    if (rc)
        return rc;
    for (size_t i = 0; i < g->n_urls; i++) {
        client_etcd |= !strncmp(g->urls[i], "etcd://", 7) || !strncmp(g->urls[i], "etcds://", 8);
        client_zk |= !strncmp(g->urls[i], "zk://", 5);
        client_plain_tcp |= !g->copts.tls && (!strncmp(g->urls[i], "redis://", 8) ||
                                               !strncmp(g->urls[i], "redis-sentinel://", 17));
    }
    /* Said here in the options' words; the library would name its fields. */
    if (!g->copts.tls_cert_file != !g->copts.tls_key_file)
        return cli_usage_error(NULL, "%s: a client certificate needs both --cert and --key "
                               "(or DLOCK_CERT and DLOCK_KEY): the certificate and its "
                               "private key", g->copts.tls_cert_file ? "--cert" : "--key");
    /* -a, else --password-file, else DLOCK_PASSWORD, else REDISCLI_AUTH
     * (as redis-cli reads it), else the URLs'. The variables are a Redis
     * AUTH password: etcd takes user and password in its URL (etcd://
     * user:password@host), so there they are ignored rather than make
     * every etcd:// call fail (dlock(1), ENVIRONMENT). */
    const char *env_pass = getenv("DLOCK_PASSWORD"), *env_name = "DLOCK_PASSWORD";
    if (!env_pass || !*env_pass) {
        env_pass = getenv("REDISCLI_AUTH");
        env_name = "REDISCLI_AUTH";
    }
    if (env_pass && !*env_pass)
        env_pass = NULL;
    if (g->pass) {
        g->copts.password = g->pass_copy;
    } else if (g->pass_file) {
        if ((rc = read_password_file(g)) != 0)
            return rc;
        g->copts.password = g->file_pass;
    } else if (env_pass && client_etcd) {
        if (g->verbose)
            cli_msg("%s ignored: etcd:// URLs carry their own credentials "
                    "(etcd://user:password@host:port)", env_name);
    } else if (env_pass && client_zk && !g->copts.username) {
        /* a Redis AUTH password; ZooKeeper's digest needs the user too */
        if (g->verbose)
            cli_msg("%s ignored: zk:// digest authentication is user:password "
                    "(zk://user:password@host:port, or --user with it)", env_name);
    } else if (env_pass) {
        g->copts.password = env_pass;
    }
    rc = dlock_client_new(out, g->urls, g->n_urls, &g->copts, err, sizeof err);
    if (rc == DLOCK_OK)
        return 0;
    if (rc == DLOCK_EINVAL)
        return cli_usage_error(NULL, "%s", *err ? err : "invalid Redis URL");
    cli_msg("cannot use %s%s: %s (%s)", cli_redact_url(g->urls[0], red, sizeof red),
            g->n_urls > 1 ? " (and others)" : "", *err ? err : dlock_strerror(rc),
            dlock_errname(rc));
    return cli_exit_for(rc, NULL, 0);
}

/* A usage error for a name etcd refuses (dlock_lock_new(): NAME/read's
 * keys would be NAME's readers'), or 0 for any other. */
static int etcd_role_name(const char *name)
{
    size_t len = strlen(name);
    int bad = strstr(name, "/read/") || (len >= 5 && !strcmp(name + len - 5, "/read")) ||
              (len >= 6 && !strcmp(name + len - 6, "/write"));
    if (!client_etcd || !bad)
        return 0;
    return cli_usage_error(NULL, "\"%s\": on etcd a lock name may not end in /read or "
                           "/write nor hold /read/ (another name's reader's or writer's keys: "
                           "docs/backends.md)", name);
}

int cli_open_lock(dlock_client *c, const char *name, const dlock_lock_options *lo,
                  dlock_lock **out)
{
    /* Fair mode keeps its line on one node: with several it is a usage
     * error, said before anything is sent. */
    if (lo && (lo->flags & DLOCK_FAIR) && dlock_client_node_count(c) > 1)
        return cli_usage_error(NULL, "--fair works with one Redis node only, not %zu "
                               "(the line lives in one node's memory)",
                               dlock_client_node_count(c));
    int rc = dlock_lock_new(out, c, name, lo);
    if (rc == DLOCK_OK)
        return 0;
    if (rc == DLOCK_ENOTSUP && lo && (lo->flags & DLOCK_FAIR)) {
        cli_msg("\"%s\": --fair is not supported %s (DLOCK_ENOTSUP)", name,
                client_etcd ? "on etcd (its waiters queue in order anyway: docs/backends.md)"
                : dlock_client_node_count(c) > 1 ? "with several Redis nodes"
                                                 : "by this libdlock");
        return CLI_EXIT_UNAVAILABLE;
    }
    if (rc == DLOCK_ENOTSUP && client_zk && lo && lo->lock_delay_ms > 0) {
        cli_msg("\"%s\": --lock-delay is not supported on ZooKeeper yet (DLOCK_ENOTSUP; "
                "docs/lock-delay.md)", name);
        return CLI_EXIT_UNAVAILABLE;
    }
    if (rc == DLOCK_EINVAL) {
        if (!*name || strlen(name) > DLOCK_NAME_MAX)
            return cli_usage_error(NULL, "the lock name must be 1..%d bytes", DLOCK_NAME_MAX);
        if ((rc = etcd_role_name(name)) != 0)
            return rc;
        return cli_usage_error(NULL, "\"%s\": invalid lock options", name);
    }
    cli_msg("\"%s\": %s (%s)", name, dlock_strerror(rc), dlock_errname(rc));
    return cli_exit_for(rc, NULL, 0);
}

dlock_lock_options cli_lock_options(const cli_lock_opts *o, unsigned flags)
{
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = o->ttl_ms;
    lo.lock_delay_ms = o->lock_delay_ms;
    lo.flags = flags | (o->fence ? 0u : DLOCK_NO_FENCE);
    /* Exclusive by default: the writer side of a read-write lock holds the
     * same plain key as before, so `dlock release`, other tools and older
     * dlock versions see the same lock; it only also waits for `run -s`
     * readers (and keeps new ones back while it waits). On ZooKeeper a
     * plain lock does that already (a reader waits for every other node
     * before its own), and is Curator's InterProcessMutex, which `dlock
     * run` users there pair with; -x is Curator's read-write lock's writer
     * (docs/backends.md, "ZooKeeper"). So on etcd: the plain lock is
     * etcd's own (`etcdctl lock`'s NAME/<lease>) and waits for readers
     * anyway; -x is the recipe RWMutex's writer (NAME/write/<ID>). */
    if (o->fair)
        lo.flags |= DLOCK_FAIR;
    else if (o->permits == 0 && o->shared)
        lo.flags |= DLOCK_SHARED;
    else if (o->permits == 0 && (o->exclusive || (!client_zk && !client_etcd)))
        lo.flags |= DLOCK_EXCLUSIVE;
    return lo;
}

int cli_check_lock_mode(const char *cmd, const cli_lock_opts *o, size_t n_names)
{
    if (o->shared && o->permits)
        return cli_usage_error(cmd, "-s and --permits exclude each other");
    if (o->fair && (o->shared || o->permits))
        return cli_usage_error(cmd, "--fair works with exclusive locks only, not with %s",
                               o->shared ? "-s" : "--permits");
    if (o->fair && n_names > 1)
        return cli_usage_error(cmd, "--fair takes one NAME, not %zu", n_names);
    if (o->permits && n_names > 1)
        return cli_usage_error(cmd, "--permits takes one NAME, not %zu", n_names);
    if (n_names > DLOCK_MULTI_MAX)
        return cli_usage_error(cmd, "at most %d names", DLOCK_MULTI_MAX);
    if (o->fence && o->permits) /* -s may: its grants raise the break's guard */
        return cli_usage_error(cmd, "--fence: a semaphore keeps no fencing counter");
    return 0;
}

int cli_open_lock_set(dlock_client *c, const char *const *names, size_t n,
                      const dlock_lock_options *lo, const cli_lock_opts *o, dlock_lock **out)
{
    int rc;
    if (n == 1 && !o->permits)
        return cli_open_lock(c, names[0], lo, out);
    if (o->permits)
        rc = dlock_semaphore_new(out, c, names[0], o->permits, lo);
    else
        rc = dlock_lock_new_multi(out, c, names, n, lo);
    if (rc == DLOCK_OK)
        return 0;
    if (rc == DLOCK_ENOTSUP && client_etcd) {
        cli_msg("\"%s\": %s is not supported on etcd (DLOCK_ENOTSUP)", names[0],
                o->permits ? "--permits with these options" : "this kind over several names");
        return CLI_EXIT_UNAVAILABLE;
    }
    if (rc == DLOCK_ENOTSUP && o->permits)
        return cli_usage_error(NULL, "--permits works with one Redis node only, not %zu (permits "
                               "counted per node do not add up over a majority)",
                               dlock_client_node_count(c));
    if (rc == DLOCK_EINVAL && n > 1) {
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (!strcmp(names[i], names[j]))
                    return cli_usage_error(NULL, "the name \"%s\" is given twice", names[i]);
    }
    for (size_t i = 0; rc == DLOCK_EINVAL && i < n; i++) {
        int bad = etcd_role_name(names[i]);
        if (bad)
            return bad;
    }
    if (rc == DLOCK_EINVAL)
        return cli_usage_error(NULL, "every lock name must be 1..%d bytes", DLOCK_NAME_MAX);
    cli_msg("\"%s\": %s (%s)", names[0], dlock_strerror(rc), dlock_errname(rc));
    return cli_exit_for(rc, NULL, 0);
}

int cli_exit_for(int rc, const cli_lock_opts *o, int sig)
{
    if (sig && (rc == DLOCK_ECANCELED || rc == DLOCK_OK))
        return 128 + sig; /* interrupted: nothing is kept */
    if (o && (rc == DLOCK_ENOTACQUIRED || rc == DLOCK_ETIMEDOUT))
        return o->conflict_exit;
    /* Unreachable, no reply, busy, no quorum: Redis cannot give an answer
     * now; a later try may (the library's rule, shared with the bench). */
    if (dlock_error_is_transient(rc))
        return CLI_EXIT_UNAVAILABLE;
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
    case DLOCK_EAUTH:
        return CLI_EXIT_NOPERM;
    case DLOCK_EREFUSED:
    case DLOCK_EWRONGTYPE:
    case DLOCK_EPROTO:
        return CLI_EXIT_PROTOCOL;
    default:
        /* Unsupported, TLS, out of memory: not transient, but nothing the
         * caller's arguments can fix either; 69 as for the transient ones. */
        return CLI_EXIT_UNAVAILABLE;
    }
}

const char *cli_hint(int rc, const char *detail)
{
    /* A first run with no server configured reaches for the default. */
    if (client_default_url && rc == DLOCK_EIO)
        return "; no -r and no DLOCK_REDIS: dlock tried the default, " CLI_DEFAULT_URL
               " (is a redis-server running there?)";
    /* A TLS port resets a plain client's connection once it sees the
     * command: the outcome is unknown, and nothing says why. (Not for a
     * refused connection: nothing listens there at all.) */
    if (client_plain_tcp && rc == DLOCK_EUNKNOWN)
        return "; if the server speaks TLS, use rediss:// or --tls";
    /* A plain port answers a TLS handshake with silence (dlock.h). */
    if (strstr(detail, "TLS handshake timed out"))
        return "; a plain (non-TLS) port answers a handshake with silence: use redis:// "
               "without --tls there";
    return "";
}

void cli_report(dlock_client *c, dlock_lock *lock, int rc, const char *doing)
{
    const char *detail = lock ? dlock_lock_errmsg(lock) : "";
    const char *name = lock ? dlock_lock_name(lock) : "?";
    char nodes[512];
    const char *hint = cli_hint(rc, detail);
    if (*detail)
        cli_msg("\"%s\": %s failed: %s (%s)%s", name, doing, detail, dlock_errname(rc), hint);
    else
        cli_msg("\"%s\": %s failed on %s: %s (%s)%s", name, doing,
                cli_nodes(c, nodes, sizeof nodes), dlock_strerror(rc), dlock_errname(rc), hint);
}
