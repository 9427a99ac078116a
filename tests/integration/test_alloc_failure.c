/* SPDX-License-Identifier: BSD-3-Clause */
/* Every allocation dlock makes on a path fails in turn, against real
 * redis-server processes: client and handle creation, acquire (one node,
 * Redlock, auto-renew, waiting with wake-ups), release, extend and a
 * watchdog renewal round. For each path the allocations are first counted
 * (dlock__alloc_fail_after(-1) returns how many were made), then for
 * k = 0..count-1 the path runs with every allocation after the k-th
 * failing. Each run must return a clean code (DLOCK_ENOMEM, or
 * DLOCK_ENOQUORUM when several nodes failed that way), leak nothing (ASan's
 * leak checker runs this in `make check`), and leave Redis consistent with
 * what the handle believes: no lock key behind a failed acquire. No run
 * reports a node error for it (the memory was ours, not the node's).
 *
 * hiredis' own allocations are not covered: hiredis 0.14 has no allocator
 * hook, so only dlock's allocations (through dlock__malloc and friends)
 * fail. Each path runs twice: with pool_size 0 (every call makes a new
 * connection and its handshake) and with a warm pool (the steady state).
 * A second group runs the connection paths again over TLS (rediss://
 * servers): OpenSSL's own allocations are not injected either, but dlock's
 * TLS context and sessions are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "engine.h"
#include "handle.h"
#include "loop_poll.h"
#include "watchdog.h"

#define N_NODES 3
#define KEY "alloc:lock"

static test_redis srv[N_NODES];

typedef struct fx {
    dlock_client *c;
    dlock_lock *l;
    const struct path *p;
} fx;

typedef struct path {
    const char *name;
    int nodes;      /* 1 or N_NODES */
    int pool;       /* pool_size; > 0 also warms the pool in prepare */
    int wakeups;
    unsigned flags;
    int64_t ttl_ms;
    void (*prepare)(fx *f); /* injection off */
    int (*run)(fx *f);      /* under injection */
    void (*verify)(fx *f, int rc); /* injection off */
} path;

/* ---- Redis-side state ---------------------------------------------------- */

/* Nodes whose lock key holds `token` (any owner if token is NULL). Plain
 * locks are strings; reentrant ones hashes keyed by owner. */
static int nodes_holding(const fx *f, const char *token)
{
    int n = 0;
    for (int i = 0; i < f->p->nodes; i++) {
        redisReply *r = test_redis_cmd(&srv[i], "EXISTS %s", KEY);
        assert_non_null(r);
        int exists = r->integer == 1;
        freeReplyObject(r);
        if (!exists)
            continue;
        if (!token) {
            n++;
            continue;
        }
        r = (f->p->flags & DLOCK_REENTRANT) ? test_redis_cmd(&srv[i], "HEXISTS %s %s", KEY, token)
                                            : test_redis_cmd(&srv[i], "GET %s", KEY);
        assert_non_null(r);
        if ((r->type == REDIS_REPLY_INTEGER && r->integer == 1) ||
            (r->type == REDIS_REPLY_STRING && !strcmp(r->str, token)))
            n++;
        freeReplyObject(r);
    }
    return n;
}

static int64_t max_pttl(const fx *f)
{
    int64_t m = -2;
    for (int i = 0; i < f->p->nodes; i++) {
        redisReply *r = test_redis_cmd(&srv[i], "PTTL %s", KEY);
        assert_non_null(r);
        if (r->integer > m)
            m = r->integer;
        freeReplyObject(r);
    }
    return m;
}

static void wipe(void)
{
    for (int i = 0; i < N_NODES; i++) {
        redisReply *r = test_redis_cmd(&srv[i], "FLUSHALL");
        assert_non_null(r);
        freeReplyObject(r);
    }
}

/* ---- fixture --------------------------------------------------------------- */

static const char *urls[N_NODES];
static test_tls_certs certs;
static const char *tls_ca; /* set while the TLS group runs */

/* Node events that blame a node for our own memory (none may). */
static _Atomic int enomem_events;

static void on_node(void *arg, const dlock_node_event *ev)
{
    (void)arg;
    if (ev->error == DLOCK_ENOMEM)
        enomem_events++;
}

static const dlock_observer observer = {.version = DLOCK_OBSERVER_VERSION, .node_event = on_node};

static void fx_open(fx *f, const path *p)
{
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.observer = &observer;
    enomem_events = 0;
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    memset(f, 0, sizeof *f);
    f->p = p;
    co.pool_size = p->pool;
    co.wakeups = p->wakeups;
    co.tls_ca_file = tls_ca;
    if (tls_ca) {
        /* Every run makes new connections, each with a TLS handshake: on
         * a loaded 2-core VM one can take longer than the 1 s default, and
         * a node missing from the prepared state would change what the
         * run under injection may answer. */
        co.connect_timeout_ms = co.io_timeout_ms = 5000;
    }
    lo.ttl_ms = p->ttl_ms;
    lo.flags = p->flags;
    lo.retry_min_ms = 5;
    lo.retry_max_ms = 10;
    assert_int_equal(dlock_client_new(&f->c, urls, (size_t)p->nodes, &co, NULL, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_new(&f->l, f->c, KEY, &lo), DLOCK_OK);
    if (p->pool > 0) {
        /* Warm the pool: connections exist and have loaded the scripts. */
        dlock_node_status st[N_NODES];
        assert_int_equal(dlock_client_status(f->c, "alloc:warm", N_NODES, st, NULL), DLOCK_OK);
    }
}

static void fx_close(fx *f)
{
    dlock__alloc_fail_after(-1);
    assert_int_equal(enomem_events, 0);
    dlock_lock_free(f->l);
    dlock_client_free(f->c);
    f->l = NULL;
    f->c = NULL;
    wipe();
}

static int is_clean_error(const fx *f, int rc)
{
    return rc == DLOCK_ENOMEM || (f->p->nodes > 1 && rc == DLOCK_ENOQUORUM);
}

/* ---- paths ----------------------------------------------------------------- */

static void prep_none(fx *f)
{
    (void)f;
}

static void prep_acquired(fx *f)
{
    assert_int_equal(dlock_lock_acquire(f->l, 0), DLOCK_OK);
}

static void prep_contended(fx *f)
{
    (void)f;
    redisReply *r = test_redis_cmd(&srv[0], "SET %s other PX 60000", KEY);
    assert_non_null(r);
    freeReplyObject(r);
}

static int run_acquire(fx *f)
{
    return dlock_lock_acquire(f->l, 0);
}

static int run_acquire_wait(fx *f)
{
    return dlock_lock_acquire(f->l, 40);
}

static int run_release(fx *f)
{
    return dlock_lock_release(f->l);
}

static int run_extend(fx *f)
{
    return dlock_lock_extend(f->l, 0);
}

/* Let the watchdog's first round (due ttl/3 after the acquire) run under
 * injection: until it completed, or 150 ms after it was due (a round whose
 * allocations fail is retried every interval/4, or 10 ms when even its item
 * array cannot be had). The lease then has more than half a TTL left. */
static int run_round(fx *f)
{
    dlock__watchdog_stats st;
    int64_t until = test_now_ms() + f->p->ttl_ms / 3 + 150;
    do {
        dlock__watchdog_get_stats(f->c, &st);
        if (st.rounds >= 1)
            break;
        test_sleep_ms(2);
    } while (test_now_ms() < until);
    return DLOCK_OK;
}

/* The handle holds the lock: a majority has our token; release clears it. */
static void expect_held_then_release(fx *f)
{
    int quorum = f->p->nodes / 2 + 1;
    assert_int_equal(dlock_lock_state_get(f->l), DLOCK_STATE_HELD);
    assert_true(nodes_holding(f, dlock_lock_token(f->l)) >= quorum);
    assert_int_equal(dlock_lock_release(f->l), DLOCK_OK);
    /* Released on a majority at once; the release decides there (with a
     * 100 ms grace for the rest), and a node that answers later, or whose
     * first answer is a NOSCRIPT, is sent it again by the handle's next
     * call or its free: a minority may still hold the key now. */
    assert_true(nodes_holding(f, NULL) < quorum);
    if (f->p->nodes == 1)
        assert_int_equal(nodes_holding(f, NULL), 0);
}

static void verify_acquire(fx *f, int rc)
{
    if (rc == DLOCK_OK) {
        expect_held_then_release(f);
        return;
    }
    if (!is_clean_error(f, rc))
        fail_msg("%s: acquire returned %s (%s)", f->p->name, dlock_errname(rc),
                 dlock_lock_errmsg(f->l));
    assert_int_equal(dlock_lock_state_get(f->l), DLOCK_STATE_UNLOCKED);
    /* Nothing held in Redis that the caller was told it did not get. */
    if (nodes_holding(f, NULL) != 0)
        fail_msg("%s: acquire returned %s but left the lock key in Redis (pttl %lld)",
                 f->p->name, dlock_errname(rc), (long long)max_pttl(f));
}

static void verify_acquire_wait(fx *f, int rc)
{
    if (rc != DLOCK_ETIMEDOUT && !is_clean_error(f, rc))
        fail_msg("%s: acquire returned %s (%s)", f->p->name, dlock_errname(rc),
                 dlock_lock_errmsg(f->l));
    assert_int_equal(dlock_lock_state_get(f->l), DLOCK_STATE_UNLOCKED);
    assert_int_equal(nodes_holding(f, "other"), 1);
}

static long released_late; /* release failures that leave the key to its TTL */

static void verify_release(fx *f, int rc)
{
    int quorum = f->p->nodes / 2 + 1;
    assert_int_equal(dlock_lock_state_get(f->l), DLOCK_STATE_UNLOCKED);
    if (rc == DLOCK_OK) {
        /* Released on a majority; a minority node that could not be asked
         * keeps its copy to its TTL, which no majority can be built on. */
        assert_true(nodes_holding(f, NULL) < quorum);
        if (f->p->nodes == 1)
            assert_int_equal(nodes_holding(f, NULL), 0);
        return;
    }
    if (!is_clean_error(f, rc))
        fail_msg("%s: release returned %s", f->p->name, dlock_errname(rc));
    /* Documented: after any return the handle holds nothing. A release
     * that could not be sent leaves the key to expire with its TTL. */
    if (nodes_holding(f, NULL) > 0) {
        int64_t pttl = max_pttl(f);
        assert_true(pttl > 0 && pttl <= f->p->ttl_ms);
        released_late++;
    }
}

static void verify_extend(fx *f, int rc)
{
    if (rc != DLOCK_OK && !is_clean_error(f, rc))
        fail_msg("%s: extend returned %s", f->p->name, dlock_errname(rc));
    /* A failed extend keeps the lease it had. */
    expect_held_then_release(f);
}

static void verify_round(fx *f, int rc)
{
    dlock__watchdog_stats st;
    assert_int_equal(rc, DLOCK_OK);
    /* A round that could not run is retried while the lease lasts. */
    int64_t until = test_now_ms() + 5000;
    do {
        dlock__watchdog_get_stats(f->c, &st);
        if (st.renewed >= 1 || st.lost > 0)
            break;
        test_sleep_ms(5);
    } while (test_now_ms() < until);
    if (st.renewed < 1 || st.lost != 0)
        fail_msg("%s: after the failing round: rounds %lu renewed %lu lost %lu, state %d, "
                 "validity %lld ms", f->p->name, st.rounds, st.renewed, st.lost,
                 (int)dlock_lock_state_get(f->l), (long long)dlock_lock_validity_ms(f->l));
    expect_held_then_release(f);
}

/* ---- the driver ------------------------------------------------------------ */

/* The current fixture, closed by teardown if a test fails half-way. */
static fx f;

static void every_failure(const path *p)
{
    fx_open(&f, p);
    p->prepare(&f);
    dlock__alloc_fail_after(-1);
    int rc = p->run(&f);
    long count = dlock__alloc_fail_after(-1);
    p->verify(&f, rc);
    fx_close(&f);
    print_message("%-32s %3ld allocations\n", p->name, count);
    released_late = 0;
    /* A few more than counted: helper threads may allocate a little more
     * in one run than in another. */
    for (long k = 0; k < count + 2; k++) {
        fx_open(&f, p);
        p->prepare(&f);
        dlock__alloc_fail_after(k);
        rc = p->run(&f);
        dlock__alloc_fail_after(-1);
        p->verify(&f, rc);
        fx_close(&f);
    }
    if (released_late)
        print_message("%-32s %3ld failed releases left the key to its TTL\n", p->name,
                      released_late);
}

#define P(name, nodes, pool, wake, flags, ttl, prep, run, verify)                                  \
    static void name(void **state)                                                             \
    {                                                                                          \
        static const path p = {#name, nodes, pool, wake, flags, ttl, prep, run, verify};        \
        (void)state;                                                                           \
        every_failure(&p);                                                                     \
    }

/* Over several nodes a node gets ttl/10 to answer (quorum.c). Under
 * valgrind, fresh TLS handshakes to three servers on a loaded 2-core VM
 * took longer than the 500 ms a 5 s lease allows, so the setup's acquire
 * (or the extend after it) failed for reasons that are not the injected
 * allocation failure. A 30 s lease gives every node 3 s. */
#define REDLOCK_TTL_MS 30000

P(acquire_fresh_connection, 1, 0, 0, 0, 5000, prep_none, run_acquire, verify_acquire)
P(acquire_pooled_connection, 1, 4, 0, 0, 5000, prep_none, run_acquire, verify_acquire)
P(acquire_redlock_fresh, N_NODES, 0, 0, 0, REDLOCK_TTL_MS, prep_none, run_acquire, verify_acquire)
P(acquire_redlock_pooled, N_NODES, 4, 0, 0, REDLOCK_TTL_MS, prep_none, run_acquire, verify_acquire)
P(acquire_auto_renew_fresh, 1, 0, 0, DLOCK_AUTO_RENEW, 5000, prep_none, run_acquire,
  verify_acquire)
P(acquire_auto_renew_pooled, 1, 4, 0, DLOCK_AUTO_RENEW, 5000, prep_none, run_acquire,
  verify_acquire)
P(acquire_reentrant_pooled, 1, 4, 0, DLOCK_REENTRANT, 5000, prep_none, run_acquire,
  verify_acquire)
P(acquire_waiting_with_wakeups, 1, 4, 1, 0, 5000, prep_contended, run_acquire_wait,
  verify_acquire_wait)
/* Fair mode: the engine's wait over fair.c's begin, looks and leave. */
P(acquire_fair_pooled, 1, 4, 0, DLOCK_FAIR, 5000, prep_none, run_acquire, verify_acquire)
P(acquire_fair_waiting_with_wakeups, 1, 4, 1, DLOCK_FAIR, 5000, prep_contended,
  run_acquire_wait, verify_acquire_wait)
P(release_fresh_connection, 1, 0, 0, 0, 5000, prep_acquired, run_release, verify_release)
P(release_redlock_fresh, N_NODES, 0, 0, 0, REDLOCK_TTL_MS, prep_acquired, run_release, verify_release)
P(extend_fresh_connection, 1, 0, 0, 0, 5000, prep_acquired, run_extend, verify_extend)
P(extend_redlock_fresh, N_NODES, 0, 0, 0, REDLOCK_TTL_MS, prep_acquired, run_extend, verify_extend)
P(watchdog_round_fresh, 1, 0, 0, DLOCK_AUTO_RENEW, 1500, prep_acquired, run_round, verify_round)
P(watchdog_round_pooled, N_NODES, 4, 0, DLOCK_AUTO_RENEW, 1500, prep_acquired, run_round,
  verify_round)

/* Free the handle (allocations as they are set now), then, with them
 * back on, no node may still hold the key. */
static void free_and_expect_no_key(fx *x)
{
    dlock_lock_free(x->l);
    dlock__alloc_fail_after(-1);
    x->l = NULL;
    if (nodes_holding(x, NULL))
        print_message("%s: the key outlived the freed handle (PTTL %lld ms)\n", x->p->name,
                      (long long)max_pttl(x));
    assert_int_equal(nodes_holding(x, NULL), 0);
    fx_close(x);
}

/* A blocking release lends its request the record it needs (call.c,
 * op.h's scratch): with every allocation failing it still releases, each
 * hold in turn. A release request made without that loan (an event
 * loop's, engine.h) whose record cannot be allocated sent nothing: as for
 * a release no node answered (release.c, released()), the handle sends it
 * again on free, every hold it dropped with it, instead of leaving the key
 * (and a counted kind's holds) to the TTL. Plain, and reentrant with two
 * holds. */
static void release_done(dlock__engine_req *r)
{
    (void)r;
    fail_msg("a release that could not start answers at once, with no done");
}

static void a_release_that_could_not_start_is_sent_on_free(void **state)
{
    (void)state;
    static const path plain = {"release_unsent", 1, 4, 0, 0, 60000, NULL, NULL, NULL};
    static const path counted = {"release_unsent_reentrant", 1, 4, 0, DLOCK_REENTRANT, 60000,
                                 NULL, NULL, NULL};
    const path *ps[] = {&plain, &counted};
    for (size_t i = 0; i < 2; i++) {
        int holds = ps[i]->flags & DLOCK_REENTRANT ? 2 : 1;
        fx_open(&f, ps[i]);
        for (int h = 0; h < holds; h++)
            assert_int_equal(dlock_lock_acquire(f.l, 0), DLOCK_OK);
        dlock__alloc_fail_after(0);
        for (int h = 0; h < holds; h++)
            assert_int_equal(dlock_lock_release(f.l), DLOCK_OK); /* the loan: no memory needed */
        dlock__alloc_fail_after(-1);
        assert_int_equal(nodes_holding(&f, NULL), 0);

        for (int h = 0; h < holds; h++)
            assert_int_equal(dlock_lock_acquire(f.l, 0), DLOCK_OK);
        dlock__loop_poll lp;
        dlock__loop_poll_init(&lp);
        dlock__engine_req r = {.done = release_done}; /* no scratch */
        dlock__alloc_fail_after(0);
        int rc = dlock__engine_release_start(f.l, &lp.loop, &r);
        dlock__alloc_fail_after(-1);
        dlock__loop_poll_close(&lp);
        assert_int_equal(rc, DLOCK_ENOMEM);
        assert_int_equal(dlock_lock_state_get(f.l), DLOCK_STATE_UNLOCKED);
        assert_int_equal(nodes_holding(&f, NULL), 1); /* nothing was sent */
        free_and_expect_no_key(&f);
    }
}

/* A free that cannot allocate anything still releases what the handle
 * holds: its cleanup's record is the call's (call.c, dlock__call_tidy),
 * not the heap's, so the key does not outlive the handle by a whole TTL.
 * One node and three, on pooled connections (a new connection needs
 * memory: without one nothing can be sent, and the TTL ends it). */
static void a_free_without_memory_still_releases(void **state)
{
    (void)state;
    static const path one = {"free_no_memory", 1, 4, 0, 0, 60000, NULL, NULL, NULL};
    static const path three = {"free_no_memory_redlock", N_NODES, 4, 0, 0, 60000, NULL, NULL,
                               NULL};
    const path *ps[] = {&one, &three};
    for (size_t i = 0; i < 2; i++) {
        fx_open(&f, ps[i]);
        assert_int_equal(dlock_lock_acquire(f.l, 0), DLOCK_OK);
        assert_int_equal(nodes_holding(&f, NULL), ps[i]->nodes);
        dlock__alloc_fail_after(0);
        free_and_expect_no_key(&f);
    }
}

/* An adopt of a long token (past the handle's inline buffer) whose copy
 * cannot be allocated, after a long token was adopted before: the
 * handle is left with no token, and never with the old one's length
 * over the inline buffer (which a later script argument would read past). */
static void a_long_adopt_without_memory_leaves_no_stale_length(void **state)
{
    (void)state;
    static const path one = {"adopt_no_memory", 1, 4, 0, 0, 60000, NULL, NULL, NULL};
    fx_open(&f, &one);
    char t1[DLOCK_TOKEN_MAX + 1], t2[DLOCK_TOKEN_MAX + 1];
    memset(t1, 'a', 100);
    t1[100] = '\0';
    memset(t2, 'b', 90);
    t2[90] = '\0';
    assert_int_equal(dlock_lock_adopt(f.l, t1), DLOCK_OK);
    assert_string_equal(dlock_lock_token(f.l), t1);
    assert_int_equal(dlock_lock_forget(f.l), DLOCK_OK);
    dlock__alloc_fail_after(0);
    assert_int_equal(dlock_lock_adopt(f.l, t2), DLOCK_ENOMEM);
    dlock__alloc_fail_after(-1);
    assert_int_equal(dlock_lock_state_get(f.l), DLOCK_STATE_UNLOCKED);
    assert_int_equal(f.l->token_len, strlen(f.l->token));
    assert_true(f.l->token_len < sizeof f.l->token_inline);
}

/* Creation: client_new (what 0), lock_new on a client (1) or a set of
 * three names on a client (2, dlock_lock_new_multi()) with allocation k
 * failing (k < 0: none). Returns the allocations made. */
static long create_once(int what, long k)
{
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.tls_ca_file = tls_ca;
    const char *names[] = {KEY ":c", KEY ":a", KEY ":b"};
    dlock__alloc_fail_after(what ? -1 : k);
    int rc = dlock_client_new(&c, urls, N_NODES, &co, NULL, 0);
    if (what) {
        assert_int_equal(rc, DLOCK_OK);
        dlock__alloc_fail_after(k);
        rc = what == 1 ? dlock_lock_new(&l, c, KEY, NULL)
                       : dlock_lock_new_multi(&l, c, names, 3, NULL);
    }
    long made = dlock__alloc_fail_after(-1);
    assert_true(rc == DLOCK_OK || (k >= 0 && rc == DLOCK_ENOMEM));
    assert_true(rc == DLOCK_OK || (what ? l == NULL : c == NULL));
    dlock_lock_free(l);
    dlock_client_free(c);
    return made;
}

/* Creation paths: a clean DLOCK_ENOMEM and nothing leaked (a handle left
 * over makes dlock_client_free() abort; ASan finds the rest). */
static void client_and_lock_creation(void **state)
{
    (void)state;
    static const char *const what_name[] = {"client_new", "lock_new", "lock_new_multi"};
    for (int what = 0; what < 3; what++) {
        long count = create_once(what, -1);
        print_message("%-32s %3ld allocations\n", what_name[what], count);
        for (long k = 0; k < count; k++)
            create_once(what, k);
    }
}

static int group_setup(void **state)
{
    (void)state;
    if (test_redis_start_many(srv, N_NODES, NULL) != 0)
        return -1;
    for (int i = 0; i < N_NODES; i++)
        urls[i] = srv[i].url;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fx_close(&f);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    dlock__alloc_fail_after(-1);
    test_redis_stop_many(srv, N_NODES);
    return 0;
}

static int tls_group_setup(void **state)
{
    (void)state;
    if (test_tls_certs_make(&certs) != 0)
        return -1;
    for (int i = 0; i < N_NODES; i++) {
        if (test_redis_start_tls(&srv[i], &certs, 0, NULL) != 0) {
            test_redis_stop_many(srv, i);
            return -1;
        }
        urls[i] = srv[i].url;
    }
    tls_ca = certs.ca;
    return 0;
}

static int tls_group_teardown(void **state)
{
    group_teardown(state);
    tls_ca = NULL;
    test_tls_certs_remove(&certs);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(client_and_lock_creation, teardown),
        cmocka_unit_test_teardown(a_free_without_memory_still_releases, teardown),
        cmocka_unit_test_teardown(a_long_adopt_without_memory_leaves_no_stale_length, teardown),
        cmocka_unit_test_teardown(acquire_fresh_connection, teardown),
        cmocka_unit_test_teardown(acquire_pooled_connection, teardown),
        cmocka_unit_test_teardown(acquire_redlock_fresh, teardown),
        cmocka_unit_test_teardown(acquire_redlock_pooled, teardown),
        cmocka_unit_test_teardown(acquire_auto_renew_fresh, teardown),
        cmocka_unit_test_teardown(acquire_auto_renew_pooled, teardown),
        cmocka_unit_test_teardown(acquire_reentrant_pooled, teardown),
        cmocka_unit_test_teardown(acquire_waiting_with_wakeups, teardown),
        cmocka_unit_test_teardown(acquire_fair_pooled, teardown),
        cmocka_unit_test_teardown(acquire_fair_waiting_with_wakeups, teardown),
        cmocka_unit_test_teardown(release_fresh_connection, teardown),
        cmocka_unit_test_teardown(release_redlock_fresh, teardown),
        cmocka_unit_test_teardown(a_release_that_could_not_start_is_sent_on_free, teardown),
        cmocka_unit_test_teardown(extend_fresh_connection, teardown),
        cmocka_unit_test_teardown(extend_redlock_fresh, teardown),
        cmocka_unit_test_teardown(watchdog_round_fresh, teardown),
        cmocka_unit_test_teardown(watchdog_round_pooled, teardown),
    };
    /* Over TLS: every path that makes or uses a connection. */
    const struct CMUnitTest tls_tests[] = {
        cmocka_unit_test_teardown(client_and_lock_creation, teardown),
        cmocka_unit_test_teardown(acquire_fresh_connection, teardown),
        cmocka_unit_test_teardown(acquire_pooled_connection, teardown),
        cmocka_unit_test_teardown(acquire_redlock_fresh, teardown),
        cmocka_unit_test_teardown(acquire_waiting_with_wakeups, teardown),
        cmocka_unit_test_teardown(release_fresh_connection, teardown),
        cmocka_unit_test_teardown(extend_redlock_fresh, teardown),
        cmocka_unit_test_teardown(watchdog_round_pooled, teardown),
    };
    int failed = cmocka_run_group_tests_name("plain", tests, group_setup, group_teardown);
    failed += cmocka_run_group_tests_name("tls", tls_tests, tls_group_setup, tls_group_teardown);
    return failed;
}
