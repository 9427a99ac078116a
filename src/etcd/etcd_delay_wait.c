/* SPDX-License-Identifier: BSD-3-Clause */
/* Lock-delay in the etcd wait: the check before a grant and the
 * companion after it (etcd_delay_wait.h). */
#include <stdatomic.h>

#include "backend.h"
#include "clock.h"
#include "etcd_delay.h"
#include "etcd_delay_wait.h"
#include "etcd_kv.h"
#include "handle.h"

#define LD DLOCK__ETCD_LD

/* A waiter under a lock-delay looks again at least this often, as every
 * etcd waiter does (etcd_wait.c: a watch on a member cut off from the
 * others stays silent). */
#define RECHECK_MS 2000

/* A companions' watch lives this long at most (the wait stops it sooner). */
#define STREAM_MAX_MS (10 * 60 * 1000)

static int has_delay(const dlock__etcd_wait *w)
{
    return w->l->opts.lock_delay_ms > 0;
}

/* The name's companion range, [*begin, *end) of *len bytes each. */
static int companion_range(const dlock_lock *l, char **begin, char **end, size_t *len)
{
    *begin = *end = NULL;
    int rc = dlock__etcd_delay_key(l->name, l->name_len, l->prefix_len, NULL, 0, begin, len);
    if (rc == DLOCK_OK)
        rc = dlock__etcd_delay_key(l->name, l->name_len, l->prefix_len, NULL, 1, end, len);
    return rc;
}

/* ---- the check before a grant ------------------------------------------- */

/* A companion went (its dead holder's delay is over), or the watch was
 * cancelled (compaction): look again now. A stream that just broke
 * leaves the wait to its looks (no loop of looks and watches). */
static void companion_gone(dlock__etcd_watch *ww)
{
    dlock__etcd_wait *w = DLOCK__OWNER(ww, dlock__etcd_wait, delay_watch);
    if (ww->look)
        dlock__lock_waiter_wake(w->l);
}

/* The stream was taken after our read: a deletion between is not in it. */
static void companion_moved(dlock__etcd_watch *ww)
{
    dlock__lock_waiter_wake(DLOCK__OWNER(ww, dlock__etcd_wait, delay_watch)->l);
}

/* Watch the name's companions for a deletion from the check's read on
 * (a stream running already covers it: kept). */
static void watch_companions(dlock__etcd_wait *w, const char *begin, const char *end,
                             size_t len, int64_t rev)
{
    dlock__etcd_watch *ww = &w->delay_watch;
    if (ww->running) {
        ww->read_rev = rev;
        return;
    }
    ww->ended = companion_gone;
    ww->moved = companion_moved;
    (void)dlock__etcd_watch_start(ww, dlock__etcd_step_etcd(w), w->op->loop, begin, len, end, len,
                                  rev, dlock__deadline_after_ms(STREAM_MAX_MS));
}

/* A try-once under a lock-delay: refused with the delay's time left (its
 * companion lease's TTL, -1 unknown), out of line. */
static void delay_read(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code;
    int64_t left_ms = -1;
    if (rc == DLOCK_ECANCELED) {
        dlock__etcd_step_failed(w, rc);
        return;
    }
    if (rc != DLOCK_OK || dlock__etcd_ttl_reply(rep, &left_ms, NULL, NULL) != DLOCK_OK)
        left_ms = -1;
    else
        left_ms = dlock__etcd_delay_left_ms(left_ms);
    w->holder_ttl_ms = left_ms;
    atomic_store(&w->l->holder_ttl_ms, left_ms);
    if (left_ms >= 0)
        dlock__err_set(&w->l->err, "\"%s\" is free but under a lock-delay (%.1fs left)",
                       w->l->name, (double)left_ms / 1000.0);
    else
        dlock__err_set(&w->l->err, "\"%s\" is free but under a lock-delay", w->l->name);
    dlock__etcd_step_undo(w, DLOCK_ENOTACQUIRED, 0, 0);
}

/* Delayed: a try-once reads how long for its message; a waiter keeps its
 * place and looks again when a companion goes. */
static void delayed(dlock__etcd_wait *w, int64_t dead_lease, const char *begin, const char *end,
                    size_t len, int64_t rev)
{
    int rc;
    if (w->l->try_once) {
        rc = dlock__etcd_step_call(w, "/v3/lease/timetolive", dlock__etcd_lease_body(dead_lease),
                                   delay_read);
        if (rc != DLOCK_OK)
            dlock__etcd_step_failed(w, rc);
        return;
    }
    watch_companions(w, begin, end, len, rev);
    dlock__err_set(&w->l->err, "\"%s\" is free but under a lock-delay", w->l->name);
    int64_t look_ms = DLOCK__MIN(RECHECK_MS, DLOCK__MAX(dlock__ms_until(w->next_renew_ns), 0));
    dlock__etcd_step_answer(w, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY | DLOCK__V_QUEUED, look_ms);
}

/* Is a dead holder's companion in the way of a place the kind's own rule
 * found in (etcd_wait.c)? A lock's: any (the kind let it in with nobody
 * ahead, or with live holders it may share with). A semaphore's: its
 * dead holders' permits count with the keys ahead of ours. */
static int in_the_way(const dlock__etcd_wait *w, size_t ahead, size_t dead)
{
    int64_t permits = dlock__etcd_permits(w->l);
    return dead > 0 && (permits <= 1 || (int64_t)(ahead + dead) >= permits);
}

static void checked(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code;
    size_t ahead = 0, dead = 0, len = 0;
    int64_t dead_lease = 0, rev = 0;
    char *begin = NULL, *end = NULL;
    if (rc == DLOCK_OK)
        rc = dlock__etcd_delay_check_reply(rep, w->s->h.rev, &ahead, &dead, &dead_lease, 1, &rev);
    if (rc == DLOCK_OK && !in_the_way(w, ahead, dead)) {
        w->delay_ok_rev = w->s->h.rev; /* no dead holder in the way: on to the grant */
        dlock__etcd_watch_stop(&w->delay_watch);
        rc = dlock__etcd_granted(w);
    } else if (rc == DLOCK_OK && (rc = companion_range(w->l, &begin, &end, &len)) == DLOCK_OK) {
        delayed(w, dead_lease, begin, end, len, rev);
    }
    dlock__free(begin);
    dlock__free(end);
    if (rc != DLOCK_OK)
        dlock__etcd_step_failed(w, rc);
}

/* The companions and the line in one read, by a waiting acquire's
 * deadline at the latest (as a look: etcd_wait.c; a try-once's is now). */
static int check(dlock__etcd_wait *w)
{
    const dlock__etcd_name *line = &LD(w->l)->range;
    dlock__etcd *e = dlock__etcd_step_etcd(w);
    char *begin = NULL, *end = NULL;
    size_t len = 0;
    int rc = companion_range(w->l, &begin, &end, &len);
    if (rc == DLOCK_OK) {
        int64_t deadline = dlock__etcd_call_deadline(e);
        if (w->op->deadline_ns > 0 && !w->l->try_once)
            deadline = DLOCK__MIN(deadline, w->op->deadline_ns);
        rc = dlock__etcd_step_post(
            w, "/v3/kv/txn",
            dlock__etcd_delay_check_body(begin, end, len, line->begin, line->end, line->len),
            deadline, dlock__etcd_io_timeout_ms(e), checked, &w->l->err);
    }
    dlock__free(begin);
    dlock__free(end);
    return rc;
}

/* Our place's lease kept alive while a delay keeps us waiting; then the
 * check. Our key gone meanwhile: out of line, in again after a backoff. */
static void place_kept(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code;
    rc = dlock__etcd_step_kept(w, rc, rep);
    if (rc == DLOCK_OK) {
        w->next_renew_ns = dlock__deadline_after_ms(w->renew_every_ms);
        rc = check(w);
    }
    if (rc == DLOCK_EEXPIRED)
        dlock__etcd_step_undo(w, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY, 0);
    else if (rc != DLOCK_OK)
        dlock__etcd_step_failed(w, rc);
}

int dlock__etcd_delay_before_grant(dlock__etcd_wait *w, int *started)
{
    *started = 0;
    if (!has_delay(w) || w->delay_ok_rev == w->s->h.rev)
        return DLOCK_OK;
    *started = 1;
    if (dlock__now_ns() < w->next_renew_ns)
        return check(w);
    w->sent_ns = dlock__now_ns();
    return dlock__etcd_step_call(w, "/v3/lease/keepalive", dlock__etcd_lease_body(w->s->h.lease),
                                 place_kept);
}

/* ---- the companion of a new hold ------------------------------------------- */

/* The companion lease of a failed put is revoked: now the grant fails. */
static void unmarked(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)rc, (void)code, (void)rep;
    dlock__etcd_step_failed(w, w->delay_rc);
}

static void put_done(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    (void)code, (void)rep;
    dlock__etcd_hold *h = &w->s->h;
    int64_t lease = dlock__etcd_delay_lease_of_token(h->token);
    if (rc == DLOCK_OK) {
        h->delay_lease = lease;
        w->delay_then(w); /* takes the hold now */
        return;
    }
    /* The put's outcome may be unknown: a companion left would delay the
     * next holder for nothing (a cancel's budget for it) */
    w->delay_rc = rc;
    if (dlock__etcd_step_revoke_lease(w, lease, DLOCK__CANCEL_LEAVE_MS, unmarked) != DLOCK_OK)
        dlock__etcd_step_failed(w, rc);
}

static void companion_granted(dlock__etcd_wait *w, int rc, long code, json_t *rep)
{
    dlock__etcd_hold *h = &w->s->h;
    int64_t ttl_s = dlock__etcd_delay_ttl_s(h, w->l->opts.lock_delay_ms), got = 0;
    char *key = NULL;
    size_t len = 0;
    rc = dlock__etcd_grant_reply(rc, code, rep, ttl_s, &got, &w->l->err);
    if (rc == DLOCK_OK)
        rc = dlock__etcd_delay_key(w->l->name, w->l->name_len, w->l->prefix_len, h->token, 0,
                                   &key, &len);
    if (rc == DLOCK_OK)
        rc = dlock__etcd_step_call(
            w, "/v3/kv/put",
            dlock__etcd_delay_put_body(key, len, h, dlock__etcd_delay_lease_of_token(h->token)),
            put_done);
    dlock__free(key);
    if (rc != DLOCK_OK)
        dlock__etcd_step_failed(w, rc);
}

int dlock__etcd_delay_mark(dlock__etcd_wait *w, void (*then)(dlock__etcd_wait *w))
{
    dlock__etcd_hold *h = &w->s->h;
    if (!has_delay(w) || h->delay_lease)
        return 0;
    w->delay_then = then;
    int64_t lease = dlock__etcd_delay_lease_of_token(h->token);
    int rc = dlock__etcd_step_call(
        w, "/v3/lease/grant",
        dlock__etcd_grant_body(lease, dlock__etcd_delay_ttl_s(h, w->l->opts.lock_delay_ms)),
        companion_granted);
    if (rc != DLOCK_OK)
        dlock__etcd_step_failed(w, rc);
    return 1;
}
