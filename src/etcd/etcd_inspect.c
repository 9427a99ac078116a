/* SPDX-License-Identifier: BSD-3-Clause */
/* What a client asks etcd about a name without a handle: its status (the
 * cluster is one node, so the verdict is that node's), breaking its
 * holder's key, and the list of held names. Each is one request over the
 * client's transport (etcd_client.h), with no handle and no hold of ours:
 * the handle's side is etcd_backend.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "etcd_client.h"
#include "etcd_inspect.h"
#include "etcd_kv.h"
#include "etcd_list.h"
#include "etcd_lock.h"

/* The client's etcd side (etcd_client.h): its store (client.h). */
#define EC(c) ((struct dlock__etcd_client *)(c)->store)

/* The i-th holder's key. */
static const dlock__etcd_kv *holder_kv(const dlock__etcd_holding *h, size_t i)
{
    return h->shared ? &h->readers[i] : &h->writer;
}

/* What is left of kv's lease, or -1 (no lease, gone, not read). */
static int64_t lease_left_ms(struct dlock__etcd_client *ec, const dlock__etcd_kv *kv)
{
    int64_t ttl = -1;
    if (kv->lease == 0 || dlock__etcd_lease_ttl_ms(ec->e, kv->lease, &ttl, NULL,
                                                   dlock__etcd_call_deadline(ec->e), -1,
                                                   NULL) != DLOCK_OK)
        return -1;
    return ttl;
}

static int node_status(struct dlock__etcd_client *ec, const char *key, size_t len,
                       dlock_node_status *out)
{
    dlock__etcd_holding h;
    int rc = dlock__etcd_holding_read(ec->e, key, len, &h);
    int held = rc == DLOCK_OK && h.count > 0;
    /* the fence: the newest holder's create revision, a reader's too
     * (readers hold none themselves): what a guarded break compares, and
     * a reader granted after the look is newer */
    *out = (dlock_node_status){rc, held, held ? lease_left_ms(ec, holder_kv(&h, 0)) : -1,
                               held ? (uint64_t)holder_kv(&h, h.count - 1)->create_rev : 0};
    dlock__etcd_holding_clear(&h);
    return rc;
}

int dlock__etcd_status(dlock_client *c, const char *key, size_t klen, dlock_node_status *out,
                       dlock_lock_status *summary)
{
    int rc = node_status(EC(c), key, klen, out);
    if (summary)
        *summary = (dlock_lock_status){rc != DLOCK_OK ? DLOCK_STATUS_UNKNOWN
                                       : out->held    ? DLOCK_STATUS_HELD
                                                      : DLOCK_STATUS_FREE,
                                       1, rc == DLOCK_OK, (size_t)(rc == DLOCK_OK && out->held),
                                       1};
    return rc;
}

/* A holder's token: its key's ID in 16 hex digits, and for a key on a
 * session (its ID not its lease's) its create revision in 16 more, as the
 * holder's dlock_lock_token() says when a later hold may take its key (a
 * lock-delay's, a term's or a reentrant hold's own token is the ID alone;
 * dlock_lock_adopt() takes either). A negative ID as Go's %x prints it,
 * and another locker's suffix, as they are. */
static void holder_token(const dlock__etcd_kv *kv, char *out, size_t cap)
{
    size_t n = dlock__etcd_key_suffix_len(kv->key, kv->key_len), start = kv->key_len;
    while (start > 0 && kv->key[start - 1] != '/')
        start--;
    if (n > 0 && n == kv->key_len - start && kv->key[start] != '-') {
        int on_session = kv->lease && !dlock__etcd_key_names_lease(kv->key, kv->key_len, kv->lease);
        snprintf(out, cap, on_session ? "%016llx%016llx" : "%016llx",
                 strtoull(kv->key + start, NULL, 16), (unsigned long long)kv->create_rev);
        return;
    }
    n = kv->key_len - start < cap - 1 ? kv->key_len - start : cap - 1;
    memcpy(out, kv->key + start, n);
    out[n] = '\0';
}

int dlock__etcd_holders(dlock_client *c, const char *key, size_t klen, size_t node,
                        dlock_holders_info *info, dlock_holder *out, size_t max_out)
{
    (void)node; /* the cluster is one node */
    dlock__etcd_holding h;
    int rc = dlock__etcd_holding_read(EC(c)->e, key, klen, &h);
    if (rc == DLOCK_OK) {
        *info = (dlock_holders_info){.mode = !h.count   ? DLOCK_HOLD_FREE
                                             : h.shared ? DLOCK_HOLD_SHARED
                                                        : DLOCK_HOLD_EXCLUSIVE,
                                     .count = h.count, .writer_waiting_ms = -1};
        for (size_t i = 0; i < h.count && i < max_out; i++) {
            holder_token(holder_kv(&h, i), out[i].token, sizeof out[i].token);
            out[i].ttl_ms = lease_left_ms(EC(c), holder_kv(&h, i));
        }
    }
    dlock__etcd_holding_clear(&h);
    return rc;
}

/* Identities listed for readers, then "+N more" (as Redis's status.lua). */
#define IDENT_LISTED 8

/* Append one identity (len bytes) to buf (cap bytes, NUL-terminated so
 * far at *at), "; " between, cut to fit. */
static void join(char *buf, size_t cap, size_t *at, const char *id, size_t len)
{
    if (*at && *at + 2 < cap) {
        memcpy(buf + *at, "; ", 2);
        *at += 2;
    }
    size_t n = len < cap - 1 - *at ? len : cap - 1 - *at;
    memcpy(buf + *at, id, n);
    *at += n;
    buf[*at] = '\0';
}

static int by_create_rev(const void *a, const void *b)
{
    const dlock__etcd_kv *x = a, *y = b;
    return (x->create_rev > y->create_rev) - (x->create_rev < y->create_rev);
}

/* The readers' identities, oldest first: one page of the readers' keys
 * with their values ([KEY/read/, KEY/read0)), the holders among them
 * (created no later than the last holder h read). */
static int readers_identity(struct dlock__etcd_client *ec, const char *key, size_t klen,
                            const dlock__etcd_holding *h, char *buf, size_t len)
{
    dlock__etcd_name range;
    int rc = dlock__etcd_name_init(&range, key, klen);
    if (rc == DLOCK_OK)
        rc = dlock__etcd_name_role(&range, DLOCK_SHARED); /* the readers' gap */
    dlock__etcd_kv *kvs = NULL;
    size_t n = 0, at = 0, listed = 0;
    int more = 0;
    if (rc == DLOCK_OK)
        rc = dlock__etcd_range_page(ec->e, range.gap_begin, range.gap_len, range.gap_end,
                                    range.gap_len, 1000, &kvs, &n, &more,
                                    dlock__etcd_call_deadline(ec->e), NULL);
    if (n > 1)
        qsort(kvs, n, sizeof *kvs, by_create_rev);
    int64_t last = h->readers[h->count - 1].create_rev;
    for (size_t i = 0; i < n && kvs[i].create_rev <= last && listed < IDENT_LISTED; i++) {
        size_t idlen = 0;
        const char *id = dlock__etcd_kv_identity(&kvs[i], &idlen);
        listed++;
        if (id)
            join(buf, len, &at, id, idlen);
    }
    if (at && h->count > IDENT_LISTED) {
        char tail[32];
        int m = snprintf(tail, sizeof tail, "+%zu more", h->count - IDENT_LISTED);
        join(buf, len, &at, tail, (size_t)m);
    }
    for (size_t i = 0; i < n; i++)
        dlock__etcd_kv_clear(&kvs[i]);
    dlock__free(kvs);
    dlock__etcd_name_clear(&range);
    return rc;
}

int dlock__etcd_identity(dlock_client *c, const char *key, size_t klen, size_t node, char *buf,
                         size_t len)
{
    (void)node; /* the cluster is one node */
    dlock__etcd_holding h;
    int rc = dlock__etcd_holding_read(EC(c)->e, key, klen, &h);
    buf[0] = '\0';
    if (rc == DLOCK_OK && h.shared)
        rc = readers_identity(EC(c), key, klen, &h, buf, len);
    dlock__etcd_holding_clear(&h);
    if (rc != DLOCK_OK || buf[0])
        return rc;
    dlock__etcd_name range;
    if (dlock__etcd_name_init(&range, key, klen) != DLOCK_OK)
        return DLOCK_ENOMEM;
    dlock__etcd_kv first;
    rc = dlock__etcd_first_value(EC(c)->e, range.begin, range.len, range.end, range.len,
                                 &first, dlock__etcd_call_deadline(EC(c)->e), NULL);
    size_t idlen = 0;
    const char *id = rc == DLOCK_OK ? dlock__etcd_kv_identity(&first, &idlen) : NULL;
    if (id) {
        size_t n = idlen < len - 1 ? idlen : len - 1;
        memcpy(buf, id, n);
        buf[n] = '\0';
    }
    dlock__etcd_kv_clear(&first);
    dlock__etcd_name_clear(&range);
    return rc;
}

int dlock__etcd_break_holds(dlock_client *c, const char *key, size_t klen, uint64_t fence,
                            dlock_break_result *out)
{
    size_t removed = 0;
    int shared = 0;
    uint64_t owner_fence = 0;
    int rc = dlock__etcd_break(EC(c)->e, key, klen, fence, &removed, &shared, &owner_fence, NULL);
    dlock_hold_mode mode = !removed ? DLOCK_HOLD_FREE
                           : shared ? DLOCK_HOLD_SHARED
                                    : DLOCK_HOLD_EXCLUSIVE;
    *out = (dlock_break_result){0, DLOCK_HOLD_FREE, 0, 0, 0, 1, 1};
    if (rc == DLOCK_OK || rc == DLOCK_ENOTOWNER)
        *out = (dlock_break_result){removed, mode, owner_fence, (size_t)(removed > 0), 1, 1, 1};
    return rc;
}

int dlock__etcd_list_names(dlock_client *c, const char *pattern, dlock_list_fn cb, void *arg)
{
    return dlock__etcd_list(c, EC(c)->e, pattern, cb, arg);
}
