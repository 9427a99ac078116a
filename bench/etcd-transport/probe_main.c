/* SPDX-License-Identifier: BSD-3-Clause */
/* etcd-transport-probe: S1 of the peers contract (../shared/peers/
 * SCENARIOS.md, "Worker contract", mode=cycle only) with Go's Mutex cycle
 * (probe.h) over gRPC or the JSON gateway, so bench/etcd-vs-redis.py can
 * run it beside Go's worker and dlock's:
 *
 *   etcd-transport-probe transport=grpc|http mode=cycle url=etcd://H:P
 *       key=K start=EPOCH ttl_ms=10000 [warmup=0.5 duration=5] lat=F out=F
 *
 * It is a measurement, not a lock: one process, one name, no contention;
 * a cycle that does not find itself the owner counts as an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

void probe_prefix_end(const char *p, char *out, size_t size)
{
    snprintf(out, size, "%s", p);
    size_t n = strlen(out);
    if (n)
        out[n - 1]++;
}

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
    size_t n = strlen(name);
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=')
            return argv[i] + n + 1;
    return def;
}

static void sleep_until(double t)
{
    double d = t - wall();
    if (d > 0) {
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

int main(int argc, char **argv)
{
    const char *tr = arg(argc, argv, "transport", "grpc"), *url = arg(argc, argv, "url", "");
    const char *mode = arg(argc, argv, "mode", "cycle"), *name = arg(argc, argv, "key", "probe");
    const probe_ops *ops = strcmp(tr, "http") == 0 ? &probe_http_ops : &probe_grpc_ops;
    if (strcmp(mode, "cycle") != 0 || strncmp(url, "etcd://", 7) != 0 || strchr(url, ',')) {
        fprintf(stderr, "etcd-transport-probe: mode=cycle and url=etcd://host:port only\n");
        return 2;
    }
    double start = atof(arg(argc, argv, "start", "0"));
    double warmup = atof(arg(argc, argv, "warmup", "0.5"));
    double duration = atof(arg(argc, argv, "duration", "5"));
    int64_t ttl_s = (atoll(arg(argc, argv, "ttl_ms", "10000")) + 999) / 1000;
    probe_transport *t = ops->open(url + 7);
    int64_t lease = t ? ops->grant(t, ttl_s) : 0;
    if (!lease) {
        fprintf(stderr, "etcd-transport-probe: %s: no lease from %s\n", ops->name, url);
        return 2;
    }
    /* Go's layout: NAME/ then the session's lease in hex */
    char pfx[200], key[240];
    snprintf(pfx, sizeof pfx, "%s/", name);
    snprintf(key, sizeof key, "%s%llx", pfx, (unsigned long long)lease);
    int late = wall() > start;
    sleep_until(start);
    while (wall() < start + warmup)
        if (ops->lock(t, pfx, key, lease) == 1)
            (void)ops->unlock(t, key);
    size_t n = 0, cap = 1 << 16;
    long long *lat = malloc(cap * sizeof *lat);
    int errors = 0, rel_fail = 0;
    double t0 = mono(), now = t0;
    while (lat && (now = mono()) < t0 + duration) {
        int ours = ops->lock(t, pfx, key, lease);
        double got = mono();
        if (ours != 1) {
            errors++;
            continue;
        }
        rel_fail += ops->unlock(t, key) != 0;
        if (n == cap && !(lat = realloc(lat, (cap *= 2) * sizeof *lat)))
            break;
        lat[n++] = (long long)((got - now) * 1e9);
    }
    double elapsed = mono() - t0;
    FILE *f = fopen(arg(argc, argv, "lat", "/dev/null"), "w");
    for (size_t i = 0; f && lat && i < n; i++)
        fprintf(f, "%lld\n", lat[i]);
    if (f)
        fclose(f);
    const char *out = arg(argc, argv, "out", NULL);
    f = out ? fopen(out, "w") : stdout;
    if (f) {
        fprintf(f,
                "{\"n\": %zu, \"elapsed_s\": %.6f, \"acq_fail\": %d, \"giveups\": 0, "
                "\"rel_fail\": %d, \"errors\": %d, \"viol\": 0, \"t_target\": null, "
                "\"t_end\": %.6f, \"late\": %s}\n",
                n, elapsed, errors, rel_fail, errors, wall(), late ? "true" : "false");
        if (f != stdout)
            fclose(f);
    }
    int status = lat ? 0 : 1; /* out of memory for the latencies */
    free(lat);
    ops->close(t);
    return status;
}
