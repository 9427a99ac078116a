/* SPDX-License-Identifier: BSD-3-Clause */
/* Elections (dlock.h, "Elections"; docs/elections.md) on a real ZooKeeper
 * member, in Curator's LeaderSelector layout (src/zk/zk_elect.c):
 * campaign, proclaim, resign, leader and observe; a standby that takes
 * over at a resign, and when a SIGKILLed or SIGSTOPped leader's session
 * expires; observe sees every change, in order, each pushed by a watch
 * (within a time far below anything a look would wait for: ZooKeeper has
 * no lease end to look at); many terms of several candidates, one leader
 * at a time (a chaos history of their terms) with fences that only grow,
 * as the observer saw them. Curator's side is test_zk_curator.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "history.h"
#include "proc.h"
#include "test_leaders.h"
#include "test_util.h"
#include "zk_contend.h"
#include "zk_server.h"

/* A change an observer saw within PUSH_MS was pushed: it never looks by
 * itself on ZooKeeper (no lease end to look at), and a failed look backs
 * off far longer than this only after many failures. */
#define PUSH_MS 2000
#define SESSION_MS 1000

static test_zk srv;
static dlock_client *cl;

static dlock_client *client_new(const char *tail)
{
    char url[400];
    snprintf(url, sizeof url, "%s%s", srv.url, tail);
    const char *u = url;
    return test_client_new(&u, 1, NULL);
}

static int setup(void **state)
{
    (void)state;
    return test_zk_start(&srv);
}

static int teardown(void **state)
{
    (void)state;
    test_zk_stop(&srv);
    return 0;
}

/* Each test's client, freed after it: a test that forks does so before
 * it makes its own, with no thread of ours running (TSan refuses a fork
 * of a process with threads, and this file runs under it, label
 * threads). */
static int client_setup(void **state)
{
    (void)state;
    cl = client_new("");
    return cl ? 0 : -1;
}

static int client_teardown(void **state)
{
    (void)state;
    dlock_client_free(cl);
    cl = NULL;
    return 0;
}

static dlock_election *election(dlock_client *c, const char *name)
{
    dlock_election *e = NULL;
    assert_int_equal(dlock_election_new(&e, c, name, NULL), DLOCK_OK);
    return e;
}

static void expect_leader(dlock_election *e, uint64_t fence, const char *value)
{
    test_expect_leader(e, fence, value, 0);
}

/* The term's fence is its node's czxid, as dlock_client_status() shows
 * the lock's holder; the leader's value is its node's data. */
static void campaign_proclaim_resign_hand_over(void **state)
{
    (void)state;
    const char *name = "/elect/job";
    dlock_election *a = election(cl, name), *b = election(cl, name);
    expect_leader(a, 0, "");
    assert_int_equal(dlock_election_campaign(a, "host-a", 0), DLOCK_OK);
    uint64_t fa = dlock_election_fence(a);
    assert_true(fa > 0);
    dlock_node_status st;
    assert_int_equal(dlock_client_status(cl, name, strlen(name), &st, NULL), DLOCK_OK);
    assert_int_equal(st.fence, fa);
    expect_leader(b, fa, "host-a");
    assert_int_equal(dlock_election_proclaim(a, "host-a:8080"), DLOCK_OK);
    expect_leader(b, fa, "host-a:8080");
    assert_int_equal(dlock_election_proclaim(a, ""), DLOCK_OK);
    expect_leader(b, fa, "");
    assert_int_equal(dlock_election_proclaim(a, "host-a:8080"), DLOCK_OK);
    assert_int_equal(dlock_election_campaign(b, "host-b", 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_election_proclaim(b, "host-b"), DLOCK_ENOTHELD);

    test_campaigner cb = {b, "host-b", 1, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, test_campaign_thread, &cb), 0);
    test_sleep_ms(300); /* b waits in line, its node holding its value */
    expect_leader(a, fa, "host-a:8080");
    int64_t resigned = test_now_ms();
    assert_int_equal(dlock_election_resign(a), DLOCK_OK);
    assert_int_equal(dlock_election_fence(a), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(cb.rc, DLOCK_OK);
    print_message("# hand-over at a resign: %" PRId64 " ms\n", atomic_load(&cb.done_ms) - resigned);
    assert_true(atomic_load(&cb.done_ms) - resigned < PUSH_MS);
    uint64_t fb = dlock_election_fence(b);
    assert_true(fb > fa);
    expect_leader(a, fb, "host-b");
    assert_int_equal(dlock_election_resign(b), DLOCK_OK);
    expect_leader(a, 0, "");
    /* A name that is no ZooKeeper path is refused as for a lock. */
    dlock_election *bad = (dlock_election *)1;
    assert_int_equal(dlock_election_new(&bad, cl, "a//b", NULL), DLOCK_EINVAL);
    assert_null(bad);
    dlock_election_free(a);
    dlock_election_free(b);
}

/* ---- observe ------------------------------------------------------------------ */

static int64_t wait_seen(test_leaders *s, int n, int64_t from_ms)
{
    return test_leaders_wait(s, n, from_ms, PUSH_MS);
}

/* Each change pushed by a watch: the name is a path not made yet, which
 * the observer watches for. */
static void observe_sees_every_change_in_order(void **state)
{
    (void)state;
    test_leaders_observe_changes(cl, "/elect/obs", 10000, PUSH_MS, 0);
}

/* ---- a leader whose session ends ------------------------------------------------- */

/* A leader in a child process on a session of SESSION_MS; the parent
 * SIGKILLs or SIGSTOPs it (sig), and a standby of this process takes
 * over once the server expired the session: the ms from the signal. The
 * observer saw the dead leader, then the standby. */
static int64_t takeover_after(const char *name, int sig)
{
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = test_fork_child(); /* before this test makes any thread */
    if (pid == 0) {
        close(ready[0]);
        char url[400];
        snprintf(url, sizeof url, "%s?session_timeout_ms=%d", srv.url, SESSION_MS);
        const char *u = url;
        dlock_client *c = NULL;
        dlock_election *e = NULL;
        if (dlock_client_new(&c, &u, 1, NULL, NULL, 0) != DLOCK_OK ||
            dlock_election_new(&e, c, name, NULL) != DLOCK_OK ||
            dlock_election_campaign(e, "doomed", 0) != DLOCK_OK)
            _exit(1);
        char b = 'L';
        if (write(ready[1], &b, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(ready[1]); /* a child that died ends the read */
    char b;
    assert_int_equal(read(ready[0], &b, 1), 1);
    close(ready[0]);
    cl = client_new("");
    dlock_election *s = election(cl, name), *o = election(cl, name);
    uint64_t f0 = 0;
    char buf[32];
    assert_int_equal(dlock_election_leader(o, &f0, buf, sizeof buf, NULL), DLOCK_OK);
    assert_string_equal(buf, "doomed");
    test_leaders seen;
    test_leaders_start(&seen, o);
    wait_seen(&seen, 1, test_now_ms());
    int64_t signalled = test_now_ms();
    kill(pid, sig);
    assert_int_equal(dlock_election_campaign(s, "standby", 10000), DLOCK_OK);
    int64_t took = test_now_ms() - signalled;
    assert_true(dlock_election_fence(s) > f0);
    expect_leader(o, dlock_election_fence(s), "standby");
    wait_seen(&seen, 2, test_now_ms());
    test_leaders_stop(&seen);
    assert_string_equal(seen.value[0], "doomed");
    assert_int_equal(seen.fence[0], f0);
    assert_string_equal(seen.value[seen.n - 1], "standby");
    assert_int_equal(seen.fence[seen.n - 1], dlock_election_fence(s));
    if (sig == SIGSTOP)
        kill(pid, SIGCONT);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_int_equal(dlock_election_resign(s), DLOCK_OK);
    dlock_election_free(s);
    dlock_election_free(o);
    return took;
}

/* Not at once (a closed socket is no closed session), and about the
 * session's timeout (the server expires sessions on its 100 ms ticks). */
static void a_killed_leader_is_replaced_when_its_session_expires(void **state)
{
    (void)state;
    int64_t took = takeover_after("/elect/killed", SIGKILL);
    print_message("# takeover after SIGKILL (session %d ms): %" PRId64 " ms\n", SESSION_MS,
                  took);
    assert_true(took >= SESSION_MS / 2 && took <= SESSION_MS + 3000);
}

static void a_stopped_leader_is_replaced_when_its_session_expires(void **state)
{
    (void)state;
    int64_t took = takeover_after("/elect/stopped", SIGSTOP);
    print_message("# takeover after SIGSTOP (session %d ms): %" PRId64 " ms\n", SESSION_MS,
                  took);
    assert_true(took >= SESSION_MS / 2 && took <= SESSION_MS + 3000);
}

/* ---- many terms ------------------------------------------------------------------- */

#define CANDIDATES 4
#define TERMS 12 /* each candidate's */

typedef struct candidate {
    int slot, fd;
    pthread_t thread;
    int errors;
} candidate;

/* Campaign, lead 5..20 ms (a section of the history, fenced with the
 * term's fence, entered only while the term's lock is held), resign, on a
 * client (a session) of its own, TERMS times. */
static void *candidate_main(void *arg)
{
    candidate *k = arg;
    dlock_client *c = client_new("");
    dlock_election *e = NULL;
    char value[32];
    snprintf(value, sizeof value, "cand-%d", k->slot);
    if (!c || dlock_election_new(&e, c, "/elect/terms", NULL) != DLOCK_OK) {
        k->errors++;
        dlock_client_free(c);
        return NULL;
    }
    for (int t = 0; t < TERMS; t++) {
        if (dlock_election_campaign(e, value, 30000) != DLOCK_OK) {
            k->errors++;
            continue;
        }
        uint64_t fence = dlock_election_fence(e);
        chaos_history_note(k->fd, CHAOS_REC_ENTER, k->slot, (uint32_t)k->slot + 1, (uint32_t)t,
                           fence, CHAOS_KIND_EXCLUSIVE, 0);
        test_sleep_ms(5 + (t * 7 + k->slot * 3) % 16);
        if (dlock_lock_state_get(dlock_election_lock(e)) != DLOCK_STATE_HELD)
            k->errors++;
        chaos_history_note(k->fd, CHAOS_REC_EXIT, k->slot, (uint32_t)k->slot + 1, (uint32_t)t,
                           fence, 0, 0);
        if (dlock_election_resign(e) != DLOCK_OK)
            k->errors++;
    }
    dlock_election_free(e);
    dlock_client_free(c);
    return NULL;
}

/* What an observer of many terms saw: leaders in fence order only, each
 * with a candidate's value, and how many. */
typedef struct terms_seen {
    dlock_election *e;
    pthread_t thread;
    int rc;
    pthread_mutex_t mu;
    uint64_t last;  /* under mu, as the rest */
    int leaders, nobody_last, violations;
} terms_seen;

static int on_term(void *arg, uint64_t fence, const char *value, size_t len)
{
    terms_seen *s = arg;
    pthread_mutex_lock(&s->mu);
    s->nobody_last = fence == 0;
    if (fence == 0) {
        s->violations += len != 0;
    } else {
        s->violations += fence <= s->last || len < 5 || strncmp(value, "cand-", 5) != 0;
        s->last = fence;
        s->leaders++;
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void *observe_terms(void *arg)
{
    terms_seen *s = arg;
    s->rc = dlock_election_observe(s->e, DLOCK_WAIT_FOREVER, on_term, s);
    return NULL;
}

static void many_terms_one_leader_at_a_time_and_fences_only_grow(void **state)
{
    (void)state;
    char hist[300];
    int fd = zk_history_new(hist, sizeof hist, "dlock-zk-election-terms");
    assert_true(fd >= 0);
    terms_seen s = {.e = election(cl, "/elect/terms"), .rc = 1};
    assert_int_equal(pthread_mutex_init(&s.mu, NULL), 0);
    assert_int_equal(pthread_create(&s.thread, NULL, observe_terms, &s), 0);
    candidate k[CANDIDATES];
    for (int i = 0; i < CANDIDATES; i++) {
        k[i] = (candidate){.slot = i, .fd = fd};
        assert_int_equal(pthread_create(&k[i].thread, NULL, candidate_main, &k[i]), 0);
    }
    int errors = 0;
    for (int i = 0; i < CANDIDATES; i++) {
        pthread_join(k[i].thread, NULL);
        errors += k[i].errors;
    }
    close(fd);
    int64_t end = test_now_ms() + PUSH_MS; /* the last resign reaches the observer */
    for (int nobody = 0; !nobody && test_now_ms() < end; test_sleep_ms(10)) {
        pthread_mutex_lock(&s.mu);
        nobody = s.nobody_last && s.leaders > 0;
        pthread_mutex_unlock(&s.mu);
    }
    dlock_election_cancel(s.e);
    assert_int_equal(pthread_join(s.thread, NULL), 0);
    assert_int_equal(s.rc, DLOCK_ECANCELED);
    assert_int_equal(errors, 0);
    chaos_verdict v;
    assert_int_equal(zk_history_verdict(hist, &v), 0);
    assert_int_equal(v.cs, CANDIDATES * TERMS);
    assert_int_equal(v.torn, 0);
    assert_int_equal(v.cs_unclosed, 0);
    assert_int_equal(v.overlaps, 0);
    assert_int_equal(v.max_concurrent, 1);
    assert_int_equal(v.fence_violations, 0);
    /* (some terms may pass between two looks of the observer) */
    print_message("# %d terms; the observer reported %d leaders\n", CANDIDATES * TERMS,
                  s.leaders);
    assert_int_equal(s.violations, 0);
    assert_true(s.leaders > 0);
    assert_true(s.nobody_last);
    pthread_mutex_destroy(&s.mu);
    dlock_election_free(s.e);
}

int main(void)
{
    if (!test_zk_available()) {
        printf("no java or /usr/share/java/zookeeper.jar: skipped\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, client_setup, client_teardown)
        T(campaign_proclaim_resign_hand_over),
        T(observe_sees_every_change_in_order),
        /* these fork first, then make the client */
        cmocka_unit_test_teardown(a_killed_leader_is_replaced_when_its_session_expires,
                                  client_teardown),
        cmocka_unit_test_teardown(a_stopped_leader_is_replaced_when_its_session_expires,
                                  client_teardown),
        T(many_terms_one_leader_at_a_time_and_fences_only_grow),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
