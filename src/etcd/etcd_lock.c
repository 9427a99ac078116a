/* SPDX-License-Identifier: BSD-3-Clause */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "common.h"
#include "etcd_kv.h"
#include "etcd_lock.h"
#include "loop_poll.h"
#include "rand.h"

/* A waiter reads the line again at least this often even when its watch
 * says nothing: a watch on a member cut off from the others stays silent. */
#define RECHECK_MS 2000

/* After a cancel, the revoke that undoes the attempt gets this long in all
 * (shared by the members): dlock_lock_cancel() promises the wait ends at
 * once, and a member that does not answer must not hold it for
 * io_timeout_ms. A revoke that does not make it is safe: the lease ends
 * with its TTL and etcd deletes our key then; until that, a key that
 * became first makes the lock look held by nobody who uses it (a cost
 * in liveness of one TTL at most, never a second holder). */
#define CANCEL_UNDO_MS 100

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
    /* Lock names hold no NUL, so KEY NUL .. KEY \1 holds the waiter keys of
     * this lock and of no other (lock "a" never sees lock "a/b"'s keys). */
    memcpy(n->begin, key, key_len);
    memcpy(n->end, key, key_len);
    n->begin[key_len] = '\0';
    n->end[key_len] = '\1';
    return DLOCK_OK;
}

void dlock__etcd_name_clear(dlock__etcd_name *n)
{
    dlock__free(n->begin);
    dlock__free(n->end);
    memset(n, 0, sizeof *n);
}

int64_t dlock__etcd_ttl_s(int64_t ttl_ms)
{
    int64_t s = ttl_ms / 1000 + (ttl_ms % 1000 != 0);
    return s < 1 ? 1 : s;
}

/* A fresh lease ID: 63 random bits, never 0 (0 asks etcd to choose). */
static int new_lease_id(int64_t *id)
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

static int hold_init(dlock__etcd_hold *h, const dlock__etcd_name *name, int64_t lease)
{
    memset(h, 0, sizeof *h);
    h->lease = lease;
    snprintf(h->token, sizeof h->token, "%016llx", (unsigned long long)lease);
    h->key_len = name->len + 16;
    if (!(h->key = dlock__malloc(h->key_len + 1)))
        return DLOCK_ENOMEM;
    memcpy(h->key, name->begin, name->len);
    memcpy(h->key + name->len, h->token, 17);
    return DLOCK_OK;
}

int dlock__etcd_hold_new(dlock__etcd_hold *h, const dlock__etcd_name *name, int64_t ttl_ms)
{
    int64_t lease;
    int rc = new_lease_id(&lease);
    if (rc != DLOCK_OK || (rc = hold_init(h, name, lease)) != DLOCK_OK)
        return rc;
    h->asked_s = dlock__etcd_ttl_s(ttl_ms);
    return DLOCK_OK;
}

/* Deadline of one step: the wait's, but at least one I/O timeout per
 * endpoint, so that a try-once still fails over across the members. */
static int64_t step_deadline(dlock__etcd *e, int64_t wait_deadline_ns)
{
    return DLOCK__MAX(dlock__etcd_call_deadline(e), wait_deadline_ns);
}

static int transient(int rc)
{
    return rc == DLOCK_EIO || rc == DLOCK_EUNKNOWN || rc == DLOCK_EBUSY;
}

static int cancel_seen(int cancel_fd)
{
    struct pollfd p = {cancel_fd, POLLIN, 0};
    return cancel_fd >= 0 && poll(&p, 1, 0) > 0;
}

/* Sleep up to ms (a minute at most, the callers loop), or until cancel_fd
 * is readable (1): a timer and the cancel fd's record on a private loop. */
static int nap(int64_t ms, int cancel_fd)
{
    if (ms <= 0)
        return 0;
    return dlock__loop_poll_sleep(dlock__deadline_after_ms(DLOCK__MIN(ms, 60000)), cancel_fd);
}

/* Undo an attempt: revoking the lease deletes the waiter key with it.
 * Best effort, and once the acquire is cancelled (before or during the
 * revoke) bounded by CANCEL_UNDO_MS, never io_timeout_ms per member. */
static void undo(dlock__etcd *e, dlock__etcd_hold *h, int cancel_fd)
{
    if (h->lease) {
        int rc = cancel_seen(cancel_fd)
                     ? DLOCK_ECANCELED
                     : dlock__etcd_lease_revoke(e, h->lease, dlock__etcd_call_deadline(e),
                                                cancel_fd, NULL, NULL);
        if (rc == DLOCK_ECANCELED)
            (void)dlock__etcd_lease_revoke_brief(e, h->lease, CANCEL_UNDO_MS);
    }
    dlock__etcd_hold_clear(h);
}

static void holder_ttl(dlock__etcd *e, int64_t lease, int cancel_fd, int64_t *out)
{
    int64_t ttl = -1;
    if (lease && dlock__etcd_lease_ttl_ms(e, lease, &ttl, NULL, dlock__etcd_call_deadline(e),
                                          cancel_fd, NULL) != DLOCK_OK)
        ttl = -1;
    *out = ttl;
}

static void tried(const dlock__etcd_events *ev)
{
    if (ev && ev->tried)
        ev->tried(ev->arg);
}

static void woke(const dlock__etcd_events *ev, int pushed)
{
    if (ev && ev->woke)
        ev->woke(ev->arg, pushed);
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

/* Get in line: grant a lease and create our key. *owner: 1 when ours is
 * the first key. */
static int enter(dlock__etcd *e, const dlock__etcd_name *name, int64_t ttl_ms,
                 int64_t deadline_ns, int cancel_fd, dlock__etcd_hold *h,
                 int *owner, int64_t *first_lease, dlock__errbuf *err)
{
    int rc = dlock__etcd_hold_new(h, name, ttl_ms);
    if (rc != DLOCK_OK)
        return rc;
    int64_t sent_ns = dlock__now_ns();
    rc = dlock__etcd_lease_grant(e, h->lease, h->asked_s, &h->ttl_s,
                                 deadline_ns, cancel_fd, err);
    if (rc != DLOCK_OK)
        return rc;
    h->valid_until_ns = sent_ns + h->ttl_s * 1000 * DLOCK__NS_PER_MS;
    dlock__etcd_kv first;
    char id[DLOCK_IDENTITY_READ_MAX + 1];
    size_t id_len = name->identity ? dlock__etcd_identity_value(name->identity, id, sizeof id) : 0;
    rc = dlock__etcd_create_and_first(e, h->key, h->key_len, name->identity ? id : NULL, id_len,
                                      h->lease, name->begin, name->len, name->end, name->len,
                                      &h->rev, &first, deadline_ns, cancel_fd, err);
    if (rc != DLOCK_OK)
        return rc;
    *owner = first.create_rev == h->rev;
    *first_lease = first.lease;
    dlock__etcd_kv_clear(&first);
    return DLOCK_OK;
}

/* Wait in line until ours is the first key. DLOCK_EEXPIRED: our key went
 * (the lease ended while we waited): the caller gets in line again. The
 * waiter keeps its own lease alive meanwhile, every third of its TTL. */
static int wait_turn(dlock__etcd *e, const dlock__etcd_name *name,
                     dlock__etcd_hold *h, int64_t deadline_ns, int64_t retry_max_ms,
                     int cancel_fd, const dlock__etcd_events *ev, dlock__errbuf *err)
{
    int64_t renew_every_ms = DLOCK__MAX(h->ttl_s * 1000 / 3, 100);
    int64_t next_renew_ns = dlock__deadline_after_ms(renew_every_ms);
    unsigned failures = 0;
    int watched = 0; /* the last watch ended without an event */
    for (;;) {
        int64_t now = dlock__now_ns();
        if (now >= deadline_ns)
            return DLOCK_ETIMEDOUT;
        int64_t step = DLOCK__MIN(deadline_ns, step_deadline(e, 0));
        int rc = DLOCK_OK;
        if (now >= next_renew_ns) {
            int64_t ttl_s;
            rc = dlock__etcd_lease_keepalive(e, h->lease, &ttl_s, step, cancel_fd, err);
            if (rc == DLOCK_OK) {
                h->valid_until_ns = now + ttl_s * 1000 * DLOCK__NS_PER_MS;
                next_renew_ns = dlock__deadline_after_ms(renew_every_ms);
            }
        }
        if (rc == DLOCK_OK) {
            dlock__etcd_kv pred;
            int64_t rev = 0;
            tried(ev);
            rc = dlock__etcd_predecessor(e, h->key, h->key_len, h->rev, name->begin,
                                         name->len, name->end, name->len, &pred,
                                         &rev, step, cancel_fd, err);
            if (rc == DLOCK_OK && !pred.key) {
                if (watched)
                    woke(ev, 0);
                return DLOCK_OK; /* nobody before us: ours */
            }
            watched = 0;
            if (rc == DLOCK_OK) {
                /* Watch only the key just before ours; when it goes, look
                 * again (the one before it may have gone meanwhile, or be
                 * the owner now). */
                int64_t slice = DLOCK__MIN(
                    DLOCK__MIN(deadline_ns, next_renew_ns),
                    dlock__deadline_after_ms(RECHECK_MS));
                rc = dlock__etcd_wait_delete(e, pred.key, pred.key_len, rev + 1,
                                             slice, cancel_fd, err);
                if (rc == DLOCK_OK)
                    woke(ev, 1);
                watched = rc == DLOCK_ETIMEDOUT;
                if (rc == DLOCK_ETIMEDOUT)
                    rc = DLOCK_OK;
            }
            dlock__etcd_kv_clear(&pred);
        }
        if (rc == DLOCK_OK) {
            failures = 0;
            if (err)
                dlock__err_clear(err);
            continue;
        }
        if (!transient(rc))
            return rc; /* DLOCK_ECANCELED, DLOCK_EEXPIRED, refusals */
        /* A member down or an election: try again after a pause. */
        int64_t pause = dlock__backoff_ms(failures++, 10, retry_max_ms);
        pause = DLOCK__MIN(pause, dlock__ms_until(deadline_ns));
        if (nap(pause, cancel_fd))
            return DLOCK_ECANCELED;
    }
}

int dlock__etcd_acquire(dlock__etcd *e, const dlock__etcd_name *name,
                        int64_t ttl_ms, int64_t wait_ms, int64_t retry_max_ms,
                        int cancel_fd, const dlock__etcd_events *ev, dlock__etcd_hold *out,
                        int64_t *holder_ttl_ms, dlock__errbuf *err)
{
    memset(out, 0, sizeof *out);
    *holder_ttl_ms = -1;
    int64_t deadline_ns = wait_ms < 0 ? INT64_MAX : dlock__deadline_after_ms(wait_ms);
    unsigned failures = 0;
    for (;;) {
        dlock__etcd_hold h;
        int owner = 0;
        int64_t first_lease = 0;
        memset(&h, 0, sizeof h);
        tried(ev);
        int rc = enter(e, name, ttl_ms, step_deadline(e, deadline_ns), cancel_fd,
                       &h, &owner, &first_lease, err);
        if (rc == DLOCK_OK && owner) {
            *out = h;
            return DLOCK_OK;
        }
        if (rc == DLOCK_OK) {
            holder_ttl(e, first_lease, cancel_fd, holder_ttl_ms);
            if (wait_ms == 0) {
                undo(e, &h, cancel_fd);
                if (err)
                    dlock__err_set(err, "held by another owner");
                return DLOCK_ENOTACQUIRED;
            }
            rc = wait_turn(e, name, &h, deadline_ns, retry_max_ms, cancel_fd, ev, err);
            if (rc == DLOCK_OK) {
                /* Ours. The wait renewed the lease every third of its TTL,
                 * so two thirds of it are normally left, counted from the
                 * last renewal sent; only when renewals failed meanwhile is
                 * one more sent now (if that fails too, the lease still
                 * runs from the last one). */
                int64_t sent_ns = dlock__now_ns(), ttl_s;
                int krc = DLOCK_OK;
                if (h.valid_until_ns - sent_ns >= h.ttl_s * 2000 / 3 * DLOCK__NS_PER_MS - 1) {
                    if (err)
                        dlock__err_clear(err);
                    *out = h;
                    return DLOCK_OK;
                }
                krc = dlock__etcd_lease_keepalive(e, h.lease, &ttl_s, step_deadline(e, 0),
                                                  cancel_fd, NULL);
                if (krc == DLOCK_OK)
                    h.valid_until_ns = sent_ns + ttl_s * 1000 * DLOCK__NS_PER_MS;
                if (krc == DLOCK_OK ||
                    (transient(krc) && h.valid_until_ns > dlock__now_ns())) {
                    if (err)
                        dlock__err_clear(err);
                    *out = h;
                    return DLOCK_OK;
                }
                rc = krc;
            }
        }
        undo(e, &h, cancel_fd);
        int64_t now = dlock__now_ns();
        if (rc == DLOCK_ECANCELED || rc == DLOCK_ETIMEDOUT)
            return rc;
        if (wait_ms != 0 && (rc == DLOCK_EEXPIRED || transient(rc)) && now < deadline_ns) {
            /* Our lease ended while we waited (a pause longer than the
             * TTL), or a member failed: get in line again. */
            int64_t pause = dlock__backoff_ms(failures++, 10, retry_max_ms);
            if (nap(DLOCK__MIN(pause, dlock__ms_until(deadline_ns)), cancel_fd))
                return DLOCK_ECANCELED;
            continue;
        }
        if (rc == DLOCK_EEXPIRED) /* the lease ended before the attempt did */
            return wait_ms == 0 ? DLOCK_EUNKNOWN : DLOCK_ETIMEDOUT;
        return rc;
    }
}

int dlock__etcd_release(dlock__etcd *e, dlock__etcd_hold *h, dlock__errbuf *err)
{
    int64_t sent_ns = dlock__now_ns();
    int unknown_before = 0;
    int rc = dlock__etcd_lease_revoke(e, h->lease, step_deadline(e, 0), -1, err,
                                      &unknown_before);
    /* "Not found" after a copy of this revoke went unanswered: the lease
     * cannot have ended by itself while it was valid when we sent, so that
     * copy revoked it (it reached a member that answered too late). */
    if (rc == DLOCK_EEXPIRED && unknown_before && h->valid_until_ns != INT64_MIN &&
        sent_ns < h->valid_until_ns) {
        rc = DLOCK_OK;
        if (err)
            dlock__err_clear(err);
    }
    dlock__etcd_hold_clear(h);
    return rc;
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

int dlock__etcd_break(dlock__etcd *e, const dlock__etcd_name *name, uint64_t if_fence,
                      int *removed, uint64_t *fence, dlock__errbuf *err)
{
    *removed = 0;
    *fence = 0;
    /* The owner may change between the read and the delete (it released,
     * its lease ended): then the new owner is read and broken, a few times
     * at most. */
    for (int tries = 0; tries < 3; tries++) {
        dlock__etcd_kv first;
        int rc = dlock__etcd_first(e, name->begin, name->len, name->end, name->len, &first,
                                   step_deadline(e, 0), err);
        if (rc != DLOCK_OK || !first.key) {
            dlock__etcd_kv_clear(&first);
            return rc;
        }
        if (if_fence && (uint64_t)first.create_rev != if_fence) {
            *fence = (uint64_t)first.create_rev; /* another owner than the one asked for */
            dlock__etcd_kv_clear(&first);
            return DLOCK_ENOTOWNER;
        }
        rc = dlock__etcd_delete_if_created(e, first.key, first.key_len, first.create_rev,
                                           step_deadline(e, 0), err);
        if (rc != DLOCK_ENOTOWNER || if_fence) { /* that owner's key, or gone: done */
            *removed = rc == DLOCK_OK;
            *fence = (uint64_t)first.create_rev;
            dlock__etcd_kv_clear(&first);
            return rc == DLOCK_ENOTOWNER ? DLOCK_OK : rc;
        }
        dlock__etcd_kv_clear(&first);
    }
    if (err)
        dlock__err_set(err, "etcd: the owner kept changing; try again");
    return DLOCK_EBUSY;
}
