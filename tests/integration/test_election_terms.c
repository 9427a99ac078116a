/* SPDX-License-Identifier: BSD-3-Clause */
/* Elections over many terms (issue 39's proof) on one real Redis node,
 * and on a Redlock of three (one node SIGKILLed a third of the way in
 * and left down: the rest runs on two): five candidate processes
 * campaign in a loop; the driver SIGKILLs the
 * leader, or SIGSTOPs it past its lease and lets it go on, in turn, and a
 * killed candidate is replaced by a new one. Every candidate reports on a
 * pipe (one write(2) per record, so records never tear): a term's start
 * with its fence, and while it leads a heartbeat whose time was taken
 * before the handle's validity was seen above 0 (so the lease covered
 * it). The checker then finds:
 *   - no two terms overlap: every record of a term is older than the next
 *     term's start (a stopped leader that wakes up past its lease writes
 *     no heartbeat: it no longer believes it leads);
 *   - fences strictly grow from term to term;
 *   - the take-over time after each fault (fault to the next start): at
 *     most the lease plus the standby's refresh and slack;
 * and an observer (this process) saw leaders in fence order only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "test_util.h"

#define N_CAND 5
#define TTL_MS 1000
#define FAULTS 12          /* 6 SIGKILLs and 6 SIGSTOPs, alternating */
#define STOP_MS (TTL_MS + 600) /* a SIGSTOP lasts past the lease */
#define MAX_RECS 200000
#define MAX_TERMS 4096

enum { REC_START = 1, REC_BEAT, REC_END };

typedef struct rec {
    int32_t type;
    int32_t pid;
    uint64_t fence;
    int64_t t_ns;
} rec;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void put(int fd, int type, uint64_t fence, int64_t t_ns)
{
    rec r = {type, (int32_t)getpid(), fence, t_ns};
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
        _exit(2);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The candidates' store: test_srv, or a Redlock's nodes. */
static const char *cand_urls[3];
static size_t cand_n;

/* A candidate: campaign, lead 50..250 ms with heartbeats, resign, again. */
static void candidate(int fd, unsigned seed)
{
    dlock_client *c = NULL;
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.connect_timeout_ms = 300; /* a killed node refuses at once anyway */
    co.io_timeout_ms = 300;
    if (dlock_client_new(&c, cand_urls, cand_n, &co, NULL, 0) != DLOCK_OK)
        _exit(1);
    dlock_election_options o = DLOCK_ELECTION_OPTIONS_INIT;
    o.ttl_ms = TTL_MS;
    dlock_election *e = NULL;
    char value[32];
    snprintf(value, sizeof value, "cand-%ld", (long)getpid());
    if (dlock_election_new(&e, c, "terms", &o) != DLOCK_OK)
        _exit(1);
    dlock_lock *l = dlock_election_lock(e);
    for (;;) {
        int rc = dlock_election_campaign(e, value, DLOCK_WAIT_FOREVER);
        if (rc != DLOCK_OK) {
            sleep_ms(20); /* a node error: stand by again */
            continue;
        }
        uint64_t fence = dlock_election_fence(e);
        int64_t t = mono_ns();
        if (dlock_lock_validity_ms(l) > 0)
            put(fd, REC_START, fence, t);
        int hold_ms = 50 + (int)(rand_r(&seed) % 200);
        /* Counted beats, not a deadline: a leader stopped mid-term goes on
         * beating when it wakes, unless it sees its lease ended. */
        for (int k = 0; k < hold_ms / 10; k++) {
            t = mono_ns();
            if (dlock_lock_validity_ms(l) <= 0)
                break; /* no longer leading (stopped past the lease) */
            put(fd, REC_BEAT, fence, t);
            sleep_ms(10);
        }
        put(fd, REC_END, fence, mono_ns());
        (void)dlock_election_resign(e);
    }
}

static pid_t spawn(int fd, unsigned seed)
{
    pid_t pid = test_fork_child();
    if (pid == 0)
        candidate(fd, seed);
    return pid;
}

/* ---- the driver's reading of the records -------------------------------- */

typedef struct history {
    rec *r;
    size_t n;
    int fd;
} history;

static void drain(history *h)
{
    rec buf[256];
    ssize_t got;
    while ((got = read(h->fd, buf, sizeof buf)) > 0) {
        size_t k = (size_t)got / sizeof(rec);
        assert_int_equal((size_t)got % sizeof(rec), 0);
        if (h->n + k <= MAX_RECS) {
            memcpy(h->r + h->n, buf, k * sizeof(rec));
            h->n += k;
        }
    }
}

/* The pid leading now: the newest start whose term has no end yet. */
static pid_t current_leader(history *h, uint64_t *fence)
{
    for (size_t i = h->n; i-- > 0;) {
        if (h->r[i].type == REC_END)
            return 0;
        if (h->r[i].type == REC_START) {
            *fence = h->r[i].fence;
            return h->r[i].pid;
        }
    }
    return 0;
}

/* The first start of a term after fence `after`, or -1. */
static int64_t next_start_ns(history *h, uint64_t after)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->r[i].type == REC_START && h->r[i].fence > after)
            return h->r[i].t_ns;
    return -1;
}

/* ---- the observer --------------------------------------------------------- */

typedef struct observed {
    dlock_election *e;
    uint64_t fences[MAX_TERMS];
    int n, out_of_order, rc;
} observed;

static int on_leader(void *arg, uint64_t fence, const char *value, size_t len)
{
    observed *o = arg;
    (void)value;
    (void)len;
    if (fence == 0)
        return 0;
    if (o->n > 0 && fence < o->fences[o->n - 1])
        o->out_of_order++;
    if (o->n < MAX_TERMS)
        o->fences[o->n++] = fence;
    return 0;
}

static void *observe_main(void *arg)
{
    observed *o = arg;
    o->rc = dlock_election_observe(o->e, DLOCK_WAIT_FOREVER, on_leader, o);
    return NULL;
}

/* ---- the check -------------------------------------------------------------- */

static int by_time(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

/* Every record of term f is older than the first start of any later
 * term; starts grow with time. Returns the number of terms. */
static int check_terms(history *h)
{
    qsort(h->r, h->n, sizeof(rec), by_time);
    uint64_t last_fence = 0;
    int terms = 0;
    for (size_t i = 0; i < h->n; i++) {
        const rec *r = &h->r[i];
        if (r->type == REC_START) {
            if (r->fence <= last_fence)
                fail_msg("term %" PRIu64 " started after term %" PRIu64, r->fence,
                         last_fence);
            last_fence = r->fence;
            terms++;
        } else if (r->type == REC_BEAT && r->fence != last_fence) {
            fail_msg("term %" PRIu64 " (pid %d) still led at %" PRId64 " ns, after term %" PRIu64
                     " started", r->fence, r->pid, r->t_ns, last_fence);
        }
    }
    return terms;
}

/* The run on the candidates' store (cand_urls), observed through obs_cl;
 * victim (may be NULL): a node SIGKILLed after the third fault. */
static void run_terms(dlock_client *obs_cl, test_redis *victim, const char *what)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    history h = {calloc(MAX_RECS, sizeof(rec)), 0, p[0]};
    assert_non_null(h.r);
    pid_t cand[N_CAND];
    for (int i = 0; i < N_CAND; i++)
        cand[i] = spawn(p[1], 1234u + (unsigned)i);

    observed obs = {.rc = 1};
    dlock_election_options eo = DLOCK_ELECTION_OPTIONS_INIT;
    eo.ttl_ms = TTL_MS;
    assert_int_equal(dlock_election_new(&obs.e, obs_cl, "terms", &eo), DLOCK_OK);
    pthread_t ot;
    assert_int_equal(pthread_create(&ot, NULL, observe_main, &obs), 0);

    int64_t took_ms[FAULTS];
    for (int f = 0; f < FAULTS; f++) {
        if (victim && f == FAULTS / 3) {
            test_redis_kill9(victim);
            print_message("# %s: node %s killed before fault %d\n", what, victim->url, f);
        }
        /* Let a few terms pass, then find the leader of the moment. */
        uint64_t fence = 0;
        pid_t leader = 0;
        int64_t end = test_now_ms() + 5000;
        sleep_ms(400);
        while (test_now_ms() < end) {
            drain(&h);
            if ((leader = current_leader(&h, &fence)) != 0)
                break;
            sleep_ms(2);
        }
        assert_true(leader != 0);
        int64_t fault_ns = mono_ns();
        if (f % 2 == 0) {
            kill(leader, SIGKILL);
            waitpid(leader, NULL, 0);
            for (int i = 0; i < N_CAND; i++)
                if (cand[i] == leader)
                    cand[i] = spawn(p[1], 99u + (unsigned)f);
        } else {
            kill(leader, SIGSTOP);
        }
        int64_t start_ns = -1;
        end = test_now_ms() + 4 * TTL_MS;
        while (test_now_ms() < end && (start_ns = next_start_ns(&h, fence)) < 0) {
            sleep_ms(2);
            drain(&h);
        }
        assert_true(start_ns > 0);
        if (f % 2 == 1) {
            sleep_ms(STOP_MS - (int)((mono_ns() - fault_ns) / 1000000) > 0
                         ? STOP_MS - (int)((mono_ns() - fault_ns) / 1000000)
                         : 0);
            kill(leader, SIGCONT); /* it wakes past its lease */
        }
        took_ms[f] = (start_ns - fault_ns) / 1000000;
    }
    sleep_ms(500);
    for (int i = 0; i < N_CAND; i++) {
        kill(cand[i], SIGKILL);
        waitpid(cand[i], NULL, 0);
    }
    drain(&h);
    dlock_election_cancel(obs.e);
    assert_int_equal(pthread_join(ot, NULL), 0);
    assert_int_equal(obs.rc, DLOCK_ECANCELED);

    int terms = check_terms(&h);
    print_message("# %s: %d terms, %zu records; take-over after the fault (ms, ttl %d):", what,
                  terms, h.n, TTL_MS);
    int64_t worst = 0;
    for (int f = 0; f < FAULTS; f++) {
        print_message(" %s %" PRId64, f % 2 ? "STOP" : "KILL", took_ms[f]);
        worst = took_ms[f] > worst ? took_ms[f] : worst;
    }
    print_message("\n# observer: %d leaders seen, %d out of order\n", obs.n, obs.out_of_order);
    assert_true(terms >= FAULTS);
    assert_int_equal(obs.out_of_order, 0);
    assert_true(obs.n >= terms / 2); /* it follows the terms, merging some */
    /* A standby takes over once the lease ends: at most TTL after the
     * fault, plus its look (a standby learns of an expired leader when it
     * looks, every refresh period) and slack for a loaded machine. */
    assert_true(worst <= TTL_MS + 1000);
    dlock_election_free(obs.e);
    free(h.r);
    close(p[0]);
    close(p[1]);
}

static void one_leader_at_a_time_over_many_terms(void **state)
{
    (void)state;
    cand_urls[0] = test_srv.url;
    cand_n = 1;
    run_terms(test_cl, NULL, "one node");
}

/* On a Redlock the term is a plain lock (standbys contend) held on a
 * majority; a node killed a third of the way in leaves two of three, on
 * which every later term is held. */
static void one_leader_at_a_time_on_a_redlock_with_a_node_killed(void **state)
{
    (void)state;
    test_redis more[2];
    assert_int_equal(test_redis_start(&more[0], NULL), 0);
    assert_int_equal(test_redis_start(&more[1], NULL), 0);
    assert_int_equal(test_flushall(&test_srv), 0);
    cand_urls[0] = test_srv.url;
    cand_urls[1] = more[0].url;
    cand_urls[2] = more[1].url;
    cand_n = 3;
    dlock_client *c = test_client_timeouts((test_redis[]){test_srv, more[0], more[1]}, 3, 300,
                                           300);
    run_terms(c, &more[1], "Redlock of 3");
    dlock_client_free(c);
    test_redis_stop(&more[0]);
    test_redis_stop(&more[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_leader_at_a_time_over_many_terms),
        cmocka_unit_test(one_leader_at_a_time_on_a_redlock_with_a_node_killed),
    };
    return cmocka_run_group_tests(tests, test_srv_client_setup, test_srv_client_teardown);
}
