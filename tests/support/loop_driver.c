/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <time.h>

#include "loop_driver.h"

void test_loop_done(dlock_lock *lock, int rc, void *arg)
{
    test_loop_result *r = arg;
    r->calls++;
    r->rc = rc;
    r->lock = lock;
}

int test_loop_client_n(const test_loop_driver *d, dlock_client **out, const char *const *urls,
                       size_t n, int timeout_ms)
{
    dlock_loop hooks = d->hooks();
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.io_timeout_ms = timeout_ms;
    o.connect_timeout_ms = timeout_ms;
    o.loop = &hooks;
    char err[256] = "";
    int rc = dlock_client_new(out, urls, n, &o, err, sizeof err);
    if (rc != DLOCK_OK)
        fprintf(stderr, "test_loop_client (%s): %s\n", d->name, err);
    return rc == DLOCK_OK ? 0 : -1;
}

int test_loop_client(const test_loop_driver *d, dlock_client **out, const char *url,
                     int timeout_ms)
{
    return test_loop_client_n(d, out, &url, 1, timeout_ms);
}

int test_loop_open_n(const test_loop_driver *d, dlock_client **out, const char *const *urls,
                     size_t n, int timeout_ms)
{
    if (d->open() != 0)
        return -1;
    return test_loop_client_n(d, out, urls, n, timeout_ms);
}

int test_loop_open(const test_loop_driver *d, dlock_client **out, const char *url,
                   int timeout_ms)
{
    return test_loop_open_n(d, out, &url, 1, timeout_ms);
}

int test_loop_close(const test_loop_driver *d, dlock_client **cl, int max_ms)
{
    dlock_client_free(*cl);
    *cl = NULL;
    if (test_loop_drain(d, max_ms) != 0)
        return -1;
    return d->close();
}

int64_t test_loop_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int test_loop_wait(const test_loop_driver *d, test_loop_result *r, int max_ms)
{
    int64_t end = test_loop_now_ms() + max_ms;
    int64_t now;
    while (r->calls == 0 && (now = test_loop_now_ms()) < end)
        d->turn((int)(end - now));
    return r->calls ? r->rc : -999;
}

void test_loop_turn(const test_loop_driver *d, int ms)
{
    int64_t end = test_loop_now_ms() + ms;
    int64_t now;
    while ((now = test_loop_now_ms()) < end)
        d->turn((int)(end - now));
}

int test_loop_drain(const test_loop_driver *d, int max_ms)
{
    int64_t end = test_loop_now_ms() + max_ms;
    int64_t now;
    while (!d->idle()) {
        if ((now = test_loop_now_ms()) >= end)
            return -1;
        d->turn((int)(end - now));
    }
    return 0;
}

int test_loop_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}
