/* SPDX-License-Identifier: BSD-3-Clause */
/* Runs and turns of a contended plain lock (issue 20; src/redis/scripts/lib/
 * waitq.lua, docs/waiting.md "Runs and turns"), step by step through the
 * embedded acquire.lua and release.lua against a real redis-server:
 *   - a holder that releases within its run wakes nobody (no PUBLISH), and
 *     the first release after the run hands the lock to the head of the
 *     line as "turn:ID", which every other acquire, and another library's
 *     SET NX, finds held, and which the head alone takes;
 *   - the head of the line is told when the run ends, nobody else is, and
 *     a turn's grant wakes the new head to be told;
 *   - a head woken by a run's first release keeps its place if it finds the
 *     lock taken back, and leaves the line if it never comes back;
 *   - a turn nobody takes lapses within its few ms.
 * Each test fails on the previous main, where every release woke a waiter
 * and no turn existed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redis_server.h"
#include "scripts.h"
#include "test_util.h"

#define KEY "runs:k"
#define WQ KEY "\0wq"
#define WR KEY "\0wr"
#define CH "dlock:wake:" KEY
#define RUN_US "500000" /* 0.5 s: no step of a test outlasts it, even under a sanitizer */
#define TURN_MS "50"

/* One call of an embedded script with its keys (binary: the helper keys
 * hold a NUL) and arguments. */
static redisReply *call(dlock__script_id id, int nkeys, const char *const *keys,
                        const size_t *key_lens, int nargs, const char *const *args)
{
    const dlock__script *s = dlock__script_get(id);
    const char *argv[20];
    size_t lens[20];
    char nk[8];
    int n = 0;
    argv[n] = "EVAL", lens[n++] = 4;
    argv[n] = s->body, lens[n++] = s->len;
    snprintf(nk, sizeof nk, "%d", nkeys);
    argv[n] = nk, lens[n++] = strlen(nk);
    for (int i = 0; i < nkeys; i++)
        argv[n] = keys[i], lens[n++] = key_lens[i];
    for (int i = 0; i < nargs; i++)
        argv[n] = args[i], lens[n++] = strlen(args[i]);
    redisContext *c = test_redis_admin(&test_srv);
    assert_non_null(c);
    redisReply *r = redisCommandArgv(c, n, argv, lens);
    redisFree(c);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("%s.lua: %s", s->name, r->str);
    return r;
}

static const char *const keys3[] = {KEY, WQ, WR};
static const size_t lens3[] = {sizeof KEY - 1, sizeof WQ - 1, sizeof WR - 1};

/* acquire.lua as a first attempt (id NULL: not listed) or as the listed
 * waiter id of handle run. Returns -1 when granted, else the look hint;
 * *holder gets the holder it named (or ""). */
static long long acquire(const char *token, const char *id, const char *run, char *holder,
                         size_t cap)
{
    const char *args[] = {token, "10000", id, "400", run, RUN_US, CH};
    redisReply *r = call(DLOCK__S_ACQUIRE, id ? 3 : 1, keys3, lens3, id ? 7 : 2, args);
    long long look = -1;
    if (holder)
        holder[0] = '\0';
    if (r->type == REDIS_REPLY_INTEGER) {
        freeReplyObject(r);
        return -2;
    }
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_true(r->elements >= 3);
    assert_int_equal(r->element[0]->integer, 0);
    if (holder)
        snprintf(holder, cap, "%s", r->element[2]->str);
    if (r->elements > 3)
        look = r->element[3]->integer;
    freeReplyObject(r);
    return look;
}

#define GRANTED (-2)

static void release(const char *token, const char *run)
{
    const char *args[] = {token, CH, run, RUN_US, TURN_MS};
    redisReply *r = call(DLOCK__S_RELEASE, 3, keys3, lens3, 5, args);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
}

/* PUBLISH calls so far, scripts' included (INFO commandstats). */
static long long publishes(void)
{
    char *info = test_cmd_str(&test_srv, "INFO commandstats");
    const char *p = strstr(info, "cmdstat_publish:calls=");
    long long n = p ? atoll(p + strlen("cmdstat_publish:calls=")) : 0;
    free(info);
    return n;
}

static redisReply *helper(const char *fmt, const char *key, size_t len)
{
    redisReply *r = test_cmd_bin(&test_srv, fmt, key, len);
    assert_non_null(r);
    return r;
}

static int listed(const char *id, double *score)
{
    char fmt[64];
    snprintf(fmt, sizeof fmt, "ZSCORE %%b %s", id);
    redisReply *r = helper(fmt, WQ, sizeof WQ - 1);
    int yes = r->type == REDIS_REPLY_STRING;
    if (yes && score)
        *score = atof(r->str);
    freeReplyObject(r);
    return yes;
}

/* A run of handle run ending ms from now (server time). */
static void set_run_for(const char *run, long long ms)
{
    redisReply *t = test_cmd(&test_srv, "TIME");
    assert_int_equal(t->type, REDIS_REPLY_ARRAY);
    long long now = atoll(t->element[0]->str) * 1000000 + atoll(t->element[1]->str);
    freeReplyObject(t);
    char v[96];
    snprintf(v, sizeof v, "%s %lld - -", run, now + ms * 1000);
    redisReply *r = test_cmd_bin(&test_srv, "SET %b %s PX 2000", WR, sizeof WR - 1, v);
    assert_non_null(r);
    freeReplyObject(r);
}

static void set_run(const char *value)
{
    redisReply *r = test_cmd_bin(&test_srv, "SET %b %s PX 2000", WR, sizeof WR - 1, value);
    assert_non_null(r);
    freeReplyObject(r);
}

static void a_release_within_the_run_wakes_nobody_and_its_end_hands_over(void **state)
{
    (void)state;
    char holder[96];
    assert_int_equal(acquire("A1", NULL, NULL, NULL, 0), GRANTED);
    /* B waits: listed, head of the line, no run yet. */
    assert_int_equal(acquire("B1", "wb", "runB", holder, sizeof holder), -1);
    assert_string_equal(holder, "A1");
    double place = 0, again = 0;
    assert_true(listed("wb", &place));

    /* A's first release starts A's run and wakes the head (no turn). */
    long long p0 = publishes();
    release("A1", "runA");
    assert_int_equal(publishes() - p0, 1);
    assert_false(listed("wb", NULL));
    /* A takes it back; B, woken, finds it held: back in its old place, and
     * told when A's run ends. */
    assert_int_equal(acquire("A2", NULL, NULL, NULL, 0), GRANTED);
    long long look = acquire("B2", "wb", "runB", holder, sizeof holder);
    assert_string_equal(holder, "A2");
    assert_true(look >= 1 && look <= 501);
    assert_true(listed("wb", &again));
    assert_true(again == place);

    /* Within A's run: a release publishes nothing, B stays listed. Made
     * long, so a slow machine cannot end it between the calls. */
    set_run_for("runA", 500);
    p0 = publishes();
    release("A2", "runA");
    assert_int_equal(publishes() - p0, 0);
    assert_true(listed("wb", NULL));
    assert_int_equal(acquire("A3", NULL, NULL, NULL, 0), GRANTED);

    /* The run is over: the next release hands the lock to B. */
    set_run("runA 1 - -");
    p0 = publishes();
    release("A3", "runA");
    assert_int_equal(publishes() - p0, 1);
    char *v = test_cmd_str(&test_srv, "GET " KEY);
    assert_string_equal(v, "turn:wb");
    free(v);
    long long pttl = test_cmd_int(&test_srv, "PTTL " KEY);
    assert_true(pttl > 0 && pttl <= 50);
    assert_false(listed("wb", NULL));

    /* The turn is B's: A, and another library's SET NX, find it held. */
    assert_int_equal(acquire("A4", NULL, NULL, holder, sizeof holder), -1);
    assert_string_equal(holder, "turn:wb");
    redisReply *r = test_cmd(&test_srv, "SET " KEY " foreign NX PX 10000");
    assert_int_equal(r->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    /* C waits behind; B's grant wakes C, the new head, to learn when B's
     * run ends (should B leave within it, C looks then). */
    assert_int_equal(acquire("C1", "wc", "runC", NULL, 0), -1);
    p0 = publishes();
    assert_int_equal(acquire("B3", "wb", "runB", NULL, 0), GRANTED);
    assert_int_equal(publishes() - p0, 1);
    assert_true(acquire("C2", "wc", "runC", NULL, 0) > 0);
    v = test_cmd_str(&test_srv, "GET " KEY);
    assert_string_equal(v, "B3");
    free(v);
    /* B's run starts with the grant. */
    r = helper("GET %b", WR, sizeof WR - 1);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_memory_equal(r->str, "runB ", 5);
    freeReplyObject(r);
}

static void only_the_head_is_told_when_the_run_ends(void **state)
{
    (void)state;
    assert_int_equal(acquire("A1", NULL, NULL, NULL, 0), GRANTED);
    assert_int_equal(acquire("B1", "wb", "runB", NULL, 0), -1);
    assert_int_equal(acquire("C1", "wc", "runC", NULL, 0), -1);
    /* No run on: nobody is told (the holder's release wakes the head). */
    assert_int_equal(acquire("B2", "wb", "runB", NULL, 0), -1);
    set_run_for("runA", 500);
    assert_int_equal(acquire("C2", "wc", "runC", NULL, 0), -1);
    assert_true(acquire("B3", "wb", "runB", NULL, 0) > 0);
    /* A run that has ended: nobody is told (its next release hands over). */
    set_run("runA 1 - -");
    assert_int_equal(acquire("B4", "wb", "runB", NULL, 0), -1);
}

static void a_dead_head_woken_by_the_first_release_leaves_the_line(void **state)
{
    (void)state;
    assert_int_equal(acquire("A1", NULL, NULL, NULL, 0), GRANTED);
    assert_int_equal(acquire("B1", "wb", "runB", NULL, 0), -1);
    assert_int_equal(acquire("C1", "wc", "runC", NULL, 0), -1);
    release("A1", "runA"); /* wakes wb, which never comes back */
    assert_false(listed("wb", NULL));
    assert_int_equal(acquire("A2", NULL, NULL, NULL, 0), GRANTED);
    /* The run ends (the woken head's place is still in it): the turn goes
     * to C, the line's head now. */
    redisReply *r = helper("GET %b", WR, sizeof WR - 1);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    char run[128];
    snprintf(run, sizeof run, "%s", r->str);
    freeReplyObject(r);
    char *sp = strchr(run, ' ');
    assert_non_null(sp);
    char *rest = strchr(sp + 1, ' ');
    assert_non_null(rest);
    char ended[160];
    snprintf(ended, sizeof ended, "runA 1%s", rest);
    set_run(ended);
    release("A2", "runA");
    char *v = test_cmd_str(&test_srv, "GET " KEY);
    assert_string_equal(v, "turn:wc");
    free(v);
}

static void a_turn_nobody_takes_lapses(void **state)
{
    (void)state;
    assert_int_equal(acquire("A1", NULL, NULL, NULL, 0), GRANTED);
    assert_int_equal(acquire("B1", "wb", "runB", NULL, 0), -1);
    set_run("runA 1 - -");
    release("A1", "runA");
    assert_int_equal(acquire("A2", NULL, NULL, NULL, 0), -1);
    /* B is dead: the turn lapses (50 ms), and the lock is anyone's. */
    usleep(120 * 1000);
    assert_int_equal(acquire("A3", NULL, NULL, NULL, 0), GRANTED);
}

static long long leave(const char *id)
{
    const char *args[] = {id, CH};
    redisReply *r = call(DLOCK__S_WQ_LEAVE, 3, keys3, lens3, 2, args);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static void the_run_s_end_also_wakes_the_next_in_line(void **state)
{
    (void)state;
    char holder[96];
    assert_int_equal(acquire("A1", NULL, NULL, NULL, 0), GRANTED);
    assert_int_equal(acquire("B1", "wb", "runB", NULL, 0), -1);
    assert_int_equal(acquire("C1", "wc", "runC", NULL, 0), -1);
    set_run("runA 1 - -");
    long long p0 = publishes();
    release("A1", "runA");
    /* "w wb" (the turn) and "w wc": should B never come, C looks when the
     * turn lapses instead of at its 200 ms look. */
    assert_int_equal(publishes() - p0, 2);
    long long look = acquire("C2", "wc", "runC", holder, sizeof holder);
    assert_int_equal(look, -1);
    assert_string_equal(holder, "turn:wb");
    long long pttl = test_cmd_int(&test_srv, "PTTL " KEY);
    assert_true(pttl > 0 && pttl <= 50);
}

static void a_waiter_that_gives_up_passes_its_turn_on(void **state)
{
    (void)state;
    assert_int_equal(acquire("A1", NULL, NULL, NULL, 0), GRANTED);
    assert_int_equal(acquire("B1", "wb", "runB", NULL, 0), -1);
    assert_int_equal(acquire("C1", "wc", "runC", NULL, 0), -1);
    set_run("runA 1 - -");
    release("A1", "runA"); /* turn:wb */
    long long p0 = publishes();
    assert_int_equal(leave("wb"), 1);
    assert_int_equal(publishes() - p0, 1); /* "w wc" */
    assert_int_equal(test_cmd_int(&test_srv, "EXISTS " KEY), 0);
    assert_false(listed("wb", NULL));
    assert_int_equal(acquire("C2", "wc", "runC", NULL, 0), GRANTED);
}

static void a_head_that_gives_up_within_a_run_wakes_the_next(void **state)
{
    (void)state;
    assert_int_equal(acquire("A1", NULL, NULL, NULL, 0), GRANTED);
    assert_int_equal(acquire("B1", "wb", "runB", NULL, 0), -1);
    assert_int_equal(acquire("C1", "wc", "runC", NULL, 0), -1);
    set_run_for("runA", 500);
    long long p0 = publishes();
    assert_int_equal(leave("wb"), 0);
    /* C, the new head, is woken to learn when A's run ends. */
    assert_int_equal(publishes() - p0, 1);
    assert_true(acquire("C2", "wc", "runC", NULL, 0) > 0);
    /* A waiter behind the head leaves quietly. */
    assert_int_equal(acquire("D1", "wd", "runD", NULL, 0), -1);
    p0 = publishes();
    assert_int_equal(leave("wd"), 0);
    assert_int_equal(publishes() - p0, 0);
}

static void an_older_dlock_s_waiter_is_woken_without_a_turn(void **state)
{
    (void)state;
    assert_int_equal(acquire("A1", NULL, NULL, NULL, 0), GRANTED);
    /* dlock 33c7d88 scored its entries by lapse time in ms: they sort
     * first, and its acquire.lua knows no turn. */
    redisReply *r = test_cmd_bin(&test_srv, "ZADD %b 1700000000000 old1", WQ, sizeof WQ - 1);
    freeReplyObject(r);
    set_run("runA 1 - -");
    release("A1", "runA");
    assert_int_equal(test_cmd_int(&test_srv, "EXISTS " KEY), 0);
    assert_false(listed("old1", NULL));
}

static void a_waiting_writer_takes_its_turn(void **state)
{
    (void)state;
    /* A writer (DLOCK_EXCLUSIVE, what `dlock run` takes) waits on a name a
     * plain holder runs: listed in the same line, it may be handed a turn. */
    test_cmd_status(&test_srv, "SET " KEY " turn:wx PX 50");
    static const char *const xkeys[] = {KEY, KEY "\0ww", WQ};
    static const size_t xlens[] = {sizeof KEY - 1, sizeof KEY "\0ww" - 1, sizeof WQ - 1};
    const char *args[] = {"X1", "10000", "2000", "wx", "400"};
    redisReply *r = call(DLOCK__S_X_ACQUIRE, 3, xkeys, xlens, 5, args);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->element[0]->integer, 1);
    freeReplyObject(r);
    char *v = test_cmd_str(&test_srv, "GET " KEY);
    assert_string_equal(v, "X1");
    free(v);
    /* Another writer's wait id does not. */
    test_cmd_status(&test_srv, "SET " KEY " turn:wx PX 50");
    const char *other[] = {"Y1", "10000", "2000", "wy", "400"};
    r = call(DLOCK__S_X_ACQUIRE, 3, xkeys, xlens, 5, other);
    assert_int_equal(r->element[0]->integer, 0);
    freeReplyObject(r);
}

/* Who is not a listed waiter (a first try, a try-once) and a release with
 * nobody listed take the scripts' short paths (issue 20): they never touch
 * the waiter list or the run, a release wakes everyone once (or nobody
 * without a channel), and a foreign token is left alone. */
static void first_tries_and_releases_with_nobody_listed_touch_no_list(void **state)
{
    (void)state;
    char holder[64];
    assert_int_equal(acquire("A1", NULL, NULL, NULL, 0), GRANTED);
    assert_int_equal(acquire("B1", NULL, NULL, holder, sizeof holder), -1);
    assert_string_equal(holder, "A1");
    long long p0 = publishes();
    const char *other[] = {"B1", CH, "rb", RUN_US, TURN_MS};
    redisReply *r = call(DLOCK__S_RELEASE, 3, keys3, lens3, 5, other);
    assert_int_equal(r->integer, -1);
    freeReplyObject(r);
    assert_int_equal(publishes() - p0, 0);
    release("A1", "ra");
    assert_int_equal(publishes() - p0, 1);
    assert_int_equal(acquire("A2", NULL, NULL, NULL, 0), GRANTED);
    const char *quiet[] = {"A2", "", "ra", RUN_US, TURN_MS};
    r = call(DLOCK__S_RELEASE, 3, keys3, lens3, 5, quiet);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    assert_int_equal(publishes() - p0, 1);
    r = test_cmd_bin(&test_srv, "EXISTS %b", KEY, sizeof KEY - 1);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    r = helper("EXISTS %b", WQ, sizeof WQ - 1);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    r = helper("EXISTS %b", WR, sizeof WR - 1);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(a_release_within_the_run_wakes_nobody_and_its_end_hands_over,
                                  test_srv_flush),
        cmocka_unit_test_teardown(only_the_head_is_told_when_the_run_ends, test_srv_flush),
        cmocka_unit_test_teardown(a_dead_head_woken_by_the_first_release_leaves_the_line,
                                  test_srv_flush),
        cmocka_unit_test_teardown(a_turn_nobody_takes_lapses, test_srv_flush),
        cmocka_unit_test_teardown(the_run_s_end_also_wakes_the_next_in_line, test_srv_flush),
        cmocka_unit_test_teardown(a_waiter_that_gives_up_passes_its_turn_on, test_srv_flush),
        cmocka_unit_test_teardown(a_head_that_gives_up_within_a_run_wakes_the_next,
                                  test_srv_flush),
        cmocka_unit_test_teardown(an_older_dlock_s_waiter_is_woken_without_a_turn,
                                  test_srv_flush),
        cmocka_unit_test_teardown(a_waiting_writer_takes_its_turn, test_srv_flush),
        cmocka_unit_test_teardown(first_tries_and_releases_with_nobody_listed_touch_no_list,
                                  test_srv_flush),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
