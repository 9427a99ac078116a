/* SPDX-License-Identifier: BSD-3-Clause */
/* A client's etcd sessions (etcd_session.h). */
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

/* Take s out of the table (under mu); freed when it has no user. */
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
    if (s->refs == 0)
        dlock__free(s);
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
        dlock__free(s);
    unlock(ec);
    return revoke;
}

void dlock__etcd_sessions_free(struct dlock__etcd_client *ec,
                               void (*keeper_free)(struct dlock__etcd_keeper *k))
{
    while (ec->sessions) {
        session *s = ec->sessions;
        ec->sessions = s->next;
        if (s->keeper)
            keeper_free(s->keeper);
        dlock__free(s);
    }
}
