/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dlock/libuv.h"
#include "uv_support.h"

void test_uv_done(dlock_lock *lock, int rc, void *arg)
{
    test_uv_result *r = arg;
    r->calls++;
    r->rc = rc;
    r->lock = lock;
}

int test_uv_client_with(dlock_client **out, uv_loop_t *loop, const char *const *urls, size_t n,
                        dlock_client_options *o)
{
    dlock_loop hooks = dlock_libuv_loop(loop);
    o->loop = &hooks;
    char err[256] = "";
    int rc = dlock_client_new(out, urls, n, o, err, sizeof err);
    o->loop = NULL; /* hooks is gone on return (the client copied it) */
    if (rc != DLOCK_OK)
        fprintf(stderr, "test_uv_client: %s\n", err);
    return rc == DLOCK_OK ? 0 : -1;
}

int test_uv_client(dlock_client **out, uv_loop_t *loop, const char *url, int timeout_ms)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.io_timeout_ms = timeout_ms;
    o.connect_timeout_ms = timeout_ms;
    const char *urls[] = {url};
    return test_uv_client_with(out, loop, urls, 1, &o);
}

dlock_lock *test_uv_lock(dlock_client *c, const char *name, int64_t ttl_ms, unsigned flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = flags;
    dlock_lock *l = NULL;
    return dlock_lock_new(&l, c, name, &o) == DLOCK_OK ? l : NULL;
}

int64_t test_uv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A timer that stops the loop's run: the caller's deadline. */
static void stop_cb(uv_timer_t *t)
{
    uv_stop(t->loop);
}

static void closed(uv_handle_t *h)
{
    (void)h;
}

int test_uv_wait(uv_loop_t *loop, test_uv_result *r, int max_ms)
{
    int64_t end = test_uv_now_ms() + max_ms;
    while (r->calls == 0 && test_uv_now_ms() < end)
        uv_run(loop, UV_RUN_ONCE);
    return r->calls ? r->rc : -999;
}

void test_uv_turn(uv_loop_t *loop, int ms)
{
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, stop_cb, (uint64_t)ms, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, closed);
    uv_run(loop, UV_RUN_NOWAIT); /* t's close */
}

int test_uv_drain(uv_loop_t *loop, int max_ms)
{
    int64_t end = test_uv_now_ms() + max_ms;
    while (test_uv_now_ms() < end)
        if (uv_run(loop, UV_RUN_ONCE) == 0)
            return 0;
    return -1;
}

int test_uv_threads(void)
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

int test_uv_open(uv_loop_t *loop, dlock_client **out, const char *url, int timeout_ms)
{
    if (uv_loop_init(loop) != 0)
        return -1;
    return test_uv_client(out, loop, url, timeout_ms);
}

int test_uv_close(uv_loop_t *loop, dlock_client **cl, int max_ms)
{
    dlock_client_free(*cl);
    *cl = NULL;
    if (test_uv_drain(loop, max_ms) != 0)
        return -1;
    return uv_loop_close(loop) == 0 ? 0 : -1;
}

static void ticked(uv_timer_t *t)
{
    test_uv_ticker *k = (test_uv_ticker *)t;
    int64_t now = test_uv_now_ms();
    if (k->last_ms && now - k->last_ms > k->longest_gap_ms)
        k->longest_gap_ms = now - k->last_ms;
    k->last_ms = now;
}

void test_uv_ticker_start(uv_loop_t *loop, test_uv_ticker *k, uint64_t period_ms)
{
    memset(k, 0, sizeof *k);
    uv_timer_init(loop, &k->t);
    uv_timer_start(&k->t, ticked, period_ms, period_ms);
}

void test_uv_ticker_stop(test_uv_ticker *k)
{
    uv_close((uv_handle_t *)&k->t, closed);
}
