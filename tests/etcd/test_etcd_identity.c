/* SPDX-License-Identifier: BSD-3-Clause */
/* The holder identity on etcd (dlock_client_options.identity): our key's
 * value carries it (the key itself without one, as before), and
 * dlock_client_identity() reads the owner's, against a real etcd member.
 * Interop with `etcdctl lock` is test_etcd_lock's and cli_etcd's: they
 * look at create revisions only, never at values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "dlock.h"
#include "etcd_server.h"
#include "test_util.h"

static test_etcd srv;
static dlock_client *off, *with_id;

static int setup(void **state)
{
    (void)state;
    if (test_etcd_setup(&srv, 1, NULL, &off) != 0)
        return -1;
    const char *url = srv.url;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.identity = 1;
    o.identity_text = "etcd-job 7";
    return dlock_client_new(&with_id, &url, 1, &o, NULL, 0) == DLOCK_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_free(with_id);
    test_etcd_teardown(&srv, off);
    return 0;
}

static const char *seen(const char *name)
{
    static char buf[DLOCK_IDENTITY_READ_MAX + 1];
    memset(buf, 'x', sizeof buf);
    assert_int_equal(dlock_client_identity(off, name, 0, buf, sizeof buf), DLOCK_OK);
    return buf;
}

static void the_owners_key_carries_its_identity_until_release(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(with_id, "eid:a", 5000, 0, 10, 200);
    dlock_lock *w = test_lock_new(off, "eid:a", 5000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_true(strncmp(seen("eid:a"), "etcd-job 7 since=", 17) == 0);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED);
    assert_true(strncmp(seen("eid:a"), "etcd-job 7 since=", 17) == 0); /* the owner's */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_string_equal(seen("eid:a"), "");
    /* A holder without an identity: its key's value is the key, read as none. */
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    assert_string_equal(seen("eid:a"), "");
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(w);
}

/* A shared lock's holders' identities are joined with "; " (dlock.h):
 * on etcd every reader's before the oldest other key, oldest first (a
 * reader that keeps none adds nothing). */
static void the_readers_identities_are_joined(void **state)
{
    (void)state;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 5000;
    o.flags = DLOCK_SHARED;
    dlock_lock *a = test_lock_with(with_id, "eid:r", &o), *b = test_lock_with(off, "eid:r", &o);
    const char *url = srv.url;
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.identity = 1;
    co.identity_text = "reader-B";
    dlock_client *cb = NULL;
    assert_int_equal(dlock_client_new(&cb, &url, 1, &co, NULL, 0), DLOCK_OK);
    dlock_lock *c = test_lock_with(cb, "eid:r", &o);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK); /* keeps none */
    assert_int_equal(dlock_lock_acquire(c, 0), DLOCK_OK);
    const char *id = seen("eid:r");
    assert_true(strncmp(id, "etcd-job 7 since=", 17) == 0);
    const char *sep = strstr(id, "; ");
    assert_non_null(sep);
    assert_true(strncmp(sep + 2, "reader-B since=", 15) == 0);
    assert_null(strstr(sep + 2, "; "));
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_true(strncmp(seen("eid:r"), "reader-B since=", 15) == 0);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(dlock_lock_release(c), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(c);
    dlock_client_free(cb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_owners_key_carries_its_identity_until_release),
        cmocka_unit_test(the_readers_identities_are_joined),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
