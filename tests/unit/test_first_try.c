/* SPDX-License-Identifier: BSD-3-Clause */
/* DLOCK_NO_FENCE's first try (src/redis/first_try.c): its replies, fed one by one
 * to its fan-out callback in both forms (SET ... NX GET and PTTL on Redis
 * 7; SET NX, GET and PTTL before), including what no server here sends:
 * a server that calls itself 7 and refuses NX with GET, and replies lost
 * at each step. The client is never connected; test_lock_basic runs the
 * forms against a real redis-server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <hiredis/hiredis.h>
#include <string.h>

#include "client.h"
#include "dlock.h"
#include "first_try.h"
#include "node.h"

typedef struct {
    dlock_client *c;
    dlock__errbuf err;
    dlock__tally t;
    dlock__first_try ft;
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    const char *url = "redis://127.0.0.1:1";
    if (dlock_client_new(&f.c, &url, 1, NULL, NULL, 0) != DLOCK_OK)
        return -1;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    dlock__err_free(&f->err);
    dlock_client_free(f->c);
    return 0;
}

static void begin(fixture *f, int set_get)
{
    dlock__tally_init(&f->t, f->c, &f->err);
    memset(&f->ft, 0, sizeof f->ft);
    f->ft.t = &f->t;
    f->ft.set_get = set_get;
}

/* Feed reply idx; returns the callback's "decided". */
static int feed(fixture *f, uint32_t idx, int type, const char *str, long long integer)
{
    redisReply r = {.type = type, .integer = integer};
    r.str = (char *)(str ? str : "");
    r.len = str ? strlen(str) : 0;
    return dlock__first_try_reply(&f->ft, 0, idx, 0, &r, type == REDIS_REPLY_ERROR ? r.str : "",
                                  0);
}

/* A reply that never came (err < 0: DLOCK_EUNKNOWN, sent, no answer). */
static int lose(fixture *f, uint32_t idx)
{
    return dlock__first_try_reply(&f->ft, 0, idx, DLOCK_EUNKNOWN, NULL, "timed out", 0);
}

static void set_get_grant_and_busy(void **state)
{
    fixture *f = *state;
    begin(f, 1);
    assert_true(feed(f, 0, REDIS_REPLY_NIL, NULL, 0)); /* nil: no earlier value, granted */
    assert_int_equal(f->t.yes, 1);
    assert_true(f->t.maybe_ours[0]);
    assert_false(feed(f, 1, REDIS_REPLY_INTEGER, NULL, 10000)); /* read in the grace */
    assert_int_equal(f->t.yes + f->t.no + f->t.errs, 1);

    begin(f, 1);
    assert_false(feed(f, 0, REDIS_REPLY_STRING, "holder-token", 0));
    assert_int_equal(f->t.holder[0], dlock__holder_hash("holder-token", 12));
    assert_true(feed(f, 1, REDIS_REPLY_INTEGER, NULL, 4321));
    assert_int_equal(f->t.no, 1);
    assert_int_equal(f->t.min_pttl, 4321);
    assert_false(f->t.maybe_ours[0]);
}

static void set_get_wrongtype_and_refusals(void **state)
{
    fixture *f = *state;
    begin(f, 1); /* a key of another type: SET ... GET says so itself */
    assert_true(feed(f, 0, REDIS_REPLY_ERROR, "WRONGTYPE Operation against a key", 0));
    assert_int_equal(f->t.node_err[0], DLOCK_EWRONGTYPE);
    assert_true(f->t.fatal_err);

    begin(f, 1); /* refused, no key behind it: the refusal stands */
    assert_false(feed(f, 0, REDIS_REPLY_ERROR, "OOM command not allowed", 0));
    assert_true(feed(f, 1, REDIS_REPLY_INTEGER, NULL, -2));
    assert_int_equal(f->t.errs, 1);
    assert_int_equal(f->t.node_err[0], DLOCK_EREFUSED);
    assert_false(f->t.maybe_ours[0]);

    begin(f, 1); /* refused, a key behind it: busy */
    assert_false(feed(f, 0, REDIS_REPLY_ERROR, "OOM command not allowed", 0));
    assert_true(feed(f, 1, REDIS_REPLY_INTEGER, NULL, 777));
    assert_int_equal(f->t.no, 1);
    assert_int_equal(f->t.min_pttl, 777);

    begin(f, 1); /* refused, and the PTTL lost too: the refusal stands */
    assert_false(feed(f, 0, REDIS_REPLY_ERROR, "NOPERM no permissions", 0));
    assert_true(lose(f, 1));
    assert_int_equal(f->t.node_err[0], DLOCK_EAUTH);
}

/* A server that says it is Redis 7 and refuses NX with GET: the SET did
 * not run, the try fails with a transient code, and the node gets the
 * three commands from then on. */
static void set_get_refused_by_the_server_falls_back(void **state)
{
    fixture *f = *state;
    dlock__node *n = &f->c->nodes[0];
    atomic_store(&n->set_get, 1);
    assert_true(dlock__node_set_get(n));
    begin(f, 1);
    assert_false(feed(f, 0, REDIS_REPLY_ERROR, "ERR syntax error", 0));
    assert_true(feed(f, 1, REDIS_REPLY_INTEGER, NULL, -2));
    assert_int_equal(f->t.node_err[0], DLOCK_EBUSY);
    assert_false(f->t.fatal_err); /* a waiting acquire goes on */
    assert_false(f->t.maybe_ours[0]);
    assert_false(dlock__node_set_get(n));
    assert_int_equal(atomic_load(&n->set_get), -1); /* a handshake cannot undo it */
    assert_non_null(strstr(dlock__err_str(&f->err), "SET NX GET refused"));
}

static void three_commands(void **state)
{
    fixture *f = *state;
    begin(f, 0);
    assert_true(feed(f, 0, REDIS_REPLY_STATUS, "OK", 0));
    assert_int_equal(f->t.yes, 1);

    begin(f, 0); /* nil: held; the GET names the holder, the PTTL ends it */
    assert_false(feed(f, 0, REDIS_REPLY_NIL, NULL, 0));
    assert_false(feed(f, 1, REDIS_REPLY_STRING, "other", 0));
    assert_true(feed(f, 2, REDIS_REPLY_INTEGER, NULL, 99));
    assert_int_equal(f->t.no, 1);
    assert_int_equal(f->t.holder[0], dlock__holder_hash("other", 5));
    assert_int_equal(f->t.min_pttl, 99);

    begin(f, 0); /* a key of another type: the GET says WRONGTYPE */
    assert_false(feed(f, 0, REDIS_REPLY_NIL, NULL, 0));
    assert_true(feed(f, 1, REDIS_REPLY_ERROR, "WRONGTYPE Operation against a key", 0));
    assert_int_equal(f->t.node_err[0], DLOCK_EWRONGTYPE);

    begin(f, 0); /* refused; the GET finds nobody: refused */
    assert_false(feed(f, 0, REDIS_REPLY_ERROR, "READONLY You can't write against a replica", 0));
    assert_true(feed(f, 1, REDIS_REPLY_NIL, NULL, 0));
    assert_int_equal(f->t.errs, 1);

    begin(f, 0); /* an unexpected SET reply: it may have run, undo it */
    assert_true(feed(f, 0, REDIS_REPLY_INTEGER, NULL, 1));
    assert_int_equal(f->t.node_err[0], DLOCK_EPROTO);
    assert_true(f->t.maybe_ours[0]);
}

/* A reply lost after the SET was sent: the SET may have run (undone), or,
 * once the SET said "held", still a "no". */
static void lost_replies(void **state)
{
    fixture *f = *state;
    for (int set_get = 0; set_get < 2; set_get++) {
        begin(f, set_get);
        assert_true(lose(f, 0));
        assert_true(f->t.maybe_ours[0]);
        assert_int_equal(f->t.errs, 1);

        begin(f, set_get);
        if (set_get)
            assert_false(feed(f, 0, REDIS_REPLY_STRING, "other", 0));
        else
            assert_false(feed(f, 0, REDIS_REPLY_NIL, NULL, 0));
        if (!set_get)
            assert_false(feed(f, 1, REDIS_REPLY_STRING, "other", 0));
        assert_true(lose(f, set_get ? 1 : 2));
        assert_int_equal(f->t.no, 1);
        assert_int_equal(f->t.min_pttl, -1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(set_get_grant_and_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(set_get_wrongtype_and_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(set_get_refused_by_the_server_falls_back, setup, teardown),
        cmocka_unit_test_setup_teardown(three_commands, setup, teardown),
        cmocka_unit_test_setup_teardown(lost_replies, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
