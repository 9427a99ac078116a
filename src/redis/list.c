/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_list(): the held lock names under the client's prefix,
 * read-only. Each node is walked with SCAN; each batch of lock keys is read
 * in one pipelined round trip with the scripts `status` and `holders` use
 * (status.lua, holders.lua) and the lengths of the waiter list and fair
 * queue, so a listing costs O(keys) commands and about two round trips per
 * SCAN batch. With several nodes the names are merged by name; on a
 * Cluster each master is walked in turn. */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "cluster.h"
#include "error.h"
#include "fanout.h"
#include "keys.h"
#include "node.h"
#include "redis_backend.h"
#include "replies.h"
#include "scripts.h"

#define SCAN_COUNT "1000"
#define READS_PER_KEY 4 /* status.lua, holders.lua, ZCARD KEY\0wq, LLEN KEY\0q */
#define HELPERS_PER_KEY 5 /* KEY\0fence, KEY\0ww, KEY\0wq, KEY\0q, KEY\0id */

/* What one node says of one name. */
typedef struct rec {
    char *name; /* without the prefix */
    size_t node;
    int mode;
    unsigned permits;
    size_t holders;
    int64_t ttl_ms;
    size_t waiters;
    uint64_t fence;
    char *identity; /* the holder's (lib/ident.lua), or NULL */
} rec;

typedef struct list_state {
    rec *v;
    size_t n, cap;
    size_t plen; /* the key_prefix's length */
} list_state;

/* One SCAN reply: the next cursor and the lock keys of the batch. */
typedef struct scan_ctx {
    int err;
    char cursor[32];
    char **keys;
    size_t *lens;
    size_t n;
} scan_ctx;

static void free_keys(scan_ctx *s)
{
    for (size_t i = 0; i < s->n; i++)
        dlock__free(s->keys[i]);
    dlock__free(s->keys);
    dlock__free(s->lens);
    s->keys = NULL;
    s->lens = NULL;
    s->n = 0;
}

static int scan_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                   const char *detail, int64_t start_ns)
{
    scan_ctx *s = arg;
    (void)node;
    (void)idx;
    (void)detail;
    (void)start_ns;
    if (err != DLOCK_OK || !r) {
        s->err = err != DLOCK_OK ? err : DLOCK_EIO;
        return 0;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        s->err = DLOCK_EREFUSED;
        return 0;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= sizeof s->cursor ||
        r->element[1]->type != REDIS_REPLY_ARRAY) {
        s->err = DLOCK_EPROTO;
        return 0;
    }
    memcpy(s->cursor, r->element[0]->str, r->element[0]->len);
    s->cursor[r->element[0]->len] = '\0';
    const redisReply *ks = r->element[1];
    s->keys = dlock__calloc(ks->elements ? ks->elements : 1, sizeof *s->keys);
    s->lens = dlock__calloc(ks->elements ? ks->elements : 1, sizeof *s->lens);
    if (!s->keys || !s->lens) {
        s->err = DLOCK_ENOMEM;
        return 0;
    }
    for (size_t i = 0; i < ks->elements; i++) {
        const redisReply *k = ks->element[i];
        /* A helper key (KEY NUL kind) is reported with its lock, never as
         * a name of its own (keys.c: no lock key holds a NUL). */
        if (k->type != REDIS_REPLY_STRING || memchr(k->str, '\0', k->len))
            continue;
        char *c = dlock__malloc(k->len + 1);
        if (!c) {
            s->err = DLOCK_ENOMEM;
            return 0;
        }
        memcpy(c, k->str, k->len);
        c[k->len] = '\0';
        s->keys[s->n] = c;
        s->lens[s->n++] = k->len;
    }
    s->err = DLOCK_OK;
    return 0;
}

/* The replies of one batch, READS_PER_KEY per key. */
typedef struct read_ctx {
    rec *cur; /* the batch's records, one per key */
    int err;
} read_ctx;

static size_t int_reply(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_INTEGER && r->integer > 0 ? (size_t)r->integer : 0;
}

static int read_cb(void *arg, size_t node, uint32_t idx, int err, const redisReply *r,
                   const char *detail, int64_t start_ns)
{
    read_ctx *c = arg;
    rec *o = &c->cur[idx / READS_PER_KEY];
    (void)node;
    (void)detail;
    (void)start_ns;
    if (err != DLOCK_OK) {
        c->err = err;
        return 1;
    }
    switch (idx % READS_PER_KEY) {
    case 0: {
        dlock__status_reply st;
        dlock__decode_status(err, r, &st);
        if (st.err != DLOCK_OK) {
            c->err = st.err;
            return 1;
        }
        if (!st.held) /* gone since the SCAN */
            o->mode = -1;
        o->ttl_ms = st.ttl_ms;
        o->fence = st.fence;
        if (st.identity && !(o->identity = dlock__strndup(st.identity, st.identity_len))) {
            c->err = DLOCK_ENOMEM;
            return 1;
        }
        break;
    }
    case 1: {
        dlock__holders_reply h;
        dlock__decode_holders(err, r, &h);
        if (h.err != DLOCK_OK) {
            c->err = h.err;
            return 1;
        }
        if (o->mode < 0 || h.mode == DLOCK_HOLD_FREE || h.mode == DLOCK_HOLD_FOREIGN) {
            o->mode = -1;
            break;
        }
        o->mode = h.mode;
        o->permits = h.permits > 0 ? (unsigned)h.permits : 0;
        /* holders.lua lists no holder of a reentrant lock: it has one. */
        o->holders = h.mode == DLOCK_HOLD_OTHER ? 1 : h.count;
        break;
    }
    default:
        o->waiters += int_reply(r);
    }
    return 0;
}

static int push_rec(list_state *st, rec *r)
{
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 256;
        rec *v = dlock__realloc(st->v, cap * sizeof *v);
        if (!v)
            return DLOCK_ENOMEM;
        st->v = v;
        st->cap = cap;
    }
    st->v[st->n++] = *r;
    return DLOCK_OK;
}

/* Read one SCAN batch of node `node` in one pipelined round trip. */
static int read_batch(dlock_client *cl, list_state *st, size_t node, const scan_ctx *s,
                      const dlock__fanout_opts *fo)
{
    static const char *const kinds[HELPERS_PER_KEY] = {"fence", "ww", "wq", "q", "id"};
    size_t n = s->n, nk = n * READS_PER_KEY, nh = n * HELPERS_PER_KEY;
    char **helpers = dlock__calloc(nh, sizeof *helpers);
    size_t *hlens = dlock__calloc(nh, sizeof *hlens);
    const char **args = dlock__calloc(nk * 3, sizeof *args);
    size_t *alens = dlock__calloc(nk * 3, sizeof *alens);
    dlock__req *reqs = dlock__calloc(nk, sizeof *reqs);
    rec *cur = dlock__calloc(n, sizeof *cur);
    int rc = helpers && hlens && args && alens && reqs && cur ? DLOCK_OK : DLOCK_ENOMEM;
    for (size_t i = 0; i < n && rc == DLOCK_OK; i++) {
        char **h = &helpers[i * HELPERS_PER_KEY];
        size_t *hl = &hlens[i * HELPERS_PER_KEY];
        for (size_t k = 0; k < HELPERS_PER_KEY && rc == DLOCK_OK; k++)
            if (!(h[k] = dlock__helper_key(cl, s->keys[i], s->lens[i], kinds[k],
                                           strlen(kinds[k]), &hl[k])))
                rc = DLOCK_ENOMEM;
        for (size_t k = 0; k < READS_PER_KEY && rc == DLOCK_OK; k++) {
            size_t j = i * READS_PER_KEY + k;
            const char **a = &args[3 * j];
            size_t *al = &alens[3 * j];
            /* status.lua takes (KEY, fence, id: the holder identity),
             * holders.lua (KEY, ww); ZCARD and LLEN the helper alone. */
            a[0] = k < 2 ? s->keys[i] : (k == 2 ? "ZCARD" : "LLEN");
            al[0] = k < 2 ? s->lens[i] : strlen(a[0]);
            a[1] = h[k];
            al[1] = hl[k];
            a[2] = h[4];
            al[2] = hl[4];
            reqs[j] = (dlock__req){.script = k == 0   ? dlock__script_get(DLOCK__S_STATUS)
                                             : k == 1 ? dlock__script_get(DLOCK__S_HOLDERS)
                                                      : NULL,
                                   .numkeys = k == 0 ? 3 : k == 1 ? 2 : 0,
                                   .nargs = k == 0 ? 3 : 2, .args = a, .arglens = al};
        }
        cur[i] = (rec){NULL, node, 0, 0, 0, -1, 0, 0, NULL};
    }
    read_ctx ctx = {cur, DLOCK_OK};
    if (rc == DLOCK_OK && n > 0) {
        if (dlock__fanout(cl, reqs, (uint32_t)nk, fo, read_cb, &ctx) != DLOCK_OK)
            rc = DLOCK_ENOMEM;
        else
            rc = ctx.err;
    }
    for (size_t i = 0; i < n && rc == DLOCK_OK; i++) {
        if (cur[i].mode <= 0)
            continue;
        size_t len = s->lens[i] - st->plen;
        cur[i].name = dlock__malloc(len + 1);
        if (!cur[i].name) {
            rc = DLOCK_ENOMEM;
            break;
        }
        memcpy(cur[i].name, s->keys[i] + st->plen, len + 1);
        if ((rc = push_rec(st, &cur[i])) != DLOCK_OK)
            dlock__free(cur[i].name);
        else
            cur[i].identity = NULL; /* st's now */
    }
    for (size_t i = 0; cur && i < n; i++)
        dlock__free(cur[i].identity);
    for (size_t j = 0; helpers && j < nh; j++)
        dlock__free(helpers[j]);
    dlock__free(helpers);
    dlock__free(hlens);
    dlock__free(args);
    dlock__free(alens);
    dlock__free(reqs);
    dlock__free(cur);
    return rc;
}

/* On a Cluster, is slot cslot - 1 still served by master m (the one the
 * walk started on)? A SCAN cursor means nothing on another node. */
static int same_master(dlock_client *cl, unsigned cslot, int m)
{
    return !cslot || dlock__cluster_master_of(dlock__client_cluster(cl), cslot - 1) == m;
}

/* Walk one node with SCAN to the end; on a Cluster, master m, by its slot
 * cslot - 1 (cslot 0: not a Cluster), DLOCK_EBUSY if the map moves that
 * slot to another master during the walk. */
static int list_node(dlock_client *cl, list_state *st, size_t node, unsigned cslot, int m,
                     const char *match, size_t mlen)
{
    uint8_t only[DLOCK__MAX_NODES] = {0};
    only[node] = 1;
    dlock__fanout_opts fo = {.io_timeout_ms = cl->opts.io_timeout_ms, .deadline_ns = INT64_MAX,
                             .only = only, .grace_ms = 0, .cluster_slot = cslot};
    scan_ctx s = {DLOCK_EIO, "0", NULL, NULL, 0};
    do {
        const char *args[6] = {"SCAN", s.cursor, "MATCH", match, "COUNT", SCAN_COUNT};
        size_t lens[6] = {4, strlen(s.cursor), 5, mlen, 5, sizeof SCAN_COUNT - 1};
        char cursor[32];
        memcpy(cursor, s.cursor, sizeof cursor);
        args[1] = cursor;
        dlock__req req = {.script = NULL, .numkeys = 0, .nargs = 6, .args = args, .arglens = lens};
        s.err = DLOCK_EIO;
        int rc = dlock__fanout(cl, &req, 1, &fo, scan_cb, &s);
        if (rc == DLOCK_OK)
            rc = s.err;
        if (rc == DLOCK_OK)
            rc = read_batch(cl, st, node, &s, &fo);
        free_keys(&s);
        if (rc == DLOCK_OK && !same_master(cl, cslot, m))
            rc = DLOCK_EBUSY; /* the cursor went on, or would go on, elsewhere */
        if (rc != DLOCK_OK)
            return rc;
    } while (strcmp(s.cursor, "0") != 0);
    return DLOCK_OK;
}

static int by_name_then_node(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->node > y->node) - (x->node < y->node);
}

/* The MATCH pattern: the prefix with every glob character escaped, then
 * the caller's pattern. */
static char *match_pattern(const char *pfx, const char *pattern, size_t *out_len)
{
    size_t plen = strlen(pfx), n = strlen(pattern);
    char *m = dlock__malloc(2 * plen + n + 1), *p = m;
    if (!m)
        return NULL;
    for (size_t i = 0; i < plen; i++) {
        if (strchr("*?[]\\", pfx[i]))
            *p++ = '\\';
        *p++ = pfx[i];
    }
    memcpy(p, pattern, n + 1);
    *out_len = (size_t)(p - m) + n;
    return m;
}

/* Merge the records of one name (v[0..n), one per node that holds it)
 * and call back. */
static int report(const dlock_client *cl, const rec *v, size_t n, dlock_list_fn cb, void *arg)
{
    dlock_list_entry e = {DLOCK_LIST_ENTRY_VERSION, v[0].name, DLOCK_STATUS_PARTIAL,
                          (dlock_hold_mode)v[0].mode, v[0].permits, 0, -1, 0, 0, 0,
                          cl->n_nodes, cl->quorum, NULL};
    for (size_t i = 0; i < n; i++) {
        /* SCAN may return a key twice: count each node once (v is sorted
         * by node within the name). */
        e.held_on += i == 0 || v[i].node != v[i - 1].node;
        if (v[i].holders > e.holders)
            e.holders = v[i].holders;
        if (v[i].waiters > e.waiters)
            e.waiters = v[i].waiters;
        if (v[i].fence > e.fence)
            e.fence = v[i].fence;
        if (v[i].ttl_ms >= 0 && (e.ttl_ms < 0 || v[i].ttl_ms < e.ttl_ms))
            e.ttl_ms = v[i].ttl_ms;
        if (!e.identity)
            e.identity = v[i].identity;
    }
    if (e.held_on >= cl->quorum)
        e.state = DLOCK_STATUS_HELD;
    return cb(arg, &e) ? DLOCK_ECANCELED : DLOCK_OK;
}

/* Call back once per name (st sorted and merged by name) if rc is
 * DLOCK_OK, then free st. */
static int report_all(dlock_client *c, list_state *st, int rc, dlock_list_fn cb, void *arg)
{
    if (rc == DLOCK_OK && st->n > 0)
        qsort(st->v, st->n, sizeof *st->v, by_name_then_node);
    for (size_t i = 0; rc == DLOCK_OK && i < st->n;) {
        size_t j = i + 1;
        while (j < st->n && strcmp(st->v[j].name, st->v[i].name) == 0)
            j++;
        rc = report(c, &st->v[i], j - i, cb, arg);
        i = j;
    }
    for (size_t i = 0; i < st->n; i++) {
        dlock__free(st->v[i].name);
        dlock__free(st->v[i].identity);
    }
    dlock__free(st->v);
    return rc;
}

/* A Cluster: every master that serves a slot is walked with SCAN, the
 * run routed to it by one of its slots, and each batch is read from it
 * too (its keys are its slots'). A key whose slot moves during the walk
 * may be missed or seen twice, as with SCAN across a resharding; a walk
 * whose slot moved to another master (its cursor means nothing there)
 * ends with DLOCK_EBUSY. Every master must answer: a name is on one
 * master only. */
static int list_cluster(dlock_client *c, struct dlock__cluster *cluster, list_state *st,
                        const char *match, size_t mlen)
{
    const dlock__node *node = &c->nodes[0];
    int rc = dlock__cluster_prepare(cluster, &node->url, node->tls_ctx, 0);
    if (rc != DLOCK_OK)
        return rc;
    /* Each master once, by its first slot, as the map was when the walk
     * began: a master's slot moving later ends its walk (list_node). */
    int masters[DLOCK__CLUSTER_MAX_MASTERS];
    unsigned slots[DLOCK__CLUSTER_MAX_MASTERS];
    size_t n = dlock__cluster_masters(cluster, masters, slots);
    for (size_t i = 0; i < n && rc == DLOCK_OK; i++)
        rc = list_node(c, st, 0, slots[i] + 1, masters[i], match, mlen);
    return rc;
}

int dlock__redis_list(dlock_client *c, const char *pattern, dlock_list_fn cb, void *arg)
{
    const char *pfx = c->opts.key_prefix ? c->opts.key_prefix : "";
    size_t mlen = 0;
    char *match = match_pattern(pfx, pattern, &mlen);
    if (!match)
        return DLOCK_ENOMEM;
    list_state st = {NULL, 0, 0, strlen(pfx)};
    size_t listed = 0;
    int last = DLOCK_EIO;
    struct dlock__cluster *cluster = dlock__client_cluster(c);
    if (cluster) { /* one node of dlock's: its masters, one after another */
        int rc = list_cluster(c, cluster, &st, match, mlen);
        dlock__free(match);
        return report_all(c, &st, rc, cb, arg);
    }
    for (size_t i = 0; i < c->n_nodes; i++) {
        size_t before = st.n;
        int rc = list_node(c, &st, i, 0, -1, match, mlen);
        if (rc == DLOCK_ENOMEM) {
            last = rc;
            listed = 0;
            break;
        }
        if (rc != DLOCK_OK) { /* forget that node's partial walk */
            for (size_t j = before; j < st.n; j++) {
                dlock__free(st.v[j].name);
                dlock__free(st.v[j].identity);
            }
            st.n = before;
            last = rc;
            continue;
        }
        listed++;
    }
    dlock__free(match);
    int rc = DLOCK_OK;
    if (listed < c->quorum)
        rc = c->n_nodes == 1 || last == DLOCK_ENOMEM ? last : DLOCK_ENOQUORUM;
    return report_all(c, &st, rc, cb, arg);
}
