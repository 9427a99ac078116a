/* SPDX-License-Identifier: BSD-3-Clause */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "proc.h"
#include "zk_ensemble.h"

/* What each member's zoo.cfg adds to a standalone one: the ensemble's
 * timing (a follower that hears nothing from the leader for syncLimit
 * ticks, 1 s, goes looking for another) and its members. */
#define ENSEMBLE_CONF "initLimit=50\nsyncLimit=10\n"

static int write_myid(const test_zk *z, int id)
{
    char path[300];
    snprintf(path, sizeof path, "%s/data", z->dir);
    if (mkdir(path, 0700) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/data/myid", z->dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "%d\n", id);
    return fclose(f) == 0 ? 0 : -1;
}

static int plan(test_zk_ensemble *e, int n)
{
    size_t at = 0, uat = 0;
    uat += (size_t)snprintf(e->url, sizeof e->url, "zk://");
    at += (size_t)snprintf(e->servers, sizeof e->servers, "%s", ENSEMBLE_CONF);
    for (int i = 0; i < n; i++) {
        test_zk *z = &e->m[i];
        int peer = test_free_port(), election = test_free_port();
        z->port = test_free_port();
        if (z->port < 0 || peer < 0 || election < 0 ||
            test_make_dir(z->dir, sizeof z->dir, "zk") != 0 || write_myid(z, i + 1) != 0)
            return -1;
        snprintf(z->url, sizeof z->url, "zk://127.0.0.1:%d", z->port);
        at += (size_t)snprintf(e->servers + at, sizeof e->servers - at,
                               "server.%d=127.0.0.1:%d:%d\n", i + 1, peer, election);
        uat += (size_t)snprintf(e->url + uat, sizeof e->url - uat, "%s127.0.0.1:%d",
                                i ? "," : "", z->port);
    }
    return 0;
}

int test_zk_ensemble_start(test_zk_ensemble *e, int n)
{
    memset(e, 0, sizeof *e);
    if (!test_zk_available() || n < 1 || n > TEST_ZK_MEMBERS_MAX) {
        fprintf(stderr, "zk_ensemble: no java or ZooKeeper, or %d members\n", n);
        return -1;
    }
    e->n = n;
    int ok = plan(e, n) == 0;
    for (int i = 0; ok && i < n; i++)
        ok = test_zk_spawn_member(&e->m[i], e->servers) == 0;
    /* java, three times, on a loaded machine: a minute at most */
    if (ok && test_zk_ensemble_wait(e, 60000) >= 0)
        return 0;
    fprintf(stderr, "zk_ensemble: no quorum (see %s/zookeeper.log and the others)\n",
            e->m[0].dir);
    test_zk_ensemble_stop(e);
    return -1;
}

/* "leader", "follower" or "" (not serving) from member i's "srvr". */
static const char *mode_of(const test_zk *z, char *buf, size_t cap)
{
    if (z->pid <= 0 || test_zk_four_letters(z->port, "srvr", buf, cap) != 0)
        return "";
    char *m = strstr(buf, "Mode: ");
    if (!m)
        return "";
    m += strlen("Mode: ");
    m[strcspn(m, "\r\n")] = '\0';
    return m;
}

int test_zk_ensemble_leader(const test_zk_ensemble *e)
{
    char buf[1024];
    for (int i = 0; i < e->n; i++)
        if (strcmp(mode_of(&e->m[i], buf, sizeof buf), "leader") == 0)
            return i;
    return -1;
}

int test_zk_ensemble_wait(const test_zk_ensemble *e, int timeout_ms)
{
    int64_t end = test_now_ms() + timeout_ms;
    char buf[1024];
    do {
        int leader = -1, serving = 1;
        for (int i = 0; i < e->n; i++) {
            if (e->m[i].pid <= 0)
                continue;
            const char *mode = mode_of(&e->m[i], buf, sizeof buf);
            if (strcmp(mode, "leader") == 0)
                leader = i;
            else if (strcmp(mode, "follower") != 0)
                serving = 0;
        }
        if (leader >= 0 && serving)
            return leader;
        test_sleep_ms(50);
    } while (test_now_ms() < end);
    return -1;
}

void test_zk_ensemble_kill(test_zk_ensemble *e, int i)
{
    if (e->m[i].pid > 0) {
        kill(e->m[i].pid, SIGKILL);
        test_reap_server(e->m[i].pid, 5000);
        e->m[i].pid = 0;
    }
}

int test_zk_ensemble_restart(test_zk_ensemble *e, int i)
{
    return e->m[i].pid > 0 ? 0 : test_zk_spawn_member(&e->m[i], e->servers);
}

void test_zk_ensemble_stop(test_zk_ensemble *e)
{
    for (int i = 0; i < e->n; i++)
        test_zk_stop(&e->m[i]);
    e->n = 0;
}
