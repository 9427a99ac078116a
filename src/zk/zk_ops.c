/* SPDX-License-Identifier: BSD-3-Clause */
/* The operator's calls on ZooKeeper (backend.h: break_holds, list): who
 * holds what under the client's prefix, and breaking a stuck lock. Both
 * read a name's holders as status does (zk_inspect.c, dlock__zk_holding).
 *
 * A break deletes the holders' nodes, any version: a node's name (its
 * _c_<uuid> and sequence) is never given to another create, so a delete
 * by name can only ever remove the holder that was read, never one that
 * came since; and any session may delete another's ephemeral node unless
 * an ACL forbids it (ZNOAUTH: DLOCK_EAUTH). The next in line is woken by
 * its watch on the deleted node, as by a release.
 *
 * A listing walks the tree below the prefix with getChildren, one call
 * per znode, LIST_NODES_MAX znodes at most; a znode whose children hold a
 * lock node, or a "leases" child holding a semaphore's lease nodes (one
 * more getChildren), is a lock name. A "leases" or "locks" child is a
 * semaphore's line only then: otherwise it is walked as any name is (a
 * lock may be named "q/leases"). A znode this client may not read
 * (ZNOAUTH) is skipped: what is below it is not listed. */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "client.h"
#include "zk_lock.h"
#include "zk_session.h"

#define ZK(c) ((dlock__zk *)(c)->store)

/* The znodes a listing reads at most: a tree larger than that below the
 * prefix is refused (DLOCK_EIO) rather than listed in part. */
#define LIST_NODES_MAX 100000

/* ---- break ----------------------------------------------------------------- */

/* Delete the holders of h, counting those that went: DLOCK_OK, or the
 * first error (a node gone already is not one). */
static int delete_holders(dlock__zk *z, const dlock__zk_holding *h, size_t *removed)
{
    int rc = DLOCK_OK;
    for (size_t i = 0; rc == DLOCK_OK && i < h->count; i++) {
        dlock__zk_call k = {0};
        k.what = DLOCK__ZK_DELETE;
        if (!dlock__zk_path_set(k.path, h->dir, "/") ||
            !dlock__zk_path_set(k.path, k.path, h->names[i]))
            return DLOCK_EINVAL;
        rc = dlock__zk_call_wait(z, &k);
        if (rc == DLOCK_OK && k.zrc == ZOK)
            (*removed)++;
        else if (rc == DLOCK_OK && k.zrc != ZNONODE)
            rc = dlock__zk_error(k.zrc);
        dlock__zk_call_clear(&k);
    }
    return rc;
}

int dlock__zk_break_holds(dlock_client *c, const char *key, size_t klen, uint64_t fence,
                          dlock_break_result *out)
{
    (void)klen;
    char path[DLOCK__ZK_PATH_MAX];
    *out = (dlock_break_result){0, DLOCK_HOLD_FREE, 0, 0, 0, 1, 1};
    if (!dlock__zk_lock_path(path, sizeof path, key))
        return DLOCK_EINVAL;
    dlock__zk_holding h;
    int rc = dlock__zk_holding_read(ZK(c), path, &h);
    if (rc == DLOCK_OK) {
        out->answered = 1;
        out->mode = h.mode;
        out->fence = h.fence;
        /* the guard: the newest holder's czxid, as status reports it; a
         * holder that came since is newer, with a larger one (and one
         * that left since changes it too: look again) */
        if (fence && h.count && fence != h.fence)
            rc = DLOCK_ENOTOWNER;
        else /* (free: nothing to delete) */
            rc = delete_holders(ZK(c), &h, &out->removed);
        out->removed_on = out->removed > 0;
    }
    dlock__zk_holding_clear(&h);
    return rc;
}

/* ---- list ------------------------------------------------------------------ */

typedef struct list_walk {
    char **paths; /* found lock names' paths (owned) */
    size_t n, cap;
    char **todo;  /* znodes still to read (owned) */
    size_t n_todo, cap_todo;
    size_t read;  /* znodes read */
    const char *root; /* the prefix's path: names are what follows it */
    size_t rlen;
    const char *glob;
} list_walk;

static int push(char ***v, size_t *n, size_t *cap, const char *a, const char *b)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        char **nv = dlock__realloc(*v, nc * sizeof *nv);
        if (!nv)
            return DLOCK_ENOMEM;
        *v = nv;
        *cap = nc;
    }
    size_t la = strlen(a), lb = b ? strlen(b) : 0;
    char *s = dlock__malloc(la + lb + 2);
    if (!s)
        return DLOCK_ENOMEM;
    memcpy(s, a, la);
    if (b) { /* a + "/" + b, "/" + b at the root */
        la -= la == 1 && a[0] == '/';
        s[la] = '/';
        memcpy(s + la + 1, b, lb + 1);
    } else {
        s[la] = '\0';
    }
    (*v)[(*n)++] = s;
    return DLOCK_OK;
}

/* 1 if one of children is a lock node. */
static int has_lock_node(char *const *children, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (dlock__zk_node_seq(children[i], NULL) >= 0)
            return 1;
    }
    return 0;
}

/* 1 if the znode at path (children its n children) is a semaphore: its
 * "leases" child holds a lease node. */
static int is_semaphore(dlock__zk *z, const char *path, char *const *children, size_t n,
                        int *rc)
{
    int leases = 0, sem = 0;
    for (size_t i = 0; i < n; i++)
        leases |= !strcmp(children[i], "leases");
    dlock__zk_call k = {0};
    k.what = DLOCK__ZK_CHILDREN;
    if (!leases || !dlock__zk_path_set(k.path, path, "/leases"))
        return 0;
    *rc = dlock__zk_call_wait(z, &k);
    for (size_t i = 0; *rc == DLOCK_OK && k.zrc == ZOK && i < k.n_children; i++)
        sem |= dlock__zk_lease_seq(k.children[i]) >= 0;
    dlock__zk_call_clear(&k);
    return sem;
}

/* Read one znode: a lock whose name matches is kept; its children that
 * are no lock node (nor a semaphore's lines) are read later. */
static int visit(dlock__zk *z, list_walk *w, char *path)
{
    dlock__zk_call k = {0};
    k.what = DLOCK__ZK_CHILDREN;
    int rc = dlock__zk_path_set(k.path, path, NULL) ? dlock__zk_call_wait(z, &k) : DLOCK_OK;
    if (rc == DLOCK_OK && k.zrc != ZOK && k.zrc != ZNONODE && k.zrc != ZNOAUTH)
        rc = dlock__zk_error(k.zrc);
    int sem = rc == DLOCK_OK && is_semaphore(z, path, k.children, k.n_children, &rc);
    int lock = rc == DLOCK_OK && (sem || has_lock_node(k.children, k.n_children));
    const char *name = path + w->rlen;
    if (lock && strncmp(path, w->root, w->rlen) == 0 && *name && fnmatch(w->glob, name, 0) == 0)
        rc = push(&w->paths, &w->n, &w->cap, path, NULL);
    for (size_t i = 0; rc == DLOCK_OK && i < k.n_children; i++) {
        const char *ch = k.children[i];
        if (dlock__zk_node_seq(ch, NULL) >= 0 || (sem && (!strcmp(ch, "leases") ||
                                                          !strcmp(ch, "locks"))))
            continue;
        if (!strcmp(path, "/") && !strcmp(ch, "zookeeper"))
            continue; /* the server's own */
        rc = push(&w->todo, &w->n_todo, &w->cap_todo, path, ch);
    }
    dlock__zk_call_clear(&k);
    return rc;
}

static int walk(dlock__zk *z, list_walk *w)
{
    int rc = DLOCK_OK;
    while (rc == DLOCK_OK && w->n_todo > 0) {
        char *path = w->todo[--w->n_todo];
        rc = ++w->read > LIST_NODES_MAX ? DLOCK_EIO : visit(z, w, path);
        dlock__free(path);
    }
    return rc;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One name's entry, read again as status reads it: a name released since
 * the walk is not listed. */
static int report(dlock__zk *z, const list_walk *w, const char *path, dlock_list_fn cb,
                  void *arg)
{
    dlock__zk_holding h;
    int rc = dlock__zk_holding_read(z, path, &h);
    if (rc == DLOCK_OK && h.count) {
        char id[DLOCK_IDENTITY_READ_MAX + 1];
        dlock__zk_identity_text(h.data, h.data_len, h.ctime_ms, id, sizeof id);
        dlock_list_entry en = {DLOCK_LIST_ENTRY_VERSION, path + w->rlen, DLOCK_STATUS_HELD,
                               h.mode, 0, h.count, -1, h.waiters, h.fence, 1, 1, 1,
                               id[0] ? id : NULL};
        rc = cb(arg, &en) ? DLOCK_ECANCELED : DLOCK_OK;
    }
    dlock__zk_holding_clear(&h);
    return rc;
}

/* The path names are under: the prefix's, as dlock__zk_lock_path() makes a
 * key's ("/" before it unless it starts with one). */
static char *root_of(const char *pfx)
{
    size_t n = strlen(pfx);
    char *r = dlock__malloc(n + 2);
    if (r) {
        r[0] = '/';
        memcpy(r + (pfx[0] != '/'), pfx, n + 1);
    }
    return r;
}

/* Where the walk starts: the znode that holds every name the glob can
 * match, the root and the glob's literal start cut back to its last '/'. */
static int start_of(list_walk *w)
{
    size_t lit = strcspn(w->glob, "*?[\\");
    char *s = dlock__malloc(w->rlen + lit + 1);
    if (!s)
        return DLOCK_ENOMEM;
    memcpy(s, w->root, w->rlen);
    memcpy(s + w->rlen, w->glob, lit);
    size_t n = w->rlen + lit;
    while (n > 1 && s[n - 1] != '/')
        n--;
    s[n > 1 ? n - 1 : 1] = '\0';
    int rc = push(&w->todo, &w->n_todo, &w->cap_todo, s, NULL);
    dlock__free(s);
    return rc;
}

int dlock__zk_list(dlock_client *c, const char *pattern, dlock_list_fn cb, void *arg)
{
    char *root = root_of(c->opts.key_prefix ? c->opts.key_prefix : "");
    if (!root)
        return DLOCK_ENOMEM;
    list_walk w = {0};
    w.root = root;
    w.rlen = strlen(root);
    w.glob = pattern;
    int rc = start_of(&w);
    if (rc == DLOCK_OK)
        rc = walk(ZK(c), &w);
    if (rc == DLOCK_OK && w.n > 1)
        qsort(w.paths, w.n, sizeof *w.paths, by_name);
    for (size_t i = 0; rc == DLOCK_OK && i < w.n; i++)
        rc = report(ZK(c), &w, w.paths[i], cb, arg);
    for (size_t i = 0; i < w.n; i++)
        dlock__free(w.paths[i]);
    for (size_t i = 0; i < w.n_todo; i++)
        dlock__free(w.todo[i]);
    dlock__free(w.paths);
    dlock__free(w.todo);
    dlock__free(root);
    return rc;
}
