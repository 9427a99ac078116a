/* SPDX-License-Identifier: BSD-3-Clause */
/* Faults on a timer (test_delayed.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "proc.h"
#include "test_delayed.h"
#include "test_util.h"

static void *run(void *arg)
{
    test_delayed *d = arg;
    test_sleep_ms(d->delay_ms);
    redisContext *ctx = test_redis_admin(d->srv);
    if (!ctx)
        return NULL;
    struct timeval tv = {10, 0};
    redisSetTimeout(ctx, tv);
    redisReply *r = redisCommand(ctx, d->cmd);
    d->ok = r && r->type != REDIS_REPLY_ERROR;
    if (r)
        freeReplyObject(r);
    redisFree(ctx);
    return NULL;
}

void test_delayed_start(test_delayed *d, const test_redis *srv, int delay_ms, const char *cmd)
{
    d->srv = srv;
    d->delay_ms = delay_ms;
    d->cmd = cmd;
    d->ok = 0;
    assert_int_equal(pthread_create(&d->th, NULL, run, d), 0);
}

void test_delayed_join(test_delayed *d)
{
    assert_int_equal(pthread_join(d->th, NULL), 0);
    assert_true(d->ok);
}

void test_cut_off_next_command(test_delayed *d, const test_redis *srv)
{
    test_cmd_status(srv, "CLIENT PAUSE 600 WRITE");
    test_delayed_start(d, srv, 150, "CLIENT KILL TYPE normal SKIPME yes");
}
