/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock_client_list() on etcd: the lock names under the client's prefix
 * whose keys (KEY/<lease>, etcd_lock.h: dlock's and `etcdctl lock`'s
 * alike) exist now, read-only. The keys are read in pages of LIST_PAGE
 * (values too: the owner's carries its identity, etcd_lock.c), from the
 * literal start of the pattern on (a range needs a prefix, not a glob);
 * each key's name (the bytes before its last '/', followed by a lease ID
 * in hex) is matched against the glob with fnmatch(3), which reads `*`,
 * `?`, `[...]` and `\` as Redis's MATCH does. A key belongs to the name
 * before its last '/' only: lock "a/b"'s keys are listed under "a/b",
 * although lock "a"'s line holds them too (etcd's layout,
 * docs/backends.md). Per held name one more request reads its owner's
 * lease TTL: a listing costs one range per LIST_PAGE keys and one lease
 * look per name. A key that ends in no /<lease> (another client's: no
 * hex, upper-case hex, trailing bytes) is still in that name's line, the
 * acquire waits for it and status reports it: it is counted as the
 * owner (the oldest) or a waiter of a name that holds a locker's key,
 * and a name with none of those is not listed. A read-write lock's keys
 * (NAME/read/<ID>, NAME/write/<ID>) are listed under NAME, the recipe
 * RWMutex's own too (NAME/write/<UnixNano in decimal>); a name whose
 * owner is a reader's key is shared, its holders read as status reads
 * them (one more request: etcd_lock.h, holding). */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "client.h"
#include "error.h"
#include "etcd_client.h"
#include "etcd_kv.h"
#include "etcd_list.h"
#include "etcd_lock.h"

#define LIST_PAGE 1000

/* One held name, gathered before the first callback. */
typedef struct rec {
    char *name;      /* without the prefix */
    int64_t first_rev, lease; /* the owner: the lowest create revision */
    char *identity;  /* the owner's, or NULL */
    size_t keys;     /* the owner and its waiters */
    int locker;      /* 1 when one of them ends in /<lease> */
    int reads;       /* the owner is a reader's key (NAME/read/<ID>) */
} rec;

/* r's owner is kv now (a reader's key: reads): take its lease and
 * identity. */
static int own(rec *r, const dlock__etcd_kv *kv, int reads)
{
    r->reads = reads;
    size_t len = 0;
    const char *id = dlock__etcd_kv_identity(kv, &len);
    char *copy = NULL;
    if (id) {
        if (!(copy = dlock__malloc(len + 1)))
            return DLOCK_ENOMEM;
        memcpy(copy, id, len);
        copy[len] = '\0';
    }
    dlock__free(r->identity);
    r->identity = copy;
    r->first_rev = kv->create_rev;
    r->lease = kv->lease;
    return DLOCK_OK;
}

typedef struct list_state {
    rec *v;
    size_t n, cap;
    const char *glob;
    const char *pfx; /* the client's key_prefix */
    size_t plen;     /* its length */
} list_state;

/* The literal start of a glob: its bytes up to the first unescaped
 * wildcard, escapes undone. Into out (at least strlen(glob) + 1). */
static size_t literal_start(const char *glob, char *out)
{
    size_t n = 0;
    for (const char *p = glob; *p && !strchr("*?[", *p); p++) {
        if (*p == '\\' && p[1])
            p++;
        out[n++] = *p;
    }
    return n;
}

/* 1 if the name of len bytes at name ends in /role. */
static int ends_in(const char *name, size_t len, const char *role)
{
    size_t n = strlen(role);
    return len > n + 1 && name[len - n - 1] == '/' && memcmp(name + len - n, role, n) == 0;
}

/* The length of the name of key (past the prefix): the bytes before its
 * last '/', whose line ([NAME/, NAME0)) holds the key; 0 when none. A
 * reader's or writer's key of a read-write lock (NAME/read/<ID>,
 * NAME/write/<ID>: etcd_lock.h) is NAME's, not "NAME/read"'s; *reads
 * says it is a reader's, *role either. */
static size_t name_len(const list_state *st, const dlock__etcd_kv *kv, int *reads, int *role)
{
    size_t len = kv->key_len;
    while (len > st->plen && kv->key[len - 1] != '/')
        len--;
    len = len > st->plen + 1 ? len - 1 - st->plen : 0;
    const char *name = kv->key + st->plen;
    *reads = ends_in(name, len, "read");
    *role = *reads || ends_in(name, len, "write");
    if (*reads)
        len -= sizeof "/read" - 1;
    else if (*role)
        len -= sizeof "/write" - 1;
    return len;
}

/* 1 if a reader's or writer's key ends in the recipe RWMutex's own
 * suffix: time.Now().UnixNano() in decimal (19 digits today; 1 to 20
 * taken), not a lease ID, but a locker's key all the same. */
static int recipe_suffix(const dlock__etcd_kv *kv)
{
    size_t n = 0;
    while (n < kv->key_len && kv->key[kv->key_len - 1 - n] >= '0' &&
           kv->key[kv->key_len - 1 - n] <= '9')
        n++;
    return n > 0 && n <= 20 && n < kv->key_len && kv->key[kv->key_len - 1 - n] == '/';
}

/* Add the key's name (or count the key into the last record). A name's
 * keys mostly come one after another, but the keys of a name below it
 * sort among them (a/1f, a/b/3c, a/c0): merge() joins the records of a
 * name after the walk. */
static int take_key(list_state *st, const dlock__etcd_kv *kv)
{
    int reads = 0, role = 0;
    size_t len = name_len(st, kv, &reads, &role);
    if (!len)
        return DLOCK_OK; /* in no name's line */
    int locker = dlock__etcd_key_suffix_len(kv->key, kv->key_len) != 0 ||
                 (role && recipe_suffix(kv));
    const char *name = kv->key + st->plen;
    if (memchr(name, '\0', len))
        return DLOCK_OK; /* names hold no NUL (an older dlock's key) */
    rec *last = st->n ? &st->v[st->n - 1] : NULL;
    if (last && strlen(last->name) == len && memcmp(last->name, name, len) == 0) {
        last->keys++;
        last->locker |= locker;
        return kv->create_rev < last->first_rev ? own(last, kv, reads) : DLOCK_OK;
    }
    char *copy = dlock__malloc(len + 1);
    if (!copy)
        return DLOCK_ENOMEM;
    memcpy(copy, name, len);
    copy[len] = '\0';
    if (fnmatch(st->glob, copy, 0) != 0) {
        dlock__free(copy);
        return DLOCK_OK;
    }
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 256;
        rec *v = dlock__realloc(st->v, cap * sizeof *v);
        if (!v) {
            dlock__free(copy);
            return DLOCK_ENOMEM;
        }
        st->v = v;
        st->cap = cap;
    }
    st->v[st->n] = (rec){copy, 0, 0, NULL, 1, locker, 0};
    return own(&st->v[st->n++], kv, reads);
}

static int by_name_then_rev(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->first_rev > y->first_rev) - (x->first_rev < y->first_rev);
}

static void rec_free(rec *r)
{
    dlock__free(r->name);
    dlock__free(r->identity);
}

/* One record per name, in name order: the owner is the oldest key of all
 * of a name's records (the first after the sort), the keys summed; the
 * names without a locker's key dropped. */
static void merge(list_state *st)
{
    if (st->n > 1)
        qsort(st->v, st->n, sizeof *st->v, by_name_then_rev);
    size_t out = 0;
    for (size_t i = 0; i < st->n; i++) {
        if (out && strcmp(st->v[out - 1].name, st->v[i].name) == 0) {
            st->v[out - 1].keys += st->v[i].keys;
            st->v[out - 1].locker |= st->v[i].locker;
            rec_free(&st->v[i]);
            continue;
        }
        if (out && !st->v[out - 1].locker)
            rec_free(&st->v[--out]);
        st->v[out++] = st->v[i];
    }
    if (out && !st->v[out - 1].locker)
        rec_free(&st->v[--out]);
    st->n = out;
}

/* Walk [begin, end) page by page into st. */
static int walk(dlock__etcd *e, list_state *st, char *begin, size_t blen, const char *end,
                size_t elen)
{
    for (;;) {
        dlock__etcd_kv *kvs = NULL;
        size_t n = 0;
        int more = 0;
        int rc = dlock__etcd_range_page(e, begin, blen, end, elen, LIST_PAGE, &kvs, &n, &more,
                                        dlock__etcd_call_deadline(e), NULL);
        for (size_t i = 0; i < n; i++) {
            if (rc == DLOCK_OK)
                rc = take_key(st, &kvs[i]);
        }
        /* The next page starts just after the last key: KEY NUL. */
        if (rc == DLOCK_OK && more && n > 0) {
            const dlock__etcd_kv *lastkv = &kvs[n - 1];
            char *next = dlock__realloc(begin, lastkv->key_len + 1);
            if (!next) {
                rc = DLOCK_ENOMEM;
            } else {
                begin = next;
                memcpy(begin, lastkv->key, lastkv->key_len);
                begin[lastkv->key_len] = '\0';
                blen = lastkv->key_len + 1;
            }
        }
        for (size_t i = 0; i < n; i++)
            dlock__etcd_kv_clear(&kvs[i]);
        dlock__free(kvs);
        if (rc != DLOCK_OK || !more || n == 0) {
            dlock__free(begin);
            return rc;
        }
    }
}

/* A name its readers hold: how many (one more read of its line, as
 * dlock_client_holders() reads it), at least the owner; *fence the newest
 * reader's create revision, as status's (kept if the read failed). */
static size_t readers(dlock__etcd *e, const list_state *st, const rec *r, uint64_t *fence)
{
    size_t n = 0, len = st->plen + strlen(r->name);
    char *key = dlock__malloc(len + 1);
    if (key) {
        memcpy(key, st->pfx, st->plen);
        memcpy(key + st->plen, r->name, len - st->plen + 1);
        dlock__etcd_holding h;
        if (dlock__etcd_holding_read(e, key, len, &h) == DLOCK_OK && h.shared) {
            n = h.count;
            *fence = (uint64_t)h.readers[n - 1].create_rev;
        }
        dlock__etcd_holding_clear(&h);
    }
    dlock__free(key);
    return n ? n : 1;
}

static int report(dlock__etcd *e, const list_state *st, const rec *r, dlock_list_fn cb,
                  void *arg)
{
    int64_t ttl = -1;
    /* A lease gone since the range: -1 (the name may be free by now). */
    (void)dlock__etcd_lease_ttl_ms(e, r->lease, &ttl, NULL, dlock__etcd_call_deadline(e), -1,
                                   NULL);
    uint64_t fence = (uint64_t)r->first_rev;
    size_t holders = r->reads ? readers(e, st, r, &fence) : 1;
    if (holders > r->keys)
        holders = r->keys; /* read later than the walk */
    /* the newest holder's create revision, a reader's too, as status's */
    dlock_list_entry en = {DLOCK_LIST_ENTRY_VERSION, r->name, DLOCK_STATUS_HELD,
                           r->reads ? DLOCK_HOLD_SHARED : DLOCK_HOLD_EXCLUSIVE, 0, holders, ttl,
                           r->keys - holders, fence, 1, 1, 1, r->identity};
    return cb(arg, &en) ? DLOCK_ECANCELED : DLOCK_OK;
}

int dlock__etcd_list(dlock_client *c, dlock__etcd *e, const char *pattern, dlock_list_fn cb,
                     void *arg)
{
    const char *pfx = c->opts.key_prefix ? c->opts.key_prefix : "";
    size_t plen = strlen(pfx), glen = strlen(pattern);
    /* [prefix + the pattern's literal start, the same + 1 in its last
     * byte): every key whose name can match. An empty start is the whole
     * keyspace ("\0" as range_end: every key from begin on). */
    char *begin = dlock__malloc(plen + glen + 1);
    char *end = dlock__malloc(plen + glen + 1);
    if (!begin || !end) {
        dlock__free(begin);
        dlock__free(end);
        return DLOCK_ENOMEM;
    }
    memcpy(begin, pfx, plen);
    size_t blen = plen + literal_start(pattern, begin + plen);
    size_t elen = blen;
    memcpy(end, begin, blen);
    if (blen == 0) /* etcd wants a key: "\0" is below every key there is */
        begin[blen++] = '\0';
    while (elen > 0 && (unsigned char)end[elen - 1] == 0xff)
        elen--; /* 0xff cannot be incremented: the range ends one byte earlier */
    if (elen > 0)
        end[elen - 1]++;
    else
        end[elen++] = '\0';
    list_state st = {NULL, 0, 0, pattern, pfx, plen};
    int rc = walk(e, &st, begin, blen, end, elen); /* frees begin */
    dlock__free(end);
    merge(&st);
    for (size_t i = 0; rc == DLOCK_OK && i < st.n; i++)
        rc = report(e, &st, &st.v[i], cb, arg);
    for (size_t i = 0; i < st.n; i++)
        rec_free(&st.v[i]);
    dlock__free(st.v);
    return rc;
}
