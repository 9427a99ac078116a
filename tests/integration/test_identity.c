/* SPDX-License-Identifier: BSD-3-Clause */
/* The holder identity (dlock_client_options.identity, issue 40): kept
 * beside the lock in KEY NUL "id" by a client that has it on, seen by any
 * client's dlock_client_identity() and dlock_client_list() while the lock
 * is held, kept through extend and auto-renewal, gone with release and
 * break; never written by a client that has it off; the lock key's value
 * stays the bare token (other libraries compare it). Against a real
 * redis-server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dlock.h"
#include "redis_server.h"
#include "test_util.h"
#include "test_waiter.h"

static dlock_client *with_id;  /* identity on, host/pid/prog */
static dlock_client *with_txt; /* identity on, identity_text "job=42 team=x" */

static dlock_client *identity_client(const char *text)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.identity = 1;
    o.identity_text = text;
    return test_client_for(&test_srv, &o);
}

static int setup(void **state)
{
    if (test_srv_client_setup(state) != 0)
        return -1;
    with_id = identity_client(NULL);
    with_txt = identity_client("job=42 team=x");
    return 0;
}

static int teardown(void **state)
{
    dlock_client_free(with_id);
    dlock_client_free(with_txt);
    return test_srv_client_teardown(state);
}

/* What another client (test_cl, identity off) reads of name. */
static const char *seen(const char *name)
{
    static char buf[DLOCK_IDENTITY_READ_MAX + 1];
    memset(buf, 'x', sizeof buf);
    assert_int_equal(dlock_client_identity(test_cl, name, 0, buf, sizeof buf), DLOCK_OK);
    return buf;
}

static long long id_key_cmd(const char *cmd, const char *name)
{
    char key[256];
    size_t n = test_helper_key(key, sizeof key, name, "id");
    char fmt[32];
    snprintf(fmt, sizeof fmt, "%s %%b", cmd);
    redisReply *r = test_cmd_bin(&test_srv, fmt, key, n);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static void identity_is_seen_by_another_client_while_held_and_gone_after_release(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(with_id, "id:a", 10000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    const char *s = seen("id:a");
    char want[64];
    snprintf(want, sizeof want, " pid=%ld prog=test_identity since=", (long)getpid());
    assert_true(strncmp(s, "host=", 5) == 0);
    assert_non_null(strstr(s, want));
    /* The lock key's value is the bare token: redis-py and redsync compare it. */
    test_assert_key_value(&test_srv, "id:a", dlock_lock_token(l));
    assert_int_equal(id_key_cmd("EXISTS", "id:a"), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_string_equal(seen("id:a"), "");
    assert_int_equal(id_key_cmd("EXISTS", "id:a"), 0);
    dlock_lock_free(l);
}

/* A release with a waiter listed hands the lock on (a plain lock: a turn,
 * then the waiter's grant): the identity shown is then the new holder's,
 * for a plain lock and a writer. (Not a reentrant lock here: its owner is
 * client x thread, and the waiter's hold, taken on the waiter's thread,
 * is not this thread's to release.) */
static void a_waiter_that_takes_the_lock_over_shows_its_own(void **state)
{
    (void)state;
    static const unsigned flags[] = {0, DLOCK_EXCLUSIVE};
    for (size_t i = 0; i < 2; i++) {
        dlock_lock *a = test_lock_new(with_id, "id:h", 10000, flags[i], 10, 200);
        dlock_lock *b = test_lock_new(with_txt, "id:h", 10000, flags[i], 10, 200);
        assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
        test_waiter w;
        assert_int_equal(test_waiter_start(&w, b, 5000, TEST_WAITER_KEEP), 0);
        usleep(300 * 1000); /* listed by now */
        assert_true(strncmp(seen("id:h"), "host=", 5) == 0);
        assert_int_equal(dlock_lock_release(a), DLOCK_OK);
        assert_int_equal(test_waiter_join(&w), DLOCK_OK);
        assert_true(strncmp(seen("id:h"), "job=42 team=x since=", 20) == 0);
        assert_int_equal(dlock_lock_release(b), DLOCK_OK);
        assert_string_equal(seen("id:h"), "");
        dlock_lock_free(a);
        dlock_lock_free(b);
    }
}

static void an_exclusive_writer_keeps_the_applications_text(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(with_txt, "id:w", 10000, DLOCK_EXCLUSIVE, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    const char *s = seen("id:w");
    assert_true(strncmp(s, "job=42 team=x since=", 20) == 0);
    test_assert_key_value(&test_srv, "id:w", dlock_lock_token(l));
    /* A buffer too short for it gets a cut, terminated copy. */
    char small[8];
    assert_int_equal(dlock_client_identity(test_cl, "id:w", 0, small, sizeof small), DLOCK_OK);
    assert_string_equal(small, "job=42 ");
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_string_equal(seen("id:w"), "");
    dlock_lock_free(l);
}

/* DLOCK_NO_FENCE's first try is a bare SET NX without an identity; with
 * one, the script writes it. */
static void an_unfenced_plain_lock_keeps_it_too(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(with_txt, "id:nf", 10000, DLOCK_NO_FENCE, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_true(strncmp(seen("id:nf"), "job=42 team=x since=", 20) == 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

static void auto_renewal_keeps_the_identity_past_three_ttls(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(with_id, "id:r", 300, DLOCK_AUTO_RENEW, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    char first[DLOCK_IDENTITY_READ_MAX + 1];
    snprintf(first, sizeof first, "%s", seen("id:r"));
    assert_true(strncmp(first, "host=", 5) == 0);
    usleep(1000 * 1000);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    assert_string_equal(seen("id:r"), first); /* since is the grant's, not a renewal's */
    long long pttl = id_key_cmd("PTTL", "id:r");
    assert_true(pttl > 0 && pttl <= 300);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(id_key_cmd("EXISTS", "id:r"), 0);
    dlock_lock_free(l);
}

/* A reentrant lock (a hash of owner -> count): the identity is the first
 * hold's, kept through a re-entry by another handle of the owner, the
 * watchdog's renewal and an extend, and gone with the last hold. */
static void a_reentrant_lock_keeps_its_first_holds_identity(void **state)
{
    (void)state;
    dlock_lock *a = test_lock_new(with_txt, "id:re", 300, DLOCK_REENTRANT | DLOCK_AUTO_RENEW,
                                  10, 200);
    dlock_lock *b = test_lock_new(with_txt, "id:re", 10000, DLOCK_REENTRANT, 10, 200);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char first[DLOCK_IDENTITY_READ_MAX + 1];
    snprintf(first, sizeof first, "%s", seen("id:re"));
    assert_true(strncmp(first, "job=42 team=x since=", 20) == 0);
    usleep(1000 * 1000); /* past three TTLs: renewed by the watchdog */
    assert_int_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_string_equal(seen("id:re"), first);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK); /* a re-entry: same owner */
    assert_string_equal(seen("id:re"), first);
    assert_int_equal(dlock_lock_extend(b, 60000), DLOCK_OK);
    assert_true(id_key_cmd("PTTL", "id:re") > 30000);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK); /* b still holds it */
    assert_string_equal(seen("id:re"), first);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_string_equal(seen("id:re"), "");
    assert_int_equal(id_key_cmd("EXISTS", "id:re"), 0);
    dlock_lock_free(a);
    dlock_lock_free(b);
}

static void extend_gives_the_identity_the_new_ttl(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(with_id, "id:e", 2000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_extend(l, 60000), DLOCK_OK);
    assert_true(id_key_cmd("PTTL", "id:e") > 30000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

static void break_removes_the_identity(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(with_id, "id:b", 10000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_client_break(test_cl, "id:b", 0, NULL), DLOCK_OK);
    assert_int_equal(id_key_cmd("EXISTS", "id:b"), 0);
    assert_string_equal(seen("id:b"), "");
    dlock_lock_free(l);
}

static void a_client_with_identity_off_writes_no_identity_key(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(test_cl, "id:off", 10000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(id_key_cmd("EXISTS", "id:off"), 0);
    assert_string_equal(seen("id:off"), "");
    test_assert_key_value(&test_srv, "id:off", dlock_lock_token(l));
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    assert_string_equal(seen("id:never-held"), "");
}

static int on_entry(void *arg, const dlock_list_entry *e)
{
    char *got = arg;
    assert_true(e->version >= 2);
    if (strcmp(e->name, "id:l") == 0)
        snprintf(got, DLOCK_IDENTITY_READ_MAX + 1, "%s", e->identity ? e->identity : "(none)");
    if (strcmp(e->name, "id:l-off") == 0)
        assert_null(e->identity);
    return 0;
}

static void list_shows_the_identity(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(with_txt, "id:l", 10000, 0, 10, 200);
    dlock_lock *off = test_lock_new(test_cl, "id:l-off", 10000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(off, 0), DLOCK_OK);
    char got[DLOCK_IDENTITY_READ_MAX + 1] = "";
    assert_int_equal(dlock_client_list(test_cl, "id:*", on_entry, got), DLOCK_OK);
    assert_true(strncmp(got, "job=42 team=x since=", 20) == 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_release(off), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(off);
}

static int refused(int identity, const char *text)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.identity = identity;
    o.identity_text = text;
    const char *urls[] = {test_srv.url};
    dlock_client *c = NULL;
    char err[256] = "";
    int rc = dlock_client_new(&c, urls, 1, &o, err, sizeof err);
    dlock_client_free(c);
    return rc == DLOCK_EINVAL && strstr(err, "identity") != NULL;
}

static void bad_identity_options_are_refused(void **state)
{
    (void)state;
    char longer[DLOCK_IDENTITY_MAX + 2];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_true(refused(2, NULL));
    assert_true(refused(-1, NULL));
    assert_true(refused(0, "job=1"));  /* a text needs identity on */
    assert_true(refused(1, ""));
    assert_true(refused(1, "two\nlines"));
    assert_true(refused(1, "caf\xc3\xa9"));
    assert_true(refused(1, longer));
    longer[DLOCK_IDENTITY_MAX] = '\0'; /* exactly the longest */
    assert_false(refused(1, longer));
    char buf[4];
    assert_int_equal(dlock_client_identity(test_cl, "id:x", 0, NULL, 4), DLOCK_EINVAL);
    assert_int_equal(dlock_client_identity(test_cl, "id:x", 0, buf, 0), DLOCK_EINVAL);
    assert_int_equal(dlock_client_identity(test_cl, "id:x", 1, buf, sizeof buf), DLOCK_EINVAL);
    assert_int_equal(dlock_client_identity(test_cl, "", 0, buf, sizeof buf), DLOCK_EINVAL);
    assert_int_equal(dlock_client_identity(NULL, "id:x", 0, buf, sizeof buf), DLOCK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(identity_is_seen_by_another_client_while_held_and_gone_after_release),
        cmocka_unit_test(an_exclusive_writer_keeps_the_applications_text),
        cmocka_unit_test(a_waiter_that_takes_the_lock_over_shows_its_own),
        cmocka_unit_test(an_unfenced_plain_lock_keeps_it_too),
        cmocka_unit_test(auto_renewal_keeps_the_identity_past_three_ttls),
        cmocka_unit_test(a_reentrant_lock_keeps_its_first_holds_identity),
        cmocka_unit_test(extend_gives_the_identity_the_new_ttl),
        cmocka_unit_test(break_removes_the_identity),
        cmocka_unit_test(a_client_with_identity_off_writes_no_identity_key),
        cmocka_unit_test(list_shows_the_identity),
        cmocka_unit_test(bad_identity_options_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
