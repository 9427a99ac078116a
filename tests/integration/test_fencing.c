/* SPDX-License-Identifier: BSD-3-Clause */
/* Fencing tokens under contention, on one node and under Redlock over five,
 * including two of five nodes killed and restarted mid-run; and a fenced
 * resource that refuses the write of a holder paused past its lease.
 *
 * Each worker process appends one record per grant to its own file: the
 * CLOCK_MONOTONIC time taken inside the critical section, the fencing
 * token, and whether the lease was still valid after the time was taken.
 * Afterwards the parent merges the files and checks that no token repeats,
 * that each process saw its tokens grow, and that, ordered by time, the
 * tokens of all grants grow (grants are mutually exclusive while valid, so
 * their times are ordered as the grants are). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

#define N_NODES TEST_N_NODES
#define N_PROCS 8
#define N_ITERS 1000

static test_redis store_srv; /* the fenced resource lives here */

static int group_setup(void **state)
{
    if (test_nodes_setup(state) != 0)
        return -1;
    if (test_redis_start(&store_srv, NULL) != 0) {
        test_nodes_teardown(state);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    test_nodes_teardown(state);
    test_redis_stop(&store_srv);
    return 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- contended grants, recorded per process ------------------------------- */

enum { PHASE_ALL_UP = 0, PHASE_TWO_DOWN = 1, PHASE_RESTARTED = 2 };

/* Memory shared between the parent and its workers. */
typedef struct shared {
    atomic_int grants; /* progress, for the parent's fault injection */
    atomic_int phase;
    int done[N_PROCS];
    int retries[N_PROCS]; /* acquires that failed and were tried again */
} shared;

typedef struct fence_run {
    const char *name;
    int n_nodes;      /* 1: test_nodes[0] alone; N_NODES: Redlock */
    int64_t ttl_ms;
    int64_t min_uptime_ms;
    int iters;
    char dir[256];    /* per-process record files live here */
    shared *sh;
} fence_run;

typedef struct rec {
    int64_t t_ns;
    uint64_t fence;
    int valid; /* lease still valid after t_ns was taken */
    int phase;
    int proc;
} rec;

static void rec_path(const fence_run *r, int i, char *out, size_t len)
{
    snprintf(out, len, "%s/proc-%d.txt", r->dir, i);
}

static int fence_worker(int i, void *arg)
{
    fence_run *r = arg;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char path[320];
    rec_path(r, i, path, sizeof path);
    FILE *out = fopen(path, "w");
    if (!out)
        return 2;

    const char *urls[N_NODES];
    for (int k = 0; k < r->n_nodes; k++)
        urls[k] = test_nodes[k].url;
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.min_node_uptime_ms = r->min_uptime_ms;
    co.connect_timeout_ms = 300;
    dlock_client *c = NULL;
    char err[256] = "";
    if (dlock_client_new(&c, urls, (size_t)r->n_nodes, &co, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "worker %d: dlock_client_new: %s\n", i, err);
        return 3;
    }
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = r->ttl_ms;
    o.retry_min_ms = 1;
    o.retry_max_ms = 10;
    dlock_lock *l = NULL;
    if (dlock_lock_new(&l, c, r->name, &o) != DLOCK_OK)
        return 4;

    int rc_out = 0;
    while (r->sh->done[i] < r->iters) {
        int rc = dlock_lock_acquire(l, 20000);
        if (rc != DLOCK_OK) {
            /* No quorum while nodes are down or not yet counted is expected
             * in the fault run; a worker that never gets through fails. */
            if (++r->sh->retries[i] > 20000 ||
                (rc != DLOCK_ENOQUORUM && rc != DLOCK_ETIMEDOUT)) {
                fprintf(stderr, "worker %d: acquire: %s: %s\n", i, dlock_errname(rc),
                        dlock_lock_errmsg(l));
                rc_out = 5;
                break;
            }
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
            continue;
        }
        /* ---- critical section ---- */
        int64_t t = now_ns();
        uint64_t fence = dlock_lock_fence(l);
        int valid = dlock_lock_validity_ms(l) > 0;
        int phase = atomic_load(&r->sh->phase);
        /* ---- end ---- */
        (void)dlock_lock_release(l); /* may report expiry after an overrun */
        fprintf(out, "%" PRId64 " %" PRIu64 " %d %d\n", t, fence, valid, phase);
        r->sh->done[i]++;
        atomic_fetch_add(&r->sh->grants, 1);
    }
    if (fclose(out) != 0)
        rc_out = 6;
    dlock_lock_free(l);
    dlock_client_free(c);
    return rc_out;
}

/* Fork the workers; with `faults`, kill nodes 0 and 1 after a third of the
 * grants and restart them after more than a TTL. Returns how many workers
 * failed. The restart is done here, in the parent's main thread, because
 * the harness ties each server's life to the thread that started it. */
static int run_workers(fence_run *r, int faults)
{
    pid_t pids[N_PROCS];
    int failed = test_start_procs(pids, N_PROCS, fence_worker, r);
    if (faults) {
        int total = N_PROCS * r->iters;
        int64_t give_up = test_now_ms() + 120000;
        while (atomic_load(&r->sh->grants) < total / 3 && test_now_ms() < give_up)
            test_sleep_ms(5);
        test_redis_kill9(&test_nodes[0]);
        test_redis_kill9(&test_nodes[1]);
        atomic_store(&r->sh->phase, PHASE_TWO_DOWN);
        print_message("killed nodes 0 and 1 after %d grants\n", atomic_load(&r->sh->grants));
        test_sleep_ms((int)r->ttl_ms + 300);
        if (test_redis_restart(&test_nodes[0]) != 0 || test_redis_restart(&test_nodes[1]) != 0)
            failed++;
        atomic_store(&r->sh->phase, PHASE_RESTARTED);
        print_message("restarted nodes 0 and 1 after %d grants\n", atomic_load(&r->sh->grants));
    }
    return failed + test_wait_procs(pids, N_PROCS);
}

static int by_fence(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    return x->fence < y->fence ? -1 : x->fence > y->fence;
}

static int by_time(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

/* Read every worker's records, checking per-process growth on the way.
 * Returns the merged array (caller frees) and its length in *n. */
static rec *load_records(const fence_run *r, size_t *n)
{
    size_t cap = (size_t)N_PROCS * (size_t)r->iters, len = 0;
    rec *all = calloc(cap, sizeof *all);
    assert_non_null(all);
    for (int i = 0; i < N_PROCS; i++) {
        char path[320];
        rec_path(r, i, path, sizeof path);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        rec x;
        uint64_t prev = 0;
        int count = 0;
        while (fscanf(f, "%" SCNd64 " %" SCNu64 " %d %d", &x.t_ns, &x.fence, &x.valid,
                      &x.phase) == 4) {
            x.proc = i;
            if (x.fence <= prev)
                fail_msg("process %d: grant %d has token %" PRIu64 " after %" PRIu64, i,
                         count, x.fence, prev);
            prev = x.fence;
            assert_true(len < cap);
            all[len++] = x;
            count++;
        }
        fclose(f);
        unlink(path);
        assert_int_equal(count, r->iters);
    }
    *n = len;
    return all;
}

static void check_records(rec *all, size_t n, int *phase_counts)
{
    /* Distinct: no token was ever handed out twice. */
    qsort(all, n, sizeof *all, by_fence);
    for (size_t k = 1; k < n; k++)
        if (all[k].fence == all[k - 1].fence)
            fail_msg("token %" PRIu64 " granted twice (processes %d and %d)", all[k].fence,
                     all[k - 1].proc, all[k].proc);
    assert_true(all[0].fence > 0);

    /* In time order, grants that were valid when timed carry growing
     * tokens. A grant timed after its lease ran out (a worker descheduled
     * for longer than the TTL) is not covered by mutual exclusion. */
    qsort(all, n, sizeof *all, by_time);
    const rec *prev = NULL;
    size_t overruns = 0;
    for (size_t k = 0; k < n; k++) {
        phase_counts[all[k].phase]++;
        if (!all[k].valid) {
            overruns++;
            continue;
        }
        if (prev && all[k].fence <= prev->fence)
            fail_msg("token %" PRIu64 " (process %d, t=%" PRId64 ") after token %" PRIu64
                     " (process %d, t=%" PRId64 ")",
                     all[k].fence, all[k].proc, all[k].t_ns, prev->fence, prev->proc,
                     prev->t_ns);
        prev = &all[k];
    }
    print_message("%zu grants, %zu timed after their lease ended; tokens %" PRIu64
                  "..%" PRIu64 "\n", n, overruns, all[0].fence, all[n - 1].fence);
    assert_true(overruns < n / 10); /* the ordering check must mean something */
}

static void run_fence_test(const char *name, int n_nodes, int64_t ttl_ms, int faults)
{
    fence_run r;
    memset(&r, 0, sizeof r);
    r.name = name;
    r.n_nodes = n_nodes;
    r.ttl_ms = ttl_ms;
    r.min_uptime_ms = faults ? ttl_ms : 0;
    r.iters = N_ITERS;
    test_tmp_path(r.dir, sizeof r.dir, "fence");
    strncat(r.dir, "-XXXXXX", sizeof r.dir - strlen(r.dir) - 1);
    assert_non_null(mkdtemp(r.dir));
    r.sh = mmap(NULL, sizeof *r.sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(r.sh != MAP_FAILED);
    memset(r.sh, 0, sizeof *r.sh);

    int64_t t0 = test_now_ms();
    int failed = run_workers(&r, faults);
    int64_t took = test_now_ms() - t0;
    int retries = 0;
    for (int i = 0; i < N_PROCS; i++)
        retries += r.sh->retries[i];
    print_message("%d processes x %d grants on %d node(s) in %" PRId64 " ms, %d retried acquires\n",
                  N_PROCS, N_ITERS, n_nodes, took, retries);
    assert_int_equal(failed, 0);

    size_t n = 0;
    rec *all = load_records(&r, &n);
    assert_int_equal(n, (size_t)N_PROCS * N_ITERS);
    int phases[3] = {0, 0, 0};
    check_records(all, n, phases);
    free(all);
    if (faults) {
        print_message("grants with all nodes up: %d, with two down: %d, after restart: %d\n",
                      phases[0], phases[1], phases[2]);
        /* The run must have gone on past the restart for it to test it. */
        assert_true(phases[0] > 0 && phases[2] > 0);
    }
    munmap(r.sh, sizeof *r.sh);
    rmdir(r.dir);
}

static void tokens_strictly_increase_under_contention_on_one_node(void **state)
{
    (void)state;
    run_fence_test("fence:one-node", 1, 10000, 0);
}

static void tokens_strictly_increase_under_contention_on_five_nodes(void **state)
{
    (void)state;
    run_fence_test("fence:five-nodes", N_NODES, 10000, 0);
}

static void tokens_never_repeat_or_decrease_when_two_of_five_nodes_restart_mid_run(void **state)
{
    (void)state;
    run_fence_test("fence:restarts", N_NODES, 500, 1);
}

/* ---- a fenced resource ------------------------------------------------------ */

/* The store: a value guarded by the highest token seen. A write carrying a
 * lower token is refused; an equal one (the same holder again) is taken. */
static const char store_lua[] =
    "local max = tonumber(redis.call('get', KEYS[1]) or '0')\n"
    "local t = tonumber(ARGV[1])\n"
    "if t < max then return 0 end\n"
    "redis.call('set', KEYS[1], ARGV[1])\n"
    "redis.call('set', KEYS[2], ARGV[2])\n"
    "return 1\n";

/* 1 written, 0 refused, -1 error. */
static int store_write(uint64_t fence, const char *value)
{
    char f[24];
    snprintf(f, sizeof f, "%" PRIu64, fence);
    redisReply *r = test_redis_cmd(&store_srv, "EVAL %s 2 store:max store:data %s %s", store_lua,
                                   f, value);
    int rc = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    if (r)
        freeReplyObject(r);
    return rc;
}

static dlock_client *redlock_client(void)
{
    const char *urls[N_NODES];
    for (int k = 0; k < N_NODES; k++)
        urls[k] = test_nodes[k].url;
    dlock_client *c = NULL;
    char err[256] = "";
    if (dlock_client_new(&c, urls, N_NODES, NULL, err, sizeof err) != DLOCK_OK)
        return NULL;
    return c;
}

#define STORE_TTL_MS 500

/* Exit codes of process A. */
enum { A_REFUSED = 0, A_ACCEPTED = 10, A_NO_LOCK = 11, A_FIRST_WRITE = 12, A_PIPE = 13,
       A_RELEASE = 14 };

static int process_a(int to_parent, int from_parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dlock_client *c = redlock_client();
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = STORE_TTL_MS;
    dlock_lock *l = NULL;
    if (!c || dlock_lock_new(&l, c, "fence:store", &o) != DLOCK_OK ||
        dlock_lock_acquire(l, 5000) != DLOCK_OK)
        return A_NO_LOCK;
    uint64_t fence = dlock_lock_fence(l);
    /* While the lease is valid, A's writes go through. */
    if (dlock_lock_validity_ms(l) <= 0 || store_write(fence, "A1") != 1)
        return A_FIRST_WRITE;
    char go;
    if (write(to_parent, &fence, sizeof fence) != (ssize_t)sizeof fence ||
        read(from_parent, &go, 1) != 1) /* the parent stops us in here */
        return A_PIPE;
    /* A believes it still holds the lock and writes with its token. */
    int w = store_write(fence, "A2");
    /* Its release must not remove B's lock. */
    int rel = dlock_lock_release(l);
    dlock_lock_free(l);
    dlock_client_free(c);
    if (w == 1)
        return A_ACCEPTED;
    if (w != 0)
        return A_PIPE;
    return rel == DLOCK_ENOTOWNER ? A_REFUSED : A_RELEASE;
}

static void fenced_store_refuses_a_holder_paused_past_its_lease(void **state)
{
    (void)state;
    freeReplyObject(test_cmd(&store_srv, "DEL store:max store:data"));
    int up[2], down[2];
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(down), 0);
    fflush(NULL);
    pid_t a = fork();
    assert_true(a >= 0);
    if (a == 0) {
        close(up[0]);
        close(down[1]);
        _exit(process_a(up[1], down[0]));
    }
    close(up[1]);
    close(down[0]);

    uint64_t fence_a = 0;
    assert_int_equal(read(up[0], &fence_a, sizeof fence_a), sizeof fence_a);
    assert_true(fence_a > 0);
    /* A pauses (a GC pause, a swap storm) for longer than its lease. */
    assert_int_equal(kill(a, SIGSTOP), 0);
    int st;
    assert_int_equal(waitpid(a, &st, WUNTRACED), a);
    assert_true(WIFSTOPPED(st));
    test_sleep_ms(STORE_TTL_MS + 300);

    /* B takes the lock once A's lease ran out and writes. */
    dlock_client *c = redlock_client();
    assert_non_null(c);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    dlock_lock *b = NULL;
    assert_int_equal(dlock_lock_new(&b, c, "fence:store", &o), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK);
    uint64_t fence_b = dlock_lock_fence(b);
    assert_true(fence_b > fence_a);
    assert_int_equal(store_write(fence_b, "B"), 1);

    /* A wakes up and writes with its old token: refused. */
    assert_int_equal(kill(a, SIGCONT), 0);
    assert_int_equal(write(down[1], "g", 1), 1);
    assert_int_equal(waitpid(a, &st, 0), a);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) != A_REFUSED)
        fail_msg("process A exited with %d (10: its stale write was accepted)", WEXITSTATUS(st));
    close(up[0]);
    close(down[1]);

    char *data = test_cmd_str(&store_srv, "GET store:data");
    char *max = test_cmd_str(&store_srv, "GET store:max");
    char want_max[24];
    snprintf(want_max, sizeof want_max, "%" PRIu64, fence_b);
    assert_string_equal(data, "B");
    assert_string_equal(max, want_max);
    free(data);
    free(max);
    /* The store is not refusing everything: B can still write. */
    assert_int_equal(store_write(fence_b, "B2"), 1);
    assert_int_equal(store_write(fence_a, "A3"), 0);

    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    dlock_lock_free(b);
    dlock_client_free(c);
}

#define T(f) cmocka_unit_test_setup_teardown(f, test_nodes_revive, NULL)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(tokens_strictly_increase_under_contention_on_one_node),
        T(tokens_strictly_increase_under_contention_on_five_nodes),
        T(tokens_never_repeat_or_decrease_when_two_of_five_nodes_restart_mid_run),
        T(fenced_store_refuses_a_holder_paused_past_its_lease),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
