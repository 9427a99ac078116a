/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd lock algorithm (src/etcd/etcd_lock.c, etcd_kv.c) on a real etcd
 * member: getting in line below the public API (a grant and the create
 * transaction, as the wait's begin sends them), the owner being the oldest
 * key, fencing by create revision, what renewal finds; and through the
 * public API (the engine's wait, src/etcd/etcd_wait.c) each waiter served
 * in turn, watching its predecessor, its lease kept alive during a wait. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "dlock.h"
#include "error.h"
#include "etcd_kv.h"
#include "etcd_lock.h"
#include "etcd_release.h"
#include "etcd_renew.h"
#include "etcd_server.h"
#include "proxy.h"
#include "test_util.h"

static test_etcd srv;
static dlock__etcd *cl;
static dlock_client *api; /* the same member through the public API */

static int setup(void **state)
{
    (void)state;
    if (test_etcd_start(&srv, 1) != 0)
        return -1;
    dlock__etcd_url u;
    const char *url = srv.url;
    if (dlock__etcd_url_parse(&u, &url, 1, NULL, 0) != DLOCK_OK)
        return -1;
    if (dlock__etcd_new(&cl, &u, 1000, 1000) != DLOCK_OK)
        return -1;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.io_timeout_ms = 1000;
    return dlock_client_new(&api, &url, 1, &o, NULL, 0) == DLOCK_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_free(api);
    dlock__etcd_free(cl);
    test_etcd_stop(&srv);
    return 0;
}

static void name_of(dlock__etcd_name *n, const char *key)
{
    assert_int_equal(dlock__etcd_name_init(n, key, strlen(key)), DLOCK_OK);
}

static int64_t ms_since(int64_t t0)
{
    return (dlock__now_ns() - t0) / DLOCK__NS_PER_MS;
}

/* How many waiter keys the lock has. */
static int line_length(const dlock__etcd_name *n)
{
    json_t *req = json_pack("{s:o, s:o, s:b}", "key", dlock__etcd_json_b64(n->begin, n->len),
                            "range_end", dlock__etcd_json_b64(n->end, n->len), "count_only", 1);
    json_t *rep = NULL;
    assert_int_equal(dlock__etcd_post(cl, "/v3/kv/range", req, &rep,
                                      dlock__deadline_after_ms(3000), -1, NULL, NULL, NULL),
                     DLOCK_OK);
    int64_t count;
    assert_int_equal(dlock__etcd_json_i64(rep, "count", &count), 0);
    json_decref(req);
    json_decref(rep);
    return (int)count;
}

/* A try-once below the API, the requests the wait's begin and first try
 * send: a lease of our own ID and our key, and when ours is not the first
 * key the holder's TTL and the revoke. */
static int enter_once(dlock__etcd *e, const dlock__etcd_name *n, int64_t ttl_ms,
                      dlock__etcd_hold *h, int64_t *holder_ttl_ms, dlock__errbuf *err)
{
    int64_t dl = dlock__deadline_after_ms(3000), sent = dlock__now_ns();
    dlock__etcd_kv first;
    *holder_ttl_ms = -1;
    memset(h, 0, sizeof *h);
    assert_int_equal(dlock__etcd_hold_new(h, n, ttl_ms, 0), DLOCK_OK);
    int rc = dlock__etcd_lease_grant(e, h->lease, h->asked_s, &h->ttl_s, dl, -1, err);
    if (rc == DLOCK_OK)
        rc = dlock__etcd_create_and_first(e, h->key, h->key_len, NULL, 0, h->lease, n->begin,
                                          n->len, n->end, n->len, &h->rev, &first, dl, -1, err);
    if (rc != DLOCK_OK) {
        dlock__etcd_hold_clear(h);
        return rc;
    }
    h->valid_until_ns = sent + h->ttl_s * 1000 * DLOCK__NS_PER_MS;
    int owner = first.create_rev == h->rev;
    if (!owner) {
        assert_int_equal(dlock__etcd_lease_ttl_ms(e, first.lease, holder_ttl_ms, NULL, dl, -1,
                                                  NULL), DLOCK_OK);
        assert_int_equal(dlock__etcd_lease_revoke(e, h->lease, dl, -1, NULL, NULL), DLOCK_OK);
        dlock__etcd_hold_clear(h);
    }
    dlock__etcd_kv_clear(&first);
    return owner ? DLOCK_OK : DLOCK_ENOTACQUIRED;
}

static void try_once_on_a_held_lock_leaves_no_key_and_fences_grow(void **state)
{
    (void)state;
    dlock__etcd_name n;
    name_of(&n, "core-try");
    dlock__etcd_hold a, b;
    int64_t holder = 0;
    assert_int_equal(enter_once(cl, &n, 5000, &a, &holder, NULL), DLOCK_OK);
    assert_true(a.rev > 0);
    assert_int_equal(strlen(a.token), 16);
    assert_true(a.valid_until_ns > dlock__now_ns() + 4000 * DLOCK__NS_PER_MS);
    dlock__errbuf err = {0};
    assert_int_equal(enter_once(cl, &n, 5000, &b, &holder, &err),
                     DLOCK_ENOTACQUIRED);
    assert_true(holder > 0 && holder <= 5000);
    assert_int_equal(b.lease, 0);
    assert_int_equal(line_length(&n), 1); /* b left the line */
    int64_t first = a.rev;
    assert_int_equal(dlock__etcd_release(cl, &a, NULL), DLOCK_OK);
    assert_int_equal(line_length(&n), 0);
    assert_int_equal(enter_once(cl, &n, 5000, &b, &holder, NULL), DLOCK_OK);
    assert_true(b.rev > first);
    /* released twice: the lease is gone */
    dlock__etcd_hold copy = b;
    copy.key = NULL;
    assert_int_equal(dlock__etcd_release(cl, &b, NULL), DLOCK_OK);
    assert_int_equal(dlock__etcd_release(cl, &copy, NULL), DLOCK_EEXPIRED);
    dlock__err_free(&err);
    dlock__etcd_name_clear(&n);
}

/* A waiter through the public API: a handle on the name (its lease 5 s),
 * waiting wait_ms. */
typedef struct waiter {
    dlock_lock *l;
    int64_t wait_ms;
    int rc;
    int64_t got_ns;
    int order;
} waiter;

static void waiter_init(waiter *w, const char *name, int64_t wait_ms)
{
    *w = (waiter){test_lock_new(api, name, 5000, 0, 10, 200), wait_ms, -99, 0, -1};
}

static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static int next_order;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, w->wait_ms);
    w->got_ns = dlock__now_ns();
    pthread_mutex_lock(&order_mu);
    w->order = next_order++;
    pthread_mutex_unlock(&order_mu);
    if (w->rc == DLOCK_OK) {
        /* hold a little, so that the next in line waits for us */
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
        assert_int_equal(dlock_lock_release(w->l), DLOCK_OK);
    }
    return NULL;
}

static void waiters_are_served_in_arrival_order(void **state)
{
    (void)state;
    dlock__etcd_name n;
    name_of(&n, "core-fifo");
    dlock__etcd_hold a;
    int64_t holder;
    assert_int_equal(enter_once(cl, &n, 5000, &a, &holder, NULL), DLOCK_OK);
    enum { N = 4 };
    waiter w[N];
    pthread_t t[N];
    next_order = 0;
    for (int i = 0; i < N; i++) {
        waiter_init(&w[i], "core-fifo", 20000);
        assert_int_equal(pthread_create(&t[i], NULL, wait_thread, &w[i]), 0);
        /* the next one gets in line after this one */
        while (line_length(&n) < i + 2)
            usleep(5000);
    }
    assert_int_equal(dlock__etcd_release(cl, &a, NULL), DLOCK_OK);
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) {
        assert_int_equal(w[i].rc, DLOCK_OK);
        assert_int_equal(w[i].order, i);
        dlock_lock_free(w[i].l);
    }
    assert_int_equal(line_length(&n), 0);
    dlock__etcd_name_clear(&n);
}

static void wait_times_out_and_cancel_ends_it(void **state)
{
    (void)state;
    dlock__etcd_name n;
    name_of(&n, "core-timeout");
    dlock__etcd_hold a;
    int64_t holder;
    assert_int_equal(enter_once(cl, &n, 5000, &a, &holder, NULL), DLOCK_OK);
    dlock_lock *b = test_lock_new(api, "core-timeout", 5000, 0, 10, 200);
    int64_t t0 = dlock__now_ns();
    assert_int_equal(dlock_lock_acquire(b, 400), DLOCK_ETIMEDOUT);
    dlock_lock_free(b);
    assert_true(ms_since(t0) >= 390);
    assert_true(ms_since(t0) < 4000);
    assert_int_equal(line_length(&n), 1);

    waiter w;
    waiter_init(&w, "core-timeout", DLOCK_WAIT_FOREVER);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    while (line_length(&n) < 2)
        usleep(5000);
    t0 = dlock__now_ns();
    dlock_lock_cancel(w.l);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_ECANCELED);
    assert_true((w.got_ns - t0) / DLOCK__NS_PER_MS < 1000);
    assert_int_equal(line_length(&n), 1);
    dlock_lock_free(w.l);
    dlock__etcd_release(cl, &a, NULL);
    dlock__etcd_name_clear(&n);
}

static void a_waiter_keeps_its_place_through_a_wait_longer_than_its_ttl(void **state)
{
    (void)state;
    dlock__etcd_name n;
    name_of(&n, "core-long");
    dlock__etcd_hold a;
    int64_t holder;
    /* the holder's lease: 30 s; the waiter's (wait_thread): 5 s, and it
     * waits 6 s: without its own keep-alives its key would go */
    assert_int_equal(enter_once(cl, &n, 30000, &a, &holder, NULL),
                     DLOCK_OK);
    waiter w;
    waiter_init(&w, "core-long", 20000);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
    while (line_length(&n) < 2)
        usleep(5000);
    sleep(6);
    assert_int_equal(line_length(&n), 2); /* the waiter's key is still there */
    int64_t t0 = dlock__now_ns();
    assert_int_equal(dlock__etcd_release(cl, &a, NULL), DLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DLOCK_OK);
    assert_true((w.got_ns - t0) / DLOCK__NS_PER_MS < 3000);
    dlock_lock_free(w.l);
    dlock__etcd_name_clear(&n);
}

static void renewal_finds_a_deleted_key_and_an_ended_lease(void **state)
{
    (void)state;
    dlock__etcd_name n;
    name_of(&n, "core-renew");
    dlock__etcd_hold a;
    int64_t holder;
    assert_int_equal(enter_once(cl, &n, 5000, &a, &holder, NULL), DLOCK_OK);
    int64_t before = a.valid_until_ns;
    usleep(20000);
    assert_int_equal(dlock__etcd_renew(cl, &a, dlock__deadline_after_ms(3000), -1, NULL), DLOCK_OK);
    assert_true(a.valid_until_ns > before);
    /* someone deletes the key (etcdctl del) while the lease lives */
    json_t *req = json_pack("{s:o}", "key", dlock__etcd_json_b64(a.key, a.key_len));
    json_t *rep = NULL;
    assert_int_equal(dlock__etcd_post(cl, "/v3/kv/deleterange", req, &rep,
                                      dlock__deadline_after_ms(3000), -1, NULL, NULL, NULL),
                     DLOCK_OK);
    json_decref(req);
    json_decref(rep);
    assert_int_equal(dlock__etcd_renew(cl, &a, dlock__deadline_after_ms(3000), -1, NULL),
                     DLOCK_ENOTOWNER);
    assert_int_equal(dlock__etcd_lease_revoke(cl, a.lease, dlock__deadline_after_ms(3000), -1, NULL, NULL),
                     DLOCK_OK);
    assert_int_equal(dlock__etcd_renew(cl, &a, dlock__deadline_after_ms(3000), -1, NULL),
                     DLOCK_EEXPIRED);
    dlock__etcd_hold_clear(&a);
    dlock__etcd_name_clear(&n);
}

static void peek_reports_owner_fence_and_ttl(void **state)
{
    (void)state;
    dlock__etcd_name n;
    name_of(&n, "core-peek");
    int held;
    int64_t ttl;
    uint64_t fence;
    assert_int_equal(dlock__etcd_peek(cl, &n, &held, &ttl, &fence, NULL), DLOCK_OK);
    assert_int_equal(held, 0);
    assert_int_equal(ttl, -1);
    dlock__etcd_hold a;
    int64_t holder;
    assert_int_equal(enter_once(cl, &n, 9000, &a, &holder, NULL), DLOCK_OK);
    assert_int_equal(dlock__etcd_peek(cl, &n, &held, &ttl, &fence, NULL), DLOCK_OK);
    assert_int_equal(held, 1);
    assert_true(ttl > 0 && ttl <= 9000);
    assert_int_equal(fence, (uint64_t)a.rev);
    dlock__etcd_release(cl, &a, NULL);
    dlock__etcd_name_clear(&n);
}

/* etcd's own lock's layout (concurrency.Mutex): lock "a"'s line is the
 * prefix a/, so a holder of "a/b" (key a/b/<lease>) keeps "a" from being
 * taken, while "a/b"'s line (a/b/) does not see "a"'s keys. (Before the
 * interop layout, KEY NUL <lease>, both were taken at once.) */
static void a_names_line_holds_the_names_below_it_as_etcds_does(void **state)
{
    (void)state;
    dlock__etcd_name n1, n2;
    name_of(&n1, "core-a");
    name_of(&n2, "core-a/b");
    dlock__etcd_hold a, b;
    int64_t holder;
    assert_int_equal(enter_once(cl, &n2, 5000, &b, &holder, NULL), DLOCK_OK);
    assert_int_equal(enter_once(cl, &n1, 5000, &a, &holder, NULL), DLOCK_ENOTACQUIRED);
    dlock__etcd_release(cl, &b, NULL);
    assert_int_equal(enter_once(cl, &n1, 5000, &a, &holder, NULL), DLOCK_OK);
    assert_int_equal(enter_once(cl, &n2, 5000, &b, &holder, NULL), DLOCK_OK);
    dlock__etcd_release(cl, &a, NULL);
    dlock__etcd_release(cl, &b, NULL);
    dlock__etcd_name_clear(&n1);
    dlock__etcd_name_clear(&n2);
}

/* The release's first copy runs but its reply is lost (a proxy that
 * forwards requests and drops replies); the copy sent again to the next
 * endpoint finds the lease gone. That is our own release, not an expiry:
 * the lease was valid when we sent it. (Was DLOCK_EEXPIRED.) */
static void a_release_whose_reply_was_lost_is_not_called_expired(void **state)
{
    (void)state;
    chaos_proxy px;
    assert_int_equal(chaos_proxy_start(&px, srv.m[0].client_port), 0);
    char url[200];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d,127.0.0.1:%d", px.port,
             srv.m[0].client_port);
    dlock__etcd_url u;
    const char *up = url;
    assert_int_equal(dlock__etcd_url_parse(&u, &up, 1, NULL, 0), DLOCK_OK);
    dlock__etcd *e;
    assert_int_equal(dlock__etcd_new(&e, &u, 1000, 300), DLOCK_OK);
    dlock__etcd_name n;
    name_of(&n, "core-deaf");
    dlock__etcd_hold a;
    int64_t holder;
    assert_int_equal(enter_once(e, &n, 10000, &a, &holder, NULL), DLOCK_OK);
    assert_int_equal(chaos_proxy_set(&px, CHAOS_PROXY_DEAF, 0), 0);
    dlock__errbuf err = {0};
    int rc = dlock__etcd_release(e, &a, &err);
    if (rc != DLOCK_OK)
        fail_msg("release: %s: %s", dlock_errname(rc), dlock__err_str(&err));
    assert_int_equal(line_length(&n), 0);
    chaos_proxy_stop(&px);
    dlock__err_free(&err);
    dlock__etcd_name_clear(&n);
    dlock__etcd_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(try_once_on_a_held_lock_leaves_no_key_and_fences_grow),
        cmocka_unit_test(waiters_are_served_in_arrival_order),
        cmocka_unit_test(wait_times_out_and_cancel_ends_it),
        cmocka_unit_test(a_waiter_keeps_its_place_through_a_wait_longer_than_its_ttl),
        cmocka_unit_test(renewal_finds_a_deleted_key_and_an_ended_lease),
        cmocka_unit_test(peek_reports_owner_fence_and_ttl),
        cmocka_unit_test(a_names_line_holds_the_names_below_it_as_etcds_does),
        cmocka_unit_test(a_release_whose_reply_was_lost_is_not_called_expired),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
