/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "common.h"
#include "etcd_kv.h"
#include "etcd_lock.h"
#include "rand.h"

void dlock__etcd_hold_clear(dlock__etcd_hold *h)
{
    dlock__free(h->key);
    memset(h, 0, sizeof *h);
}

int dlock__etcd_name_init(dlock__etcd_name *n, const char *key, size_t key_len)
{
    n->len = key_len + 1;
    n->identity = NULL; /* the caller's to set */
    n->begin = dlock__malloc(n->len);
    n->end = dlock__malloc(n->len);
    if (!n->begin || !n->end) {
        dlock__etcd_name_clear(n);
        return DLOCK_ENOMEM;
    }
    /* etcd's own lock's line (concurrency.Mutex, `etcdctl lock`): the
     * prefix KEY/, that is [KEY/, KEY0) ('0' follows '/'), so both lockers
     * wait in one line. Like etcd's, lock "a"'s line holds lock "a/b"'s keys
     * too (docs/backends.md). */
    memcpy(n->begin, key, key_len);
    memcpy(n->end, key, key_len);
    n->begin[key_len] = '/';
    n->end[key_len] = '/' + 1;
    n->role = "";
    n->role_len = 0;
    n->gap_begin = n->gap_end = NULL;
    n->gap_len = 0;
    return DLOCK_OK;
}

int dlock__etcd_name_role(dlock__etcd_name *n, unsigned flags)
{
    static const char reader[] = "read/", writer[] = "write/";
    if (flags & DLOCK_EXCLUSIVE) {
        n->role = writer;
        n->role_len = sizeof writer - 1;
    }
    if (!(flags & DLOCK_SHARED))
        return DLOCK_OK;
    n->role = reader;
    n->role_len = sizeof reader - 1;
    /* [KEY/read/, KEY/read0): the readers' keys, as the recipe names them */
    n->gap_len = n->len + n->role_len;
    n->gap_begin = dlock__malloc(n->gap_len);
    n->gap_end = dlock__malloc(n->gap_len);
    if (!n->gap_begin || !n->gap_end)
        return DLOCK_ENOMEM; /* the name's clear frees either */
    memcpy(n->gap_begin, n->begin, n->len);
    memcpy(n->gap_begin + n->len, reader, n->role_len);
    memcpy(n->gap_end, n->gap_begin, n->gap_len);
    n->gap_end[n->gap_len - 1] = '/' + 1;
    return DLOCK_OK;
}

void dlock__etcd_name_clear(dlock__etcd_name *n)
{
    dlock__free(n->begin);
    dlock__free(n->end);
    dlock__free(n->gap_begin);
    dlock__free(n->gap_end);
    memset(n, 0, sizeof *n);
}

int64_t dlock__etcd_ttl_s(int64_t ttl_ms)
{
    int64_t s = ttl_ms / 1000 + (ttl_ms % 1000 != 0);
    return s < 1 ? 1 : s;
}

int dlock__etcd_new_lease_id(int64_t *id)
{
    char hex[33];
    int rc = dlock__token_hex(hex);
    if (rc != DLOCK_OK)
        return rc;
    unsigned long long v = 0;
    sscanf(hex, "%16llx", &v);
    v &= 0x7fffffffffffffffull;
    *id = v ? (int64_t)v : 1;
    return DLOCK_OK;
}

int dlock__etcd_hold_key(dlock__etcd_hold *h, const dlock__etcd_name *name)
{
    return dlock__etcd_hold_key_id(h, name, h->lease);
}

int dlock__etcd_key_names_lease(const char *key, size_t key_len, int64_t lease)
{
    char hex[18];
    int n = snprintf(hex, sizeof hex, "/%llx", (unsigned long long)lease);
    return key_len >= (size_t)n && memcmp(key + key_len - (size_t)n, hex, (size_t)n) == 0;
}

int dlock__etcd_hold_key_id(dlock__etcd_hold *h, const dlock__etcd_name *name, int64_t id)
{
    /* Go's fmt "%x" of the lease: lowercase, no padding (concurrency.Mutex
     * names its key so; the same lease must name the same key) */
    char hex[17];
    int n = snprintf(hex, sizeof hex, "%llx", (unsigned long long)id);
    snprintf(h->token, sizeof h->token, "%016llx", (unsigned long long)id);
    h->key_id = id;
    size_t pre = name->len + name->role_len;
    h->key_len = pre + (size_t)n;
    if (!(h->key = dlock__malloc(h->key_len + 1)))
        return DLOCK_ENOMEM;
    memcpy(h->key, name->begin, name->len);
    memcpy(h->key + name->len, name->role, name->role_len);
    memcpy(h->key + pre, hex, (size_t)n + 1);
    return DLOCK_OK;
}

int dlock__etcd_key_is_waiter(const dlock__etcd_name *name, const char *key, size_t key_len)
{
    size_t pre = name->len + name->role_len;
    if (key_len <= pre || memcmp(key, name->begin, name->len) != 0 ||
        memcmp(key + name->len, name->role, name->role_len) != 0)
        return 0;
    return dlock__etcd_key_suffix_len(key, key_len) == key_len - pre;
}

int dlock__etcd_key_in_other_role(const dlock__etcd_name *name, const char *key, size_t key_len)
{
    /* A plain lock's (or a semaphore's) key, a reader's, a writer's: no
     * name ends in /read or /write, nor holds /read/ (dlock__etcd_name_ok),
     * so a key of ours is one of these for one name only. */
    static const char *const roles[] = {"", "read/", "write/"};
    dlock__etcd_name other = *name;
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++) {
        if (strcmp(roles[i], name->role) == 0)
            continue;
        other.role = roles[i];
        other.role_len = strlen(roles[i]);
        if (dlock__etcd_key_is_waiter(&other, key, key_len))
            return 1;
    }
    return 0;
}

/* 1 if the len bytes at s end in the text end (NUL-terminated). */
static int ends_with(const char *s, size_t len, const char *end)
{
    size_t n = strlen(end);
    return len >= n && memcmp(s + len - n, end, n) == 0;
}

int dlock__etcd_name_ok(const char *name, size_t len)
{
    if (ends_with(name, len, "/read") || ends_with(name, len, "/write"))
        return 0;
    for (size_t i = 0; i + 6 <= len; i++)
        if (memcmp(name + i, "/read/", 6) == 0)
            return 0;
    return 1;
}

/* A lowercase hex digit's value, or -1 (Go's %x writes lowercase). */
static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

size_t dlock__etcd_key_suffix_len(const char *key, size_t key_len)
{
    size_t n = 0;
    unsigned long long id = 0;
    while (n < key_len && n < 16 && hex_digit(key[key_len - 1 - n]) >= 0)
        n++;
    if (n == 0 || n == key_len)
        return 0;
    for (size_t i = key_len - n; i < key_len; i++)
        id = id * 16 + (unsigned long long)hex_digit(key[i]);
    size_t before = key_len - 1 - n; /* the byte before the digits */
    if (id == 0) /* etcd's "no lease" */
        return 0;
    /* etcd grants any int64 ID asked for, negative ones too: printed
     * unsigned (16 digits, the high bit set) by a C client, or as Go's %x
     * prints a negative int64 (concurrency.Mutex's key), a minus sign and
     * the magnitude, 1 to 2^63. */
    if (key[before] == '/')
        return n;
    if (key[before] == '-' && before > 0 && key[before - 1] == '/' && id <= 1ull << 63)
        return n + 1;
    return 0;
}

static int hold_init(dlock__etcd_hold *h, const dlock__etcd_name *name, int64_t lease)
{
    memset(h, 0, sizeof *h);
    h->lease = lease;
    return dlock__etcd_hold_key(h, name);
}

int dlock__etcd_hold_new(dlock__etcd_hold *h, const dlock__etcd_name *name, int64_t ttl_ms,
                         int on_session)
{
    int64_t id;
    int rc = dlock__etcd_new_lease_id(&id);
    if (rc != DLOCK_OK || (rc = hold_init(h, name, id)) != DLOCK_OK)
        return rc;
    h->asked_s = dlock__etcd_ttl_s(ttl_ms);
    if (on_session) {
        h->lease = 0; /* the session's, once known */
        h->on_session = 1;
    }
    return DLOCK_OK;
}

/* Deadline of one call: at least one I/O timeout per endpoint, so that it
 * fails over across the members. */
static int64_t step_deadline(dlock__etcd *e, int64_t wait_deadline_ns)
{
    return DLOCK__MAX(dlock__etcd_call_deadline(e), wait_deadline_ns);
}

/* Our key's value with an identity: the text and " since=" with the
 * wall-clock time in ms (etcd has no clock a request can read; this is a
 * stamp for a person, never used in lease arithmetic). Its length. */
size_t dlock__etcd_identity_value(const char *text, char *out, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int n = snprintf(out, len, "%s since=%lld", text,
                     (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

int dlock__etcd_peek(dlock__etcd *e, const dlock__etcd_name *name, int *held,
                     int64_t *ttl_ms, uint64_t *fence, dlock__errbuf *err)
{
    dlock__etcd_kv first;
    *held = 0;
    *ttl_ms = -1;
    *fence = 0;
    int rc = dlock__etcd_first(e, name->begin, name->len, name->end, name->len,
                               &first, step_deadline(e, 0), err);
    if (rc != DLOCK_OK)
        return rc;
    if (first.key) {
        *held = 1;
        *fence = (uint64_t)first.create_rev;
        rc = dlock__etcd_lease_ttl_ms(e, first.lease, ttl_ms, NULL, step_deadline(e, 0), -1,
                                      err);
    }
    dlock__etcd_kv_clear(&first);
    return rc;
}

/* Keys deleted per transaction by a break: etcd's default cap on a
 * transaction's operations (--max-txn-ops). */
#define BREAK_TXN_KEYS 128

int dlock__etcd_break(dlock__etcd *e, const char *key, size_t len, uint64_t if_fence,
                      size_t *removed, int *shared, uint64_t *fence, dlock__errbuf *err)
{
    *removed = 0;
    *shared = 0;
    *fence = 0;
    /* The holders may change between the read and the delete (one
     * released, its lease ended): then they are read again and broken, a
     * few times at most; the guard is checked at each read until some are
     * gone. Readers go BREAK_TXN_KEYS at a time, each batch whole or not
     * at all, until a read finds none left of the holders broken (a
     * writer that got in after them is not theirs: it stays). */
    for (int tries = 0; tries < 3;) {
        dlock__etcd_holding h;
        int rc = dlock__etcd_holding_read(e, key, len, &h);
        if (rc != DLOCK_OK || !h.count || (*removed && !h.shared)) {
            dlock__etcd_holding_clear(&h);
            return rc;
        }
        const dlock__etcd_kv *held = h.shared ? h.readers : &h.writer;
        if (!*removed) {
            /* the newest holder's (status's): holders are the line's
             * first keys, so one that came after the look is newer */
            *fence = (uint64_t)held[h.count - 1].create_rev;
            *shared = h.shared;
            if (if_fence && *fence != if_fence) { /* other holders than the ones asked for */
                dlock__etcd_holding_clear(&h);
                return DLOCK_ENOTOWNER;
            }
        }
        /* later batches: only the readers the first read found (a reader
         * granted since is newer than *fence: it stays) */
        size_t n = 0;
        while (n < h.count && n < BREAK_TXN_KEYS && (uint64_t)held[n].create_rev <= *fence)
            n++;
        int more = h.count > n && (uint64_t)held[n].create_rev <= *fence;
        if (!n) {
            dlock__etcd_holding_clear(&h);
            return DLOCK_OK;
        }
        rc = dlock__etcd_delete_all_if_created(e, held, n, step_deadline(e, 0), err);
        dlock__etcd_holding_clear(&h);
        if (rc == DLOCK_OK)
            *removed += n;
        if (rc == DLOCK_OK && !more)
            return DLOCK_OK;
        if (rc != DLOCK_OK && rc != DLOCK_ENOTOWNER)
            return rc;
        tries += rc != DLOCK_OK;
    }
    if (err)
        dlock__err_set(err, "etcd: the holders kept changing; try again");
    return DLOCK_EBUSY;
}

/* Readers read per look at most (the holders are the first of them, up
 * to the oldest other key). */
#define READERS_MAX 1000

void dlock__etcd_holding_clear(dlock__etcd_holding *h)
{
    dlock__etcd_kv_clear(&h->writer);
    for (size_t i = 0; i < h->n_readers; i++)
        dlock__etcd_kv_clear(&h->readers[i]);
    dlock__free(h->readers);
    memset(h, 0, sizeof *h);
}

int dlock__etcd_holding_read(dlock__etcd *e, const char *key, size_t len,
                             dlock__etcd_holding *h)
{
    dlock__etcd_name range;
    memset(h, 0, sizeof *h);
    if (dlock__etcd_name_init(&range, key, len) != DLOCK_OK)
        return DLOCK_ENOMEM;
    int rc = dlock__etcd_name_role(&range, DLOCK_SHARED); /* the readers' gap */
    dlock__etcd_line line = {range.begin, range.end, range.len, range.len, range.gap_begin,
                             range.gap_end, range.gap_len};
    if (rc == DLOCK_OK)
        rc = dlock__etcd_rw_read(e, &line, READERS_MAX, &h->writer, &h->readers, &h->n_readers,
                                 step_deadline(e, 0), NULL);
    dlock__etcd_name_clear(&range);
    if (rc != DLOCK_OK)
        return rc;
    while (h->count < h->n_readers &&
           (!h->writer.key || h->readers[h->count].create_rev < h->writer.create_rev))
        h->count++;
    h->shared = h->count > 0;
    if (!h->shared && h->writer.key)
        h->count = 1;
    return DLOCK_OK;
}
