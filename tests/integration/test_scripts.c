/* SPDX-License-Identifier: BSD-3-Clause */
/* The embedded Lua scripts against a real redis-server: the SHA1 the build
 * computed for each script (cmake/embed_scripts.cmake, after joining the
 * shared preludes of src/redis/scripts/lib) is the one Redis computes for the
 * body (SCRIPT LOAD), so EVALSHA finds what dlock loaded and no call falls
 * back to EVAL for good; no body still names a prelude instead of holding
 * it; and every script id resolves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "redis_server.h"
#include "scripts.h"

static test_redis srv;

static int group_setup(void **state)
{
    (void)state;
    return test_redis_start(&srv, NULL);
}

static int group_teardown(void **state)
{
    (void)state;
    test_redis_stop(&srv);
    return 0;
}

static void sha_matches_what_redis_computes(void **state)
{
    (void)state;
    redisContext *c = test_redis_admin(&srv);
    assert_non_null(c);
    size_t n = 0;
    for (const dlock__script *s = dlock__scripts; s->name; s++, n++) {
        redisReply *r = redisCommand(c, "SCRIPT LOAD %b", s->body, s->len);
        assert_non_null(r);
        if (r->type != REDIS_REPLY_STRING)
            fail_msg("%s.lua: SCRIPT LOAD gave %s", s->name, r->type == REDIS_REPLY_ERROR ? r->str : "?");
        if (strcmp(r->str, s->sha) != 0)
            fail_msg("%s.lua: built-in SHA1 %s, Redis says %s", s->name, s->sha, r->str);
        freeReplyObject(r);
    }
    assert_true(n >= DLOCK__S_COUNT);
    redisFree(c);
}

/* A connection's first command may be SCRIPT LOAD, sent before the server
 * has said whether it wants a password: Redis 7 refuses a bulk over 16 KB
 * from a client that has not authenticated and closes the connection, so
 * a missing password would show as a reset instead of NOAUTH (it did, for
 * acquire.lua at 16421 bytes with its comments; cmake/embed_scripts.cmake
 * now leaves comment lines out). */
static void every_script_is_under_the_unauthenticated_bulk_limit(void **state)
{
    (void)state;
    for (const dlock__script *s = dlock__scripts; s->name; s++) {
        if (s->len >= 16384)
            fail_msg("%s.lua: %zu bytes as sent, over Redis' 16 KB for a client before AUTH",
                     s->name, s->len);
        if (strstr(s->body, "\n--") || strncmp(s->body, "--", 2) == 0)
            fail_msg("%s.lua: a comment line is sent", s->name);
    }
}

static void preludes_are_joined(void **state)
{
    (void)state;
    int with_prelude = 0, with_zlease = 0;
    for (const dlock__script *s = dlock__scripts; s->name; s++) {
        if (strstr(s->body, "--#include"))
            fail_msg("%s.lua still names a prelude", s->name);
        with_prelude += strstr(s->body, "local function bad_fence(k, f)") != NULL;
        with_zlease += strstr(s->body, "local function zlease_expire(key, now)") != NULL;
    }
    /* acquire, reentrant_acquire, fair_acquire, fair_release,
     * exclusive_acquire, shared_acquire (a reader's grant raises the
     * counter) */
    assert_int_equal(with_prelude, 6);
    /* shared_acquire, shared_release, shared_extend, renew_batch, and
     * exclusive_acquire (its upgrade check reads live shares) */
    assert_int_equal(with_zlease, 5);
    const char *missing = NULL;
    assert_int_equal(dlock__scripts_check(&missing), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sha_matches_what_redis_computes),
        cmocka_unit_test(every_script_is_under_the_unauthenticated_bulk_limit),
        cmocka_unit_test(preludes_are_joined),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
