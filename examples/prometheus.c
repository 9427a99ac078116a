/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prometheus - a client's statistics in Prometheus's text format.
 *
 *   usage: prometheus [redis://127.0.0.1:6379]
 *
 * It takes and releases a lock a few times, tries it once while it is
 * held, then prints dlock_client_stats() as Prometheus's text exposition
 * format (version 0.0.4) on stdout. A real program calls print_metrics()
 * from whatever answers its /metrics endpoint, or writes it to a file for
 * node_exporter's textfile collector. docs/observing.md names each metric.
 *
 * Build against an installed dlock:
 *   cc prometheus.c $(pkg-config --cflags --libs dlock) -o prometheus
 */
#include <inttypes.h>
#include <stdio.h>

#include "dlock.h"

static void counter(FILE *out, const char *name, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
}

/* A dlock_histogram as a Prometheus histogram in seconds: the `le`
 * buckets are running sums of dlock's per-bucket counts. */
static void histogram(FILE *out, const char *name, const char *help, const dlock_histogram *h)
{
    static const double bounds_ms[DLOCK_STATS_BUCKETS - 1] = DLOCK_STATS_BOUNDS_MS;
    uint64_t sum = 0;
    fprintf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (int i = 0; i < DLOCK_STATS_BUCKETS - 1; i++) {
        sum += h->bucket[i];
        fprintf(out, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name, bounds_ms[i] / 1000.0, sum);
    }
    /* +Inf and _count from the buckets as well, not h->count: the
     * snapshot is not taken at one instant, so under load h->count may
     * lag the buckets, and an +Inf below the 60 s bucket is a histogram
     * Prometheus cannot read. */
    sum += h->bucket[DLOCK_STATS_BUCKETS - 1];
    fprintf(out, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, sum);
    fprintf(out, "%s_sum %.6f\n", name, (double)h->sum_us / 1e6);
    fprintf(out, "%s_count %" PRIu64 "\n", name, sum);
}

static void print_metrics(FILE *out, const dlock_stats *s)
{
    counter(out, "dlock_acquires_total", "Lock acquires ended, by result.");
    fprintf(out, "dlock_acquires_total{result=\"granted\"} %" PRIu64 "\n", s->acquires_granted);
    fprintf(out, "dlock_acquires_total{result=\"busy\"} %" PRIu64 "\n", s->acquires_busy);
    fprintf(out, "dlock_acquires_total{result=\"failed\"} %" PRIu64 "\n", s->acquires_failed);
    counter(out, "dlock_acquire_attempts_total", "Tries sent by acquires.");
    fprintf(out, "dlock_acquire_attempts_total %" PRIu64 "\n", s->acquire_attempts);
    counter(out, "dlock_holds_ended_total", "Holds ended, by how.");
    fprintf(out, "dlock_holds_ended_total{how=\"released\"} %" PRIu64 "\n", s->holds_released);
    fprintf(out, "dlock_holds_ended_total{how=\"lost\"} %" PRIu64 "\n", s->holds_lost);
    fprintf(out, "dlock_holds_ended_total{how=\"ended\"} %" PRIu64 "\n", s->holds_ended);
    fprintf(out, "dlock_holds_ended_total{how=\"forgotten\"} %" PRIu64 "\n", s->holds_forgotten);
    counter(out, "dlock_renewal_rounds_total", "Watchdog renewal rounds.");
    fprintf(out, "dlock_renewal_rounds_total %" PRIu64 "\n", s->renewal_rounds);
    counter(out, "dlock_renewals_total", "Lock renewals in rounds, by result.");
    fprintf(out, "dlock_renewals_total{result=\"ok\"} %" PRIu64 "\n", s->renewals);
    fprintf(out, "dlock_renewals_total{result=\"failed\"} %" PRIu64 "\n", s->renewal_failures);
    counter(out, "dlock_node_errors_total", "Requests a node failed.");
    fprintf(out, "dlock_node_errors_total %" PRIu64 "\n", s->node_errors);
    counter(out, "dlock_topology_changes_total", "Slot maps relearned, failovers followed.");
    fprintf(out, "dlock_topology_changes_total %" PRIu64 "\n", s->topology_changes);
    counter(out, "dlock_wakeups_total", "Waiting acquires woken, by how.");
    fprintf(out, "dlock_wakeups_total{how=\"pushed\"} %" PRIu64 "\n", s->wakeups_pushed);
    fprintf(out, "dlock_wakeups_total{how=\"looked\"} %" PRIu64 "\n", s->wakeups_looked);
    histogram(out, "dlock_acquire_duration_seconds", "Time an acquire took.",
              &s->acquire_duration);
    histogram(out, "dlock_hold_duration_seconds", "Time a lock was held.", &s->hold_duration);
    histogram(out, "dlock_renewal_duration_seconds", "Time a renewal round took.",
              &s->renewal_duration);
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    dlock_client *client = NULL;
    dlock_lock *lock = NULL, *rival = NULL;
    char err[256] = "";
    int rc = dlock_client_new(&client, &url, 1, NULL, err, sizeof err);
    if (rc == DLOCK_OK)
        rc = dlock_lock_new(&lock, client, "example:prometheus", NULL);
    if (rc == DLOCK_OK)
        rc = dlock_lock_new(&rival, client, "example:prometheus", NULL);
    for (int i = 0; i < 3 && rc == DLOCK_OK; i++) {
        rc = dlock_lock_acquire(lock, 1000);
        if (rc == DLOCK_OK && i == 2 && dlock_lock_acquire(rival, 0) != DLOCK_ENOTACQUIRED)
            rc = DLOCK_EPROTO; /* a second owner: should never happen */
        if (rc == DLOCK_OK)
            rc = dlock_lock_release(lock);
    }
    dlock_stats stats;
    if (rc == DLOCK_OK)
        rc = dlock_client_stats(client, &stats, sizeof stats);
    if (rc == DLOCK_OK)
        print_metrics(stdout, &stats);
    else
        fprintf(stderr, "prometheus: %s%s%s\n", dlock_strerror(rc), err[0] ? ": " : "", err);
    dlock_lock_free(rival);
    dlock_lock_free(lock);
    dlock_client_free(client);
    return rc == DLOCK_OK ? 0 : 1;
}
