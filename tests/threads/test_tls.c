/* SPDX-License-Identifier: BSD-3-Clause */
/* TLS (rediss://) against real redis-server processes with tls-port and
 * port 0, using certificates the harness makes with openssl: a CA, a server
 * certificate for 127.0.0.1 and localhost, a client certificate, and an
 * unrelated CA. Verification is on by default and a failure is DLOCK_ETLS
 * with a message that says it was verification and why; everything else
 * (Redlock with renewal, mixed plain and TLS nodes, many processes, wake-ups,
 * fair mode, fencing, pooled connections) works as over plain TCP. In the
 * threads label, so ASan and TSan run it too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"
#include "test_waiter.h"

static test_tls_certs certs;
static test_redis tls_srv[3];   /* tls-auth-clients no */
static test_redis mtls_srv;     /* tls-auth-clients yes */
static test_redis plain_srv;

static dlock_client_options tls_opts(void)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.tls_ca_file = certs.ca;
    return o;
}

static int try_acquire(const char *url, const dlock_client_options *o, char *msg, size_t len)
{
    return test_try_acquire(url, o, "tls:try", msg, len);
}

/* ---- verification ----------------------------------------------------- */

static void verified_connection_by_ip_and_by_name(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    char msg[1024], url[128];
    assert_int_equal(try_acquire(tls_srv[0].url, &o, msg, sizeof msg), DLOCK_OK);
    snprintf(url, sizeof url, "rediss://localhost:%d", tls_srv[0].port);
    assert_int_equal(try_acquire(url, &o, msg, sizeof msg), DLOCK_OK);
    /* The lock really is on the TLS server. */
    dlock_client *c = test_client_for(&tls_srv[0], &o);
    dlock_lock *l = test_lock_new(c, "tls:where", 10000, 0, 5, 20);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(test_key_exists(&tls_srv[0], "tls:where"), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void wrong_ca_is_refused_with_the_verification_message(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    o.tls_ca_file = certs.other_ca;
    char msg[1024];
    int rc = try_acquire(tls_srv[0].url, &o, msg, sizeof msg);
    /* OpenSSL's reason follows: "self-signed certificate in certificate
     * chain" or "unable to get local issuer certificate". */
    test_expect_tls_error(rc, msg, "certificate verification failed: ");
    const char *why = strstr(msg, "verification failed: ") + 21;
    assert_true(strlen(why) > 5);
    assert_int_equal(test_key_exists(&tls_srv[0], "tls:try"), 0);
}

static void host_name_mismatch_is_refused(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    o.tls_server_name = "wrong.example";
    char msg[1024];
    int rc = try_acquire(tls_srv[0].url, &o, msg, sizeof msg);
    test_expect_tls_error(rc, msg, "certificate verification failed");
    assert_non_null(strstr(msg, "mismatch"));
    /* A server name that is in the certificate is accepted instead of the
     * address connected to. */
    o.tls_server_name = "localhost";
    assert_int_equal(try_acquire(tls_srv[0].url, &o, msg, sizeof msg), DLOCK_OK);
}

static void insecure_connects_without_verification(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    o.tls_ca_file = certs.other_ca;
    o.tls_insecure = 1;
    char msg[1024];
    assert_int_equal(try_acquire(tls_srv[0].url, &o, msg, sizeof msg), DLOCK_OK);
    o.tls_server_name = "wrong.example";
    assert_int_equal(try_acquire(tls_srv[0].url, &o, msg, sizeof msg), DLOCK_OK);
}

static void tls_option_makes_redis_urls_speak_tls(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    char msg[1024], url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", tls_srv[0].port);
    o.tls = 1;
    assert_int_equal(try_acquire(url, &o, msg, sizeof msg), DLOCK_OK);
    /* Never silently plain: a unix socket cannot do TLS, so it is refused. */
    assert_int_equal(try_acquire(tls_srv[0].unix_url, &o, msg, sizeof msg), DLOCK_EINVAL);
    assert_non_null(strstr(msg, "unix socket"));
}

static void tls_to_a_plain_server_fails_cleanly(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    char msg[1024], url[128];
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d", plain_srv.port);
    o.connect_timeout_ms = 300;
    int64_t t0 = test_now_ms();
    /* Redis reads the ClientHello as the start of an inline command and
     * waits for its end: the handshake times out, and says so. */
    int rc = try_acquire(url, &o, msg, sizeof msg);
    printf("# %s: %s\n", dlock_errname(rc), msg);
    assert_true(rc == DLOCK_EIO || rc == DLOCK_ETLS);
    assert_non_null(strstr(msg, "TLS handshake"));
    assert_true(test_now_ms() - t0 < 5000);
    assert_int_equal(test_key_exists(&plain_srv, "tls:try"), 0);
}

static void bad_tls_files_are_refused_at_client_creation(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    char msg[1024];
    o.tls_ca_file = "/nonexistent/ca.pem";
    assert_int_equal(try_acquire(tls_srv[0].url, &o, msg, sizeof msg), DLOCK_EINVAL);
    assert_non_null(strstr(msg, "/nonexistent/ca.pem"));
    o = tls_opts();
    o.tls_cert_file = certs.client_cert;
    assert_int_equal(try_acquire(tls_srv[0].url, &o, msg, sizeof msg), DLOCK_EINVAL);
    o.tls_key_file = certs.server_key; /* not the certificate's key */
    assert_int_equal(try_acquire(tls_srv[0].url, &o, msg, sizeof msg), DLOCK_EINVAL);
    printf("# %s\n", msg);
}

static void mutual_tls_with_and_without_a_client_certificate(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    char msg[1024];
    int rc = try_acquire(mtls_srv.url, &o, msg, sizeof msg);
    test_expect_tls_error(rc, msg, "TLS");
    assert_int_equal(test_key_exists(&mtls_srv, "tls:try"), 0);
    o.tls_cert_file = certs.client_cert;
    o.tls_key_file = certs.client_key;
    assert_int_equal(try_acquire(mtls_srv.url, &o, msg, sizeof msg), DLOCK_OK);
}

static void old_options_version_still_works(void **state)
{
    (void)state;
    dlock_client_options o;
    /* The fields a version lacks (0x5a garbage here) must not be read. */
    char msg[1024];
    for (unsigned v = 1; v < DLOCK_CLIENT_OPTIONS_VERSION; v++) {
        memset(&o, 0x5a, sizeof o);
        assert_int_equal(dlock_client_options_init(&o, v), DLOCK_OK);
        assert_int_equal(try_acquire(plain_srv.url, &o, msg, sizeof msg), DLOCK_OK);
    }
    assert_int_equal(dlock_client_options_init(&o, DLOCK_CLIENT_OPTIONS_VERSION + 1), DLOCK_EINVAL);
}

/* ---- everything works over TLS ------------------------------------------ */

static void pooled_connection_is_reused_and_probed(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    dlock_client *c = test_client_for(&tls_srv[1], &o);
    dlock_lock *l = test_lock_new(c, "tls:pool", 10000, 0, 5, 20);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    /* Idle: TLS 1.3 session tickets sit unread on the socket. */
    test_sleep_ms(100);
    redisReply *r = test_cmd(&tls_srv[1], "INFO stats");
    const char *p = strstr(r->str, "total_connections_received:");
    assert_non_null(p);
    long before = strtol(p + 27, NULL, 10);
    freeReplyObject(r);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    }
    r = test_cmd(&tls_srv[1], "INFO stats");
    p = strstr(r->str, "total_connections_received:");
    long after = strtol(p + 27, NULL, 10);
    freeReplyObject(r);
    /* +1: our admin connection (by the unix socket) counts too. */
    printf("# connections received: %ld before, %ld after 20 acquire/release\n", before, after);
    assert_true(after - before <= 1);
    /* The server closes the pooled connection: the probe must notice, so
     * the next acquire works on a new one instead of failing. */
    test_cmd_status(&tls_srv[1], "CONFIG SET timeout 1");
    test_sleep_ms(2500);
    test_cmd_status(&tls_srv[1], "CONFIG SET timeout 0");
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static long connections_received(const test_redis *r)
{
    redisReply *rep = test_cmd(r, "INFO stats");
    const char *p = strstr(rep->str, "total_connections_received:");
    assert_non_null(p);
    long n = strtol(p + 27, NULL, 10);
    freeReplyObject(rep);
    return n;
}

/* A child of fork() frees its copy of the client: that must send nothing
 * on the shared TLS sockets (no close_notify), or the parent's session
 * would end under it. */
static void fork_child_freeing_the_client_leaves_the_parents_sessions_alone(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    dlock_client *c = test_client_for(&tls_srv[0], &o);
    dlock_lock *l = test_lock_new(c, "tls:fork", 10000, 0, 5, 20);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    long before = connections_received(&tls_srv[0]);
    pid_t pid = test_fork_child();
    if (pid == 0) {
        dlock_lock_free(l);
        dlock_client_free(c);
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* The parent's pooled TLS connection still works: no new connection
     * (+1 for each admin connection of ours, by the unix socket). */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    long after = connections_received(&tls_srv[0]);
    printf("# connections received: %ld before the fork, %ld after\n", before, after);
    assert_true(after - before <= 1);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void redlock_over_three_tls_nodes_with_renewal(void **state)
{
    (void)state;
    const char *urls[3] = {tls_srv[0].url, tls_srv[1].url, tls_srv[2].url};
    dlock_client_options o = tls_opts();
    dlock_client *c = test_client_new(urls, 3, &o);
    dlock_lock *l = test_lock_new(c, "tls:redlock", 1000, DLOCK_AUTO_RENEW, 5, 20);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    /* Held for four leases: only renewals over TLS keep it. */
    for (int i = 0; i < 8; i++) {
        test_sleep_ms(500);
        assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    }
    /* Renewed on a majority at least (a round decides at a majority, so a
     * slow node may miss one under a sanitizer). */
    int renewed = 0;
    for (int i = 0; i < 3; i++) {
        long long pttl = test_key_pttl(&tls_srv[i], "tls:redlock");
        printf("# node %d: pttl %lld ms after 4 s of a 1 s lease\n", i, pttl);
        renewed += pttl > 0 && pttl <= 1000;
    }
    assert_true(renewed >= 2);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(test_key_exists(&tls_srv[i], "tls:redlock"), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* A watchdog round over many locks sends and reads batches far larger
 * than one TLS record (16 KB): partial writes and replies spread over
 * several records must all arrive. */
static void watchdog_renews_many_locks_over_tls(void **state)
{
    (void)state;
    enum { N = 2000 };
    dlock_client_options o = tls_opts();
    dlock_client *c = test_client_for(&tls_srv[1], &o);
    static dlock_lock *locks[N];
    for (int i = 0; i < N; i++) {
        char name[64];
        snprintf(name, sizeof name, "tls:many:%d:with-a-longer-name-to-fill-records", i);
        locks[i] = test_lock_new(c, name, 1500, DLOCK_AUTO_RENEW, 5, 20);
        assert_int_equal(dlock_lock_acquire(locks[i], 0), DLOCK_OK);
    }
    test_sleep_ms(3500);
    int held = 0;
    for (int i = 0; i < N; i++)
        held += dlock_lock_state_get(locks[i]) == DLOCK_STATE_HELD;
    printf("# %d of %d auto-renewed locks held after 3.5 s of a 1.5 s lease\n", held, N);
    assert_int_equal(held, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(dlock_lock_release(locks[i]), DLOCK_OK);
        dlock_lock_free(locks[i]);
    }
    dlock_client_free(c);
}

static void redlock_over_mixed_plain_and_tls_nodes(void **state)
{
    (void)state;
    const char *urls[3] = {tls_srv[0].url, plain_srv.url, tls_srv[2].url};
    dlock_client_options o = tls_opts();
    dlock_client *c = test_client_new(urls, 3, &o);
    dlock_lock *l = test_lock_new(c, "tls:mixed", 1000, DLOCK_AUTO_RENEW, 5, 20);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    test_sleep_ms(1500);
    assert_int_equal(dlock_lock_state_get(l), DLOCK_STATE_HELD);
    /* On a majority at least: a round decides there, and a slow node (a
     * sanitizer build) may get its copy a moment later. */
    long long on = test_key_exists(&tls_srv[0], "tls:mixed") +
                   test_key_exists(&plain_srv, "tls:mixed") +
                   test_key_exists(&tls_srv[2], "tls:mixed");
    assert_true(on >= 2);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Many processes, each with its own TLS client, take turns on one name; a
 * non-atomic read-increment-write of a counter file loses an increment on
 * any overlap. */
#define N_PROCS 6
#define N_ROUNDS 150

typedef struct excl {
    char counter_path[256];
    atomic_int errors;
} excl;

static int excl_worker(int i, void *arg)
{
    excl *x = arg;
    const char *urls[] = {tls_srv[0].url};
    dlock_client_options o = tls_opts();
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    char err[256] = "";
    lo.ttl_ms = 10000;
    lo.retry_min_ms = 1;
    lo.retry_max_ms = 5;
    if (dlock_client_new(&c, urls, 1, &o, err, sizeof err) != DLOCK_OK ||
        dlock_lock_new(&l, c, "tls:excl", &lo) != DLOCK_OK) {
        fprintf(stderr, "worker %d: %s\n", i, err);
        return 1;
    }
    int bad = 0;
    for (int r = 0; r < N_ROUNDS && bad < 5; r++) {
        int rc = dlock_lock_acquire(l, 60000);
        if (rc != DLOCK_OK) {
            fprintf(stderr, "worker %d: acquire %s: %s\n", i, dlock_errname(rc),
                    dlock_lock_errmsg(l));
            bad++;
            continue;
        }
        int fd = open(x->counter_path, O_RDWR);
        char buf[32] = "";
        ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof buf - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            int len = snprintf(buf, sizeof buf, "%ld", strtol(buf, NULL, 10) + 1);
            if (pwrite(fd, buf, (size_t)len, 0) != len)
                bad++;
        } else {
            bad++;
        }
        if (fd >= 0)
            close(fd);
        if ((rc = dlock_lock_release(l)) != DLOCK_OK) {
            fprintf(stderr, "worker %d: release %s\n", i, dlock_errname(rc));
            bad++;
        }
    }
    dlock_lock_free(l);
    dlock_client_free(c);
    return bad ? 1 : 0;
}

static void exclusion_of_many_processes_over_tls(void **state)
{
    (void)state;
    excl *x = mmap(NULL, sizeof *x, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(x != MAP_FAILED);
    memset(x, 0, sizeof *x);
    test_tmp_path(x->counter_path, sizeof x->counter_path, "tls-counter");
    int fd = open(x->counter_path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0", 1), 1);
    close(fd);
    int64_t t0 = test_now_ms();
    assert_int_equal(test_run_procs(N_PROCS, excl_worker, x), 0);
    char buf[32] = "";
    fd = open(x->counter_path, O_RDONLY);
    assert_true(read(fd, buf, sizeof buf - 1) > 0);
    close(fd);
    unlink(x->counter_path);
    printf("# %d processes x %d rounds over TLS in %lld ms: counter %s\n", N_PROCS, N_ROUNDS,
           (long long)(test_now_ms() - t0), buf);
    assert_int_equal(strtol(buf, NULL, 10), N_PROCS * N_ROUNDS);
    munmap(x, sizeof *x);
}

static long long subscribers(const char *name)
{
    redisReply *r = test_cmd(&tls_srv[0], "PUBSUB NUMSUB dlock:wake:%s", name);
    long long n = r->element[1]->integer;
    freeReplyObject(r);
    return n;
}

static void waiter_is_woken_promptly_over_tls(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    dlock_client *c = test_client_for(&tls_srv[0], &o);
    /* Retries of 2..5 s: only a wake-up on the TLS subscriber connection
     * explains a return within a fraction of that. */
    dlock_lock *holder = test_lock_new(c, "tls:wake", 30000, 0, 2000, 5000);
    dlock_lock *l = test_lock_new(c, "tls:wake", 30000, 0, 2000, 5000);
    assert_int_equal(dlock_lock_acquire(holder, 0), DLOCK_OK);
    test_waiter w; /* rc stays TEST_WAITER_PENDING (99) until it returns */
    assert_int_equal(test_waiter_start(&w, l, 20000, TEST_WAITER_KEEP), 0);
    assert_true(test_wait_for_count(subscribers, "tls:wake", 1, 5000));
    test_sleep_ms(300);
    assert_int_equal(atomic_load(&w.rc), 99);
    int64_t t_release = test_now_ms();
    assert_int_equal(dlock_lock_release(holder), DLOCK_OK);
    assert_int_equal(test_waiter_join(&w), DLOCK_OK);
    int64_t lat = atomic_load(&w.done_ms) - t_release;
    printf("# wake-up over TLS: %lld ms from release to acquire\n", (long long)lat);
    assert_true(lat < 1000);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(holder);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void fair_mode_and_fencing_over_tls(void **state)
{
    (void)state;
    dlock_client_options o = tls_opts();
    dlock_client *c = test_client_for(&tls_srv[0], &o);
    dlock_lock *a = test_lock_new(c, "tls:fair", 30000, DLOCK_FAIR, 2000, 5000);
    dlock_lock *b = test_lock_new(c, "tls:fair", 30000, DLOCK_FAIR, 2000, 5000);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    uint64_t f1 = dlock_lock_fence(a);
    assert_true(f1 > 0);
    test_waiter w;
    assert_int_equal(test_waiter_start(&w, b, 20000, TEST_WAITER_KEEP), 0);
    assert_true(test_wait_for_count(subscribers, "tls:fair", 1, 5000));
    test_sleep_ms(200);
    int64_t t_release = test_now_ms();
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(test_waiter_join(&w), DLOCK_OK);
    printf("# fair hand-over over TLS: %lld ms\n", (long long)(atomic_load(&w.done_ms) - t_release));
    assert_true(atomic_load(&w.done_ms) - t_release < 1000);
    assert_true(dlock_lock_fence(b) > f1);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_free(c);
}

static int group_setup(void **state)
{
    (void)state;
    if (test_tls_certs_make(&certs) != 0)
        return -1;
    for (int i = 0; i < 3; i++)
        if (test_redis_start_tls(&tls_srv[i], &certs, 0, NULL) != 0)
            return -1;
    if (test_redis_start_tls(&mtls_srv, &certs, 1, NULL) != 0)
        return -1;
    return test_redis_start(&plain_srv, NULL);
}

static int group_teardown(void **state)
{
    (void)state;
    test_redis_stop_many(tls_srv, 3);
    test_redis_stop(&mtls_srv);
    test_redis_stop(&plain_srv);
    test_tls_certs_remove(&certs);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(verified_connection_by_ip_and_by_name),
        cmocka_unit_test(wrong_ca_is_refused_with_the_verification_message),
        cmocka_unit_test(host_name_mismatch_is_refused),
        cmocka_unit_test(insecure_connects_without_verification),
        cmocka_unit_test(tls_option_makes_redis_urls_speak_tls),
        cmocka_unit_test(tls_to_a_plain_server_fails_cleanly),
        cmocka_unit_test(bad_tls_files_are_refused_at_client_creation),
        cmocka_unit_test(mutual_tls_with_and_without_a_client_certificate),
        cmocka_unit_test(old_options_version_still_works),
        cmocka_unit_test(pooled_connection_is_reused_and_probed),
        cmocka_unit_test(fork_child_freeing_the_client_leaves_the_parents_sessions_alone),
        cmocka_unit_test(redlock_over_three_tls_nodes_with_renewal),
        cmocka_unit_test(redlock_over_mixed_plain_and_tls_nodes),
        cmocka_unit_test(watchdog_renews_many_locks_over_tls),
        cmocka_unit_test(exclusion_of_many_processes_over_tls),
        cmocka_unit_test(waiter_is_woken_promptly_over_tls),
        cmocka_unit_test(fair_mode_and_fencing_over_tls),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
