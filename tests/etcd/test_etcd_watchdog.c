/* SPDX-License-Identifier: BSD-3-Clause */
/* The watchdog's etcd renewals are requests on its loop: one lock's
 * renewal stalled on the wire holds back neither another lock's renewals
 * nor the watchdog's adds and removes. A real etcd member behind a small
 * proxy of this file's that stalls only the connections carrying one
 * lock's lease ID (its keep-alive), forwarding every other. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <inttypes.h>
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
#include "etcd_keys.h"
#include "etcd_kv.h"
#include "etcd_server.h"
#include "proc.h"
#include "test_util.h"

/* ---- a proxy that stalls the connections naming one lease ---------------- */

#define PAIRS 64

typedef struct pair {
    int c, s;    /* client side, member side; -1: free */
    int stalled; /* sent the pattern: nothing goes through any more */
} pair;

static struct {
    int lfd, port, target;
    pthread_t thread;
    atomic_int stop;
    pthread_mutex_t mu;
    char pattern[64]; /* "" : stall nothing */
    atomic_int stalls; /* connections stalled */
    pair p[PAIRS];
} px = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void pair_close(pair *p)
{
    close(p->c);
    close(p->s);
    p->c = p->s = -1;
}

static int connect_target(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)px.target)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

static void on_accept(void)
{
    int c = accept(px.lfd, NULL, NULL);
    if (c < 0)
        return;
    for (int i = 0; i < PAIRS; i++)
        if (px.p[i].c < 0) {
            int s = connect_target();
            if (s < 0)
                break;
            px.p[i] = (pair){c, s, 0};
            return;
        }
    close(c);
}

/* Forward what from has to to; a chunk from the client naming the lease
 * stalls the pair for good (a byte stream never resumes with a gap). */
static void forward(pair *p, int from, int to, int from_client)
{
    char buf[16384];
    ssize_t n = read(from, buf, sizeof buf - 1);
    if (n <= 0) {
        pair_close(p);
        return;
    }
    buf[n] = '\0';
    if (from_client && !p->stalled) {
        pthread_mutex_lock(&px.mu);
        if (px.pattern[0] && memmem(buf, (size_t)n, px.pattern, strlen(px.pattern))) {
            p->stalled = 1;
            atomic_fetch_add(&px.stalls, 1);
        }
        pthread_mutex_unlock(&px.mu);
    }
    if (p->stalled)
        return; /* read and dropped: the member never hears of it */
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w <= 0) {
            pair_close(p);
            return;
        }
        off += w;
    }
}

static void *proxy_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&px.stop)) {
        struct pollfd f[1 + 2 * PAIRS];
        int idx[1 + 2 * PAIRS], n = 0;
        f[n++] = (struct pollfd){.fd = px.lfd, .events = POLLIN};
        for (int i = 0; i < PAIRS; i++)
            if (px.p[i].c >= 0) {
                idx[n] = i;
                f[n++] = (struct pollfd){.fd = px.p[i].c, .events = POLLIN};
                idx[n] = i;
                f[n++] = (struct pollfd){.fd = px.p[i].s, .events = POLLIN};
            }
        if (poll(f, (nfds_t)n, 20) <= 0)
            continue;
        if (f[0].revents)
            on_accept();
        for (int k = 1; k < n; k++) {
            pair *p = &px.p[idx[k]];
            if (!f[k].revents || p->c < 0 || (f[k].fd != p->c && f[k].fd != p->s))
                continue;
            int from_client = f[k].fd == p->c;
            forward(p, from_client ? p->c : p->s, from_client ? p->s : p->c, from_client);
        }
    }
    for (int i = 0; i < PAIRS; i++)
        if (px.p[i].c >= 0)
            pair_close(&px.p[i]);
    return NULL;
}

static int proxy_start(int target)
{
    px.target = target;
    for (int i = 0; i < PAIRS; i++)
        px.p[i].c = px.p[i].s = -1;
    px.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (px.lfd < 0 || bind(px.lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(px.lfd, 64) != 0 || getsockname(px.lfd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    px.port = ntohs(a.sin_port);
    return pthread_create(&px.thread, NULL, proxy_main, NULL) == 0 ? 0 : -1;
}

static void proxy_stop(void)
{
    atomic_store(&px.stop, 1);
    pthread_join(px.thread, NULL);
    close(px.lfd);
}

static void proxy_stall(const char *pattern)
{
    pthread_mutex_lock(&px.mu);
    snprintf(px.pattern, sizeof px.pattern, "%s", pattern);
    pthread_mutex_unlock(&px.mu);
}

/* ---- the tests ----------------------------------------------------------- */

static test_etcd srv;
static dlock_client *cl;
static atomic_int lost_b;

/* The lease l's key is on, in decimal and quoted as a keep-alive's body
 * names it: an auto-renew lock's key is on the client's session
 * (its token names the key, not the lease), read from etcd directly. */
static void lease_pattern(const char *name, const dlock_lock *l, char *out, size_t len)
{
    dlock__etcd *raw = NULL;
    assert_int_equal(test_etcd_raw(&raw, srv.url), DLOCK_OK);
    char key[128];
    int n = snprintf(key, sizeof key, "%s/%llx", name, test_etcd_token_id(dlock_lock_token(l)));
    dlock__etcd_kv kv;
    assert_int_equal(dlock__etcd_get(raw, key, (size_t)n, &kv, dlock__deadline_after_ms(3000), -1,
                                     NULL),
                     DLOCK_OK);
    assert_non_null(kv.key);
    snprintf(out, len, "\"%" PRIu64 "\"", (uint64_t)kv.lease);
    dlock__etcd_kv_clear(&kv);
    dlock__etcd_free(raw);
}

static void on_lost_b(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)l, (void)why, (void)arg;
    atomic_fetch_add(&lost_b, 1);
}

static int setup(void **state)
{
    (void)state;
    if (test_etcd_start(&srv, 1) != 0 || proxy_start(srv.m[0].client_port) != 0)
        return -1;
    char url[80];
    snprintf(url, sizeof url, "etcd://127.0.0.1:%d", px.port);
    const char *u = url;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    /* A stalled keep-alive waits this long for its answer, far longer
     * than the other lock's lease. */
    o.io_timeout_ms = 3000;
    return dlock_client_new(&cl, &u, 1, &o, NULL, 0) == DLOCK_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dlock_client_free(cl);
    proxy_stop();
    test_etcd_stop(&srv);
    return 0;
}

static dlock_lock *auto_lock(const char *name, int64_t ttl_ms, dlock_lost_fn on_lost)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = ttl_ms;
    o.flags = DLOCK_AUTO_RENEW;
    o.on_lost = on_lost;
    return test_lock_with(cl, name, &o);
}

/* Lock A's keep-alive stalls on the wire for 3 s (the io timeout). Lock B,
 * taken while it stalls (an add), with a 1.5 s TTL renewed every 500 ms,
 * stays renewed all along, and its release (a remove) does not wait for
 * A's renewal; A's own release does. With the blocking renewals, the
 * watchdog's thread sat in A's keep-alive and B's validity ran out (its
 * least validity was 0 ms). */
static void a_stalled_renewal_holds_back_no_other_lock(void **state)
{
    (void)state;
    dlock_lock *a = auto_lock("wd-stalled", 6000, NULL);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    /* The keep-alive's body names the lease in decimal. */
    char id[32];
    lease_pattern("wd-stalled", a, id, sizeof id);
    proxy_stall(id);
    int64_t t0 = test_now_ms();
    /* A's first renewal goes out about 1.8 s after its acquire. */
    while (atomic_load(&px.stalls) == 0 && test_now_ms() - t0 < 4000)
        test_sleep_ms(10);
    assert_int_equal(atomic_load(&px.stalls), 1);
    int64_t stalled_at = test_now_ms();

    dlock_lock *b = auto_lock("wd-other", 1500, on_lost_b);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    /* B's lease would run out 1.5 s from now without renewals; watch it
     * until A's stall is nearly over. */
    int64_t least = INT64_MAX;
    while (test_now_ms() - stalled_at < 2700) {
        int64_t v = dlock_lock_validity_ms(b);
        least = v < least ? v : least;
        test_sleep_ms(20);
    }
    fprintf(stderr, "B's least validity while A's renewal stalled: %" PRId64 " ms\n", least);
    assert_true(least > 300);
    assert_int_equal(atomic_load(&lost_b), 0);
    assert_int_equal(dlock_lock_state_get(b), DLOCK_STATE_HELD);
    int64_t r0 = test_now_ms();
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_true(test_now_ms() - r0 < 1000);
    /* A's release from this thread waits for its renewal in flight (its
     * round lets the record go when the keep-alive gives up, 3 s after it
     * was sent), then revokes the lease. */
    proxy_stall("");
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    fprintf(stderr, "A's release returned %" PRId64 " ms after its keep-alive stalled\n",
            test_now_ms() - stalled_at);
    assert_true(test_now_ms() - stalled_at >= 2800);
    dlock_lock_free(b);
    dlock_lock_free(a);
}

static dlock_lock *to_release;
static atomic_int released_rc = 1, released_after_ms = -1;
static int64_t stall_began_ms;

/* On the watchdog's thread: release another lock, whose renewal is in
 * flight. */
static void on_lost_release_other(dlock_lock *l, dlock_lost_reason why, void *arg)
{
    (void)l, (void)why, (void)arg;
    atomic_store(&released_rc, dlock_lock_release(to_release));
    atomic_store(&released_after_ms, (int)(test_now_ms() - stall_began_ms));
}

static int released(void *arg)
{
    (void)arg;
    return atomic_load(&released_rc) != 1;
}

/* An on_lost on the watchdog's thread releases lock A while A's renewal
 * is stalled on the wire: it cannot wait for A's round on the loop it
 * would block, so the round lets A go, and the release goes on at once.
 * The renewal's late end then touches A no more. */
static void an_on_lost_releases_a_lock_whose_renewal_is_in_flight(void **state)
{
    (void)state;
    dlock_lock *a = auto_lock("wd-stalled-2", 6000, NULL);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    char id[32];
    lease_pattern("wd-stalled-2", a, id, sizeof id);
    int stalls = atomic_load(&px.stalls);
    proxy_stall(id);
    int64_t t0 = test_now_ms();
    while (atomic_load(&px.stalls) == stalls && test_now_ms() - t0 < 4000)
        test_sleep_ms(10);
    assert_int_equal(atomic_load(&px.stalls), stalls + 1);
    stall_began_ms = test_now_ms();
    proxy_stall(""); /* the stalled connection stays stalled; A's revoke goes through */

    to_release = a;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 3000;
    o.flags = DLOCK_AUTO_RENEW;
    o.renew_interval_ms = 200;
    o.on_lost = on_lost_release_other;
    dlock_lock *x = test_lock_with(cl, "wd-broken", &o);
    assert_int_equal(dlock_lock_acquire(x, 0), DLOCK_OK);
    dlock_break_result res;
    assert_int_equal(dlock_client_break(cl, "wd-broken", 0, &res), DLOCK_OK);
    assert_true(test_wait_until(released, NULL, 5000, 10));
    fprintf(stderr, "A released from X's on_lost %d ms into A's stalled renewal\n",
            atomic_load(&released_after_ms));
    assert_int_equal(atomic_load(&released_rc), DLOCK_OK);
    assert_true(atomic_load(&released_after_ms) < 2800); /* not after A's round */
    /* A's renewal ends 3 s after it was sent, for a record let go. */
    while (test_now_ms() - stall_began_ms < 3500)
        test_sleep_ms(20);
    assert_int_not_equal(dlock_lock_state_get(a), DLOCK_STATE_HELD);
    assert_int_equal(dlock_lock_release(x), DLOCK_ELOST);
    dlock_lock_free(x);
    dlock_lock_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_stalled_renewal_holds_back_no_other_lock),
        cmocka_unit_test(an_on_lost_releases_a_lock_whose_renewal_is_in_flight),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
