/* SPDX-License-Identifier: BSD-3-Clause */
/* Locks on a real Redis Cluster (issue 19): three masters with a replica
 * each, started once for the file. The client gets the six nodes as seeds
 * and the cluster option. Covered: the key slot against the server's
 * CLUSTER KEYSLOT; every helper key in its lock key's slot (names with
 * braces too); locks on names in different slots, on different masters;
 * exclusion among many processes with an exact counter; a 1 s lease
 * renewed for several seconds; reentrant, fair and fenced locks; wake-ups
 * across masters through sharded pub/sub; MOVED
 * and ASK during a slot migration; and, last, a master killed and the lock
 * usable again after its replica took over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "cluster.h"
#include "dlock.h"
#include "fanout.h"
#include "proc.h"
#include "redis_topology.h"
#include "test_util.h"

static test_cluster C;

static int group_setup(void **state)
{
    (void)state;
    return test_cluster_start(&C);
}

static int group_teardown(void **state)
{
    (void)state;
    test_cluster_stop(&C);
    return 0;
}

static dlock_client *cluster_client(const dlock_client_options *base)
{
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    if (base)
        o = *base;
    o.cluster = 1;
    return test_client_new(C.urls, TEST_CLUSTER_NODES, &o);
}

/* The server's slot for a binary key. */
static int server_keyslot(const char *key, size_t len)
{
    for (int i = 0; i < TEST_CLUSTER_NODES; i++) {
        if (C.node[i].pid <= 0)
            continue;
        redisReply *r = test_cmd_bin(&C.node[i], "CLUSTER KEYSLOT %b", key, len);
        int slot = r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
        freeReplyObject(r);
        return slot;
    }
    return -1;
}

static const char *const names[] = {
    "a", "orders:1", "{user1}:x", "x{}y", "a}b", "}{", "{", "}", "{a}b}c", "a{b",
    "{}", "{{x}}", "}x{y}", "123", "名前", "with space",
};

static void keyslot_is_the_servers(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_int_equal((int)dlock__cluster_keyslot(names[i], strlen(names[i])),
                         server_keyslot(names[i], strlen(names[i])));
    /* The check value of CRC16/XMODEM, from the Cluster specification. */
    assert_int_equal((int)dlock__cluster_keyslot("123456789", 9), 0x31C3 & 16383);
}

static void helper_keys_share_the_lock_keys_slot(void **state)
{
    (void)state;
    static const char *const kinds[] = {"fence", "q", "w"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t len = strlen(names[i]);
        int want = server_keyslot(names[i], len);
        for (size_t k = 0; k < 3; k++) {
            size_t hlen = 0;
            char *h = dlock__cluster_helper_key(names[i], len, kinds[k], strlen(kinds[k]), &hlen);
            assert_non_null(h);
            if (server_keyslot(h, hlen) != want)
                fail_msg("helper %s of \"%s\" is in slot %d, not %d", kinds[k], names[i],
                         server_keyslot(h, hlen), want);
            /* One-to-one: no helper key equals another lock's. */
            for (size_t j = 0; j < sizeof names / sizeof names[0]; j++) {
                size_t olen = 0;
                char *o = dlock__cluster_helper_key(names[j], strlen(names[j]), kinds[k],
                                                    strlen(kinds[k]), &olen);
                assert_non_null(o);
                if (j != i)
                    assert_false(olen == hlen && !memcmp(o, h, hlen));
                assert_false(olen == strlen(names[j]) && !memcmp(o, names[j], olen));
                free(o);
            }
            free(h);
        }
    }
}

/* Names whose slots are served by three different masters. */
static void pick_names_on_three_masters(char out[3][32])
{
    int masters[3] = {-1, -1, -1}, found = 0;
    for (int k = 0; found < 3 && k < 1000; k++) {
        char name[32];
        snprintf(name, sizeof name, "spread-%d", k);
        int m = test_cluster_master_of(&C, server_keyslot(name, strlen(name)));
        if (m < 0 || m == masters[0] || m == masters[1])
            continue;
        masters[found] = m;
        snprintf(out[found++], 32, "%s", name);
    }
    assert_int_equal(found, 3);
}

static void locks_in_different_slots_land_on_their_masters(void **state)
{
    (void)state;
    dlock_client *c = cluster_client(NULL);
    assert_int_equal(dlock_client_node_count(c), 1);
    char nm[3][32];
    pick_names_on_three_masters(nm);
    dlock_lock *l[3];
    for (int i = 0; i < 3; i++) {
        l[i] = test_lock_new(c, nm[i], 30000, 0, 10, 100);
        assert_int_equal(dlock_lock_acquire(l[i], 0), DLOCK_OK);
        assert_true(dlock_lock_fence(l[i]) >= 1);
        int m = test_cluster_master_of(&C, server_keyslot(nm[i], strlen(nm[i])));
        assert_int_equal(test_key_exists(&C.node[m], nm[i]), 1);
    }
    /* A second client sees them held, then free. */
    dlock_client *c2 = cluster_client(NULL);
    for (int i = 0; i < 3; i++) {
        dlock_lock *o = test_lock_new(c2, nm[i], 30000, 0, 10, 100);
        assert_int_equal(dlock_lock_acquire(o, 0), DLOCK_ENOTACQUIRED);
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(o, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_release(o), DLOCK_OK);
        dlock_lock_free(o);
        dlock_lock_free(l[i]);
    }
    dlock_client_free(c2);
    dlock_client_free(c);
}

static void brace_names_get_fencing_and_fair_mode(void **state)
{
    (void)state;
    dlock_client *c = cluster_client(NULL);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        dlock_lock *l = test_lock_new(c, names[i], 30000, 0, 10, 100);
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        uint64_t f1 = dlock_lock_fence(l);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
        assert_true(dlock_lock_fence(l) > f1);
        assert_int_equal(dlock_lock_release(l), DLOCK_OK);
        dlock_lock_free(l);

        dlock_lock *r = test_lock_new(c, names[i], 30000, DLOCK_REENTRANT, 10, 100);
        assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_acquire(r, 0), DLOCK_OK);
        assert_int_equal(dlock_lock_hold_count(r), 2);
        assert_int_equal(dlock_lock_release(r), DLOCK_OK);
        assert_int_equal(dlock_lock_release(r), DLOCK_OK);
        dlock_lock_free(r);

        dlock_lock *f = test_lock_new(c, names[i], 30000, DLOCK_FAIR, 10, 100);
        assert_int_equal(dlock_lock_acquire(f, 1000), DLOCK_OK);
        assert_int_equal(dlock_lock_release(f), DLOCK_OK);
        dlock_lock_free(f);
    }
    dlock_client_free(c);
}

/* A waiter that sleeps long between looks (backoff up to 10 s) is woken by
 * the release instead: the wake-up crosses masters (the subscriber sits on
 * one master, the lock and its release on another). Without it, the waiter
 * of each of three names would have to be lucky. */
typedef struct waiter {
    dlock_lock *lock;
    int rc;
    int64_t done_ms;
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    w->rc = dlock_lock_acquire(w->lock, 20000);
    w->done_ms = test_now_ms();
    return NULL;
}

/* Calls of a command a server has served (INFO commandstats; commands run
 * by scripts count too), 0 if none. */
static long long command_calls(test_redis *r, const char *cmd)
{
    char *info = test_cmd_str(r, "INFO commandstats");
    char key[64];
    snprintf(key, sizeof key, "cmdstat_%s:calls=", cmd);
    const char *p = strstr(info, key);
    long long n = p ? atoll(p + strlen(key)) : 0;
    free(info);
    return n;
}

static void release_wakes_a_waiter_on_another_master(void **state)
{
    (void)state;
    dlock_client *c = cluster_client(NULL), *c2 = cluster_client(NULL);
    char nm[3][32];
    pick_names_on_three_masters(nm);
    for (int i = 0; i < 3; i++) {
        dlock_lock *h = test_lock_new(c, nm[i], 30000, 0, 10, 100);
        waiter w = {test_lock_new(c2, nm[i], 30000, 0, 10000, 10000), 0, 0};
        assert_int_equal(dlock_lock_acquire(h, 0), DLOCK_OK);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, wait_for_lock, &w), 0);
        test_sleep_ms(500); /* the waiter tried, subscribed and sleeps */
        int64_t t0 = test_now_ms();
        assert_int_equal(dlock_lock_release(h), DLOCK_OK);
        pthread_join(th, NULL);
        print_message("wake-up on %s: acquired %lld ms after the release\n", nm[i],
                      (long long)(w.done_ms - t0));
        assert_int_equal(w.rc, DLOCK_OK);
        assert_true(w.done_ms - t0 < 1500);
        assert_int_equal(dlock_lock_release(w.lock), DLOCK_OK);
        dlock_lock_free(w.lock);
        dlock_lock_free(h);
    }
    /* Sharded pub/sub: releases SPUBLISH on the lock's shard and nothing
     * is broadcast with PUBLISH to every node. */
    long long spub = 0, pub = 0;
    for (int i = 0; i < TEST_CLUSTER_NODES; i++) {
        spub += command_calls(&C.node[i], "spublish");
        pub += command_calls(&C.node[i], "publish");
    }
    print_message("wake-ups: %lld SPUBLISH, %lld PUBLISH\n", spub, pub);
    assert_true(spub >= 3);
    assert_int_equal(pub, 0);
    dlock_client_free(c2);
    dlock_client_free(c);
}

/* Fair mode: the release hands the lock to the first waiter in line and
 * tells it with a sharded message ("g TOKEN FENCE"); the waiter takes it
 * within moments, with a larger fencing token. */
static void fair_hand_over_reaches_the_waiter(void **state)
{
    (void)state;
    dlock_client *c = cluster_client(NULL), *c2 = cluster_client(NULL);
    char nm[3][32];
    pick_names_on_three_masters(nm);
    for (int i = 0; i < 3; i++) {
        dlock_lock *h = test_lock_new(c, nm[i], 30000, DLOCK_FAIR, 10000, 10000);
        waiter w = {test_lock_new(c2, nm[i], 30000, DLOCK_FAIR, 10000, 10000), 0, 0};
        assert_int_equal(dlock_lock_acquire(h, 0), DLOCK_OK);
        uint64_t f1 = dlock_lock_fence(h);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, wait_for_lock, &w), 0);
        test_sleep_ms(500); /* in line and subscribed */
        int64_t t0 = test_now_ms();
        assert_int_equal(dlock_lock_release(h), DLOCK_OK);
        pthread_join(th, NULL);
        print_message("fair hand-over on %s: %lld ms after the release\n", nm[i],
                      (long long)(w.done_ms - t0));
        assert_int_equal(w.rc, DLOCK_OK);
        assert_true(w.done_ms - t0 < 1500);
        assert_true(dlock_lock_fence(w.lock) > f1);
        assert_int_equal(dlock_lock_release(w.lock), DLOCK_OK);
        dlock_lock_free(w.lock);
        dlock_lock_free(h);
    }
    dlock_client_free(c2);
    dlock_client_free(c);
}

/* ---- exclusion among processes -------------------------------------------- */

#define PROCS 8
#define ROUNDS 25

typedef struct shared {
    long counter;
    int inside;
    int overlaps;
} shared;

static int worker(int idx, void *arg)
{
    shared *sh = arg;
    (void)idx;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = 1;
    dlock_client *c = NULL;
    if (dlock_client_new(&c, C.urls, TEST_CLUSTER_NODES, &o, NULL, 0) != DLOCK_OK)
        return 2;
    dlock_lock *l = NULL;
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = 10000;
    if (dlock_lock_new(&l, c, "contended{counter}", &lo) != DLOCK_OK)
        return 3;
    int bad = 0;
    for (int i = 0; i < ROUNDS; i++) {
        if (dlock_lock_acquire(l, 30000) != DLOCK_OK) {
            bad = 4;
            break;
        }
        if (__atomic_fetch_add(&sh->inside, 1, __ATOMIC_SEQ_CST) != 0)
            __atomic_fetch_add(&sh->overlaps, 1, __ATOMIC_SEQ_CST);
        long v = sh->counter; /* a non-atomic read-modify-write */
        usleep(200);
        sh->counter = v + 1;
        __atomic_fetch_sub(&sh->inside, 1, __ATOMIC_SEQ_CST);
        if (dlock_lock_release(l) != DLOCK_OK) {
            bad = 5;
            break;
        }
    }
    dlock_lock_free(l);
    dlock_client_free(c);
    return bad;
}

static void many_processes_exclude_each_other(void **state)
{
    (void)state;
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    int64_t t0 = test_now_ms();
    int failed = test_run_procs(PROCS, worker, sh);
    int64_t took = test_now_ms() - t0;
    print_message("cluster exclusion: %d processes x %d sections in %lld ms, counter %ld, "
                  "overlaps %d\n", PROCS, ROUNDS, (long long)took, sh->counter, sh->overlaps);
    assert_int_equal(failed, 0);
    assert_int_equal(sh->overlaps, 0);
    assert_int_equal(sh->counter, (long)PROCS * ROUNDS);
    munmap(sh, sizeof *sh);
}

static void short_lease_is_renewed_for_seconds(void **state)
{
    (void)state;
    dlock_client *c = cluster_client(NULL);
    char nm[3][32];
    pick_names_on_three_masters(nm);
    dlock_lock *l[3];
    for (int i = 0; i < 3; i++) {
        l[i] = test_lock_new(c, nm[i], 1000, DLOCK_AUTO_RENEW, 10, 100);
        assert_int_equal(dlock_lock_acquire(l[i], 0), DLOCK_OK);
    }
    dlock_client *c2 = cluster_client(NULL);
    for (int s = 0; s < 8; s++) { /* 4 s: four leases long */
        test_sleep_ms(500);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(dlock_lock_state_get(l[i]), DLOCK_STATE_HELD);
            dlock_lock *o = test_lock_new(c2, nm[i], 1000, 0, 10, 100);
            assert_int_equal(dlock_lock_acquire(o, 0), DLOCK_ENOTACQUIRED);
            dlock_lock_free(o);
        }
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        dlock_lock_free(l[i]);
    }
    dlock_client_free(c2);
    dlock_client_free(c);
}

static void cluster_option_rejects_bad_seeds(void **state)
{
    (void)state;
    dlock_client_options o = DLOCK_CLIENT_OPTIONS_INIT;
    o.cluster = 1;
    dlock_client *c = NULL;
    char err[256];
    const char *unix_seed[2] = {C.urls[0], "unix:///tmp/x.sock"};
    assert_int_equal(dlock_client_new(&c, unix_seed, 2, &o, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "TCP"));
    o.cluster = 2;
    assert_int_equal(dlock_client_new(&c, C.urls, 1, &o, err, sizeof err), DLOCK_EINVAL);
    /* The option is for Redis Cluster; an etcd client has no nodes. */
    o.cluster = 1;
    const char *etcd[1] = {"etcd://127.0.0.1:2379"};
    assert_int_equal(dlock_client_new(&c, etcd, 1, &o, err, sizeof err), DLOCK_EINVAL);
    assert_non_null(strstr(err, "not etcd"));
    /* A server without cluster support answers CLUSTER SLOTS with an error. */
    test_redis plain;
    assert_int_equal(test_redis_start(&plain, NULL), 0);
    o.cluster = 1;
    const char *u[1] = {plain.url};
    c = test_client_new(u, 1, &o);
    dlock_lock *l = test_lock_new(c, "x", 1000, 0, 10, 100);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_EREFUSED);
    assert_non_null(strstr(dlock_lock_errmsg(l), "cluster support disabled"));
    dlock_lock_free(l);
    dlock_client_free(c);
    test_redis_stop(&plain);
}

/* Move an empty slot from its master to another by hand, the way
 * redis-cli --cluster reshard does: IMPORTING/MIGRATING first (a key not
 * yet on the source is answered with ASK), then the slot assigned to the
 * target everywhere (the source answers MOVED). The client learned the map
 * before and must follow both. */
static char *node_id(test_redis *r)
{
    return test_cmd_str(r, "CLUSTER MYID");
}

static void set_slot_everywhere(int slot, const char *id)
{
    for (int i = 0; i < TEST_CLUSTER_NODES; i++)
        if (C.node[i].pid > 0) {
            redisReply *r = test_cmd(&C.node[i], "CLUSTER SETSLOT %d NODE %s", slot, id);
            freeReplyObject(r);
        }
}

/* The observer's topology events (dlock_observer.node_event), counted on
 * whichever thread met them. */
static atomic_int relearns, other_node_events;

static void count_topology(void *arg, const dlock_node_event *ev)
{
    (void)arg;
    if (ev->what == DLOCK_NODE_SLOTS_RELEARNED && ev->error == 0 &&
        !strncmp(ev->node, "127.0.0.1:", 10))
        atomic_fetch_add(&relearns, 1);
    else
        atomic_fetch_add(&other_node_events, 1);
}

static void ask_and_moved_are_followed(void **state)
{
    (void)state;
    static const dlock_observer obs = {.version = DLOCK_OBSERVER_VERSION,
                                       .node_event = count_topology};
    dlock_client_options co = DLOCK_CLIENT_OPTIONS_INIT;
    co.observer = &obs;
    dlock_client *c = cluster_client(&co);
    const char *name = "migrating{m1}";
    int slot = server_keyslot(name, strlen(name));
    int src = test_cluster_master_of(&C, slot);
    int dst = -1;
    for (int k = 0; k < 1000 && dst < 0; k++) {
        char other[32];
        snprintf(other, sizeof other, "probe-%d", k);
        int m = test_cluster_master_of(&C, server_keyslot(other, strlen(other)));
        if (m >= 0 && m != src)
            dst = m;
    }
    assert_true(src >= 0 && dst >= 0);
    dlock_lock *l = test_lock_new(c, name, 30000, DLOCK_NO_FENCE, 10, 100);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK); /* learns the map */
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    assert_int_equal(atomic_load(&relearns), 0); /* the first map is no change */
    char *src_id = node_id(&C.node[src]), *dst_id = node_id(&C.node[dst]);
    test_cmd_status(&C.node[dst], "CLUSTER SETSLOT %d IMPORTING %s", slot, src_id);
    test_cmd_status(&C.node[src], "CLUSTER SETSLOT %d MIGRATING %s", slot, dst_id);
    /* The key is not on the source: ASK to the target. */
    int rc = dlock_lock_acquire(l, 0);
    print_message("during migration: %s (%s)\n", dlock_errname(rc), dlock_lock_errmsg(l));
    assert_int_equal(rc, DLOCK_OK);
    /* The importing node serves the key only after ASKING. */
    redisContext *ac = test_redis_admin(&C.node[dst]);
    assert_non_null(ac);
    redisReply *r = redisCommand(ac, "ASKING");
    freeReplyObject(r);
    r = redisCommand(ac, "EXISTS %s", name);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    redisFree(ac);
    /* Finish the migration with the lock held (it is on the target). */
    set_slot_everywhere(slot, dst_id);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK); /* MOVED, followed */
    assert_int_equal(test_key_exists(&C.node[dst], name), 0);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    /* The map was learned again after the MOVED, each time one event. */
    dlock_stats st;
    assert_int_equal(dlock_client_stats(c, &st, sizeof st), DLOCK_OK);
    print_message("slot moved: %d slot map relearn(s) observed\n", atomic_load(&relearns));
    assert_true(atomic_load(&relearns) >= 1);
    assert_int_equal(atomic_load(&other_node_events), 0);
    assert_int_equal(st.topology_changes, (uint64_t)atomic_load(&relearns));
    /* And back, so the failover test below finds the usual layout. */
    set_slot_everywhere(slot, src_id);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(test_key_exists(&C.node[src], name), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    free(src_id);
    free(dst_id);
    dlock_lock_free(l);
    dlock_client_free(c);
}

typedef struct gets_heard {
    int nil, other;
} gets_heard;

static int count_gets(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                      const char *detail, int64_t start_ns)
{
    (void)node, (void)idx, (void)detail, (void)start_ns;
    gets_heard *h = arg;
    if (err == DLOCK_OK && r && r->type == REDIS_REPLY_NIL)
        h->nil++;
    else
        h->other++;
    return 0;
}

/* A pipeline whose slot moved: the first MOVED moves the fan-out's slot to
 * the new master and sends the whole pipeline there again; the MOVED
 * replies still owed on the old connection go with it. Once with one
 * blocking read (nothing to cancel), once on the run's loop (a cancel fd
 * to watch). */
static void moved_in_the_middle_of_a_pipeline_resends_it_all(void **state)
{
    (void)state;
    char key[32];
    int k = 0;
    do
        snprintf(key, sizeof key, "pipe-%d", k++);
    while (server_keyslot(key, strlen(key)) != 0);
    int src = test_cluster_master_of(&C, 0), dst = -1;
    for (int j = 0; j < 1000 && dst < 0; j++) {
        char other[32];
        snprintf(other, sizeof other, "probe-%d", j);
        int m = test_cluster_master_of(&C, server_keyslot(other, strlen(other)));
        if (m >= 0 && m != src)
            dst = m;
    }
    assert_true(src >= 0 && dst >= 0);
    char *src_id = node_id(&C.node[src]), *dst_id = node_id(&C.node[dst]);
    const char *get[2] = {"GET", key};
    /* numkeys 0: a plain command routes by slot 0, where the key is. */
    dlock__req reqs[3];
    for (int j = 0; j < 3; j++)
        reqs[j] = (dlock__req){NULL, 0, 2, get, NULL, 0};
    dlock__fanout_opts o = {.io_timeout_ms = 2000, .deadline_ns = INT64_MAX};
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    for (int loop = 0; loop < 2; loop++) {
        dlock_client *c = cluster_client(NULL);
        gets_heard h = {0, 0};
        assert_int_equal(dlock__fanout(c, reqs, 3, &o, count_gets, &h), DLOCK_OK); /* the map */
        assert_int_equal(h.nil, 3);
        set_slot_everywhere(0, dst_id);
        memset(&h, 0, sizeof h);
        assert_int_equal(dlock__fanout_cancellable(c, reqs, 3, &o, loop ? pfd[0] : -1, NULL,
                                                   count_gets, &h),
                         DLOCK_OK);
        set_slot_everywhere(0, src_id);
        print_message("%s: %d nil replies, %d others\n", loop ? "on the loop" : "blocking read",
                      h.nil, h.other);
        assert_int_equal(h.nil, 3);
        assert_int_equal(h.other, 0);
        dlock_client_free(c);
    }
    close(pfd[0]);
    close(pfd[1]);
    free(src_id);
    free(dst_id);
}

static void cli_runs_a_program_under_a_cluster_lock(void **state)
{
    (void)state;
#ifndef DLOCK_CLI_PATH
    skip();
#else
    char cmd[1200];
    int n = snprintf(cmd, sizeof cmd, "'%s'", DLOCK_CLI_PATH);
    for (int i = 0; i < TEST_CLUSTER_NODES; i++)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " -r %s", C.urls[i]);
    snprintf(cmd + n, sizeof cmd - (size_t)n,
             " --cluster run --fence 'cli{x}y' -- sh -c 'test \"$DLOCK_FENCE\" -ge 1'");
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* status finds the key and its fencing counter in their slot: free
     * (exit 1), with the fence the run got. */
    snprintf(cmd + n, sizeof cmd - (size_t)n, " --cluster status --json 'cli{x}y' | grep -q '\"fence\": *[1-9]'");
    st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
#endif
}

/* on_lost of the stall test: when each lock was reported lost. */
static _Atomic int64_t lost_at_ms[3];

static void note_lost(dlock_lock *lock, dlock_lost_reason reason, void *arg)
{
    (void)lock;
    (void)reason;
    atomic_store(&lost_at_ms[(intptr_t)arg], test_now_ms());
}

/* One master stalls (SIGSTOP) for 6 s, shorter than the cluster's node
 * timeout (15 s in production; set to 20 s here, so the cluster sees no
 * failure and fails nothing over): auto-renewed 2 s leases on the two
 * healthy masters stay held, and try-once acquires on them succeed. The
 * stalled one is the master of slot 0, the first the client's map names
 * (once it was asked first by every relearn). */
static void stalled_master_leaves_the_healthy_masters_alone(void **state)
{
    (void)state;
    assert_int_equal(test_cluster_set_node_timeout(&C, 20000), 0);
    int sm = test_cluster_master_of(&C, 0);
    assert_true(sm >= 0);
    char nm[3][32];
    pick_names_on_three_masters(nm);
    dlock_client *c = cluster_client(NULL);
    dlock_lock *l[3];
    int stalled = -1;
    for (int i = 0; i < 3; i++) {
        atomic_store(&lost_at_ms[i], 0);
        dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
        o.ttl_ms = 2000;
        o.flags = DLOCK_AUTO_RENEW;
        o.on_lost = note_lost;
        o.on_lost_arg = (void *)(intptr_t)i;
        l[i] = test_lock_with(c, nm[i], &o);
        assert_int_equal(dlock_lock_acquire(l[i], 0), DLOCK_OK);
        if (test_cluster_master_of(&C, server_keyslot(nm[i], strlen(nm[i]))) == sm)
            stalled = i;
    }
    assert_true(stalled >= 0);
    test_redis_pause(&C.node[sm]);
    int64_t t0 = test_now_ms();
    int probes = 0, probe_fail = 0, probe_rc = DLOCK_OK;
    int64_t probe_max_ms = 0;
    char probe_msg[300] = "";
    while (test_now_ms() - t0 < 6000) {
        test_sleep_ms(500);
        for (int i = 0; i < 3; i++) {
            if (i == stalled)
                continue;
            /* A try-once on a healthy master, in the lock's slot. */
            char pn[48];
            snprintf(pn, sizeof pn, "{%s}probe", nm[i]);
            dlock_lock *p = test_lock_new(c, pn, 5000, 0, 10, 100);
            int64_t ta = test_now_ms();
            int rc = dlock_lock_acquire(p, 0);
            int64_t took = test_now_ms() - ta;
            probe_max_ms = took > probe_max_ms ? took : probe_max_ms;
            probes++;
            if (rc != DLOCK_OK) {
                probe_fail++;
                probe_rc = rc;
                snprintf(probe_msg, sizeof probe_msg, "%s", dlock_lock_errmsg(p));
            } else {
                dlock_lock_release(p);
            }
            dlock_lock_free(p);
        }
    }
    test_redis_resume(&C.node[sm]);
    assert_int_equal(test_cluster_set_node_timeout(&C, 1000), 0);
    int64_t lost_ms[3];
    for (int i = 0; i < 3; i++) {
        int64_t at = atomic_load(&lost_at_ms[i]);
        lost_ms[i] = at ? at - t0 : -1;
    }
    print_message("master stalled 6 s: on_lost after %lld / %lld / %lld ms (-1: never; lock %d "
                  "on the stalled master); try-once on the healthy masters: %d of %d failed "
                  "(last %s: %s), slowest %lld ms\n",
                  (long long)lost_ms[0], (long long)lost_ms[1], (long long)lost_ms[2], stalled,
                  probe_fail, probes, dlock_errname(probe_rc), probe_msg,
                  (long long)probe_max_ms);
    for (int i = 0; i < 3; i++) {
        if (i != stalled) {
            assert_int_equal(lost_ms[i], -1);
            assert_int_equal(dlock_lock_state_get(l[i]), DLOCK_STATE_HELD);
            assert_int_equal(dlock_lock_release(l[i]), DLOCK_OK);
        }
        dlock_lock_free(l[i]);
    }
    dlock_client_free(c);
    assert_int_equal(probe_fail, 0);
    /* Not a speed bound: a try-once on a healthy master must not wait out
     * the stalled one's timeouts (it took 2.6 s before the fix). */
    assert_true(probe_max_ms < 1000);
    assert_int_equal(test_cluster_wait_ok(&C, 30000), 0);
}

/* `dlock run -w` with one live seed while the master of the lock's slot
 * is dead: the first try finds the cluster answering and the slot's
 * master gone (a failover in flight), and the command waits it out
 * instead of exiting 69 at once. The dead master then comes back as a
 * replica, for the tests after this one. */
static void cli_wait_rides_out_a_master_failover(void **state)
{
    (void)state;
#ifndef DLOCK_CLI_PATH
    skip();
#else
    const char *name = "cli-failover";
    int slot = server_keyslot(name, strlen(name));
    int m = test_cluster_master_of(&C, slot);
    assert_true(m >= 0);
    int seed = (m + 1) % TEST_CLUSTER_NODES;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' --cluster -r %s run -w 15s %s -- true", DLOCK_CLI_PATH,
             C.urls[seed], name);
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    test_redis_kill9(&C.node[m]);
    int64_t t0 = test_now_ms();
    st = system(cmd);
    int64_t took = test_now_ms() - t0;
    print_message("cluster failover: dlock run -w 15s exited %d after %lld ms\n",
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1, (long long)took);
    assert_int_equal(test_redis_restart(&C.node[m]), 0);
    assert_int_equal(test_cluster_wait_ok(&C, 60000), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
#endif
}

/* The master of name's slot is killed; its replica takes over; a waiting
 * acquire rides it out. */
static void master_killed_lock_usable_after_failover(void **state)
{
    (void)state;
    dlock_client *c = cluster_client(NULL);
    const char *name = "failover-lock";
    int slot = server_keyslot(name, strlen(name));
    int m = test_cluster_master_of(&C, slot);
    assert_true(m >= 0);
    dlock_lock *l = test_lock_new(c, name, 30000, 0, 10, 200);
    assert_int_equal(dlock_lock_acquire(l, 0), DLOCK_OK);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    test_redis_kill9(&C.node[m]);
    int64_t t0 = test_now_ms();
    int rc = dlock_lock_acquire(l, 30000);
    int64_t took = test_now_ms() - t0;
    print_message("cluster failover: acquire after %lld ms: %s (%s)\n", (long long)took,
                  dlock_errname(rc), dlock_lock_errmsg(l));
    assert_int_equal(rc, DLOCK_OK);
    /* Every live node agrees on the new master (the node asked may not
     * have heard of the failover yet when the acquire got through). */
    int nm = test_cluster_wait_failover(&C, slot, m, 30000);
    assert_true(nm >= 0 && nm != m);
    assert_int_equal(test_key_exists(&C.node[nm], name), 1);
    assert_int_equal(dlock_lock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keyslot_is_the_servers),
        cmocka_unit_test(helper_keys_share_the_lock_keys_slot),
        cmocka_unit_test(locks_in_different_slots_land_on_their_masters),
        cmocka_unit_test(brace_names_get_fencing_and_fair_mode),
        cmocka_unit_test(release_wakes_a_waiter_on_another_master),
        cmocka_unit_test(fair_hand_over_reaches_the_waiter),
        cmocka_unit_test(many_processes_exclude_each_other),
        cmocka_unit_test(short_lease_is_renewed_for_seconds),
        cmocka_unit_test(cluster_option_rejects_bad_seeds),
        cmocka_unit_test(ask_and_moved_are_followed),
        cmocka_unit_test(moved_in_the_middle_of_a_pipeline_resends_it_all),
        cmocka_unit_test(cli_runs_a_program_under_a_cluster_lock),
        cmocka_unit_test(stalled_master_leaves_the_healthy_masters_alone),
        cmocka_unit_test(cli_wait_rides_out_a_master_failover),
        /* Last: it kills a master. */
        cmocka_unit_test(master_killed_lock_usable_after_failover),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
