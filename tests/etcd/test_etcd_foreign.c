/* SPDX-License-Identifier: BSD-3-Clause */
/* Keys that are not dlock's in an etcd lock's line, against a real etcd
 * member. The line is etcd's own lock's (concurrency.Mutex): KEY/ and the
 * locker's lease in Go's %x, so other clients write there too, and not
 * always as dlock would: a suffix that is not hex, empty, with trailing
 * junk or in upper case, and leases with the high bit set (etcd grants a
 * negative int64 ID asked for; Go's %x prints it "-5", a client printing
 * it unsigned "fffffffffffffffb"). Each such key is someone else's place
 * in line: dlock waits for it, never deletes it, never takes it as its
 * own, takes the name once it goes, and lists it as a locker's key when
 * its suffix is a lease in either form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "dlock.h"
#include "error.h"
#include "etcd_keys.h"
#include "etcd_kv.h"
#include "etcd_server.h"
#include "test_waiter.h"

static test_etcd srv;
static dlock_client *cl;
static dlock__etcd *raw;

/* The foreign lease every key here carries: negative, as etcd grants
 * when asked for that ID. */
#define FOREIGN_LEASE ((int64_t)-5)

static int setup(void **state)
{
    (void)state;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.key_prefix = "fk:";
    return test_etcd_setup_raw(&srv, &o, &cl, &raw);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_teardown_raw(&srv, cl, raw);
    return 0;
}

static void lease_grant_foreign(int64_t lease)
{
    int64_t granted = 0;
    assert_int_equal(dlock__etcd_lease_grant(raw, lease, 60, &granted,
                                             dlock__deadline_after_ms(3000), -1, NULL),
                     DLOCK_OK);
}

static void lease_revoke_foreign(int64_t lease)
{
    assert_int_equal(
        dlock__etcd_lease_revoke(raw, lease, dlock__deadline_after_ms(3000), -1, NULL, NULL),
        DLOCK_OK);
}

/* Put key with lease attached, as another locker's place in line; its
 * create revision. */
static int64_t put_key(const char *key, int64_t lease)
{
    int64_t rev = 0;
    char msg[256];
    if (test_etcd_put_key(raw, key, strlen(key), lease, &rev, msg, sizeof msg) != DLOCK_OK)
        fail_msg("create %s: %s", key, msg);
    return rev;
}

/* The create revision of key, 0 when it is gone. */
static int64_t key_rev(const char *key)
{
    dlock__etcd_kv kv;
    assert_int_equal(dlock__etcd_get(raw, key, strlen(key), &kv, dlock__deadline_after_ms(3000),
                                     -1, NULL),
                     DLOCK_OK);
    int64_t rev = kv.key ? kv.create_rev : 0;
    dlock__etcd_kv_clear(&kv);
    return rev;
}

static dlock_lock *lock_of(const char *name)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 20000;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, cl, name, &o), DLOCK_OK);
    return l;
}

/* The suffixes of other clients' keys: not dlock's form, or a lease
 * with the high bit set in Go's or in the unsigned form. `locker`: the
 * suffix is a lease, so the key alone makes its name a listed one; the
 * others are counted only in the line of a name that has a locker's key. */
static const struct {
    const char *suffix;
    int locker;
} suffixes[] = {
    {"xyz", 0}, {"", 0}, {"1f-junk", 0}, {"1F", 0}, {"ABCDEF", 0}, {"-5", 1},
    {"fffffffffffffffb", 1}, {"8000000000000000", 1}, {"-8000000000000000", 1}, {"0", 0},
    {"00000000000000001f", 0},
};
#define N_SUFFIXES (sizeof suffixes / sizeof *suffixes)

/* What dlock_client_list() says of one name. */
typedef struct listed {
    size_t n;
    uint64_t fence;
    size_t waiters;
} listed;

static int on_listed(void *arg, const dlock_list_entry *e)
{
    listed *s = arg;
    if (s->n++ == 0) {
        s->fence = e->fence;
        s->waiters = e->waiters;
    }
    return 0;
}

static listed list_of(const char *name)
{
    listed s = {0};
    assert_int_equal(dlock_client_list(cl, name, on_listed, &s), DLOCK_OK);
    return s;
}


/* The foreign key at (key, rev), still there, goes; the waiter w behind
 * it takes the name with a fence above rev. */
static void foreign_key_goes(test_waiter *w, const char *key, int64_t rev, const char *suffix)
{
    assert_int_equal(key_rev(key), rev); /* not deleted, not made again */
    assert_int_equal(dlock__etcd_delete_if_created(raw, key, strlen(key), rev,
                                                   dlock__deadline_after_ms(3000), NULL),
                     DLOCK_OK);
    int rc = test_waiter_join(w);
    if (rc != DLOCK_OK)
        fail_msg("suffix \"%s\": %s", suffix, dlock_errname(rc));
    assert_true((int64_t)dlock_lock_fence(w->lock) > rev);
    assert_int_equal(dlock_lock_release(w->lock), DLOCK_OK);
}

/* A foreign key first in line: a try is refused, a wait times out, the
 * key is left as it was, and a waiter gets the name once the key goes,
 * with a fence above the key's create revision. */
static void a_foreign_key_is_waited_for_never_deleted(void **state)
{
    (void)state;
    lease_grant_foreign(FOREIGN_LEASE);
    for (size_t i = 0; i < N_SUFFIXES; i++) {
        char name[32], key[96];
        snprintf(name, sizeof name, "w%zu", i);
        snprintf(key, sizeof key, "fk:%s/%s", name, suffixes[i].suffix);
        int64_t rev = put_key(key, FOREIGN_LEASE);
        /* Alone in line: its name is listed only if the key is a locker's. */
        listed alone = list_of(name);
        assert_int_equal(alone.n, (size_t)suffixes[i].locker);
        if (alone.n)
            assert_int_equal((int64_t)alone.fence, rev);
        dlock_lock *l = lock_of(name);
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_ENOTACQUIRED);
        assert_int_equal(dlock_lock_acquire(l, 300), DLOCK_ETIMEDOUT);
        assert_int_equal(key_rev(key), rev); /* not deleted, not made again */
        dlock_lock_status st;
        dlock_node_status ns;
        assert_int_equal(dlock_client_status(cl, name, 1, &ns, &st), DLOCK_OK);
        assert_int_equal(st.state, DLOCK_STATUS_HELD);
        assert_int_equal((int64_t)ns.fence, rev);
        test_waiter w;
        assert_int_equal(test_waiter_start(&w, l, 10000, TEST_WAITER_KEEP), 0);
        usleep(1000 * 300);
        /* the waiter's key behind the foreign one, which is still first */
        char begin[96], end[96];
        snprintf(begin, sizeof begin, "fk:%s/", name);
        snprintf(end, sizeof end, "fk:%s0", name);
        dlock__etcd_kv first;
        assert_int_equal(dlock__etcd_first(raw, begin, strlen(begin), end, strlen(end), &first,
                                           dlock__deadline_after_ms(3000), NULL),
                         DLOCK_OK);
        assert_int_equal(first.create_rev, rev);
        dlock__etcd_kv_clear(&first);
        /* Listed as the holder, whatever its form; the waiter as a waiter. */
        listed s = list_of(name);
        assert_int_equal(s.n, 1);
        assert_int_equal((int64_t)s.fence, rev);
        assert_int_equal(s.waiters, 1);
        foreign_key_goes(&w, key, rev, suffixes[i].suffix);
        dlock_lock_free(l);
    }
    lease_revoke_foreign(FOREIGN_LEASE);
}

/* A foreign key between a dlock holder and a dlock waiter: the holder's
 * release leaves it (and the waiter behind it) alone, the waiter waits for
 * it and takes the name once it goes. */
static void a_foreign_key_keeps_its_place_between_two_of_ours(void **state)
{
    (void)state;
    lease_grant_foreign(FOREIGN_LEASE);
    for (size_t i = 0; i < N_SUFFIXES; i++) {
        char name[32], key[96];
        snprintf(name, sizeof name, "m%zu", i);
        snprintf(key, sizeof key, "fk:%s/%s", name, suffixes[i].suffix);
        dlock_lock *h = lock_of(name), *l = lock_of(name);
        assert_int_equal(dlock_lock_acquire(h, 0), DLOCK_OK);
        int64_t rev = put_key(key, FOREIGN_LEASE);
        test_waiter w;
        assert_int_equal(test_waiter_start(&w, l, 10000, TEST_WAITER_KEEP), 0);
        usleep(1000 * 200);
        /* Behind our holder, the foreign key and our waiter are waiters. */
        listed s = list_of(name);
        assert_int_equal(s.n, 1);
        assert_int_equal(s.fence, dlock_lock_fence(h));
        assert_int_equal(s.waiters, 2);
        assert_int_equal(dlock_lock_release(h), DLOCK_OK);
        usleep(1000 * 500); /* the waiter looked again: the foreign key is first */
        assert_false(atomic_load(&w.done)); /* still waiting */
        foreign_key_goes(&w, key, rev, suffixes[i].suffix);
        dlock_lock_free(h);
        dlock_lock_free(l);
    }
    lease_revoke_foreign(FOREIGN_LEASE);
}

typedef struct seen {
    size_t n;
    char name[8][32];
    dlock_list_entry e[8];
} seen;

static int on_entry(void *arg, const dlock_list_entry *e)
{
    seen *s = arg;
    if (s->n < 8) {
        snprintf(s->name[s->n], sizeof s->name[s->n], "%s", e->name);
        s->e[s->n] = *e;
        s->e[s->n].name = s->name[s->n];
        s->e[s->n].identity = NULL;
    }
    s->n++;
    return 0;
}

/* A key whose suffix is a lease with the high bit set, in Go's form
 * (-<hex>) or unsigned (16 digits), is a locker's: listed as the holder
 * of its name, with its create revision the fence. */
static void a_negative_lease_key_is_listed(void **state)
{
    (void)state;
    lease_grant_foreign(FOREIGN_LEASE);
    const char *keys[] = {"fk:neg-go/-5", "fk:neg-u/fffffffffffffffb"};
    int64_t revs[2];
    for (size_t i = 0; i < 2; i++)
        revs[i] = put_key(keys[i], FOREIGN_LEASE);
    seen s = {0};
    assert_int_equal(dlock_client_list(cl, "neg-*", on_entry, &s), DLOCK_OK);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.name[0], "neg-go");
    assert_string_equal(s.name[1], "neg-u");
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(s.e[i].state, DLOCK_STATUS_HELD);
        assert_int_equal((int64_t)s.e[i].fence, revs[i]);
        assert_true(s.e[i].ttl_ms > 0);
    }
    lease_revoke_foreign(FOREIGN_LEASE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_foreign_key_is_waited_for_never_deleted),
        cmocka_unit_test(a_foreign_key_keeps_its_place_between_two_of_ours),
        cmocka_unit_test(a_negative_lease_key_is_listed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
