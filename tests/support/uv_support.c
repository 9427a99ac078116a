/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>

#include "dlock/libuv.h"
#include "uv_support.h"

static uv_loop_t own_loop;
static uv_loop_t *cur = &own_loop;
/* Bounds a turn's wait; initialised on the loop it is first used on. */
static uv_timer_t bound;
static uv_loop_t *bound_loop;

static int uv_open(void)
{
    cur = &own_loop;
    return uv_loop_init(cur) == 0 ? 0 : -1;
}

static dlock_loop uv_hooks(void)
{
    return dlock_libuv_loop(cur);
}

static void bound_cb(uv_timer_t *t)
{
    (void)t;
}

static void uv_turn(int max_ms)
{
    if (bound_loop != cur) {
        uv_timer_init(cur, &bound);
        bound_loop = cur;
    }
    uv_timer_start(&bound, bound_cb, (uint64_t)max_ms, 0);
    uv_run(cur, UV_RUN_ONCE);
    uv_timer_stop(&bound);
}

static int uv_idle(void)
{
    return !uv_loop_alive(cur);
}

static void bound_closed(uv_handle_t *h)
{
    (void)h;
}

static int uv_close_loop(void)
{
    if (bound_loop == cur) {
        uv_close((uv_handle_t *)&bound, bound_closed);
        uv_run(cur, UV_RUN_NOWAIT);
        bound_loop = NULL;
    }
    return uv_loop_close(cur) == 0 ? 0 : -1;
}

const test_loop_driver test_uv_driver = {
    .name = "uv",
    .open = uv_open,
    .hooks = uv_hooks,
    .turn = uv_turn,
    .idle = uv_idle,
    .close = uv_close_loop,
};

int test_uv_client(dlock_client **out, uv_loop_t *loop, const char *url, int timeout_ms)
{
    cur = loop;
    return test_loop_client(&test_uv_driver, out, url, timeout_ms);
}

int test_uv_open(uv_loop_t *loop, dlock_client **out, const char *url, int timeout_ms)
{
    if (uv_loop_init(loop) != 0)
        return -1;
    return test_uv_client(out, loop, url, timeout_ms);
}

int test_uv_close(uv_loop_t *loop, dlock_client **cl, int max_ms)
{
    cur = loop;
    return test_loop_close(&test_uv_driver, cl, max_ms);
}

int test_uv_wait(uv_loop_t *loop, test_loop_result *r, int max_ms)
{
    cur = loop;
    return test_loop_wait(&test_uv_driver, r, max_ms);
}

void test_uv_turn(uv_loop_t *loop, int ms)
{
    cur = loop;
    test_loop_turn(&test_uv_driver, ms);
}

int test_uv_drain(uv_loop_t *loop, int max_ms)
{
    cur = loop;
    return test_loop_drain(&test_uv_driver, max_ms);
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

static void ticked(uv_timer_t *t)
{
    test_uv_ticker *k = (test_uv_ticker *)t;
    int64_t now = test_loop_now_ms();
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
    uv_close((uv_handle_t *)&k->t, bound_closed);
}

dlock_lock *test_uv_lock(dlock_client *c, const char *name, int64_t ttl_ms, unsigned flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = flags;
    dlock_lock *l = NULL;
    return dlock_lock_new(&l, c, name, &o) == DLOCK_OK ? l : NULL;
}
