/* SPDX-License-Identifier: BSD-3-Clause */
/* A session takes its keys again (issue 38, src/etcd/etcd_session.h)
 * against a real member: a key its hold released cleanly is the next
 * hold's on the session, as Go's Mutex takes its session's key each time
 * (etcd keeps a deleted key in its index until a compaction, and each
 * acquire's read of the line walks them all); the key held by one handle
 * is never another's; a lock-delay's, an election term's and a reentrant
 * hold's keys are never taken again; a release that went out twice gives
 * no key back (a late copy of it would delete the next hold's key); and
 * the token names the hold, not only its key (its fence in 16 more
 * digits), so a token of an earlier hold, adopted, neither releases nor
 * extends the later hold of the same key. The waiters of another client
 * come first on a key taken again, in every kind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "dlock.h"
#include "etcd_json.h"
#include "etcd_keys.h"
#include "etcd_kv.h"
#include "etcd_server.h"
#include "proc.h"
#include "proxy.h"
#include "test_util.h"

static test_etcd srv;
static dlock_client *cl;
static dlock__etcd *raw; /* a second client of the member, to look */

static int setup(void **state)
{
    (void)state;
    return test_etcd_setup_raw(&srv, NULL, &cl, &raw);
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_teardown_raw(&srv, cl, raw);
    return 0;
}

static dlock_lock *lock_on(dlock_client *c, const char *name, unsigned flags, unsigned permits)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    o.flags = flags;
    dlock_lock *l = NULL;
    int rc = permits ? dlock_semaphore_new(&l, c, name, permits, &o)
                     : dlock_lock_new(&l, c, name, &o);
    if (rc != DLOCK_OK)
        fail_msg("new handle on %s: %s", name, dlock_errname(rc));
    return l;
}

static void first_key(const char *name, char *out, size_t len)
{
    assert_int_equal(test_etcd_first_key(raw, name, out, len), DLOCK_OK);
}

static size_t keys_under(const char *name)
{
    size_t n = 0;
    assert_int_equal(test_etcd_keys_under(raw, name, &n), DLOCK_OK);
    return n;
}

static const char *held(dlock_lock *l)
{
    return dlock_lock_state_get(l) == DLOCK_STATE_HELD ? "HELD" : "not held";
}

/* Whether a plain lock of a second client gets the name now (released at
 * once if it does): with a's hold intact it must not. */
static int second_gets(const char *name)
{
    dlock_client *c2 = test_etcd_client(&srv, 0, 1000);
    dlock_lock *b = lock_on(c2, name, 0, 0);
    int got = dlock_lock_acquire(b, 0) == DLOCK_OK;
    if (got)
        (void)dlock_lock_release(b);
    dlock_lock_free(b);
    dlock_client_free(c2);
    return got;
}

/* ---- the keys taken again --------------------------------------------------- */

/* The same handle's, and a new handle's of the same name; the key held by
 * one handle is not the other's (two permits, two handles). */
static void a_session_takes_its_released_keys_again(void **state)
{
    (void)state;
    enum { N = 10 };
    dlock_lock *a = lock_on(cl, "keys-again", DLOCK_AUTO_RENEW, 0);
    char first[96], k[96];
    for (int i = 0; i < N; i++) {
        assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
        first_key("keys-again", i ? k : first, sizeof k);
        if (i)
            assert_string_equal(k, first);
        assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    }
    dlock_lock_free(a);
    a = lock_on(cl, "keys-again", DLOCK_AUTO_RENEW, 0); /* a new handle */
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    first_key("keys-again", k, sizeof k);
    assert_string_equal(k, first);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);

    dlock_lock *p = lock_on(cl, "keys-again-sem", DLOCK_AUTO_RENEW, 2);
    dlock_lock *q = lock_on(cl, "keys-again-sem", DLOCK_AUTO_RENEW, 2);
    for (int i = 0; i < N; i++) {
        dlock_lock *x = i % 2 ? p : q, *y = i % 2 ? q : p;
        assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(y, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_release(x), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_OK); /* x's key again, not y's */
        assert_int_equal(keys_under("keys-again-sem"), 2);
        assert_int_equal(dlock_lock_release(x), DLOCK_OK);
        assert_int_equal(dlock_lock_release(y), DLOCK_OK);
    }
    dlock_lock_free(p);
    dlock_lock_free(q);
}

/* A lock-delay's key (its companion is named by the token's ID), an
 * election's term's and a reentrant hold's are never taken again. */
static void some_keys_are_never_taken_again(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        unsigned flags;
        int64_t delay_ms;
    } cases[] = {{"keys-delay", 0, 200}, {"keys-reent", DLOCK_REENTRANT, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 10000;
        o.flags = DLOCK_AUTO_RENEW | cases[c].flags;
        o.lock_delay_ms = cases[c].delay_ms;
        dlock_lock *a = NULL;
        assert_int_equal(dlock_lock_new(&a, cl, cases[c].name, &o), DLOCK_OK);
        char k1[96], k2[96];
        assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
        assert_int_equal(strlen(dlock_lock_token(a)), 16); /* the key's ID alone */
        first_key(cases[c].name, k1, sizeof k1);
        assert_int_equal(dlock_lock_release(a), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
        first_key(cases[c].name, k2, sizeof k2);
        assert_int_equal(dlock_lock_release(a), DLOCK_OK);
        printf("# %s: %s then %s\n", cases[c].name, k1, k2);
        assert_true(k1[0] && k2[0]);
        assert_string_not_equal(k1, k2);
        dlock_lock_free(a);
    }
    dlock_election *e = NULL;
    dlock_election_options eo = DLOCK_ELECTION_OPTIONS_INIT;
    eo.ttl_ms = 10000;
    char t1[96], t2[96];
    assert_int_equal(dlock_election_new(&e, cl, "keys-term", &eo), DLOCK_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(dlock_election_campaign(e, "v", 5000), DLOCK_OK);
        first_key("keys-term", i ? t2 : t1, sizeof t1);
        assert_int_equal(dlock_election_resign(e), DLOCK_OK);
    }
    printf("# keys-term: %s then %s\n", t1, t2);
    assert_string_not_equal(t1, t2);
    dlock_election_free(e);
}

/* ---- a late copy of a release ------------------------------------------------ */

/* A client whose first endpoint is a proxy in front of the member and
 * whose second is the member (300 ms per member): a request the proxy
 * holds up goes again, straight. */
static dlock_client *proxied_first(chaos_proxy *px)
{
    assert_int_equal(chaos_proxy_start(px, srv.m[0].client_port), 0);
    char url[120];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d,127.0.0.1:%d", px->port,
             srv.m[0].client_port);
    const char *u = url;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.io_timeout_ms = 300;
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_new(&c, &u, 1, &o, NULL, 0), DLOCK_OK);
    return c;
}

/* An auto-renewed lock of c on name, held: its key in key. */
static dlock_lock *held_through(dlock_client *c, const char *name, char *key, size_t len)
{
    dlock_lock *a = lock_on(c, name, DLOCK_AUTO_RENEW, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    first_key(name, key, len);
    return a;
}

/* A plain DeleteRange of key through raw, as a release's copy sends it:
 * how many keys it deleted. */
static int raw_delete(const char *key)
{
    json_t *req = json_pack("{s:o}", "key", dlock__etcd_json_b64(key, strlen(key))), *rep = NULL;
    assert_int_equal(dlock__etcd_kv_post(raw, "/v3/kv/deleterange", req, &rep,
                                         dlock__deadline_after_ms(3000), -1, NULL, NULL, NULL),
                     DLOCK_OK);
    int64_t n = 0;
    (void)dlock__etcd_json_i64(rep, "deleted", &n);
    json_decref(rep);
    return (int)n;
}

/* A release whose DeleteRange went out twice (the first copy ran and its
 * reply was lost: the proxy's DEAF mode; the second found nothing, which
 * counts as released) gives no key back: the first copy's late landing,
 * simulated here after the next hold as the taint test simulates a late
 * create, then deletes a key nobody holds, not the next hold's. */
static void a_release_sent_twice_gives_no_key_back(void **state)
{
    (void)state;
    chaos_proxy px;
    dlock_client *c = proxied_first(&px);
    char k1[96], k2[96];
    dlock_lock *a = held_through(c, "keys-twice", k1, sizeof k1);
    assert_int_equal(chaos_proxy_set(&px, CHAOS_PROXY_DEAF, 0), 0);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK); /* copy 1 ran, copy 2 found none */
    assert_int_equal(chaos_proxy_set(&px, CHAOS_PROXY_PASS, 0), 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    first_key("keys-twice", k2, sizeof k2);
    int gone = raw_delete(k1); /* the first copy, late */
    int two = second_gets("keys-twice");
    printf("# release sent twice: %s, next hold %s; the late copy deleted %d key(s); a %s, "
           "b %s\n", k1, k2, gone, held(a), two ? "HELD" : "refused");
    (void)dlock_lock_release(a);
    dlock_lock_free(a);
    dlock_client_free(c);
    chaos_proxy_stop(&px);
    assert_false(two);
    assert_string_not_equal(k1, k2);
}

/* The same with a real late copy: over gRPC a call past its deadline is
 * cut on its connection and the connection stays, so a proxy that holds
 * every chunk 1500 ms delivers the first DeleteRange after the copy sent
 * to the next endpoint deleted the key and the next hold made one. (Over
 * the gateway curl closes the timed-out connection, and this proxy drops
 * what it held.) */
static void a_late_release_copy_leaves_the_next_hold(void **state)
{
    (void)state;
    chaos_proxy px;
    dlock_client *c = proxied_first(&px);
    char k1[96], k2[96];
    dlock_lock *a = held_through(c, "keys-late", k1, sizeof k1);
    assert_int_equal(chaos_proxy_set(&px, CHAOS_PROXY_DELAY, 1500), 0);
    int rc = dlock_lock_release(a); /* copy 1 held by the proxy; copy 2 direct */
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    first_key("keys-late", k2, sizeof k2);
    test_sleep_ms(2500); /* the held copy reaches the member */
    size_t left = keys_under("keys-late");
    int two = second_gets("keys-late");
    printf("# %s: release %s; keys %s then %s; after the late copy %zu key(s); a %s, b %s\n",
           test_etcd_grpc() ? "grpc" : "gateway", dlock_errname(rc), k1, k2, left, held(a),
           two ? "HELD" : "refused");
    (void)dlock_lock_release(a);
    dlock_lock_free(a);
    dlock_client_free(c);
    chaos_proxy_stop(&px);
    assert_false(two);
}

/* ---- the token names the hold -------------------------------------------------- */

/* A hold whose key a later hold may take has a token of 32 hex digits:
 * the key's ID and the hold's fence; dlock_client_holders() lists the
 * same. Adopted after the holder released and took the key again, that
 * token's release is DLOCK_EEXPIRED and its extend DLOCK_ENOTOWNER, and
 * the later hold stands; the later hold's own token adopts it. */
static void a_token_names_its_hold(void **state)
{
    (void)state;
    dlock_lock *a = lock_on(cl, "keys-token", DLOCK_AUTO_RENEW, 0);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char old[DLOCK_TOKEN_MAX + 1], now[DLOCK_TOKEN_MAX + 1];
    snprintf(old, sizeof old, "%s", dlock_lock_token(a));
    assert_int_equal(strlen(old), 32);
    char fence[17];
    snprintf(fence, sizeof fence, "%016llx", (unsigned long long)dlock_lock_fence(a));
    assert_string_equal(old + 16, fence);
    dlock_client *c2 = test_etcd_client(&srv, 0, 1000);
    dlock_holders_info info;
    dlock_holder h[2];
    assert_int_equal(dlock_client_holders(c2, "keys-token", 0, &info, h, 2), DLOCK_OK);
    assert_int_equal(info.count, 1);
    assert_string_equal(h[0].token, old);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK); /* the same key, a later hold */
    snprintf(now, sizeof now, "%s", dlock_lock_token(a));
    assert_memory_equal(old, now, 16);
    assert_string_not_equal(old, now);

    dlock_lock *x = lock_on(c2, "keys-token", 0, 0);
    assert_int_equal(dlock_lock_adopt(x, old), DLOCK_OK);
    int rel = dlock_lock_release(x);
    assert_int_equal(dlock_lock_adopt(x, old), DLOCK_OK);
    int ext = dlock_lock_extend(x, 0);
    if (ext != DLOCK_OK)
        dlock_lock_forget(x);
    int two = second_gets("keys-token");
    printf("# token %s of an earlier hold: extend %s, release %s; a %s, b %s\n", old,
           dlock_errname(ext), dlock_errname(rel), held(a), two ? "HELD" : "refused");
    assert_int_equal(ext, DLOCK_ENOTOWNER);
    assert_int_equal(rel, DLOCK_EEXPIRED);
    assert_false(two);
    assert_int_equal(dlock_lock_adopt(x, now), DLOCK_OK); /* the hold's own token */
    assert_int_equal(dlock_lock_extend(x, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(x), DLOCK_OK);
    assert_true(second_gets("keys-token"));
    assert_int_equal(dlock_lock_release(a), DLOCK_EEXPIRED); /* released through x */
    dlock_lock_free(x);
    dlock_lock_free(a);
    dlock_client_free(c2);
}

/* ---- under contention ---------------------------------------------------------- */

#define THREADS 4
#define CYCLES 40
static atomic_int inside[2], overlaps, errors;

static void *cycler(void *arg)
{
    int i = (int)(intptr_t)arg;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 2000; /* its session turns stale every 0.7 s, and is replaced */
    o.flags = DLOCK_AUTO_RENEW;
    dlock_lock *l = NULL;
    assert_int_equal(dlock_lock_new(&l, cl, i % 2 ? "keys-thr-b" : "keys-thr-a", &o), DLOCK_OK);
    for (int n = 0; n < CYCLES; n++) {
        if (dlock_lock_acquire(l, 20000) != DLOCK_OK) {
            atomic_fetch_add(&errors, 1);
            continue;
        }
        if (atomic_fetch_add(&inside[i % 2], 1) != 0)
            atomic_fetch_add(&overlaps, 1);
        test_sleep_ms(n % 3 * 20);
        atomic_fetch_sub(&inside[i % 2], 1);
        if (dlock_lock_release(l) != DLOCK_OK)
            atomic_fetch_add(&errors, 1);
    }
    dlock_lock_free(l);
    return NULL;
}

/* Threads of one client cycling two names on one short session: keys
 * given back by one thread's release and taken by another's acquire while
 * the session is replaced under them. Never two holders of a name. */
static void threads_cycling_on_one_session_never_overlap(void **state)
{
    (void)state;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, cycler, (void *)(intptr_t)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("# %d threads x %d cycles: %d overlaps, %d errors\n", THREADS, CYCLES,
           atomic_load(&overlaps), atomic_load(&errors));
    assert_int_equal(atomic_load(&overlaps), 0);
    assert_int_equal(atomic_load(&errors), 0);
}

typedef struct waiter {
    dlock_client *c;
    const char *name;
    unsigned flags, permits;
    atomic_int in_line, got;
    int64_t released_ns;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    dlock_lock *b = lock_on(w->c, w->name, w->flags, w->permits);
    atomic_store(&w->in_line, 1);
    if (dlock_lock_acquire(b, 10000) == DLOCK_OK) {
        atomic_store(&w->got, 1);
        test_sleep_ms(200);
        w->released_ns = dlock__now_ns();
        (void)dlock_lock_release(b);
    }
    dlock_lock_free(b);
    return NULL;
}

/* Another client's waiter watches our key; we release and want the name
 * again at once, on the same key: the waiter, first in line, has it
 * before us, every round, in every kind. */
static void a_waiter_comes_before_a_key_taken_again(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        unsigned flags, permits;
    } kinds[] = {{"keys-w-plain", 0, 0}, {"keys-w-fair", DLOCK_FAIR, 0},
                 {"keys-w-excl", DLOCK_EXCLUSIVE, 0}, {"keys-w-sem", 0, 1}};
    dlock_client *c2 = test_etcd_client(&srv, 0, 1000);
    int bad = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        dlock_lock *a = lock_on(cl, kinds[k].name, DLOCK_AUTO_RENEW | kinds[k].flags,
                                kinds[k].permits);
        char k1[96] = "", k2[96] = "";
        for (int round = 0; round < 3; round++) {
            assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
            first_key(kinds[k].name, k1, sizeof k1);
            waiter w = {.c = c2, .name = kinds[k].name, .flags = kinds[k].flags,
                        .permits = kinds[k].permits};
            pthread_t t;
            assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
            while (!atomic_load(&w.in_line))
                test_sleep_ms(1);
            test_sleep_ms(300); /* in line, watching our key */
            assert_int_equal(dlock_lock_release(a), DLOCK_OK);
            int rc = dlock_lock_acquire(a, 10000);
            int64_t a_ns = dlock__now_ns();
            pthread_join(t, NULL);
            int first = atomic_load(&w.got) && a_ns >= w.released_ns;
            if (rc == DLOCK_OK)
                first_key(kinds[k].name, k2, sizeof k2);
            if (rc != DLOCK_OK || !first) {
                bad++;
                printf("# %s round %d: a %s, the waiter %sfirst\n", kinds[k].name, round,
                       dlock_errname(rc), first ? "" : "NOT ");
            }
            if (rc == DLOCK_OK)
                assert_int_equal(dlock_lock_release(a), DLOCK_OK);
        }
        printf("# %s: keys %s / %s (%s)\n", kinds[k].name, k1, k2,
               strcmp(k1, k2) ? "new" : "taken again");
        dlock_lock_free(a);
    }
    dlock_client_free(c2);
    assert_int_equal(bad, 0);
}

/* ---- a copy curl resent without a word ------------------------------------- */

/* A forwarder in front of the member that can hold what clients send, then
 * cut: close every client connection (FIN, no reply) and its listener,
 * and deliver what it held to the member later, as a TCP middlebox that
 * keeps its upstream side may. curl, seeing a reused connection die with
 * no reply byte, sends the POST again on a fresh connect (libcurl's own
 * retry); that connect is refused, CURLE_COULDNT_CONNECT, which the
 * transport counted as never sent (DLOCK_EIO, no unknown_before) until an
 * adversarial review made these cases: now an outcome unknown. */
typedef struct fwd {
    int lfd, port, up_port;
    int cfd[16], ufd[16], n;
    char held[16][8192];
    size_t held_len[16];
    atomic_int hold, cut, deliver, stop;
    pthread_t t;
} fwd;

static void fwd_pump(fwd *f, int i)
{
    char buf[8192];
    if (f->cfd[i] >= 0) {
        ssize_t n = recv(f->cfd[i], buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0 && atomic_load(&f->hold) && f->held_len[i] + (size_t)n <= sizeof f->held[i]) {
            memcpy(f->held[i] + f->held_len[i], buf, (size_t)n);
            f->held_len[i] += (size_t)n;
        } else if (n > 0) {
            (void)!send(f->ufd[i], buf, (size_t)n, MSG_NOSIGNAL);
        } else if (n == 0) {
            close(f->cfd[i]);
            f->cfd[i] = -1;
        }
    }
    ssize_t m = recv(f->ufd[i], buf, sizeof buf, MSG_DONTWAIT);
    if (m > 0 && f->cfd[i] >= 0 && !atomic_load(&f->hold))
        (void)!send(f->cfd[i], buf, (size_t)m, MSG_NOSIGNAL);
}

static void *fwd_main(void *arg)
{
    fwd *f = arg;
    while (!atomic_load(&f->stop)) {
        if (f->lfd >= 0 && atomic_load(&f->cut)) {
            for (int i = 0; i < f->n; i++)
                if (f->cfd[i] >= 0) {
                    close(f->cfd[i]); /* FIN: a reply never comes */
                    f->cfd[i] = -1;
                }
            close(f->lfd); /* a fresh connect is refused */
            f->lfd = -1;
        }
        if (atomic_load(&f->deliver))
            for (int i = 0; i < f->n; i++)
                if (f->held_len[i]) {
                    (void)!send(f->ufd[i], f->held[i], f->held_len[i], MSG_NOSIGNAL);
                    f->held_len[i] = 0;
                }
        if (f->lfd >= 0) {
            int c = accept(f->lfd, NULL, NULL);
            if (c >= 0 && f->n < 16) {
                int u = socket(AF_INET, SOCK_STREAM, 0);
                struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(f->up_port),
                                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                if (connect(u, (struct sockaddr *)&a, sizeof a) == 0) {
                    f->cfd[f->n] = c;
                    f->ufd[f->n++] = u;
                } else {
                    close(c);
                    close(u);
                }
            } else if (c >= 0) {
                close(c);
            }
        }
        for (int i = 0; i < f->n; i++)
            fwd_pump(f, i);
        test_sleep_ms(2);
    }
    return NULL;
}

static void fwd_start(fwd *f, int up_port)
{
    memset(f, 0, sizeof *f);
    f->up_port = up_port;
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->lfd, 16), 0);
    socklen_t al = sizeof a;
    getsockname(f->lfd, (struct sockaddr *)&a, &al);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->t, NULL, fwd_main, f), 0);
}

static void fwd_stop(fwd *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->t, NULL);
    for (int i = 0; i < f->n; i++) {
        if (f->cfd[i] >= 0)
            close(f->cfd[i]);
        close(f->ufd[i]);
    }
    if (f->lfd >= 0)
        close(f->lfd);
}

/* A client whose first endpoint is a forwarder (started in f) in front
 * of the member, and whose second is the member. */
static dlock_client *fwd_client(fwd *f)
{
    fwd_start(f, srv.m[0].client_port);
    char url[120];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d,127.0.0.1:%d", f->port, srv.m[0].client_port);
    const char *u = url;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.io_timeout_ms = 2000;
    dlock_client *c = NULL;
    assert_int_equal(dlock_client_new(&c, &u, 1, &o, NULL, 0), DLOCK_OK);
    return c;
}

static void *cut_soon(void *arg)
{
    test_sleep_ms(150); /* the release's DeleteRange is held by now */
    atomic_store(&((fwd *)arg)->cut, 1);
    return NULL;
}

/* A release whose first DeleteRange reached the forwarder, and whose
 * connection died without a reply: curl's silent resend is refused, the
 * request goes to the member direct and deletes the key; no copy is
 * known to be out, so the key goes back as a spare and the next hold
 * takes it; then the first copy lands. Over the gateway only. */
static void a_copy_curl_resent_leaves_the_next_hold(void **state)
{
    (void)state;
    if (test_etcd_grpc())
        skip();
    fwd f;
    dlock_client *c = fwd_client(&f);
    char k1[96], k2[96];
    dlock_lock *a = held_through(c, "keys-silent", k1, sizeof k1);
    atomic_store(&f.hold, 1);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cut_soon, &f), 0);
    int rc = dlock_lock_release(a); /* copy 1 held; curl's copy 2 refused; copy 3 direct */
    pthread_join(t, NULL);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    first_key("keys-silent", k2, sizeof k2);
    atomic_store(&f.deliver, 1); /* the first copy lands */
    test_sleep_ms(500);
    size_t left = keys_under("keys-silent");
    int two = second_gets("keys-silent");
    printf("# silent resend: release %s; keys %s then %s; after the held copy %zu key(s); "
           "a %s, b %s\n", dlock_errname(rc), k1, k2, left, held(a), two ? "HELD" : "refused");
    (void)dlock_lock_release(a);
    dlock_lock_free(a);
    dlock_client_free(c);
    fwd_stop(&f);
    assert_false(two);
}

/* The same silent resend of a hold's create: counted as never sent, it
 * taints nothing, and the held first copy lands after the hold released
 * its key: a key nobody holds, on the session (kept alive while the
 * client lives), in the name's line. Over the gateway only. */
static void a_create_curl_resent_taints_the_session(void **state)
{
    (void)state;
    if (test_etcd_grpc())
        skip();
    fwd f;
    dlock_client *c = fwd_client(&f);
    char k1[96];
    dlock_lock *a = held_through(c, "keys-silent-c", k1, sizeof k1); /* the session, through f */
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    atomic_store(&f.hold, 1);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cut_soon, &f), 0);
    int rc = dlock_lock_acquire(a, 0); /* its create: copy 1 held, curl's copy 2 refused */
    pthread_join(t, NULL);
    int rel = dlock_lock_release(a);
    atomic_store(&f.deliver, 1); /* the first create lands */
    test_sleep_ms(500);
    size_t left = keys_under("keys-silent-c");
    int got = second_gets("keys-silent-c");
    printf("# silent create resend: acquire %s, release %s; after the held copy %zu key(s); "
           "a %s, b %s\n", dlock_errname(rc), dlock_errname(rel), left, held(a),
           got ? "HELD" : "refused");
    dlock_lock_free(a);
    dlock_client_free(c);
    fwd_stop(&f);
    assert_true(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_session_takes_its_released_keys_again),
        cmocka_unit_test(some_keys_are_never_taken_again),
        cmocka_unit_test(a_release_sent_twice_gives_no_key_back),
        cmocka_unit_test(a_late_release_copy_leaves_the_next_hold),
        cmocka_unit_test(a_token_names_its_hold),
        cmocka_unit_test(threads_cycling_on_one_session_never_overlap),
        cmocka_unit_test(a_waiter_comes_before_a_key_taken_again),
        cmocka_unit_test(a_copy_curl_resent_leaves_the_next_hold),
        cmocka_unit_test(a_create_curl_resent_taints_the_session),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
