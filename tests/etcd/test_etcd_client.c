/* SPDX-License-Identifier: BSD-3-Clause */
/* The etcd v3 client under the etcd backend (src/etcd/etcd_http.c,
 * src/etcd/etcd_kv.c, src/etcd/etcd_watch.c) against a real etcd member:
 * leases, the lock's transactions, the watch, endpoint failover and the mapping of every
 * failure class to a dlock code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "dlock.h"
#include "error.h"
#include "client.h"
#include "etcd_hold.h"
#include "etcd_json.h"
#include "etcd_kv.h"
#include "etcd_owed.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_util.h"
#include "etcd_watch.h"
#include "loop_poll.h"

static test_etcd srv;

static int setup(void **state)
{
    (void)state;
    return test_etcd_start(&srv, 1);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_stop(&srv);
    return 0;
}

static dlock__etcd *client_for(const char *url, int io_timeout_ms)
{
    dlock__etcd_url u;
    char err[256];
    if (dlock__etcd_url_parse(&u, &url, 1, err, sizeof err) != DLOCK_OK)
        fail_msg("%s", err);
    dlock__etcd *e;
    assert_int_equal(dlock__etcd_new(&e, &u, 500, io_timeout_ms), DLOCK_OK);
    return e;
}

static int64_t soon(void)
{
    return dlock__deadline_after_ms(3000);
}

static void lease_grant_keepalive_revoke_round_trip(void **state)
{
    (void)state;
    dlock__etcd *e = client_for(srv.url, 1000);
    int64_t ttl = 0, ms = 0;
    assert_int_equal(dlock__etcd_lease_grant(e, 0x1234, 5, &ttl, soon(), -1, NULL), DLOCK_OK);
    assert_int_equal(ttl, 5);
    /* the same grant again (a reply lost in between) is the same lease */
    assert_int_equal(dlock__etcd_lease_grant(e, 0x1234, 5, &ttl, soon(), -1, NULL), DLOCK_OK);
    assert_int_equal(dlock__etcd_lease_keepalive(e, 0x1234, &ttl, soon(), -1, NULL), DLOCK_OK);
    assert_int_equal(ttl, 5);
    assert_int_equal(dlock__etcd_lease_ttl_ms(e, 0x1234, &ms, NULL, soon(), -1, NULL), DLOCK_OK);
    assert_true(ms > 0 && ms <= 5000);
    assert_int_equal(dlock__etcd_lease_revoke(e, 0x1234, soon(), -1, NULL, NULL), DLOCK_OK);
    /* gone: revoke and keep-alive both say expired */
    dlock__errbuf err = {0};
    assert_int_equal(dlock__etcd_lease_revoke(e, 0x1234, soon(), -1, &err, NULL), DLOCK_EEXPIRED);
    assert_non_null(strstr(dlock__err_str(&err), "lease not found"));
    assert_int_equal(dlock__etcd_lease_keepalive(e, 0x1234, &ttl, soon(), -1, NULL),
                     DLOCK_EEXPIRED);
    assert_int_equal(dlock__etcd_lease_ttl_ms(e, 0x1234, &ms, NULL, soon(), -1, NULL), DLOCK_OK);
    assert_int_equal(ms, -1);
    dlock__err_free(&err);
    dlock__etcd_free(e);
}

static void lease_too_short_is_raised_to_the_minimum(void **state)
{
    (void)state;
    dlock__etcd *e = client_for(srv.url, 1000);
    int64_t ttl = 0;
    assert_int_equal(dlock__etcd_lease_grant(e, 0x99, 1, &ttl, soon(), -1, NULL), DLOCK_OK);
    assert_true(ttl >= 1);
    dlock__etcd_lease_revoke(e, 0x99, soon(), -1, NULL, NULL);
    dlock__etcd_free(e);
}

static void create_is_idempotent_and_first_is_the_oldest(void **state)
{
    (void)state;
    dlock__etcd *e = client_for(srv.url, 1000);
    const char begin[] = "t1\0", end[] = "t1\1";
    const char ka[] = "t1\0a", kb[] = "t1\0b";
    int64_t ttl, ra = 0, ra2 = 0, rb = 0;
    assert_int_equal(dlock__etcd_lease_grant(e, 0x51, 10, &ttl, soon(), -1, NULL), DLOCK_OK);
    assert_int_equal(dlock__etcd_lease_grant(e, 0x52, 10, &ttl, soon(), -1, NULL), DLOCK_OK);
    dlock__etcd_kv first;
    assert_int_equal(dlock__etcd_create_and_first(e, ka, 4, NULL, 0, 0x51, begin, 3, end, 3, &ra,
                                                  &first, soon(), -1, NULL), DLOCK_OK);
    assert_int_equal(first.create_rev, ra);
    assert_int_equal(first.lease, 0x51);
    assert_memory_equal(first.key, ka, 4);
    dlock__etcd_kv_clear(&first);
    /* again: no new key, the same revision */
    assert_int_equal(dlock__etcd_create_and_first(e, ka, 4, NULL, 0, 0x51, begin, 3, end, 3, &ra2,
                                                  &first, soon(), -1, NULL), DLOCK_OK);
    assert_int_equal(ra2, ra);
    dlock__etcd_kv_clear(&first);
    assert_int_equal(dlock__etcd_create_and_first(e, kb, 4, NULL, 0, 0x52, begin, 3, end, 3, &rb,
                                                  &first, soon(), -1, NULL), DLOCK_OK);
    assert_true(rb > ra);
    assert_int_equal(first.create_rev, ra); /* a is still first */
    dlock__etcd_kv_clear(&first);
    /* b's predecessor is a; a has none */
    dlock__etcd_kv pred;
    int64_t rev;
    assert_int_equal(dlock__etcd_predecessor(e, kb, 4, rb, begin, 3, end, 3, &pred, &rev,
                                             soon(), -1, NULL), DLOCK_OK);
    assert_int_equal(pred.create_rev, ra);
    dlock__etcd_kv_clear(&pred);
    assert_int_equal(dlock__etcd_predecessor(e, ka, 4, ra, begin, 3, end, 3, &pred, &rev,
                                             soon(), -1, NULL), DLOCK_OK);
    assert_null(pred.key);
    /* revoking a's lease deletes a: b's key is then first */
    assert_int_equal(dlock__etcd_lease_revoke(e, 0x51, soon(), -1, NULL, NULL), DLOCK_OK);
    assert_int_equal(dlock__etcd_first(e, begin, 3, end, 3, &first, soon(), NULL), DLOCK_OK);
    assert_int_equal(first.create_rev, rb);
    dlock__etcd_kv_clear(&first);
    /* a's predecessor check now says its key is gone */
    assert_int_equal(dlock__etcd_predecessor(e, ka, 4, ra, begin, 3, end, 3, &pred, &rev,
                                             soon(), -1, NULL), DLOCK_EEXPIRED);
    dlock__etcd_lease_revoke(e, 0x52, soon(), -1, NULL, NULL);
    dlock__etcd_free(e);
}

typedef struct revoker {
    dlock__etcd *e;
    int64_t lease;
    int delay_ms;
} revoker;

static void *revoke_later(void *arg)
{
    revoker *r = arg;
    struct timespec ts = {0, (long)r->delay_ms * 1000000L};
    nanosleep(&ts, NULL);
    dlock__etcd_lease_revoke(r->e, r->lease, dlock__deadline_after_ms(3000), -1, NULL, NULL);
    return NULL;
}

/* The wait's watch (etcd_watch.c) on a private loop, as the wait runs it. */
typedef struct watched {
    dlock__etcd_watch w;
    int ended; /* ended() calls */
    int moved; /* moved() calls */
} watched;

static void watch_ended(dlock__etcd_watch *w)
{
    DLOCK__OWNER(w, watched, w)->ended++;
}

static void watch_moved(dlock__etcd_watch *w)
{
    DLOCK__OWNER(w, watched, w)->moved++;
}

static int watch_over(void *arg)
{
    return ((watched *)arg)->ended > 0;
}

/* Watch key's deletion after a read at revision rev for at most
 * deadline_ms: 1 it said "look" (the key went), 0 it ended without. It
 * must end once, by itself. *moved (may be NULL): how often it said the
 * store had moved on since rev when it started. */
static int watch_once_moved(dlock__etcd *e, const char *key, size_t key_len, int64_t rev,
                            int deadline_ms, int *moved)
{
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    watched wd = {0};
    wd.w.ended = watch_ended;
    wd.w.moved = watch_moved;
    assert_int_equal(dlock__etcd_watch_start(&wd.w, e, &lp.loop, key, key_len, NULL, 0, rev,
                                             dlock__deadline_after_ms(deadline_ms)),
                     DLOCK_OK);
    dlock__loop_poll_run(&lp, watch_over, &wd, dlock__deadline_after_ms(deadline_ms + 5000));
    int ended = wd.ended;
    dlock__etcd_watch_stop(&wd.w); /* nothing if it ended */
    dlock__loop_poll_close(&lp);
    assert_int_equal(ended, 1);
    if (moved)
        *moved = wd.moved;
    return wd.w.look;
}

static int watch_once(dlock__etcd *e, const char *key, size_t key_len, int64_t rev,
                      int deadline_ms)
{
    return watch_once_moved(e, key, key_len, rev, deadline_ms, NULL);
}

static void watch_says_look_when_the_key_is_deleted(void **state)
{
    (void)state;
    dlock__etcd *e = client_for(srv.url, 1000);
    const char begin[] = "w1\0", end[] = "w1\1", k[] = "w1\0k";
    int64_t ttl, rev;
    dlock__etcd_kv first;
    assert_int_equal(dlock__etcd_lease_grant(e, 0x61, 10, &ttl, soon(), -1, NULL), DLOCK_OK);
    assert_int_equal(dlock__etcd_create_and_first(e, k, 4, NULL, 0, 0x61, begin, 3, end, 3, &rev,
                                                  &first, soon(), -1, NULL), DLOCK_OK);
    dlock__etcd_kv_clear(&first);
    /* nobody deletes it: the watch ends at its deadline, without "look",
     * and the store is where the read left it (rev: our create) */
    int64_t t0 = dlock__now_ns();
    int moved = -1;
    assert_int_equal(watch_once_moved(e, k, 4, rev, 300, &moved), 0);
    assert_int_equal(moved, 0);
    assert_true(dlock__now_ns() - t0 >= 250 * DLOCK__NS_PER_MS);
    revoker r = {e, 0x61, 300};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, revoke_later, &r), 0);
    t0 = dlock__now_ns();
    assert_int_equal(watch_once(e, k, 4, rev, 10000), 1);
    assert_true(dlock__now_ns() - t0 < 5000 * DLOCK__NS_PER_MS);
    pthread_join(t, NULL);
    /* A delete that happened after the read and before the watch began is
     * not in the stream: it starts at the member's revision (issue 38's
     * S3: a start in the past is caught up only every 100 ms), and says
     * the store moved on since the read, once, so that the caller reads
     * again; the stream itself runs on to its deadline. */
    assert_int_equal(watch_once_moved(e, k, 4, rev, 300, &moved), 0);
    assert_int_equal(moved, 1);
    dlock__etcd_free(e);
}

typedef struct stopper {
    dlock__timer t;
    dlock__etcd_watch *w;
} stopper;

static void stop_now(dlock__timer *t)
{
    dlock__etcd_watch_stop(DLOCK__OWNER(t, stopper, t)->w);
}

static int never(void *arg)
{
    (void)arg;
    return 0;
}

/* The wait stops its watch when it is over (a cancel, a grant): no
 * ended() follows, not even at the watch's own deadline, nothing of it
 * stays on the loop, and its transfer serves the next watch. */
static void a_stopped_watch_never_ends(void **state)
{
    (void)state;
    dlock__etcd *e = client_for(srv.url, 1000);
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    watched wd = {0};
    wd.w.ended = watch_ended;
    assert_int_equal(dlock__etcd_watch_start(&wd.w, e, &lp.loop, "c\0k", 3, NULL, 0, 1,
                                             dlock__deadline_after_ms(400)),
                     DLOCK_OK);
    stopper st = {.w = &wd.w};
    st.t.fire = stop_now;
    st.t.due_ns = dlock__deadline_after_ms(150);
    assert_int_equal(dlock__timer_set(&lp.loop, &st.t), DLOCK_OK);
    assert_int_equal(dlock__loop_poll_run(&lp, never, NULL, dlock__deadline_after_ms(900)), 0);
    assert_int_equal(wd.ended, 0);
    assert_int_equal(wd.w.running, 0);
    assert_int_equal(lp.n_ios, 0);
    dlock__loop_poll_close(&lp);
    assert_int_equal(watch_once(e, "c\0k", 3, 1, 300), 0);
    dlock__etcd_free(e);
}

/* A port nobody listens on: 1 (tcpmux) is privileged and unused here. */
static int closed_port(void)
{
    return 1;
}

static void unreachable_member_is_eio_and_named(void **state)
{
    (void)state;
    char url[64];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d", closed_port());
    dlock__etcd *e = client_for(url, 500);
    dlock__errbuf err = {0};
    int64_t ttl;
    assert_int_equal(dlock__etcd_lease_grant(e, 0x71, 5, &ttl, soon(), -1, &err), DLOCK_EIO);
    assert_non_null(strstr(dlock__err_str(&err), "127.0.0.1:1"));
    dlock__err_free(&err);
    dlock__etcd_free(e);
}

static void a_dead_member_is_skipped(void **state)
{
    (void)state;
    char url[200];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d,127.0.0.1:%d", closed_port(),
             srv.m[0].client_port);
    dlock__etcd *e = client_for(url, 500);
    int64_t ttl;
    assert_int_equal(dlock__etcd_lease_grant(e, 0x72, 5, &ttl, soon(), -1, NULL), DLOCK_OK);
    assert_int_equal(dlock__etcd_lease_revoke(e, 0x72, soon(), -1, NULL, NULL), DLOCK_OK);
    dlock__etcd_free(e);
}

static void a_paused_member_leaves_the_outcome_unknown(void **state)
{
    (void)state;
    dlock__etcd *e = client_for(srv.url, 300);
    int64_t ttl;
    /* a first call opens the connection, so the next one is sent at once */
    assert_int_equal(dlock__etcd_lease_grant(e, 0x73, 5, &ttl, soon(), -1, NULL), DLOCK_OK);
    test_etcd_pause(&srv, 0);
    dlock__errbuf err = {0};
    int rc = dlock__etcd_lease_keepalive(e, 0x73, &ttl, soon(), -1, &err);
    test_etcd_resume(&srv, 0);
    assert_int_equal(rc, DLOCK_EUNKNOWN);
    assert_non_null(strstr(dlock__err_str(&err), "no reply in time"));
    /* The member answers again once resumed. */
    int64_t t0 = dlock__now_ns();
    dlock__errbuf rerr = {0};
    rc = dlock__etcd_lease_revoke(e, 0x73, soon(), -1, &rerr, NULL);
    if (rc != DLOCK_OK)
        fail_msg("revoke after the resume: %s after %lld ms: %s", dlock_errname(rc),
                 (long long)((dlock__now_ns() - t0) / 1000000), dlock__err_str(&rerr));
    dlock__err_free(&rerr);
    dlock__err_free(&err);
    dlock__etcd_free(e);
}

static void server_errors_map_to_documented_codes(void **state)
{
    (void)state;
    assert_int_equal(dlock__etcd_map_error(16, "etcdserver: invalid auth token"), DLOCK_EAUTH);
    assert_int_equal(dlock__etcd_map_error(7, "etcdserver: permission denied"), DLOCK_EAUTH);
    assert_int_equal(dlock__etcd_map_error(3, "etcdserver: authentication failed, invalid user ID or password"), DLOCK_EAUTH);
    assert_int_equal(dlock__etcd_map_error(3, "etcdserver: user name is empty"), DLOCK_EAUTH);
    assert_int_equal(dlock__etcd_map_error(3, "etcdserver: too many operations in txn request"), DLOCK_EREFUSED);
    assert_int_equal(dlock__etcd_map_error(5, "etcdserver: requested lease not found"), DLOCK_EEXPIRED);
    assert_int_equal(dlock__etcd_map_error(14, "etcdserver: request timed out"), DLOCK_EUNKNOWN);
    assert_int_equal(dlock__etcd_map_error(14, "etcdserver: leader changed"), DLOCK_EUNKNOWN);
    assert_int_equal(dlock__etcd_map_error(14, "etcdserver: no leader"), DLOCK_EBUSY);
    assert_int_equal(dlock__etcd_map_error(8, "etcdserver: too many requests"), DLOCK_EBUSY);
    assert_int_equal(dlock__etcd_map_error(8, "etcdserver: mvcc: database space exceeded"), DLOCK_EREFUSED);
    assert_int_equal(dlock__etcd_map_error(4, "context deadline exceeded"), DLOCK_EUNKNOWN);
    assert_int_equal(dlock__etcd_map_error(9, "etcdserver: lease already exists"), DLOCK_EREFUSED);
}

/* Authentication on a member of its own, so the others need none. */
static void auth_refused_is_eauth_and_accepted_works(void **state)
{
    (void)state;
    test_etcd a;
    assert_int_equal(test_etcd_start(&a, 1), 0);
    dlock__etcd *e = client_for(a.url, 2000);
    json_t *rep = NULL;
    json_t *req = json_pack("{s:s, s:s}", "name", "root", "password", "pw");
    assert_int_equal(dlock__etcd_post(e, "/v3/auth/user/add", req, &rep, soon(), -1, NULL, NULL, NULL),
                     DLOCK_OK);
    json_decref(req);
    json_decref(rep);
    req = json_pack("{s:s, s:s}", "user", "root", "role", "root");
    assert_int_equal(dlock__etcd_post(e, "/v3/auth/user/grant", req, &rep, soon(), -1, NULL, NULL, NULL),
                     DLOCK_OK);
    json_decref(req);
    json_decref(rep);
    req = json_object();
    assert_int_equal(dlock__etcd_post(e, "/v3/auth/enable", req, &rep, soon(), -1, NULL, NULL, NULL),
                     DLOCK_OK);
    json_decref(req);
    json_decref(rep);
    int64_t ttl;
    dlock__errbuf err = {0};
    /* no credentials: etcd 3.4 grants leases to anyone, but keys are
     * guarded */
    dlock__etcd_kv kv;
    assert_int_equal(dlock__etcd_get(e, "a", 1, &kv, soon(), -1, &err), DLOCK_EAUTH);
    assert_non_null(strstr(dlock__err_str(&err), "user name is empty"));
    dlock__etcd_free(e);
    /* wrong password */
    char url[200];
    snprintf(url, sizeof url, "etcd://root:nope@127.0.0.1:%d", a.m[0].client_port);
    e = client_for(url, 2000);
    dlock__err_clear(&err);
    assert_int_equal(dlock__etcd_lease_grant(e, 0x81, 5, &ttl, soon(), -1, &err), DLOCK_EAUTH);
    assert_non_null(strstr(dlock__err_str(&err), "authentication failed"));
    dlock__etcd_free(e);
    /* right password */
    snprintf(url, sizeof url, "etcd://root:pw@127.0.0.1:%d", a.m[0].client_port);
    e = client_for(url, 2000);
    assert_int_equal(dlock__etcd_lease_grant(e, 0x81, 5, &ttl, soon(), -1, NULL), DLOCK_OK);
    assert_int_equal(dlock__etcd_get(e, "a", 1, &kv, soon(), -1, NULL), DLOCK_OK);
    assert_null(kv.key);
    assert_int_equal(dlock__etcd_lease_revoke(e, 0x81, soon(), -1, NULL, NULL), DLOCK_OK);
    dlock__etcd_free(e);
    dlock__err_free(&err);
    test_etcd_stop(&a);
}

/* Calls one after another take the pooled transfer and its connection:
 * the first call's TCP connection is still the only one after twenty
 * more (a pooled transfer is bound to each call's own loop in turn, and a
 * socket curl keeps is carried from one to the next). */
static void calls_one_after_another_reuse_one_connection(void **state)
{
    (void)state;
    unsigned long first = 0, now = 0;
    int before = test_tcp_connections(0, &now);
    dlock__etcd *e = client_for(srv.url, 1000);
    int64_t ttl = 0;
    assert_int_equal(dlock__etcd_lease_grant(e, 0x5151, 5, &ttl, soon(), -1, NULL), DLOCK_OK);
    assert_int_equal(test_tcp_connections(0, &first), before + 1);
    for (int i = 0; i < 20; i++)
        assert_int_equal(dlock__etcd_lease_keepalive(e, 0x5151, &ttl, soon(), -1, NULL),
                         DLOCK_OK);
    assert_int_equal(dlock__etcd_lease_revoke(e, 0x5151, soon(), -1, NULL, NULL), DLOCK_OK);
    assert_int_equal(test_tcp_connections(0, &now), before + 1);
    assert_true(now == first || before > 0); /* the same connection */
    dlock__etcd_free(e);
    assert_int_equal(test_tcp_connections(0, &now), before);
}

/* A request cancelled while its member does not answer (SIGSTOP), and the
 * client freed at once: the transport lets go of it without touching the
 * freed request or client. Over the gateway the transfer is cut; over
 * gRPC (the _grpc row, etcd_grpc.c) the call is cancelled in the C core
 * and completes after the cancel, into a record the completion-queue
 * thread frees before the client's free returns (ASan: no leak, no use
 * after free). */
typedef struct cancel_waiter {
    dlock_lock *l;
    int rc;
} cancel_waiter;

static void *acquire_thread(void *arg)
{
    cancel_waiter *w = arg;
    w->rc = dlock_lock_acquire(w->l, 10000);
    return NULL;
}

static void a_cancel_while_the_member_is_stopped_then_a_free_is_clean(void **state)
{
    (void)state;
    for (int round = 0; round < 3; round++) {
        dlock_client *c = test_etcd_client(&srv, 0, 1000);
        assert_non_null(c);
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 5000;
        dlock_lock *l = test_lock_with(c, "cancel-free", &o);
        /* a first request, so that the connection is up and the next one
         * is surely sent, then the member stops answering */
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        test_etcd_pause(&srv, 0);
        cancel_waiter w = {l, -99};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, acquire_thread, &w), 0);
        test_sleep_ms(300 + 100 * round);
        dlock_lock_cancel(l);
        pthread_join(t, NULL);
        assert_int_equal(w.rc, DLOCK_ECANCELED);
        dlock_lock_free(l);
        /* the cancelled call may not be over yet (the free also tidies
         * up on the stopped member: an io_timeout_ms) */
        dlock_client_free(c);
        test_etcd_resume(&srv, 0);
    }
}

/* A gRPC client whose only member was killed keeps a watch of the
 * channel on its completion queue, so that a reconnect's I/O runs (gRPC
 * runs it only under a poller): the queue thread sleeps in it and wakes
 * once per change of the channel's state (a reconnect tried and
 * refused, about one a second at the longest backoff), not on a timer
 * (the watch's 200 ms deadline made again: five a second more, for as
 * long as the member stayed dead). The restarted member's channel still
 * reconnects, and the next acquire succeeds; a client freed while its
 * channel connects is freed at once. Over the gateway there is
 * no such thread: skipped. */
static void a_dead_members_channel_lets_the_queue_thread_sleep(void **state)
{
    (void)state;
    if (!test_etcd_grpc())
        skip();
    dlock_client *c = test_etcd_client(&srv, 0, 500);
    assert_non_null(c);
    dlock_lock *l = test_lock_new(c, "grpc-dead-sleeps", 5000, 0, 10, 50);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    test_etcd_kill9(&srv, 0);
    assert_int_not_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_sleep_ms(500);
    long from = test_thread_wakeups("dlock-grpc");
    test_sleep_ms(4000);
    long woke = test_thread_wakeups("dlock-grpc") - from;
    print_message("the queue thread woke %ld times in 4 s with its member dead\n", woke);
    /* a free while the channel connects ends its watch, which has no
     * deadline (it would wait for ever) */
    dlock_client *c2 = test_etcd_client(&srv, 0, 500);
    assert_non_null(c2);
    dlock_lock *l2 = test_lock_new(c2, "grpc-dead-sleeps", 5000, 0, 10, 50);
    assert_int_not_equal(dlock_lock_acquire(l2, 0), DLOCK_OK);
    dlock_lock_free(l2);
    dlock_client_free(c2);
    assert_int_equal(test_etcd_restart(&srv, 0), 0);
    assert_int_equal(dlock_lock_acquire(l, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
    assert_true(from > 0); /* the thread is there, named */
    assert_true(woke <= 20); /* the 200 ms timer alone was 20 */
}

/* Issue (gwatch, problem 2): over gRPC the first call after a member's
 * restart was once DLOCK_EUNKNOWN (test_etcd_wait's settler test, CI,
 * ASan), as if it went out on the dead connection. Here: one member, a
 * lock cycle, the member killed and started again, the next acquire and
 * release, five times. Over the gateway both must succeed; over gRPC an
 * acquire that went out on the old connection may end unknown (the C
 * core does not say to its caller that a call never left: see
 * docs/backends.md), so that is counted and printed, not failed, and a
 * release after a granted acquire must succeed (the connection is new). */
static void the_first_cycle_after_a_member_restart(void **state)
{
    (void)state;
    dlock_client *c = test_etcd_client(&srv, 0, 1000);
    assert_non_null(c);
    dlock_lock *l = test_lock_new(c, "restart-cycle", 5000, 0, 10, 50);
    int unknown = 0;
    for (int round = 0; round < 5; round++) {
        /* waits out the key of an unknown acquire before (its lease) */
        assert_int_equal(dlock_lock_acquire(l, 10000), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        test_etcd_kill9(&srv, 0);
        assert_int_equal(test_etcd_restart(&srv, 0), 0);
        int rc = dlock_lock_acquire(l, 0);
        if (rc == DLOCK_EUNKNOWN && test_etcd_grpc()) {
            print_message("round %d: acquire %s: %s\n", round, dlock_errname(rc),
                          dlock_lock_errmsg(l));
            unknown++;
            continue;
        }
        assert_int_equal(rc, DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    }
    print_message("the first acquire after a restart: %d of 5 unknown\n", unknown);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Review (relsettle): each retry of a wait against a member that never
 * answers leaves its place's leave owed to the client's settler
 * (etcd_step.c, dlock__etcd_step_owe), one record per retry, each sent
 * again every second: for 60 s for a lease of its own whose TTL was never
 * learned, for ever (INT64_MAX) for a key on a session. So a wait during
 * an outage leaves a background load that grows with the wait's length,
 * and that all lands on the cluster the moment it answers again. The
 * "member" here reads each request and closes (sent, no reply); it counts
 * connections (one per request: an unanswered transfer is cut). Before
 * the settler nothing was sent after the acquire returned. */
typedef struct silent_member {
    int fd;
    atomic_long conns;
    atomic_int stop;
} silent_member;

static void *silent_accept(void *arg)
{
    silent_member *m = arg;
    while (!atomic_load(&m->stop)) {
        struct pollfd p = {.fd = m->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(m->fd, NULL, NULL);
        if (fd < 0)
            continue;
        atomic_fetch_add(&m->conns, 1);
        char buf[4096];
        (void)recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        close(fd);
    }
    return NULL;
}

/* The silent member on a loopback port, its accepting thread t, and a
 * client of it alone (io_timeout 100 ms). */
static dlock_client *silent_start(silent_member *m, pthread_t *t)
{
    *m = (silent_member){.fd = socket(AF_INET, SOCK_STREAM, 0)};
    assert_true(m->fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(m->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(m->fd, 512), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(m->fd, (struct sockaddr *)&a, &al), 0);
    char url[64];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d", ntohs(a.sin_port));
    assert_int_equal(pthread_create(t, NULL, silent_accept, m), 0);
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.io_timeout_ms = 100;
    o.connect_timeout_ms = 100;
    const char *urls[] = {url};
    return test_client_new(urls, 1, &o);
}

static void silent_stop(silent_member *m, pthread_t t)
{
    atomic_store(&m->stop, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    close(m->fd);
}

static void a_failed_wait_leaves_no_growing_background_load(unsigned flags)
{
    silent_member m;
    pthread_t t;
    dlock_client *c = silent_start(&m, &t);
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = 5000;
    lo.flags = flags;
    dlock_lock *l = test_lock_with(c, "review-owed-load", &lo);
    int rc = dlock_lock_acquire(l, 3000);
    long during = atomic_load(&m.conns);
    test_sleep_ms(1000);
    long from = atomic_load(&m.conns);
    test_sleep_ms(3000);
    long after = atomic_load(&m.conns) - from;
    printf("# %s: acquire(3000) %s, %ld requests during it, %ld in 3 s starting 1 s after it "
           "returned\n",
           flags ? "session" : "own lease", dlock_errname(rc), during, after);
    dlock_lock_free(l);
    dlock_client_free(c);
    silent_stop(&m, t);
    assert_int_not_equal(rc, DLOCK_OK);
    /* a few leaves still owed may be sent again, not one per retry */
    assert_true(after <= 15);
}

static void a_failed_wait_leaves_no_growing_load_own_lease(void **state)
{
    (void)state;
    a_failed_wait_leaves_no_growing_background_load(0);
}

static void a_failed_wait_leaves_no_growing_load_session(void **state)
{
    (void)state;
    a_failed_wait_leaves_no_growing_background_load(DLOCK_AUTO_RENEW);
}

/* Requests the silent member got in the 3 s starting 1 s after n
 * leaves were owed, by one handle (owners 1) or by n handles. */
static long owed_load(silent_member *m, dlock_client *c, int n, int owners)
{
    static char handles[256];
    assert_true(n <= (int)sizeof handles);
    for (int i = 0; i < n; i++) {
        dlock__etcd_hold h = {.lease = 7000 + i, .ttl_s = 5, .valid_until_ns = dlock__now_ns()};
        dlock__etcd_owe(DLOCK__ETCD_EC(c), NULL, &h,
                        &(dlock__etcd_owed_by){.owner = &handles[owners > 1 ? i : 0],
                                               .leave = 1, .sent_ns = INT64_MAX});
    }
    test_sleep_ms(1000);
    long from = atomic_load(&m->conns);
    test_sleep_ms(3000);
    return atomic_load(&m->conns) - from;
}

/* The settler keeps one owed leave per handle (a newer replaces the
 * older) and 64 records per client (past that the oldest goes), each
 * sent again about once a second while nobody answers: 200 leaves of one
 * handle are about 3 requests in 3 s, of 200 handles about 3 x 64 (600
 * without the cap). */
static void owed_leaves_are_one_per_handle_and_capped(void **state)
{
    (void)state;
    /* a connection per request holds over the gateway only: gRPC keeps
     * one and backs off its reconnects */
    const char *transport = getenv("DLOCK_ETCD_TRANSPORT");
    if (transport && strcmp(transport, "grpc") == 0)
        skip();
    silent_member m;
    pthread_t t;
    dlock_client *c = silent_start(&m, &t);
    long one = owed_load(&m, c, 200, 1);
    long many = owed_load(&m, c, 200, 200);
    printf("# 200 leaves owed by one handle: %ld requests in 3 s; by 200 handles: %ld\n", one,
           many);
    dlock_client_free(c);
    silent_stop(&m, t);
    assert_true(one >= 1 && one <= 8);
    assert_true(many >= 64 && many <= 64 * 4 + 8);
}

/* key on lease, as a plain put: its create revision. */
static int64_t put_on(dlock__etcd *e, const char *key, int64_t lease)
{
    json_t *req = json_pack("{s:o, s:o, s:o}", "key", dlock__etcd_json_b64(key, strlen(key)),
                            "value", dlock__etcd_json_b64("v", 1), "lease",
                            dlock__etcd_json_of_i64(lease));
    json_t *rep = NULL;
    assert_int_equal(dlock__etcd_post(e, "/v3/kv/put", req, &rep, soon(), -1, NULL, NULL, NULL),
                     DLOCK_OK);
    json_decref(req);
    json_decref(rep);
    dlock__etcd_kv kv;
    assert_int_equal(dlock__etcd_get(e, key, strlen(key), &kv, soon(), -1, NULL), DLOCK_OK);
    assert_non_null(kv.key);
    int64_t rev = kv.create_rev;
    dlock__etcd_kv_clear(&kv);
    return rev;
}

static int key_there(dlock__etcd *e, const char *key)
{
    dlock__etcd_kv kv;
    assert_int_equal(dlock__etcd_get(e, key, strlen(key), &kv, soon(), -1, NULL), DLOCK_OK);
    int there = kv.key != NULL;
    dlock__etcd_kv_clear(&kv);
    return there;
}

/* An owed delete of a key on a session compares the key's create
 * revision too, when known: the same key made again on the same lease
 * after the hold's (a later create) is not the owed one and stays; the
 * owed delete of the key as it is now deletes it. */
static void an_owed_key_delete_spares_the_key_made_again(void **state)
{
    (void)state;
    const char *key = "owed-rev/0123456789abcdef";
    const int64_t lease = 0x5e551011;
    dlock__etcd *e = client_for(srv.url, 1000);
    int64_t ttl = 0;
    assert_int_equal(dlock__etcd_lease_grant(e, lease, 30, &ttl, soon(), -1, NULL), DLOCK_OK);
    int64_t first = put_on(e, key, lease);
    json_t *rep = NULL;
    json_t *del = dlock__etcd_key_delete_body(key, strlen(key), lease);
    assert_int_equal(dlock__etcd_post(e, "/v3/kv/txn", del, &rep, soon(), -1, NULL, NULL, NULL),
                     DLOCK_OK);
    json_decref(del);
    json_decref(rep);
    int64_t again = put_on(e, key, lease);
    assert_true(again > first);
    const char *urls[] = {srv.url};
    dlock_client *c = test_client_new(urls, 1, NULL);
    dlock__etcd_hold h = {.lease = lease, .rev = first, .ttl_s = 30, .key = (char *)key,
                          .key_len = strlen(key), .on_session = 1,
                          .valid_until_ns = dlock__deadline_after_ms(30000)};
    dlock__etcd_owed_by by = {.owner = &h, .sent_ns = dlock__now_ns()};
    dlock__etcd_owe(DLOCK__ETCD_EC(c), NULL, &h, &by);
    test_sleep_ms(600); /* sent again 0.1 s after it was owed: "not found" */
    int spared = key_there(e, key);
    h.rev = again;
    dlock__etcd_owe(DLOCK__ETCD_EC(c), NULL, &h, &by);
    test_sleep_ms(600);
    int deleted = !key_there(e, key);
    dlock_client_free(c);
    assert_int_equal(dlock__etcd_lease_revoke(e, lease, soon(), -1, NULL, NULL), DLOCK_OK);
    dlock__etcd_free(e);
    assert_true(spared);
    assert_true(deleted);
}

/* Two keys' deletes owed under one owner (a handle freed during an
 * outage and a new one made at its address: the settler cannot tell
 * them apart by the handle): both are settled. The older was dropped
 * when records were matched by their handle, and its key stayed on the
 * session's lease, kept alive, until the client ended. */
static void owed_key_deletes_of_two_keys_by_one_handle_both_settle(void **state)
{
    (void)state;
    const char *keys[] = {"owed-a/0123456789abcdef", "owed-b/0123456789abcdef"};
    const int64_t lease = 0x5e551012;
    dlock__etcd *e = client_for(srv.url, 1000);
    int64_t ttl = 0;
    assert_int_equal(dlock__etcd_lease_grant(e, lease, 30, &ttl, soon(), -1, NULL), DLOCK_OK);
    const char *urls[] = {srv.url};
    dlock_client *c = test_client_new(urls, 1, NULL);
    static char handle; /* the one address both handles had */
    for (int i = 0; i < 2; i++) {
        dlock__etcd_hold h = {.lease = lease, .rev = put_on(e, keys[i], lease), .ttl_s = 30,
                              .key = (char *)keys[i], .key_len = strlen(keys[i]),
                              .on_session = 1, .valid_until_ns = dlock__deadline_after_ms(30000)};
        dlock__etcd_owe(DLOCK__ETCD_EC(c), NULL, &h,
                        &(dlock__etcd_owed_by){.owner = &handle, .sent_ns = dlock__now_ns()});
    }
    test_sleep_ms(600); /* each sent again 0.1 s after it was owed */
    int a_there = key_there(e, keys[0]), b_there = key_there(e, keys[1]);
    dlock_client_free(c);
    assert_int_equal(dlock__etcd_lease_revoke(e, lease, soon(), -1, NULL, NULL), DLOCK_OK);
    dlock__etcd_free(e);
    assert_false(b_there);
    assert_false(a_there);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lease_grant_keepalive_revoke_round_trip),
        cmocka_unit_test(lease_too_short_is_raised_to_the_minimum),
        cmocka_unit_test(create_is_idempotent_and_first_is_the_oldest),
        cmocka_unit_test(watch_says_look_when_the_key_is_deleted),
        cmocka_unit_test(a_stopped_watch_never_ends),
        cmocka_unit_test(unreachable_member_is_eio_and_named),
        cmocka_unit_test(a_dead_member_is_skipped),
        cmocka_unit_test(a_paused_member_leaves_the_outcome_unknown),
        cmocka_unit_test(server_errors_map_to_documented_codes),
        cmocka_unit_test(auth_refused_is_eauth_and_accepted_works),
        cmocka_unit_test(calls_one_after_another_reuse_one_connection),
        cmocka_unit_test(a_cancel_while_the_member_is_stopped_then_a_free_is_clean),
        cmocka_unit_test(a_dead_members_channel_lets_the_queue_thread_sleep),
        cmocka_unit_test(the_first_cycle_after_a_member_restart),
        cmocka_unit_test(a_failed_wait_leaves_no_growing_load_own_lease),
        cmocka_unit_test(a_failed_wait_leaves_no_growing_load_session),
        cmocka_unit_test(owed_leaves_are_one_per_handle_and_capped),
        cmocka_unit_test(an_owed_key_delete_spares_the_key_made_again),
        cmocka_unit_test(owed_key_deletes_of_two_keys_by_one_handle_both_settle),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
