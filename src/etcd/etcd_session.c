/* SPDX-License-Identifier: BSD-3-Clause */
/* A client's etcd sessions (etcd_session.h). */
#include <string.h>

#include "clock.h"
#include "etcd_session.h"

typedef dlock__etcd_session session;

static void lock(struct dlock__etcd_client *ec)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&ec->mu));
}

static void unlock(struct dlock__etcd_client *ec)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&ec->mu));
}

static void session_free(session *s)
{
    for (unsigned i = 0; i < s->n_spares; i++)
        dlock__free(s->spares[i].key);
    dlock__free(s);
}

/* Take s out of the table (under mu); freed when it has no user. Its
 * spares go: no new key goes on it. */
static void unlist_locked(session *s)
{
    if (!s->listed)
        return;
    session **p = (session **)&s->ec->sessions;
    while (*p != s)
        p = &(*p)->next;
    *p = s->next;
    s->next = NULL;
    s->listed = 0;
    for (unsigned i = 0; i < s->n_spares; i++)
        dlock__free(s->spares[i].key);
    s->n_spares = 0;
    if (s->refs == 0)
        session_free(s);
}

session *dlock__etcd_session_find(struct dlock__etcd_client *ec, int64_t asked_s, int *stale)
{
    int64_t now = dlock__now_ns();
    session *found = NULL;
    *stale = 0;
    lock(ec);
    for (session *s = ec->sessions; s; s = s->next) {
        if (s->asked_s != asked_s)
            continue;
        int64_t left_ms = (s->valid_until_ns - now) / DLOCK__NS_PER_MS;
        if (left_ms < s->ttl_s * 1000 / 3) {
            unlist_locked(s); /* may have lapsed: a new one */
        } else {
            *stale = left_ms < s->ttl_s * 2000 / 3;
            s->refs++;
            found = s;
        }
        break;
    }
    unlock(ec);
    return found;
}

session *dlock__etcd_session_new(struct dlock__etcd_client *ec, int64_t asked_s, int64_t lease,
                                 int64_t ttl_s, int64_t valid_until_ns)
{
    session *s = dlock__calloc(1, sizeof *s);
    if (!s)
        return NULL;
    *s = (session){.ec = ec, .lease = lease, .asked_s = asked_s, .ttl_s = ttl_s,
                   .valid_until_ns = valid_until_ns, .refs = 1, .listed = 1};
    lock(ec);
    for (session *o = ec->sessions; o; o = o->next)
        if (o->asked_s == asked_s) {
            unlist_locked(o); /* its users keep it */
            break;
        }
    s->next = ec->sessions;
    ec->sessions = s;
    unlock(ec);
    return s;
}

void dlock__etcd_session_kept(session *s, int64_t until_ns)
{
    lock(s->ec);
    if (until_ns > s->valid_until_ns)
        s->valid_until_ns = until_ns;
    unlock(s->ec);
}

int64_t dlock__etcd_session_until(session *s)
{
    lock(s->ec);
    int64_t until = s->valid_until_ns;
    unlock(s->ec);
    return until;
}

void dlock__etcd_session_get(session *s)
{
    lock(s->ec);
    s->refs++;
    unlock(s->ec);
}

void dlock__etcd_session_gone(session *s)
{
    lock(s->ec);
    unlist_locked(s);
    unlock(s->ec);
}

void dlock__etcd_session_taint(session *s)
{
    lock(s->ec);
    s->tainted = 1;
    unlist_locked(s);
    unlock(s->ec);
}

int dlock__etcd_session_last_tainted(session *s)
{
    lock(s->ec);
    int last = s->tainted && s->refs == 1;
    unlock(s->ec);
    return last;
}

int dlock__etcd_session_put(session *s)
{
    struct dlock__etcd_client *ec = s->ec;
    lock(ec);
    s->refs = s->refs ? s->refs - 1 : 0;
    int revoke = s->refs == 0 && s->tainted;
    if (s->refs == 0 && !s->listed)
        session_free(s);
    unlock(ec);
    return revoke;
}

/* The digits of an ID as a key names it (Go's %x: no padding). */
static size_t id_digits(int64_t id)
{
    size_t n = 1;
    for (uint64_t v = (uint64_t)id; v >= 16; v >>= 4)
        n++;
    return n;
}

void dlock__etcd_session_spare_put(struct dlock__etcd_client *ec, int64_t lease,
                                   const char *key, size_t key_len, int64_t id)
{
    char *copy = dlock__malloc(key_len);
    if (!copy)
        return;
    memcpy(copy, key, key_len);
    lock(ec);
    session *s = ec->sessions;
    while (s && s->lease != lease)
        s = s->next;
    if (s && !s->tainted) { /* (listed: it is in the table) */
        if (s->n_spares == DLOCK__ETCD_SPARES) {
            dlock__free(s->spares[0].key);
            memmove(&s->spares[0], &s->spares[1], (s->n_spares - 1) * sizeof s->spares[0]);
            s->n_spares--;
        }
        s->spares[s->n_spares++] = (struct dlock__etcd_spare){id, copy, key_len};
        copy = NULL;
    }
    unlock(ec);
    dlock__free(copy);
}

int64_t dlock__etcd_session_spare_take(session *s, const char *prefix, size_t prefix_len)
{
    int64_t id = 0;
    lock(s->ec);
    for (unsigned i = 0; s->listed && i < s->n_spares; i++) {
        struct dlock__etcd_spare *p = &s->spares[i];
        if (p->key_len != prefix_len + id_digits(p->id) || memcmp(p->key, prefix, prefix_len))
            continue;
        id = p->id;
        dlock__free(p->key);
        memmove(p, p + 1, (s->n_spares - i - 1) * sizeof *p);
        s->n_spares--;
        break;
    }
    unlock(s->ec);
    return id;
}

void dlock__etcd_sessions_free(struct dlock__etcd_client *ec,
                               void (*keeper_free)(struct dlock__etcd_keeper *k))
{
    while (ec->sessions) {
        session *s = ec->sessions;
        ec->sessions = s->next;
        if (s->keeper)
            keeper_free(s->keeper);
        session_free(s);
    }
}
