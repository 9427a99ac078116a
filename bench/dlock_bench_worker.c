/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlock-bench-worker: dlock's worker for the peers lock benchmark.
 *
 * Implements the worker contract of ../shared/peers/SCENARIOS.md with
 * nothing but dlock's public API, so that dlock is measured the way a user
 * would call it:
 *
 *   dlock-bench-worker mode=cycle|contend ports=P[,P2,P3] key=K start=EPOCH
 *       [ttl_ms=10000] [warmup=0.5] [duration=5]               (cycle)
 *       [target=2000] [max_time=30] ctr=FILE holder=FILE
 *       [retry=default|tuned]                                  (contend)
 *       lat=FILE out=FILE
 *       [fair=0|1] [nofence=0|1] [wakeups=0|1] [renew=0|1]     (extras)
 *       [url=URL]                                              (extras)
 *
 * Every port becomes redis://127.0.0.1:P; several ports make the client run
 * Redlock through the same calls. retry=default keeps the library's retry
 * settings, retry=tuned sets retry_min_ms = retry_max_ms = 1 (the lowest the
 * API allows). fair=1 asks for DLOCK_FAIR. Not part of the contract, for
 * profiling: nofence=1 sets DLOCK_NO_FENCE (separates the fencing counter's
 * cost), wakeups=0 turns off the pub/sub wake-ups (waiters only poll),
 * renew=1 sets DLOCK_AUTO_RENEW (on etcd: the client's session, one lease
 * per TTL, as Go's concurrency.Mutex on a Session).
 * url=URL replaces ports= with any URL dlock_client_new() takes, such as
 * etcd://127.0.0.1:2379 (bench/etcd-vs-redis.py runs S1 and S3 on etcd
 * beside Redis with it).
 * A setup failure (bad argument, unsupported mode, the priming cycle
 * failing) exits with status 2 and a message on stderr.
 *
 * Wall-clock time is used only where the contract speaks of wall time (the
 * synchronized start, max_time, t_target, t_end); every measured interval
 * uses the monotonic clock.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlock.h"

#define PROG "dlock-bench-worker"
#define MAX_PORTS 64
/* A contended acquire waits this long before the worker counts a give-up
 * and calls acquire again (SCENARIOS.md: wait-to-acquire includes it). */
#define CONTEND_WAIT_MS 30000
/* Error details printed to stderr per run; the counters hold the rest. */
#define MAX_ERROR_REPORTS 5

typedef struct worker_args {
    const char *mode;
    const char *ports;
    const char *url; /* NULL: ports */
    const char *key;
    double start;
    int64_t ttl_ms;
    double warmup_s;
    double duration_s;
    long target;
    double max_time_s;
    const char *ctr_path;
    const char *holder_path;
    const char *retry;
    const char *lat_path;
    const char *out_path;
    int fair;
    int nofence;
    int renew;
    int wakeups;
} worker_args;

typedef struct counters {
    long n, acq_fail, giveups, rel_fail, errors, viol;
    int error_reports;
} counters;

typedef struct samples {
    int64_t *ns;
    size_t len, cap;
} samples;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;
    fputs(PROG ": ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static double wall_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t mono_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void sleep_until_wall(double t)
{
    for (;;) {
        double left = t - wall_now_s();
        if (left <= 0)
            return;
        sleep_ns((int64_t)(left * 1e9) + 1);
    }
}

/* ---- arguments ------------------------------------------------------------ */

static double parse_double(const char *name, const char *v)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= 0))
        die("%s=%s: expected a non-negative number", name, v);
    return d;
}

static long parse_long(const char *name, const char *v, long min, long max)
{
    char *end;
    errno = 0;
    long l = strtol(v, &end, 10);
    if (errno || end == v || *end || l < min || l > max)
        die("%s=%s: expected an integer in %ld..%ld", name, v, min, max);
    return l;
}

static void parse_args(worker_args *a, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    a->mode = "cycle";
    a->ports = "7101";
    a->ttl_ms = 10000;
    a->warmup_s = 0.5;
    a->duration_s = 5;
    a->target = 2000;
    a->max_time_s = 30;
    a->retry = "default";
    a->lat_path = "/dev/null";
    a->out_path = "/dev/stdout";
    a->wakeups = 1;
    int have_key = 0, have_start = 0;

    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq)
            die("argument \"%s\" is not name=value", argv[i]);
        *eq = '\0';
        const char *name = argv[i], *v = eq + 1;
        if (!strcmp(name, "mode")) {
            a->mode = v;
        } else if (!strcmp(name, "ports")) {
            a->ports = v;
        } else if (!strcmp(name, "url")) {
            a->url = v;
        } else if (!strcmp(name, "key")) {
            a->key = v;
            have_key = 1;
        } else if (!strcmp(name, "start")) {
            a->start = parse_double(name, v);
            have_start = 1;
        } else if (!strcmp(name, "ttl_ms")) {
            a->ttl_ms = parse_long(name, v, 1, (long)DLOCK_TTL_MAX_MS);
        } else if (!strcmp(name, "warmup")) {
            a->warmup_s = parse_double(name, v);
        } else if (!strcmp(name, "duration")) {
            a->duration_s = parse_double(name, v);
        } else if (!strcmp(name, "target")) {
            a->target = parse_long(name, v, 1, 1000000000L);
        } else if (!strcmp(name, "max_time")) {
            a->max_time_s = parse_double(name, v);
        } else if (!strcmp(name, "ctr")) {
            a->ctr_path = v;
        } else if (!strcmp(name, "holder")) {
            a->holder_path = v;
        } else if (!strcmp(name, "retry")) {
            a->retry = v;
        } else if (!strcmp(name, "lat")) {
            a->lat_path = v;
        } else if (!strcmp(name, "out")) {
            a->out_path = v;
        } else if (!strcmp(name, "fair")) {
            a->fair = (int)parse_long(name, v, 0, 1);
        } else if (!strcmp(name, "nofence")) {
            a->nofence = (int)parse_long(name, v, 0, 1);
        } else if (!strcmp(name, "renew")) {
            a->renew = (int)parse_long(name, v, 0, 1);
        } else if (!strcmp(name, "wakeups")) {
            a->wakeups = (int)parse_long(name, v, 0, 1);
        } else {
            die("unknown argument \"%s\"", name);
        }
    }
    if (strcmp(a->mode, "cycle") && strcmp(a->mode, "contend"))
        die("mode=%s: expected cycle or contend", a->mode);
    if (strcmp(a->retry, "default") && strcmp(a->retry, "tuned"))
        die("retry=%s: expected default or tuned", a->retry);
    if (!have_key || !*a->key)
        die("key=K is required");
    if (!have_start)
        die("start=EPOCH is required");
    if (!strcmp(a->mode, "contend") && (!a->ctr_path || !a->holder_path))
        die("mode=contend needs ctr=FILE and holder=FILE");
}

/* ---- setup ---------------------------------------------------------------- */

static dlock_client *open_client(const char *ports, const char *url, int wakeups)
{
    char buf[1024];
    char urls[MAX_PORTS][40];
    const char *url_ptrs[MAX_PORTS];
    size_t n = 0;

    if (url) {
        url_ptrs[n++] = url;
        ports = "";
    }

    if (strlen(ports) >= sizeof buf)
        die("ports=%s: too long", ports);
    strcpy(buf, ports);
    char *save = NULL;
    for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (n == MAX_PORTS)
            die("ports: more than %d ports", MAX_PORTS);
        long port = parse_long("ports", p, 1, 65535);
        snprintf(urls[n], sizeof urls[n], "redis://127.0.0.1:%ld", port);
        url_ptrs[n] = urls[n];
        n++;
    }
    if (n == 0)
        die("ports=%s: no port given", ports);

    dlock_client_options copts = DLOCK_CLIENT_OPTIONS_INIT;
    copts.wakeups = wakeups;
    dlock_client *client = NULL;
    char err[256] = "";
    int rc = dlock_client_new(&client, url_ptrs, n, &copts, err, sizeof err);
    if (rc != DLOCK_OK)
        die("dlock_client_new: %s: %s", dlock_errname(rc), err[0] ? err : dlock_strerror(rc));
    return client;
}

static dlock_lock *open_lock(dlock_client *client, const char *name,
                             const dlock_lock_options *opts, const worker_args *a)
{
    dlock_lock *lock = NULL;
    int rc = dlock_lock_new(&lock, client, name, opts);
    if (rc == DLOCK_ENOTSUP && a->fair)
        die("fair=1: dlock_lock_new: %s (%s): %s", dlock_errname(rc), dlock_strerror(rc),
            dlock_client_node_count(client) > 1
                ? "fair mode is not available over several nodes (Redlock)"
                : "this dlock build does not support fair mode");
    if (rc != DLOCK_OK)
        die("dlock_lock_new(\"%s\"): %s: %s", name, dlock_errname(rc), dlock_strerror(rc));
    return lock;
}

/* One acquire + release on a private key: connections, handshake and the
 * script cache are warm before the measured part starts. */
static void prime(dlock_client *client, const dlock_lock_options *opts, const worker_args *a)
{
    char name[512];
    snprintf(name, sizeof name, "%s:prime:%ld", a->key, (long)getpid());
    dlock_lock *lock = open_lock(client, name, opts, a);
    int rc = dlock_lock_acquire(lock, 0);
    if (rc != DLOCK_OK)
        die("priming acquire of \"%s\": %s: %s", name, dlock_errname(rc),
            dlock_lock_errmsg(lock));
    rc = dlock_lock_release(lock);
    if (rc != DLOCK_OK)
        die("priming release of \"%s\": %s: %s", name, dlock_errname(rc),
            dlock_lock_errmsg(lock));
    dlock_lock_free(lock);
}

/* ---- bookkeeping ---------------------------------------------------------- */

static void record(samples *s, int64_t ns)
{
    if (s->len == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 65536;
        int64_t *p = realloc(s->ns, ncap * sizeof *p);
        if (!p)
            die("out of memory for %zu latency samples", ncap);
        s->ns = p;
        s->cap = ncap;
    }
    s->ns[s->len++] = ns;
}

/* Codes that say the library or a node failed, as opposed to the expected
 * outcomes of a lock operation (taken, timed out, no longer ours). */
static int is_error(int rc)
{
    return rc != DLOCK_OK && rc != DLOCK_ENOTACQUIRED && rc != DLOCK_ETIMEDOUT &&
           rc != DLOCK_ENOTOWNER && rc != DLOCK_EEXPIRED;
}

static void report(counters *c, const char *what, int rc, const dlock_lock *lock)
{
    if (c->error_reports++ < MAX_ERROR_REPORTS)
        fprintf(stderr, PROG ": %s: %s: %s\n", what, dlock_errname(rc), dlock_lock_errmsg(lock));
}

/* Release and count what went wrong: rel_fail for anything but DLOCK_OK
 * (ownership not confirmed), errors for library/node failures. */
static void release_counted(dlock_lock *lock, counters *c)
{
    int rc = dlock_lock_release(lock);
    if (rc == DLOCK_OK)
        return;
    c->rel_fail++;
    if (is_error(rc))
        c->errors++;
    report(c, "release", rc, lock);
}

/* ---- cycle mode (S1, S2, S4) ---------------------------------------------- */

static double run_cycle(dlock_lock *lock, const worker_args *a, counters *c, samples *lat)
{
    /* Warm-up: not recorded, failures not counted. */
    while (wall_now_s() < a->start + a->warmup_s) {
        if (dlock_lock_acquire(lock, 0) == DLOCK_OK)
            (void)dlock_lock_release(lock);
    }
    int64_t t_begin = mono_now_ns();
    int64_t deadline = t_begin + (int64_t)(a->duration_s * 1e9);
    while (mono_now_ns() < deadline) {
        int64_t t0 = mono_now_ns();
        int rc = dlock_lock_acquire(lock, 0);
        int64_t dt = mono_now_ns() - t0;
        if (rc != DLOCK_OK) {
            c->acq_fail++;
            if (is_error(rc))
                c->errors++;
            report(c, "acquire", rc, lock);
            continue;
        }
        release_counted(lock, c);
        record(lat, dt);
        c->n++;
    }
    return (double)(mono_now_ns() - t_begin) / 1e9;
}

/* ---- contend mode (S3) ---------------------------------------------------- */

/* Read-increment-write the shared 16-byte decimal counter. */
static long counter_bump(int fd)
{
    char buf[17] = {0};
    if (pread(fd, buf, 16, 0) < 0)
        die("pread counter: %s", strerror(errno));
    long v = strtol(buf, NULL, 10) + 1;
    char out[32];
    snprintf(out, sizeof out, "%-15ld\n", v);
    if (pwrite(fd, out, 16, 0) != 16)
        die("pwrite counter: %s", strerror(errno));
    return v;
}

static double run_contend(dlock_lock *lock, const worker_args *a, counters *c,
                          samples *lat, double *t_target)
{
    int cfd = open(a->ctr_path, O_RDWR);
    if (cfd < 0)
        die("open %s: %s", a->ctr_path, strerror(errno));
    double stop_at = a->start + a->max_time_s;

    while (wall_now_s() < stop_at) {
        int64_t t0 = mono_now_ns();
        int rc;
        for (;;) {
            rc = dlock_lock_acquire(lock, CONTEND_WAIT_MS);
            if (rc == DLOCK_OK)
                break;
            if (rc == DLOCK_ETIMEDOUT) {
                c->giveups++;
            } else {
                c->errors++;
                report(c, "acquire", rc, lock);
                /* The library's rule for what a retry may mend: a node
                 * that is down or busy may come back; a refusal, bad
                 * credentials or a wrong type will not. */
                if (!dlock_error_is_transient(rc))
                    break;
                sleep_ns(1000000); /* do not spin on a failing node */
            }
            if (wall_now_s() >= stop_at)
                break;
        }
        if (rc != DLOCK_OK)
            break;
        int64_t dt = mono_now_ns() - t0;

        /* Critical section: exclusive holder file + counter RMW. */
        int own = 1;
        int hfd = open(a->holder_path, O_CREAT | O_EXCL | O_WRONLY, 0644);
        if (hfd >= 0) {
            close(hfd);
        } else if (errno == EEXIST) {
            c->viol++;
            own = 0;
        } else {
            die("create %s: %s", a->holder_path, strerror(errno));
        }
        long v = counter_bump(cfd);
        if (v == a->target)
            *t_target = wall_now_s();
        if (own)
            unlink(a->holder_path);

        release_counted(lock, c);
        record(lat, dt);
        c->n++;
        if (v >= a->target)
            break;
    }
    close(cfd);
    return wall_now_s() - a->start;
}

/* ---- output --------------------------------------------------------------- */

static void write_lat(const char *path, const samples *lat)
{
    FILE *f = fopen(path, "w");
    if (!f)
        die("open %s: %s", path, strerror(errno));
    for (size_t i = 0; i < lat->len; i++)
        fprintf(f, "%" PRId64 "\n", lat->ns[i]);
    if (ferror(f) | fclose(f))
        die("write %s failed", path);
}

static void write_out(const char *path, const counters *c, double elapsed_s,
                      double t_target, double t_end, int late)
{
    FILE *f = fopen(path, "w");
    if (!f)
        die("open %s: %s", path, strerror(errno));
    char tt[32] = "null";
    if (t_target >= 0)
        snprintf(tt, sizeof tt, "%.6f", t_target);
    fprintf(f,
            "{\"n\": %ld, \"elapsed_s\": %.6f, \"acq_fail\": %ld, \"giveups\": %ld, "
            "\"rel_fail\": %ld, \"errors\": %ld, \"viol\": %ld, \"t_target\": %s, "
            "\"t_end\": %.6f, \"late\": %s}\n",
            c->n, elapsed_s, c->acq_fail, c->giveups, c->rel_fail, c->errors, c->viol, tt,
            t_end, late ? "true" : "false");
    if (ferror(f) | fclose(f))
        die("write %s failed", path);
}

int main(int argc, char **argv)
{
    worker_args a;
    parse_args(&a, argc, argv);

    dlock_lock_options opts = DLOCK_LOCK_OPTIONS_INIT;
    opts.ttl_ms = a.ttl_ms;
    if (!strcmp(a.retry, "tuned")) {
        opts.retry_min_ms = 1;
        opts.retry_max_ms = 1;
    }
    if (a.fair)
        opts.flags |= DLOCK_FAIR;
    if (a.nofence)
        opts.flags |= DLOCK_NO_FENCE;
    if (a.renew)
        opts.flags |= DLOCK_AUTO_RENEW;

    dlock_client *client = open_client(a.ports, a.url, a.wakeups);
    prime(client, &opts, &a);
    dlock_lock *lock = open_lock(client, a.key, &opts, &a);

    counters c;
    samples lat;
    memset(&c, 0, sizeof c);
    memset(&lat, 0, sizeof lat);
    double t_target = -1, elapsed_s;

    int late = wall_now_s() > a.start;
    sleep_until_wall(a.start);
    if (!strcmp(a.mode, "cycle"))
        elapsed_s = run_cycle(lock, &a, &c, &lat);
    else
        elapsed_s = run_contend(lock, &a, &c, &lat, &t_target);
    double t_end = wall_now_s();

    dlock_lock_free(lock);
    dlock_client_free(client);
    write_lat(a.lat_path, &lat);
    write_out(a.out_path, &c, elapsed_s, t_target, t_end, late);
    free(lat.ns);
    return 0;
}
