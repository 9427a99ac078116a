/* SPDX-License-Identifier: BSD-3-Clause */
/* Mutual exclusion under contention: 8 processes, each with its own client,
 * run 1000 critical sections each on one lock name. Inside, a holder file
 * made with O_CREAT|O_EXCL detects overlap, and a decimal counter file is
 * updated with a deliberately non-atomic read-increment-write: any overlap
 * loses an increment. The end state must be 0 overlaps and exactly 8000. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

#define N_PROCS 8
#define N_ROUNDS 1000
#define LOCK_NAME "contention:counter"

/* Shared with the children through an anonymous MAP_SHARED mapping. */
typedef struct shared {
    atomic_int overlaps;
    atomic_int lock_errors;
    atomic_int file_errors;
} shared;

typedef struct ctx {
    const test_redis *srv;
    char holder_path[256];
    char counter_path[256];
    shared *sh;
} ctx;

/* The critical section: detect overlap, then read-increment-write. */
static void critical_section(ctx *x)
{
    int hfd = open(x->holder_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (hfd < 0) {
        if (errno == EEXIST)
            atomic_fetch_add(&x->sh->overlaps, 1);
        else
            atomic_fetch_add(&x->sh->file_errors, 1);
    }
    int cfd = open(x->counter_path, O_RDWR);
    char buf[32] = "";
    ssize_t n = cfd < 0 ? -1 : pread(cfd, buf, sizeof buf - 1, 0);
    if (n <= 0) {
        atomic_fetch_add(&x->sh->file_errors, 1);
    } else {
        buf[n] = '\0';
        long v = strtol(buf, NULL, 10) + 1;
        int len = snprintf(buf, sizeof buf, "%ld", v);
        /* The number only grows, so the new text covers the old. */
        if (pwrite(cfd, buf, (size_t)len, 0) != len)
            atomic_fetch_add(&x->sh->file_errors, 1);
    }
    if (cfd >= 0)
        close(cfd);
    if (hfd >= 0) {
        close(hfd);
        unlink(x->holder_path);
    }
}

/* One child process: its own client, N_ROUNDS acquire/section/release.
 * No cmocka asserts here (they would unwind into the child's copy of the
 * test runner): failures are counted and reported through the exit code. */
static int worker(int i, void *arg)
{
    ctx *x = arg;
    const char *urls[] = {x->srv->url};
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    char err[256] = "";
    o.ttl_ms = 10000; /* far longer than any critical section */
    o.retry_min_ms = 1;
    o.retry_max_ms = 5;
    if (dlock_client_new(&c, urls, 1, NULL, err, sizeof err) != DLOCK_OK ||
        dlock_lock_new(&l, c, LOCK_NAME, &o) != DLOCK_OK) {
        fprintf(stderr, "worker %d: setup failed: %s\n", i, err);
        return 1;
    }
    int failures = 0;
    for (int r = 0; r < N_ROUNDS && failures < 10; r++) {
        int rc = dlock_lock_acquire(l, 60000);
        if (rc != DLOCK_OK) {
            fprintf(stderr, "worker %d round %d: acquire %s: %s\n", i, r, dlock_errname(rc),
                    dlock_lock_errmsg(l));
            atomic_fetch_add(&x->sh->lock_errors, 1);
            failures++;
            continue;
        }
        critical_section(x);
        rc = dlock_lock_release(l);
        if (rc != DLOCK_OK) {
            fprintf(stderr, "worker %d round %d: release %s: %s\n", i, r, dlock_errname(rc),
                    dlock_lock_errmsg(l));
            atomic_fetch_add(&x->sh->lock_errors, 1);
            failures++;
        }
    }
    dlock_lock_free(l);
    dlock_client_free(c);
    return failures ? 1 : 0;
}

static void processes_never_overlap_and_no_increment_is_lost(void **state)
{
    (void)state;
    ctx x;
    memset(&x, 0, sizeof x);
    x.srv = &test_srv;
    test_tmp_path(x.holder_path, sizeof x.holder_path, "contention-holder");
    test_tmp_path(x.counter_path, sizeof x.counter_path, "contention-counter");
    unlink(x.holder_path);
    int fd = open(x.counter_path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0", 1), 1);
    close(fd);
    x.sh = mmap(NULL, sizeof *x.sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(x.sh != MAP_FAILED);
    atomic_init(&x.sh->overlaps, 0);
    atomic_init(&x.sh->lock_errors, 0);
    atomic_init(&x.sh->file_errors, 0);

    int64_t t0 = test_now_ms();
    int failed = test_run_procs(N_PROCS, worker, &x);
    int64_t took = test_now_ms() - t0;

    char buf[32] = "";
    fd = open(x.counter_path, O_RDONLY);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    assert_true(n > 0);
    long counter = strtol(buf, NULL, 10);
    int overlaps = atomic_load(&x.sh->overlaps);
    int lock_errors = atomic_load(&x.sh->lock_errors);
    int file_errors = atomic_load(&x.sh->file_errors);
    printf("# %d processes x %d critical sections: %lld ms, counter %ld, overlaps %d, "
           "lock errors %d, file errors %d\n",
           N_PROCS, N_ROUNDS, (long long)took, counter, overlaps, lock_errors, file_errors);
    munmap(x.sh, sizeof *x.sh);
    unlink(x.counter_path);
    unlink(x.holder_path);
    /* Every grant took one fencing token. */
    long long fence = -1;
    char fkey[128];
    int n_fkey = snprintf(fkey, sizeof fkey, "%s%cfence", LOCK_NAME, '\0');
    redisReply *r = test_redis_cmd(&test_srv, "GET %b", fkey, (size_t)n_fkey);
    if (r && r->type == REDIS_REPLY_STRING)
        fence = strtoll(r->str, NULL, 10);
    if (r)
        freeReplyObject(r);
    r = test_redis_cmd(&test_srv, "DEL %s %b", LOCK_NAME, fkey, (size_t)n_fkey);
    if (r)
        freeReplyObject(r);

    assert_int_equal(failed, 0);
    assert_int_equal(lock_errors, 0);
    assert_int_equal(file_errors, 0);
    assert_int_equal(overlaps, 0);
    assert_int_equal(counter, N_PROCS * N_ROUNDS);
    assert_int_equal(fence, N_PROCS * N_ROUNDS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(processes_never_overlap_and_no_increment_is_lost),
    };
    return cmocka_run_group_tests(tests, test_srv_setup, test_srv_teardown);
}
