/* SPDX-License-Identifier: BSD-3-Clause */
/* The uncontended single-node path (issue 20): what a warm acquire +
 * release costs in system calls, and what a stalled node costs a try-once.
 *
 * System calls are counted by interposing getpid(), poll() and recv() in
 * this executable (libdlock is linked statically, so its calls land here;
 * hiredis' too). Counts are not speed: they do not depend on the machine's
 * load, except where a rule depends on time (a connection idle for 1 ms is
 * probed; a reply read late goes through poll()), which the bounds allow
 * for generously. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dlock.h"
#include "proc.h"
#include "redis_server.h"
#include "test_util.h"

/* ---- counting interposers ----------------------------------------------- */

static atomic_int counting;
static atomic_long n_getpid, n_poll, n_peek, n_recv;

pid_t getpid(void)
{
    if (atomic_load(&counting))
        atomic_fetch_add(&n_getpid, 1);
    return (pid_t)syscall(SYS_getpid);
}

int poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
    static int (*real)(struct pollfd *, nfds_t, int);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "poll");
    if (atomic_load(&counting))
        atomic_fetch_add(&n_poll, 1);
    return real(fds, n, timeout_ms);
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    static ssize_t (*real)(int, void *, size_t, int);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "recv");
    if (atomic_load(&counting))
        atomic_fetch_add(flags & MSG_PEEK ? &n_peek : &n_recv, 1);
    return real(fd, buf, len, flags);
}

static void count_start(void)
{
    atomic_store(&n_getpid, 0);
    atomic_store(&n_poll, 0);
    atomic_store(&n_peek, 0);
    atomic_store(&n_recv, 0);
    atomic_store(&counting, 1);
}

static void count_stop(void)
{
    atomic_store(&counting, 0);
}

/* ---- fixtures ----------------------------------------------------------- */

#define IO_TIMEOUT_MS 1500

static test_redis srv;
static dlock_client *cl;

static int setup(void **state)
{
    (void)state;
    return test_srv_client_start(&srv, &cl, IO_TIMEOUT_MS);
}

static int teardown(void **state)
{
    (void)state;
    test_srv_client_stop(&srv, &cl);
    return 0;
}

static int flush(void **state)
{
    (void)state;
    test_redis_resume(&srv); /* a failed test may have left it stopped */
    return test_flushall(&srv);
}

/* ---- tests -------------------------------------------------------------- */

#define CYCLES 400

/* Before issue 20 every cycle asked getpid() twice (fork detection), peeked
 * at the socket twice (liveness probe) and polled twice (before each
 * read): 2 * CYCLES of each. */
static void warm_cycles_ask_no_getpid_and_seldom_poll_or_probe(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(cl, "hot:cycle", 10000, 0, 5, 50);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* connect, handshake */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    count_start();
    for (int i = 0; i < CYCLES; i++) {
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    }
    count_stop();
    printf("# %d warm cycles: getpid %ld, poll %ld, MSG_PEEK probes %ld, reads %ld\n", CYCLES,
           atomic_load(&n_getpid), atomic_load(&n_poll), atomic_load(&n_peek),
           atomic_load(&n_recv));
    assert_int_equal(atomic_load(&n_getpid), 0);
    /* A read that starts late, or a connection idle for a millisecond (a
     * preempted test thread), takes the old way: allowed for a quarter. */
    assert_true(atomic_load(&n_poll) <= CYCLES / 2);
    assert_true(atomic_load(&n_peek) <= CYCLES / 2);
    dlock_lock_free(l);
}

/* The rule the probe keeps: a pooled connection the server closed while
 * it was idle is replaced, and the call succeeds, rather than failing
 * with an unknown outcome. */
static void connection_closed_while_pooled_is_replaced(void **state)
{
    (void)state;
    dlock_lock *l = test_lock_new(cl, "hot:closed", 10000, 0, 5, 50);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    test_cmd_int(&srv, "CLIENT KILL TYPE normal SKIPME yes");
    test_sleep_ms(20);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
}

/* A try-once to a node that stopped answering returns after one I/O
 * timeout: its undo is queued behind the attempt on the same connection
 * instead of waiting for the silent node again (it used to take two). When
 * the node answers again it runs the attempt and then the undo, so the key
 * does not stay for its TTL. */
static void try_once_to_a_stalled_node(unsigned flags, const char *name)
{
    dlock_lock *warm = test_lock_new(cl, "hot:warm", 10000, 0, 5, 50);
    dlock_lock *l = test_lock_new(cl, name, 60000, flags, 5, 50);
    assert_int_equal(dlock_lock_acquire(warm, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(warm), DLOCK_OK);
    if (flags & DLOCK_REENTRANT)
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* the re-entry comes next */
    test_redis_pause(&srv);
    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(l, 0);
    int64_t took = test_now_ms() - t0;
    test_redis_resume(&srv);
    printf("# %s: try-once to a stopped node gave %s after %lld ms (io_timeout_ms %d)\n", name,
           dlock_errname(rc), (long long)took, IO_TIMEOUT_MS);
    assert_int_equal(rc, DLOCK_EUNKNOWN);
    /* One timeout plus a generous allowance for a loaded machine; two
     * timeouts (the old cost) are 2 * IO_TIMEOUT_MS. */
    assert_true(took < 2 * IO_TIMEOUT_MS - 400);
    if (flags & DLOCK_REENTRANT) {
        /* The queued undo took back the re-entry's hold only. */
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    }
    /* The attempt and its undo ran in that order once the node resumed. */
    for (int i = 0; i < 100 && test_key_exists(&srv, name); i++)
        test_sleep_ms(20);
    assert_int_equal(test_key_exists(&srv, name), 0);
    dlock_lock_free(l);
    dlock_lock_free(warm);
}

static void try_once_to_a_stalled_node_takes_one_io_timeout(void **state)
{
    (void)state;
    try_once_to_a_stalled_node(0, "hot:stalled");
}

static void reentry_to_a_stalled_node_takes_one_io_timeout(void **state)
{
    (void)state;
    try_once_to_a_stalled_node(DLOCK_REENTRANT, "hot:stalled:reentrant");
}

#define T(f) cmocka_unit_test_teardown(f, flush)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(warm_cycles_ask_no_getpid_and_seldom_poll_or_probe),
        T(connection_closed_while_pooled_is_replaced),
        T(try_once_to_a_stalled_node_takes_one_io_timeout),
        T(reentry_to_a_stalled_node_takes_one_io_timeout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
