/* SPDX-License-Identifier: BSD-3-Clause */
/* What a client asks about a name without a handle (backend.h: status,
 * holders, identity) on ZooKeeper: the lock's line read, its owner the node
 * with the lowest sequence (or the readers before the first writer, or a
 * semaphore's leases), its fence the newest holder's czxid (holders are
 * the line's first nodes in creation order, so a holder that came after
 * a look moves it: the guard a break compares), its identity the oldest
 * holder's data. Each is a call waited for on a private loop of the
 * caller's (a blocking look). The TTL is -1: a holder lives as long as its
 * session, which the server times. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "client.h"
#include "zk_lock.h"
#include "zk_session.h"

#define ZK(c) ((dlock__zk *)(c)->store)

/* Holders whose identities dlock_client_identity() joins (dlock.h). */
#define IDENTITIES_JOINED 8

/* One call, waited for on a loop of the caller's own. */
static int look_once(dlock__zk *z, dlock__zk_call *c, int what, const char *path)
{
    c->what = what;
    (void)dlock__zk_path_set(c->path, path, NULL);
    return dlock__zk_call_wait(z, c);
}

/* A call's answer as dlock's code: a missing node is no error here. */
static int look_rc(int rc, const dlock__zk_call *c)
{
    return rc == DLOCK_OK && c->zrc != ZOK && c->zrc != ZNONODE ? dlock__zk_error(c->zrc) : rc;
}

/* The sequence a node's name ends in: a lock node's (dlock__zk_node_seq),
 * or a lease's (Curator's _c_<uuid>-lease-<10 digits>); -1 none. */
static int64_t any_seq(const char *name)
{
    size_t n = strlen(name);
    if (n < 10 || strspn(name + n - 10, "0123456789") != 10)
        return -1;
    return strtoll(name + n - 10, NULL, 10);
}

int64_t dlock__zk_lease_seq(const char *name)
{
    size_t n = strlen(name);
    return n >= 17 && memcmp(name + n - 17, "-lease-", 7) == 0 ? any_seq(name) : -1;
}

static int by_seq(const void *a, const void *b)
{
    int64_t x = any_seq(*(char *const *)a), y = any_seq(*(char *const *)b);
    x = x < 0 ? INT64_MAX : x;
    y = y < 0 ? INT64_MAX : y;
    return (x > y) - (x < y);
}

/* The names a call read are h's now, sorted by sequence (the others
 * last). */
static void take_names(dlock__zk_holding *h, dlock__zk_call *k)
{
    h->names = k->children;
    h->n_names = k->n_children;
    k->children = NULL;
    k->n_children = 0;
    if (h->n_names > 1)
        qsort(h->names, h->n_names, sizeof *h->names, by_seq);
}

/* The line in names (sorted by sequence): its holders, the first
 * count, and its mode; the other lock nodes wait. */
static void line_holders(dlock__zk_holding *h)
{
    size_t nodes = 0, readers = 0;
    int role = 0, writer_seen = 0;
    for (size_t i = 0; i < h->n_names && dlock__zk_node_seq(h->names[i], &role) >= 0; i++) {
        nodes++;
        writer_seen |= role != DLOCK__ZK_READ;
        readers += !writer_seen;
    }
    h->mode = !nodes ? DLOCK_HOLD_FREE : readers ? DLOCK_HOLD_SHARED : DLOCK_HOLD_EXCLUSIVE;
    h->count = readers ? readers : nodes > 0;
    h->waiters = nodes - h->count;
}

/* A semaphore's leases (every lease node is a holder: a waiter's lease
 * asked for while all are taken too, as Curator counts them), its locks
 * line's nodes its waiters. */
static int lease_holders(dlock__zk *z, const char *path, dlock__zk_holding *h)
{
    dlock__zk_call k = {0};
    char locks[DLOCK__ZK_PATH_MAX];
    (void)dlock__zk_path_set(locks, path, "/locks");
    int rc = look_rc(look_once(z, &k, DLOCK__ZK_CHILDREN, locks), &k);
    for (size_t i = 0; rc == DLOCK_OK && k.zrc == ZOK && i < k.n_children; i++)
        h->waiters += dlock__zk_node_seq(k.children[i], NULL) >= 0;
    dlock__zk_call_clear(&k);
    (void)dlock__zk_path_set(h->dir, path, "/leases");
    if (rc == DLOCK_OK)
        rc = look_rc(look_once(z, &k, DLOCK__ZK_CHILDREN, h->dir), &k);
    if (rc == DLOCK_OK && k.zrc == ZOK) {
        take_names(h, &k);
        while (h->count < h->n_names && dlock__zk_lease_seq(h->names[h->count]) >= 0)
            h->count++;
        /* no lease in it: "leases" is a lock's own name ("q/leases") */
        h->mode = h->count ? DLOCK_HOLD_SEMAPHORE : DLOCK_HOLD_FREE;
        h->waiters = h->count ? h->waiters : 0;
    }
    dlock__zk_call_clear(&k);
    return rc;
}

/* The holder i's node (dir/names[i]) read into k: 1 there, 0 gone. */
static int holder_node(dlock__zk *z, const dlock__zk_holding *h, size_t i, dlock__zk_call *k,
                       int *rc)
{
    char node[DLOCK__ZK_PATH_MAX];
    (void)(dlock__zk_path_set(node, h->dir, "/") && dlock__zk_path_set(node, node, h->names[i]));
    *rc = look_rc(look_once(z, k, DLOCK__ZK_GET_DATA, node), k);
    return *rc == DLOCK_OK && k->zrc == ZOK;
}

/* The oldest holder's node (its data and ctime: the identity) and the
 * newest's czxid (the fence). 0 if one went meanwhile (the caller reads
 * again). */
static int holder_ends(dlock__zk *z, dlock__zk_holding *h, int *rc)
{
    dlock__zk_call k = {0};
    int there = holder_node(z, h, 0, &k, rc);
    if (there) {
        h->fence = (uint64_t)k.stat.czxid;
        h->ctime_ms = k.stat.ctime;
        h->data = k.value; /* ours now */
        h->data_len = k.value_len;
        k.value = NULL;
    }
    dlock__zk_call_clear(&k);
    if (there && h->count > 1) {
        there = holder_node(z, h, h->count - 1, &k, rc);
        h->fence = there ? (uint64_t)k.stat.czxid : 0;
        dlock__zk_call_clear(&k);
    }
    return there || *rc != DLOCK_OK;
}

/* One read of the lock at path: 1 done (rc its code), 0 read again (the
 * oldest or newest holder went between the calls). */
static int read_once(dlock__zk *z, const char *path, dlock__zk_holding *h, int *rc)
{
    dlock__zk_holding_clear(h);
    (void)dlock__zk_path_set(h->dir, path, NULL);
    dlock__zk_call k = {0};
    *rc = look_rc(look_once(z, &k, DLOCK__ZK_CHILDREN, path), &k);
    if (*rc != DLOCK_OK || k.zrc != ZOK) {
        dlock__zk_call_clear(&k);
        return 1;
    }
    take_names(h, &k);
    line_holders(h);
    int leases = 0;
    for (size_t i = 0; !h->count && i < h->n_names; i++)
        leases |= strcmp(h->names[i], "leases") == 0;
    if (leases) {
        for (size_t i = 0; i < h->n_names; i++)
            dlock__free(h->names[i]);
        dlock__free(h->names);
        h->names = NULL;
        h->n_names = 0;
        *rc = lease_holders(z, path, h);
    }
    if (*rc != DLOCK_OK || !h->count)
        return 1;
    return holder_ends(z, h, rc);
}

int dlock__zk_holding_read(dlock__zk *z, const char *path, dlock__zk_holding *h)
{
    memset(h, 0, sizeof *h);
    int rc = DLOCK_OK;
    for (int tries = 0; tries < 3; tries++) {
        if (read_once(z, path, h, &rc))
            return rc;
    }
    /* Holders kept going: read as free, as a holder gone since would be. */
    dlock__zk_holding_clear(h);
    return DLOCK_OK;
}

void dlock__zk_holding_clear(dlock__zk_holding *h)
{
    for (size_t i = 0; i < h->n_names; i++)
        dlock__free(h->names[i]);
    dlock__free(h->names);
    dlock__free(h->data);
    memset(h, 0, sizeof *h);
}

int dlock__zk_status(dlock_client *c, const char *key, size_t klen, dlock_node_status *out,
                     dlock_lock_status *summary)
{
    (void)klen;
    dlock__zk_holding h;
    char path[DLOCK__ZK_PATH_MAX];
    int rc = DLOCK_EINVAL;
    memset(&h, 0, sizeof h);
    if (dlock__zk_lock_path(path, sizeof path, key))
        rc = dlock__zk_holding_read(ZK(c), path, &h);
    int held = rc == DLOCK_OK && h.count > 0;
    *out = (dlock_node_status){.error = rc, .held = held, .ttl_ms = -1, .fence = h.fence};
    dlock__zk_holding_clear(&h);
    if (summary)
        *summary = (dlock_lock_status){.state = rc != DLOCK_OK ? DLOCK_STATUS_UNKNOWN
                                                : held         ? DLOCK_STATUS_HELD
                                                               : DLOCK_STATUS_FREE,
                                       .nodes = 1, .answered = rc == DLOCK_OK,
                                       .held_on = (size_t)held, .quorum = 1};
    return rc;
}

/* The holding of the lock at key, or DLOCK_EINVAL for a key that is no
 * ZooKeeper path. */
static int holding_of(dlock_client *c, const char *key, dlock__zk_holding *h)
{
    char path[DLOCK__ZK_PATH_MAX];
    memset(h, 0, sizeof *h);
    if (!dlock__zk_lock_path(path, sizeof path, key))
        return DLOCK_EINVAL;
    return dlock__zk_holding_read(ZK(c), path, h);
}

int dlock__zk_holders(dlock_client *c, const char *key, size_t klen, size_t node,
                      dlock_holders_info *info, dlock_holder *out, size_t max_out)
{
    (void)klen, (void)node; /* one node: the engine checked it */
    dlock__zk_holding h;
    int rc = holding_of(c, key, &h);
    if (rc == DLOCK_OK) {
        /* a semaphore's N is the holders' own (Curator keeps it nowhere) */
        *info = (dlock_holders_info){.mode = h.mode, .count = h.count, .writer_waiting_ms = -1};
        for (size_t i = 0; i < h.count && i < max_out; i++) {
            size_t n = strnlen(h.names[i], sizeof out[i].token - 1);
            memcpy(out[i].token, h.names[i], n);
            out[i].token[n] = '\0';
            out[i].ttl_ms = -1;
        }
    }
    dlock__zk_holding_clear(&h);
    return rc;
}

/* ---- identity: the holder node's data ----------------------------------------- */

void dlock__zk_identity_text(const char *data, size_t dlen, int64_t ctime_ms, char *buf,
                             size_t len)
{
    buf[0] = '\0';
    if (!data || !dlen)
        return;
    char since[40];
    int s = snprintf(since, sizeof since, " since=%" PRId64, ctime_ms);
    size_t n = dlen < len - 1 ? dlen : len - 1;
    memcpy(buf, data, n);
    size_t m = s > 0 && (size_t)s < len - 1 - n ? (size_t)s : len - 1 - n;
    memcpy(buf + n, since, m);
    buf[n + m] = '\0';
}

/* The identity of node dir/name into buf ("" none, or gone). */
static int node_identity(dlock__zk *z, const char *dir, const char *name, char *buf, size_t len)
{
    char node[DLOCK__ZK_PATH_MAX];
    dlock__zk_call k = {0};
    buf[0] = '\0';
    if (!dlock__zk_path_set(node, dir, "/") || !dlock__zk_path_set(node, node, name))
        return DLOCK_EINVAL;
    int rc = look_rc(look_once(z, &k, DLOCK__ZK_GET_DATA, node), &k);
    if (rc == DLOCK_OK && k.zrc == ZOK)
        dlock__zk_identity_text(k.value, k.value_len, k.stat.ctime, buf, len);
    dlock__zk_call_clear(&k);
    return rc;
}

/* buf += one holder's identity (with "; " after the first), cut to fit. */
static void join(char *buf, size_t len, const char *one)
{
    size_t at = strlen(buf);
    if (!one[0] || at + 1 >= len)
        return;
    snprintf(buf + at, len - at, "%s%s", at ? "; " : "", one);
}

int dlock__zk_identity(dlock_client *c, const char *key, size_t klen, size_t node, char *buf,
                       size_t len)
{
    (void)klen, (void)node;
    dlock__zk_holding h;
    buf[0] = '\0';
    int rc = holding_of(c, key, &h);
    char one[DLOCK_IDENTITY_READ_MAX + 1];
    if (rc == DLOCK_OK && h.count) {
        dlock__zk_identity_text(h.data, h.data_len, h.ctime_ms, one, sizeof one);
        join(buf, len, one);
    }
    /* a shared lock's or semaphore's holders: the oldest first (their
     * leases are one session timeout each: none ends before another) */
    for (size_t i = 1; rc == DLOCK_OK && i < h.count && i < IDENTITIES_JOINED; i++) {
        if ((rc = node_identity(ZK(c), h.dir, h.names[i], one, sizeof one)) == DLOCK_OK)
            join(buf, len, one);
    }
    if (rc == DLOCK_OK && h.count > IDENTITIES_JOINED && buf[0]) {
        snprintf(one, sizeof one, "+%zu more", h.count - IDENTITIES_JOINED);
        join(buf, len, one);
    }
    dlock__zk_holding_clear(&h);
    return rc;
}

int dlock__zk_holder_identity(dlock_client *c, const char *key, size_t klen, size_t node,
                              const char *token, size_t tlen, char *buf, size_t len)
{
    (void)klen, (void)node;
    char path[DLOCK__ZK_PATH_MAX], leases[DLOCK__ZK_PATH_MAX];
    buf[0] = '\0';
    /* a token is a node's name: a lock node's, or a semaphore's lease's */
    if (!dlock__zk_lock_path(path, sizeof path, key) || memchr(token, '/', tlen) ||
        tlen >= 64 || !strcmp(token, ".") || !strcmp(token, ".."))
        return DLOCK_EINVAL;
    int rc = node_identity(ZK(c), path, token, buf, len);
    if (rc == DLOCK_OK && !buf[0] && dlock__zk_path_set(leases, path, "/leases"))
        rc = node_identity(ZK(c), leases, token, buf, len);
    return rc;
}
