/* SPDX-License-Identifier: BSD-3-Clause */
/* The holder identity under faults (dlock_client_options.identity;
 * docs/observing.md, "Who holds what"; issue 40), on a 3-node Redlock of
 * real redis-servers: with one node stopped (SIGSTOP) or killed the
 * acquire succeeds by majority; dlock_client_identity() of the bad node
 * returns its error within the I/O timeout instead of hanging, of the live
 * nodes the identity; dlock_client_list() reports the identity from a node
 * that keeps one; after the release no live node keeps the hash KEY NUL
 * "id", and what the stopped node ran once resumed goes with the lock's
 * TTL. A lock whose TTL runs out (no release) leaves no identity behind:
 * its hash has the lock's TTL on every node (a plain lock's and a shared
 * reader's).
 *
 * tests/integration/test_identity.c covers the healthy single node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

#define N 3
#define TIMEOUT_MS 300
/* "Returns instead of hanging": far above every timeout at play. */
#define HANG_MS 10000
#define TEXT "job=7 team=obsf"
#define TEXT_SINCE TEXT " since="

static test_redis nodes[N];
static dlock_client *holder; /* identity on, TEXT */
static dlock_client *reader; /* identity off: reads what the holder keeps */

static dlock_client *client(int identity)
{
    const char *urls[N];
    for (int i = 0; i < N; i++)
        urls[i] = nodes[i].url;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.connect_timeout_ms = TIMEOUT_MS;
    o.io_timeout_ms = TIMEOUT_MS;
    o.identity = identity;
    o.identity_text = identity ? TEXT : NULL;
    return test_client_new(urls, N, &o);
}

static int setup(void **state)
{
    (void)state;
    if (test_redis_start_many(nodes, N, NULL) != 0)
        return -1;
    holder = client(1);
    reader = client(0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_free(holder);
    dlock_client_free(reader);
    test_redis_stop_many(nodes, N);
    return 0;
}

/* Before and after each test: every node running (a failed test may have
 * left one stopped or killed) and empty. */
static int revive(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++) {
        test_redis_resume(&nodes[i]);
        if (nodes[i].pid <= 0 && test_redis_restart(&nodes[i]) != 0)
            return -1;
        if (test_flushall(&nodes[i]) != 0)
            return -1;
    }
    return 0;
}

/* PTTL (or EXISTS) of name's identity hash, KEY NUL "id", on node i. */
static long long id_key_cmd(int i, const char *cmd, const char *name)
{
    char key[256];
    size_t n = test_helper_key(key, sizeof key, name, "id");
    char fmt[32];
    snprintf(fmt, sizeof fmt, "%s %%b", cmd);
    redisReply *r = test_cmd_bin(&nodes[i], fmt, key, n);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* The reader's dlock_client_identity() of node i: its code; *took_ms how
 * long it took. */
static int identity_of(const char *name, size_t i, char *buf, size_t len, int64_t *took_ms)
{
    int64_t t0 = test_now_ms();
    int rc = dlock_client_identity(reader, name, i, buf, len);
    *took_ms = test_now_ms() - t0;
    return rc;
}

static int on_entry(void *arg, const dlock_list_entry *e)
{
    dlock_list_entry *out = arg;
    static char id[DLOCK_IDENTITY_READ_MAX + 1];
    *out = *e;
    assert_true(e->version >= 2);
    snprintf(id, sizeof id, "%s", e->identity ? e->identity : "(none)");
    out->identity = id;
    return 0;
}

/* What the reader's list says of name: the one entry (the test fails if
 * the list fails or finds another count). */
static dlock_list_entry listed(const char *name)
{
    dlock_list_entry e;
    memset(&e, 0, sizeof e);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_client_list(reader, name, on_entry, &e), DLOCK_OK);
    assert_true(test_now_ms() - t0 < HANG_MS);
    assert_non_null(e.name);
    return e;
}

/* Node bad is stopped or dead: the live nodes tell the identity, the bad
 * one its error in time, the list the live nodes' identity. */
static void identity_seen_around(const char *name, int bad)
{
    char buf[DLOCK_IDENTITY_READ_MAX + 1];
    int64_t took;
    for (int i = 0; i < N; i++) {
        memset(buf, 'x', sizeof buf);
        int rc = identity_of(name, (size_t)i, buf, sizeof buf, &took);
        assert_true(took < HANG_MS);
        if (i == bad) {
            assert_true(rc == DLOCK_EIO || rc == DLOCK_EUNKNOWN);
        } else {
            assert_int_equal(rc, DLOCK_OK);
            assert_true(strncmp(buf, TEXT_SINCE, strlen(TEXT_SINCE)) == 0);
        }
    }
    dlock_list_entry e = listed(name);
    assert_int_equal(e.state, DLOCK_STATUS_HELD);
    assert_int_equal(e.held_on, N - 1);
    assert_int_equal(e.nodes, N);
    assert_true(strncmp(e.identity, TEXT_SINCE, strlen(TEXT_SINCE)) == 0);
}

/* Node 0 stopped: the first node asked is the one that cannot answer, so
 * the list's identity must come from the next that keeps one. */
static void a_stopped_node_is_an_error_in_time_and_the_others_tell(void **state)
{
    (void)state;
    const char *name = "idf:stopped";
    dlock_lock *l = test_lock_new(holder, name, 3000, 0, 10, 200);
    test_redis_pause(&nodes[0]);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    identity_seen_around(name, 0);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    for (int i = 1; i < N; i++) {
        assert_int_equal(id_key_cmd(i, "EXISTS", name), 0);
        assert_int_equal(test_key_exists(&nodes[i], name), 0);
    }
    /* Resumed, node 0 runs what it was sent meanwhile, in an order of its
     * own: an identity it keeps then has the lock's TTL and goes with it. */
    test_redis_resume(&nodes[0]);
    usleep(200 * 1000); /* it has read what its sockets held */
    int64_t t0 = test_now_ms();
    while ((test_key_exists(&nodes[0], name) || id_key_cmd(0, "EXISTS", name)) &&
           test_now_ms() - t0 < 3000 + 2000) {
        long long id_ttl = id_key_cmd(0, "PTTL", name);
        assert_true(id_ttl == -2 || (id_ttl > 0 && id_ttl <= 3000));
        usleep(50 * 1000);
    }
    assert_int_equal(test_key_exists(&nodes[0], name), 0);
    assert_int_equal(id_key_cmd(0, "EXISTS", name), 0);
    dlock_lock_free(l);
}

static void a_killed_node_is_an_error_and_release_leaves_no_identity(void **state)
{
    (void)state;
    const char *name = "idf:killed";
    dlock_lock *l = test_lock_new(holder, name, 10000, 0, 10, 200);
    test_redis_kill9(&nodes[N - 1]);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    identity_seen_around(name, N - 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    for (int i = 0; i < N - 1; i++)
        assert_int_equal(id_key_cmd(i, "EXISTS", name), 0);
    char buf[DLOCK_IDENTITY_READ_MAX + 1];
    assert_int_equal(dlock_client_identity(reader, name, 0, buf, sizeof buf), DLOCK_OK);
    assert_string_equal(buf, "");
    dlock_lock_free(l);
}

static int key_gone_on_all(void *arg)
{
    for (int i = 0; i < N; i++)
        if (test_key_exists(&nodes[i], arg))
            return 0;
    return 1;
}

/* No release, no renewal: the hash was given the lock's TTL by the
 * acquire script on every node, so it expires with the lock; a shared
 * lock's too (its reader's field, the hash with the last lease). */
static void a_lock_whose_ttl_runs_out_leaves_no_identity(void **state)
{
    (void)state;
    static const char *const names[] = {"idf:expires", "idf:expires-shared"};
    static const unsigned flags[] = {0, DLOCK_SHARED};
    for (size_t k = 0; k < 2; k++) {
        const char *name = names[k];
        dlock_lock *l = test_lock_new(holder, name, 1500, flags[k], 10, 200);
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        for (int i = 0; i < N; i++) {
            long long id_ttl = id_key_cmd(i, "PTTL", name); /* read first */
            long long key_ttl = test_key_pttl(&nodes[i], name);
            assert_true(key_ttl > 0 && key_ttl <= 1500);
            assert_true(id_ttl >= key_ttl);      /* read before it, never shorter */
            assert_true(id_ttl - key_ttl < 500); /* nor longer than the lock's */
        }
        assert_true(test_wait_until(key_gone_on_all, (void *)name, 1500 + 3000, 20));
        for (int i = 0; i < N; i++)
            assert_int_equal(id_key_cmd(i, "EXISTS", name), 0);
        char buf[DLOCK_IDENTITY_READ_MAX + 1];
        for (size_t i = 0; i < N; i++) {
            assert_int_equal(dlock_client_identity(reader, name, i, buf, sizeof buf), DLOCK_OK);
            assert_string_equal(buf, "");
        }
        dlock_lock_free(l);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_stopped_node_is_an_error_in_time_and_the_others_tell,
                                        revive, revive),
        cmocka_unit_test_setup_teardown(
            a_killed_node_is_an_error_and_release_leaves_no_identity, revive, revive),
        cmocka_unit_test_setup_teardown(a_lock_whose_ttl_runs_out_leaves_no_identity, revive,
                                        revive),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
