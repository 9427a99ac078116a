/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared/exclusive locks on etcd (issue 38), against a real etcd member, on
 * the layout of etcd's recipe RWMutex (contrib/recipes/rwmutex.go): a
 * reader's key NAME/read/<ID>, a writer's NAME/write/<ID>, one line by
 * create revision. A writer waits for every key before its own; a reader
 * waits only for the last key before its own that is not a reader's. The
 * rule itself, holders and contention under the chaos history's checker
 * are the body ZooKeeper runs too (support/store_rw.c); here what is
 * etcd's: reentrant holds of one owner sharing one key, upgrade and
 * downgrade refused, the keys' names, and other clients. Any other key
 * under NAME/ counts as a writer's: `etcdctl lock NAME` (Go's
 * concurrency.Mutex, NAME/<lease>) and a reader exclude each other both
 * ways; and the recipe itself, in a Go peer (go/rwmutex_peer.go, built
 * here in GOPATH mode against Debian's golang-etcd-server-dev), shares
 * with dlock's readers and excludes dlock's writers both ways. etcdctl and
 * the peer are started as children and stopped by their pids; their tests
 * skip when they are missing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlock.h"
#include "etcd_ctl.h"
#include "etcd_keys.h"
#include "etcd_server.h"
#include "proc.h"
#include "store_rw.h"
#include "test_util.h"
#include "test_waiter.h"

static test_etcd srv;
static dlock_client *cl;
static int have_etcdctl;

static int setup(void **state)
{
    (void)state;
    if (test_etcd_setup(&srv, 1, NULL, &cl) != 0)
        return -1;
    if ((have_etcdctl = test_etcdctl_installed())) {
        setenv("ETCDCTL_API", "3", 1);
        snprintf(test_etcdctl_endpoints, sizeof test_etcdctl_endpoints,
                 "--endpoints=127.0.0.1:%d", srv.m[0].client_port);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_etcd_teardown(&srv, cl);
    return 0;
}

static dlock_lock *lock_of(const char *name, unsigned flags)
{
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.ttl_ms = 10000;
    o.flags = flags;
    o.retry_min_ms = 10;
    o.retry_max_ms = 100;
    return test_lock_with(cl, name, &o);
}

/* ---- the rule ------------------------------------------------------------- */

/* A reentrant reader's two handles (one owner: this thread) share one key
 * until the last of their holds; a reentrant writer (of another client:
 * another owner) waits for it, and its re-entries keep its fence. */
static void reentrant_readers_and_writers_count_their_holds(void **state)
{
    (void)state;
    const char *name = "rw-c";
    dlock_lock *a = lock_of(name, DLOCK_SHARED | DLOCK_REENTRANT);
    dlock_lock *b = lock_of(name, DLOCK_SHARED | DLOCK_REENTRANT);
    dlock_client *other = test_etcd_client(&srv, -1, 0);
    assert_non_null(other);
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = DLOCK_EXCLUSIVE | DLOCK_REENTRANT;
    dlock_lock *w = test_lock_with(other, name, &o);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK); /* a re-entry */
    assert_int_equal(dlock_lock_acquire(b, 0), DLOCK_OK); /* the owner's hold */
    assert_string_equal(dlock_lock_token(a), dlock_lock_token(b));
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK); /* a's last: b holds on */
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(b), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    uint64_t fence = dlock_lock_fence(w);
    assert_true(fence > 0);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK); /* a re-entry */
    assert_int_equal(dlock_lock_fence(w), fence);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_ENOTACQUIRED); /* one hold left */
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(a, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(a), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(w);
    dlock_client_free(other);
}

/* A reentrant owner that reads does not wait for itself to write (nor
 * the reverse): refused at once, as on Redis; a writer that is no
 * reentrant owner waits for the owner's share and times out. */
static void upgrade_and_downgrade_are_refused_not_waited_for(void **state)
{
    (void)state;
    const char *name = "rw-u";
    dlock_lock *r = lock_of(name, DLOCK_SHARED | DLOCK_REENTRANT);
    dlock_lock *rw = lock_of(name, DLOCK_EXCLUSIVE | DLOCK_REENTRANT);
    dlock_lock *w = lock_of(name, DLOCK_EXCLUSIVE);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    int64_t t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(w, 300), DLOCK_ETIMEDOUT);
    t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(rw, 8000), DLOCK_EINVAL);
    assert_true(test_now_ms() - t0 < 3000);
    assert_non_null(strstr(dlock_lock_errmsg(rw), "upgrade and downgrade are not offered"));
    assert_int_equal(dlock_lock_state_get(rw), DLOCK_STATE_UNLOCKED);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(rw, 0), DLOCK_OK);
    t0 = test_now_ms();
    assert_int_equal(dlock_lock_acquire(r, 8000), DLOCK_EINVAL);
    assert_true(test_now_ms() - t0 < 3000);
    assert_int_equal(dlock_lock_release(rw), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(rw);
    dlock_lock_free(w);
}

/* A reentrant plain lock of an owner that holds the name as a reentrant
 * reader or writer (another key: NAME/<ID>, not NAME/read/<ID> nor
 * NAME/write/<ID>) would wait for that owner's own key: refused at once,
 * as an upgrade is, and the reverse too. */
static void a_reentrant_plain_lock_and_a_reader_or_writer_refuse_each_other(void **state)
{
    (void)state;
    const char *name = "rw-p";
    unsigned sides[] = {DLOCK_SHARED, DLOCK_EXCLUSIVE};
    for (size_t i = 0; i < 2; i++) {
        dlock_lock *side = lock_of(name, sides[i] | DLOCK_REENTRANT);
        dlock_lock *plain = lock_of(name, DLOCK_REENTRANT);
        assert_int_equal(dlock_lock_acquire(side, 0), DLOCK_OK);
        int64_t t0 = test_now_ms();
        assert_int_equal(dlock_lock_acquire(plain, 8000), DLOCK_EINVAL);
        assert_true(test_now_ms() - t0 < 3000);
        assert_non_null(strstr(dlock_lock_errmsg(plain), "upgrade and downgrade are not offered"));
        assert_int_equal(dlock_lock_release(side), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(plain, 0), DLOCK_OK);
        t0 = test_now_ms();
        assert_int_equal(dlock_lock_acquire(side, 8000), DLOCK_EINVAL);
        assert_true(test_now_ms() - t0 < 3000);
        assert_int_equal(dlock_lock_release(plain), DLOCK_OK);
        dlock_lock_free(side);
        dlock_lock_free(plain);
    }
}

/* A lock NAME/read's keys (NAME/read/<ID>) are a reader's of NAME by
 * their layout, and NAME/write's a writer's: a reader of NAME would get
 * in beside a holder of NAME/read (or of any name under NAME/read/), and
 * NAME's readers and writers would hold NAME/read and NAME/write. No key
 * tells the two apart, so dlock makes no lock of such a name on etcd. */
static void names_that_would_be_a_readers_or_writers_keys_are_refused(void **state)
{
    (void)state;
    const char *bad[] = {"rw-n/read", "rw-n/write", "rw-n/read/x", "a/b/read"};
    const char *good[] = {"rw-n/reads", "rw-n/writer", "read/x", "write", "rw-n/write/x",
                          "rw-n/x/readx"};
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    dlock_lock *l = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(dlock_lock_new(&l, cl, bad[i], &o), DLOCK_EINVAL);
        assert_null(l);
    }
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        assert_int_equal(dlock_lock_new(&l, cl, good[i], &o), DLOCK_OK);
        dlock_lock_free(l);
        l = NULL;
    }
    /* what that would have let happen: a reader beside a/read's holder */
    dlock_lock *sub = lock_of("rw-n/x", 0), *r = lock_of("rw-n", DLOCK_SHARED);
    assert_int_equal(dlock_lock_acquire(sub, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_ENOTACQUIRED); /* a/x keeps a busy */
    assert_int_equal(dlock_lock_release(sub), DLOCK_OK);
    dlock_lock_free(sub);
    dlock_lock_free(r);
}

/* ---- etcdctl lock (Go's concurrency.Mutex) --------------------------------- */

/* The keys are the recipe's: NAME/read/<ID> and NAME/write/<ID>, the ID
 * in lowercase hex without padding (the token is it in 16 digits). */
static void the_keys_are_the_recipes(void **state)
{
    (void)state;
    if (!have_etcdctl)
        skip();
    dlock_lock *r = lock_of("rw-k", DLOCK_SHARED), *w = lock_of("rw-k", DLOCK_EXCLUSIVE);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    dlock_holders_info hi;
    dlock_holder h[2];
    assert_int_equal(dlock_client_holders(cl, "rw-k", 0, &hi, h, 2), DLOCK_OK);
    assert_true(h[0].ttl_ms > 0 && h[0].ttl_ms <= 10000); /* the reader's lease */
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED);
    test_waiter ww;
    assert_int_equal(test_waiter_start(&ww, w, 20000, TEST_WAITER_KEEP), 0);
    test_sleep_ms(300);
    char want[128];
    snprintf(want, sizeof want, "rw-k/read/%llx\n", test_etcd_token_id(dlock_lock_token(r)));
    ctl c;
    const char *args[] = {"get", "--prefix", "--keys-only", "rw-k/", NULL};
    ctl_run(&c, args);
    assert_non_null(strstr(c.buf, want));
    assert_non_null(strstr(c.buf, "rw-k/write/"));
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(test_waiter_join(&ww), DLOCK_OK);
    snprintf(want, sizeof want, "rw-k/write/%llx\n\n", test_etcd_token_id(dlock_lock_token(w)));
    ctl_run(&c, args);
    assert_string_equal(c.buf, want);
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(w);
}

/* etcdctl holds NAME (its key NAME/<lease>): a reader's try-once is
 * refused, and its waiter gets in only after etcdctl's command printed
 * "done" (etcdctl unlocks after its command exits). */
static void a_reader_waits_for_etcdctls_hold(void **state)
{
    (void)state;
    if (!have_etcdctl)
        skip();
    ctl c;
    const char *args[] = {"lock", "rw-e", "--", "sh", "-c",
                          "echo \"held $ETCD_LOCK_KEY\"; sleep 2; echo done", NULL};
    ctl_start(&c, args);
    assert_true(ctl_wait_for(&c, "\n", 10000)); /* etcdctl holds it */
    dlock_lock *r = lock_of("rw-e", DLOCK_SHARED);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_acquire(r, 15000), DLOCK_OK);
    assert_true(ctl_wait_for(&c, "done", 100)); /* printed before it unlocked */
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    dlock_lock_free(r);
    assert_true(WIFEXITED(ctl_stop(&c)));
}

/* A reader holds NAME: `etcdctl lock NAME` waits (prints no key) until
 * the reader's release, then takes it at once; a reader that comes while
 * etcdctl holds waits for etcdctl. */
static void etcdctl_waits_for_a_readers_hold(void **state)
{
    (void)state;
    if (!have_etcdctl)
        skip();
    dlock_lock *r = lock_of("rw-f", DLOCK_SHARED), *r2 = lock_of("rw-f", DLOCK_SHARED);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    ctl c;
    const char *args[] = {"lock", "rw-f", NULL};
    ctl_start(&c, args);
    assert_false(ctl_wait_for(&c, "rw-f/", 1500)); /* waits behind the reader */
    assert_int_equal(dlock_lock_acquire(r2, 0), DLOCK_ENOTACQUIRED); /* behind etcdctl */
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_true(ctl_wait_for(&c, "rw-f/", 5000));
    assert_int_equal(dlock_lock_acquire(r2, 0), DLOCK_ENOTACQUIRED);
    (void)ctl_stop(&c); /* SIGTERM: etcdctl unlocks */
    assert_int_equal(dlock_lock_acquire(r2, 5000), DLOCK_OK);
    assert_int_equal(dlock_lock_release(r2), DLOCK_OK);
    dlock_lock_free(r);
    dlock_lock_free(r2);
}

/* ---- the recipe RWMutex (Go) ------------------------------------------------ */

#ifndef DLOCK_RWMUTEX_PEER_SRC
#error "CMake names tests/etcd/go/rwmutex_peer.go"
#endif

#define RECIPE_SRC "/usr/share/gocode/src/go.etcd.io/etcd/contrib/recipes/rwmutex.go"

/* The peer's binary, built once (GOPATH mode, Debian's etcd 3.4 sources),
 * or "" when go or the sources are missing (the tests skip). */
static char peer_bin[300];
static int peer_tried;

static const char *peer(void)
{
    if (peer_tried)
        return peer_bin;
    peer_tried = 1;
    if (access(RECIPE_SRC, R_OK) != 0 || system("go version >/dev/null 2>&1") != 0) {
        print_message("go or golang-etcd-server-dev missing: the recipe's tests skip\n");
        return peer_bin;
    }
    char bin[256], cache[256], cmd[1400];
    test_tmp_path(bin, sizeof bin, "dlock-rwmutex-peer");
    /* one cache for every run: clientv3 builds once (~15 s), then in 1 s */
    test_tmp_path(cache, sizeof cache, "dlock-gocache");
    char *dash = strrchr(cache, '-'); /* made unique with the pid: not here */
    if (dash)
        *dash = '\0';
    snprintf(cmd, sizeof cmd,
             "GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE='%s' go build -o '%s' '%s' 1>&2",
             cache, bin, DLOCK_RWMUTEX_PEER_SRC);
    int64_t t0 = test_now_ms();
    assert_int_equal(system(cmd), 0);
    print_message("built the recipe's peer in %lld ms\n", (long long)(test_now_ms() - t0));
    snprintf(peer_bin, sizeof peer_bin, "%s", bin);
    return peer_bin;
}

/* Start the peer on NAME's read or write side, holding it hold_ms. */
static void peer_start(ctl *c, const char *name, const char *side, int hold_ms)
{
    char ep[64], hold[16];
    snprintf(ep, sizeof ep, "127.0.0.1:%d", srv.m[0].client_port);
    snprintf(hold, sizeof hold, "%d", hold_ms);
    const char *argv[] = {peer_bin, ep, name, side, hold, NULL};
    ctl_start_prog(c, argv);
}

/* The recipe's reader holds: a dlock reader shares with it, a dlock
 * writer waits until it unlocked; the recipe's writer holds: a dlock
 * reader waits until it unlocked. */
static void dlock_shares_with_the_recipes_reader_and_waits_for_its_writer(void **state)
{
    (void)state;
    if (!*peer())
        skip();
    ctl c;
    peer_start(&c, "rw-go", "read", 2000);
    assert_true(ctl_wait_for(&c, "\n", 10000));
    assert_non_null(strstr(c.buf, "held rw-go/read/"));
    dlock_lock *r = lock_of("rw-go", DLOCK_SHARED), *w = lock_of("rw-go", DLOCK_EXCLUSIVE);
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK); /* beside the recipe's reader */
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_int_equal(dlock_lock_acquire(w, 15000), DLOCK_OK);
    assert_true(ctl_wait_for(&c, "done", 100)); /* printed before it unlocked */
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_true(WIFEXITED(ctl_stop(&c)));

    peer_start(&c, "rw-go", "write", 2000);
    assert_true(ctl_wait_for(&c, "\n", 10000));
    assert_non_null(strstr(c.buf, "held rw-go/write/"));
    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_ENOTACQUIRED);
    assert_int_equal(dlock_lock_acquire(r, 15000), DLOCK_OK);
    assert_true(ctl_wait_for(&c, "done", 100));
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_true(WIFEXITED(ctl_stop(&c)));
    dlock_lock_free(r);
    dlock_lock_free(w);
}

/* A dlock writer holds: the recipe's reader waits until its release; a
 * dlock reader holds: the recipe's reader shares with it, and the
 * recipe's writer waits until its release. */
static void the_recipe_shares_with_dlocks_reader_and_waits_for_its_writer(void **state)
{
    (void)state;
    if (!*peer())
        skip();
    dlock_lock *r = lock_of("rw-go2", DLOCK_SHARED), *w = lock_of("rw-go2", DLOCK_EXCLUSIVE);
    assert_int_equal(dlock_lock_acquire(w, 0), DLOCK_OK);
    ctl c;
    peer_start(&c, "rw-go2", "read", 0);
    assert_false(ctl_wait_for(&c, "held", 1500)); /* behind dlock's writer */
    assert_int_equal(dlock_lock_release(w), DLOCK_OK);
    assert_true(ctl_wait_for(&c, "done", 5000));
    assert_true(WIFEXITED(ctl_stop(&c)));

    assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
    peer_start(&c, "rw-go2", "read", 0);
    assert_true(ctl_wait_for(&c, "done", 5000)); /* beside dlock's reader */
    assert_true(WIFEXITED(ctl_stop(&c)));
    peer_start(&c, "rw-go2", "write", 0);
    assert_false(ctl_wait_for(&c, "held", 1500)); /* behind dlock's reader */
    assert_int_equal(dlock_lock_release(r), DLOCK_OK);
    assert_true(ctl_wait_for(&c, "done", 5000));
    assert_true(WIFEXITED(ctl_stop(&c)));
    dlock_lock_free(r);
    dlock_lock_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reentrant_readers_and_writers_count_their_holds),
        cmocka_unit_test(upgrade_and_downgrade_are_refused_not_waited_for),
        cmocka_unit_test(a_reentrant_plain_lock_and_a_reader_or_writer_refuse_each_other),
        cmocka_unit_test(names_that_would_be_a_readers_or_writers_keys_are_refused),
        cmocka_unit_test(the_keys_are_the_recipes),
        cmocka_unit_test(a_reader_waits_for_etcdctls_hold),
        cmocka_unit_test(etcdctl_waits_for_a_readers_hold),
        cmocka_unit_test(dlock_shares_with_the_recipes_reader_and_waits_for_its_writer),
        cmocka_unit_test(the_recipe_shares_with_dlocks_reader_and_waits_for_its_writer),
    };
    if (setup(NULL) != 0)
        return 1;
    /* the rule, holders and contention: the body ZooKeeper runs too */
    int failed = test_store_rw_run(srv.url);
    failed += cmocka_run_group_tests(tests, NULL, NULL);
    teardown(NULL);
    return failed;
}
