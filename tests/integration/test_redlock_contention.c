/* SPDX-License-Identifier: BSD-3-Clause */
/* Redlock mutual exclusion under contention: several processes, each with
 * its own client over the same five redis-server processes, run critical
 * sections on one lock name. Inside, each one claims a holder file with
 * O_CREAT|O_EXCL (finding it there means two holders at once) and
 * increments a counter file with a deliberately non-atomic read, yield,
 * write (a lost update means two holders at once). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

#define N_NODES TEST_N_NODES
#define N_PROCS 8
#define N_ITERS 1000

/* What each child reports back, in memory shared with the parent. */
typedef struct child_result {
    int done;         /* critical sections completed */
    int violations;   /* holder file already there on entry */
    int acquire_errs; /* acquires that failed (and were retried) */
    int release_errs; /* releases that did not return DLOCK_OK */
    int64_t ms;       /* how long the child ran */
} child_result;

typedef struct run {
    const char *name;
    char holder_path[256];
    char counter_path[256];
    int iters;
    child_result *res; /* N_PROCS entries, MAP_SHARED */
} run;

static uint64_t read_counter(int fd)
{
    uint64_t v = 0;
    if (pread(fd, &v, sizeof v, 0) != (ssize_t)sizeof v)
        return UINT64_MAX;
    return v;
}

static int worker(int i, void *arg)
{
    run *r = arg;
    child_result *me = &r->res[i];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int64_t t0 = test_now_ms();

    const char *urls[N_NODES];
    for (int k = 0; k < N_NODES; k++)
        urls[k] = test_nodes[k].url;
    dlock_client *c = NULL;
    char err[256] = "";
    if (dlock_client_new(&c, urls, N_NODES, NULL, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "child %d: dlock_client_new: %s\n", i, err);
        return 2;
    }
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    o.retry_min_ms = 1;
    o.retry_max_ms = 10;
    dlock_lock *l = NULL;
    if (dlock_lock_new(&l, c, r->name, &o) != DLOCK_OK) {
        dlock_client_free(c);
        return 3;
    }
    int counter = open(r->counter_path, O_RDWR);
    if (counter < 0) {
        fprintf(stderr, "child %d: open counter: %s\n", i, strerror(errno));
        return 4;
    }
    int rc_out = 0;
    while (me->done < r->iters) {
        int rc = dlock_lock_acquire(l, 30000);
        if (rc != DLOCK_OK) {
            fprintf(stderr, "child %d: acquire: %s: %s\n", i, dlock_errname(rc),
                    dlock_lock_errmsg(l));
            if (++me->acquire_errs > 50) {
                rc_out = 5;
                break;
            }
            continue;
        }
        /* ---- critical section ---- */
        int hold = open(r->holder_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
        if (hold < 0) {
            if (errno == EEXIST)
                me->violations++;
            else
                fprintf(stderr, "child %d: open holder: %s\n", i, strerror(errno));
        }
        uint64_t v = read_counter(counter);
        sched_yield(); /* widen the read-modify-write window */
        v++;
        if (pwrite(counter, &v, sizeof v, 0) != (ssize_t)sizeof v)
            rc_out = 6;
        if (hold >= 0) {
            close(hold);
            unlink(r->holder_path);
        }
        /* ---- end ---- */
        if (dlock_lock_release(l) != DLOCK_OK)
            me->release_errs++;
        me->done++;
        if (rc_out)
            break;
    }
    close(counter);
    dlock_lock_free(l);
    dlock_client_free(c);
    me->ms = test_now_ms() - t0;
    return rc_out;
}

static void processes_running_critical_sections_never_overlap(void **state)
{
    (void)state;
    run r;
    memset(&r, 0, sizeof r);
    r.name = "contention:counter";
    r.iters = N_ITERS;
    test_tmp_path(r.holder_path, sizeof r.holder_path, "redlock-holder");
    test_tmp_path(r.counter_path, sizeof r.counter_path, "redlock-counter");
    unlink(r.holder_path);
    int fd = open(r.counter_path, O_CREAT | O_TRUNC | O_RDWR, 0600);
    assert_true(fd >= 0);
    uint64_t zero = 0;
    assert_int_equal(pwrite(fd, &zero, sizeof zero, 0), sizeof zero);
    r.res = mmap(NULL, N_PROCS * sizeof *r.res, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(r.res != MAP_FAILED);
    memset(r.res, 0, N_PROCS * sizeof *r.res);

    int64_t t0 = test_now_ms();
    int failed = test_run_procs(N_PROCS, worker, &r);
    int64_t took = test_now_ms() - t0;

    uint64_t total = read_counter(fd);
    close(fd);
    int violations = 0, done = 0, aerr = 0, rerr = 0;
    for (int i = 0; i < N_PROCS; i++) {
        violations += r.res[i].violations;
        done += r.res[i].done;
        aerr += r.res[i].acquire_errs;
        rerr += r.res[i].release_errs;
    }
    print_message("%d processes x %d critical sections in %" PRId64 " ms: counter %" PRIu64
                  ", %d overlaps, %d acquire errors, %d release errors\n",
                  N_PROCS, N_ITERS, took, total, violations, aerr, rerr);
    munmap(r.res, N_PROCS * sizeof *r.res);
    unlink(r.counter_path);
    unlink(r.holder_path);

    assert_int_equal(failed, 0);
    assert_int_equal(done, N_PROCS * N_ITERS);
    assert_int_equal(violations, 0);
    assert_int_equal(total, (uint64_t)N_PROCS * N_ITERS);
    assert_int_equal(rerr, 0);
    /* Nothing is left behind on any node. */
    for (int i = 0; i < N_NODES; i++)
        assert_int_equal(test_key_exists(&test_nodes[i], "contention:counter"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(processes_running_critical_sections_never_overlap),
    };
    return cmocka_run_group_tests(tests, test_nodes_setup, test_nodes_teardown);
}
