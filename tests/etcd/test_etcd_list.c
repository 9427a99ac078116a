/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_list() on an etcd:// client against a real etcd member:
 * names under the client's prefix in name order, each with its fence,
 * TTL and waiters; the glob narrowing the names; keys that are not dlock's
 * skipped; a name whose keys span two range pages counted once; a
 * callback that stops the listing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "dlock.h"
#include "etcd_keys.h"
#include "etcd_kv.h"
#include "etcd_server.h"

static test_etcd srv;
static dlock_client *cl;

#define MAX_SEEN 16

typedef struct seen {
    size_t n;
    char name[MAX_SEEN][64];
    dlock_list_entry e[MAX_SEEN];
    char identity[MAX_SEEN][128]; /* e[i].identity points here, or is NULL */
    size_t stop_after; /* 0: never stop */
} seen;

static int on_entry(void *arg, const dlock_list_entry *e)
{
    seen *s = arg;
    if (s->n < MAX_SEEN) {
        snprintf(s->name[s->n], sizeof s->name[s->n], "%s", e->name);
        s->e[s->n] = *e;
        s->e[s->n].name = s->name[s->n];
        if (e->identity) {
            snprintf(s->identity[s->n], sizeof s->identity[s->n], "%s", e->identity);
            s->e[s->n].identity = s->identity[s->n];
        }
    }
    s->n++;
    return s->stop_after && s->n >= s->stop_after;
}

static dlock_client *client_with_prefix(const char *prefix)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.key_prefix = prefix;
    const char *url = srv.url;
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_new(&c, &url, 1, &o, NULL, 0), DLOCK_OK);
    return c;
}

static int setup(void **state)
{
    (void)state;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.key_prefix = "app:";
    return test_etcd_setup(&srv, 1, &o, &cl);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_teardown(&srv, cl);
    return 0;
}

static dlock_lock *held(dlock_client *c, const char *name)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 20000;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, c, name, &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    return l;
}

static dlock__etcd *raw_client(void)
{
    dlock__etcd_url u;
    const char *url = srv.url;
    char err[256];
    if (dlock__etcd_url_parse(&u, &url, 1, err, sizeof err) != DLOCK_OK)
        fail_msg("%s", err);
    dlock__etcd *e = NULL;
    assert_int_equal(dlock__etcd_new(&e, &u, 500, 2000), DLOCK_OK);
    return e;
}

/* Put key (of len bytes) with lease `lease` attached, as a waiter's key. */
static void put_key(dlock__etcd *e, const char *key, size_t len, int64_t lease)
{
    char msg[256];
    int rc = test_etcd_put_key(e, key, len, lease, NULL, msg, sizeof msg);
    if (rc != DLOCK_OK)
        fail_msg("create: %s: %s", dlock_errname(rc), msg);
}

static void names_come_in_order_with_fence_ttl_and_waiters(void **state)
{
    (void)state;
    dlock_lock *a = held(cl, "a"), *ab = held(cl, "a/b"), *j1 = held(cl, "job:1"),
               *j2 = held(cl, "job:2");
    /* Another prefix's lock is not a name of this client; an `etcdctl lock`
     * key (NAME/<lease>, its lease etcd's) is a holder like dlock's; a key
     * with no lease after its last '/', or an older dlock's KEY NUL
     * <lease>, is no lock's. */
    dlock_client *other = client_with_prefix("zzz:");
    dlock_lock *z = held(other, "a");
    dlock__etcd *e = raw_client();
    int64_t granted = 0;
    assert_int_equal(dlock__etcd_lease_grant(e, 0x5eed, 30, &granted,
                                             dlock__deadline_after_ms(3000), -1, NULL),
                     DLOCK_OK);
    put_key(e, "app:foreign/694d", strlen("app:foreign/694d"), 0x5eed);
    put_key(e, "app:nolease/x0", strlen("app:nolease/x0"), 0x5eed);
    char old[64];
    size_t olen = (size_t)snprintf(old, sizeof old, "app:old%c%016llx", '\0',
                                   (unsigned long long)0x5eed);
    put_key(e, old, olen, 0x5eed);
    /* A waiter behind a's holder that sorts after a/b's key (a/b/<lease>
     * lies between a/<...b> and a/f): still one record for "a". */
    put_key(e, "app:a/f", strlen("app:a/f"), 0x5eed);
    /* A waiter behind job:1's holder: KEY/<lease>, created later. */
    char wkey[64];
    size_t wlen = (size_t)snprintf(wkey, sizeof wkey, "app:job:1/%llx", (unsigned long long)0x5eed);
    put_key(e, wkey, wlen, 0x5eed);

    seen s = {0};
    assert_int_equal(dlock_client_list(cl, "*", on_entry, &s), DLOCK_OK);
    assert_int_equal(s.n, 5);
    const char *want[] = {"a", "a/b", "foreign", "job:1", "job:2"};
    dlock_lock *ls[] = {a, ab, NULL, j1, j2};
    for (size_t i = 0; i < 5; i++) {
        if (!ls[i]) { /* etcdctl's: its create revision the fence, no waiter */
            assert_string_equal(s.name[i], want[i]);
            assert_int_equal(s.e[i].waiters, 0);
            assert_true(s.e[i].fence > dlock_lock_fence(ab));
            continue;
        }
        assert_string_equal(s.name[i], want[i]);
        assert_int_equal(s.e[i].state, DLOCK_STATUS_HELD);
        assert_int_equal(s.e[i].mode, DLOCK_HOLD_EXCLUSIVE);
        assert_int_equal(s.e[i].holders, 1);
        assert_int_equal(s.e[i].fence, dlock_lock_fence(ls[i]));
        assert_true(s.e[i].ttl_ms > 0 && s.e[i].ttl_ms <= 20000);
        assert_int_equal(s.e[i].waiters, i == 0 || i == 3 ? 1 : 0);
        assert_int_equal(s.e[i].nodes, 1);
        assert_int_equal(s.e[i].held_on, 1);
    }

    /* The glob narrows the names (a range from its literal start). */
    seen g = {0};
    assert_int_equal(dlock_client_list(cl, "job:*", on_entry, &g), DLOCK_OK);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.name[0], "job:1");
    seen one = {0};
    assert_int_equal(dlock_client_list(cl, "a", on_entry, &one), DLOCK_OK);
    assert_int_equal(one.n, 1);
    assert_string_equal(one.name[0], "a");
    seen cls = {0};
    assert_int_equal(dlock_client_list(cl, "j?b:[2]", on_entry, &cls), DLOCK_OK);
    assert_int_equal(cls.n, 1);
    assert_string_equal(cls.name[0], "job:2");
    seen esc = {0}; /* an escaped wildcard is a literal byte */
    assert_int_equal(dlock_client_list(cl, "a\\*", on_entry, &esc), DLOCK_OK);
    assert_int_equal(esc.n, 0);

    /* A callback that says stop. */
    seen stop = {.stop_after = 2};
    assert_int_equal(dlock_client_list(cl, NULL, on_entry, &stop), DLOCK_ECANCELED);
    assert_int_equal(stop.n, 2);

    /* Released names are gone from the listing. */
    assert_int_equal(dlock_lock_release(j2), DLOCK_OK);
    seen after = {0};
    assert_int_equal(dlock_client_list(cl, "job:*", on_entry, &after), DLOCK_OK);
    assert_int_equal(after.n, 1);

    assert_int_equal(dlock__etcd_lease_revoke(e, 0x5eed, dlock__deadline_after_ms(3000), -1,
                                              NULL, NULL),
                     DLOCK_OK);
    dlock__etcd_free(e);
    dlock_lock *all[] = {a, ab, j1, j2, z};
    for (size_t i = 0; i < 5; i++) {
        (void)dlock_lock_release(all[i]);
        dlock_lock_free(all[i]);
    }
    dlock_client_free(other);
}

/* 1,500 waiter keys under one name and 600 names after it: the range
 * takes pages of 1,000, so "p"'s keys span a page boundary and it is still
 * one name, with every key after its first counted as a waiter. */
/* The owner's identity (its key's value), not a waiter's: the waiter's
 * key sorts first in the range (its lease id, 1, is a prefix of any other), so the listing
 * meets it before the owner's. A holder without one lists NULL. */
static void the_owners_identity_is_listed(void **state)
{
    (void)state;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.key_prefix = "app:";
    o.identity = 1;
    o.identity_text = "lister 1";
    const char *url = srv.url;
    dlock_client *ic = NULL;
    assert_int_equal(dlock_client_new(&ic, &url, 1, &o, NULL, 0), DLOCK_OK);
    dlock_lock *a = held(ic, "idn:a"), *b = held(cl, "idn:b");
    dlock__etcd *e = raw_client();
    int64_t granted = 0;
    assert_int_equal(dlock__etcd_lease_grant(e, 0x1, 30, &granted,
                                             dlock__deadline_after_ms(3000), -1, NULL),
                     DLOCK_OK);
    char wkey[64];
    size_t wlen = (size_t)snprintf(wkey, sizeof wkey, "app:idn:a/%llx", (unsigned long long)0x1);
    put_key(e, wkey, wlen, 0x1);

    seen s = {0};
    assert_int_equal(dlock_client_list(cl, "idn:*", on_entry, &s), DLOCK_OK);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.name[0], "idn:a");
    assert_int_equal(s.e[0].waiters, 1);
    assert_non_null(s.e[0].identity);
    assert_true(strncmp(s.e[0].identity, "lister 1 since=", 15) == 0);
    assert_null(s.e[1].identity);

    assert_int_equal(dlock__etcd_lease_revoke(e, 0x1, dlock__deadline_after_ms(3000), -1, NULL,
                                              NULL),
                     DLOCK_OK);
    dlock__etcd_free(e);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_free(ic);
}

static void a_name_across_range_pages_is_listed_once(void **state)
{
    (void)state;
    dlock__etcd *e = raw_client();
    int64_t granted = 0;
    assert_int_equal(dlock__etcd_lease_grant(e, 0xfeed, 60, &granted,
                                             dlock__deadline_after_ms(3000), -1, NULL),
                     DLOCK_OK);
    char key[64];
    for (int i = 0; i < 1500; i++) {
        size_t len = (size_t)snprintf(key, sizeof key, "app:p/%x", i + 1);
        put_key(e, key, len, 0xfeed);
    }
    for (int i = 0; i < 600; i++) {
        size_t len = (size_t)snprintf(key, sizeof key, "app:q%04d/%x", i, i + 1);
        put_key(e, key, len, 0xfeed);
    }
    seen s = {0};
    assert_int_equal(dlock_client_list(cl, "p", on_entry, &s), DLOCK_OK);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.e[0].waiters, 1499);
    assert_true(s.e[0].ttl_ms > 0);
    seen q = {0};
    assert_int_equal(dlock_client_list(cl, "[pq]*", on_entry, &q), DLOCK_OK);
    assert_int_equal(q.n, 601);
    assert_string_equal(q.name[0], "p");
    assert_string_equal(q.name[1], "q0000");
    assert_int_equal(dlock__etcd_lease_revoke(e, 0xfeed, dlock__deadline_after_ms(3000), -1,
                                              NULL, NULL),
                     DLOCK_OK);
    dlock__etcd_free(e);
}

/* The recipe RWMutex's own keys (NAME/write/<UnixNano>, NAME/read/<...>:
 * 19 decimal digits, no lease ID) hold the name for the wait and for
 * status; list shows the name as well, as it shows dlock's writer and
 * readers. A decimal suffix elsewhere is still nobody's lock. */
static void a_name_the_recipes_keys_hold_is_listed(void **state)
{
    (void)state;
    dlock__etcd *e = raw_client();
    const char *w = "app:rgo-w/write/1732900000000000000";
    const char *r = "app:rgo-r/read/1732900000000000001";
    const char *other = "app:rgo-n/1732900000000000002";
    put_key(e, w, strlen(w), 0);
    put_key(e, r, strlen(r), 0);
    put_key(e, other, strlen(other), 0);
    dlock_lock_status st;
    dlock_node_status ns;
    assert_int_equal(dlock_client_status(cl, "rgo-w", 1, &ns, &st), DLOCK_OK);
    assert_true(ns.held); /* status sees it */
    seen s = {0};
    assert_int_equal(dlock_client_list(cl, "rgo-*", on_entry, &s), DLOCK_OK);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.name[0], "rgo-r");
    assert_int_equal(s.e[0].mode, DLOCK_HOLD_SHARED);
    assert_int_equal(s.e[0].holders, 1);
    assert_string_equal(s.name[1], "rgo-w");
    assert_int_equal(s.e[1].mode, DLOCK_HOLD_EXCLUSIVE);
    assert_int_equal(s.e[1].fence, ns.fence);
    dlock__etcd_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_come_in_order_with_fence_ttl_and_waiters),
        cmocka_unit_test(the_owners_identity_is_listed),
        cmocka_unit_test(a_name_across_range_pages_is_listed_once),
        cmocka_unit_test(a_name_the_recipes_keys_hold_is_listed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
