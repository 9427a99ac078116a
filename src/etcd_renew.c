/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <string.h>

#include "clock.h"
#include "common.h"
#include "etcd_renew.h"
#include "handle.h"

/* After a failed renewal, try again this soon (or sooner, a quarter of the
 * interval): the lease may still have time for a member to answer. */
#define RETRY_MS 250

struct dlock__etcd_renewer {
    dlock__etcd *e;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* list changed, a round ended, or stop */
    pthread_t thread;
    int started, stop;
    dlock__etcd_renewal *head;
};

int dlock__etcd_renewer_new(dlock__etcd_renewer **out, dlock__etcd *e)
{
    dlock__etcd_renewer *r = dlock__calloc(1, sizeof *r);
    if (!r)
        return DLOCK_ENOMEM;
    r->e = e;
    DLOCK__CHECK_PTHREAD(pthread_mutex_init(&r->mu, NULL));
    dlock__cond_init_monotonic(&r->cond);
    *out = r;
    return DLOCK_OK;
}

void dlock__etcd_renewer_free(dlock__etcd_renewer *r, int forked)
{
    if (!r)
        return;
    if (!forked) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&r->mu));
        r->stop = 1;
        DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&r->cond));
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&r->mu));
        if (r->started)
            DLOCK__CHECK_PTHREAD(pthread_join(r->thread, NULL));
        DLOCK__CHECK_PTHREAD(pthread_cond_destroy(&r->cond));
        DLOCK__CHECK_PTHREAD(pthread_mutex_destroy(&r->mu));
    }
    dlock__free(r);
}

static void set_valid_until(dlock_lock *l, int64_t until)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    if (l->state == DLOCK_STATE_HELD)
        l->valid_until_ns = until;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
}

static int64_t valid_until(dlock_lock *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    int64_t v = l->valid_until_ns;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return v;
}

/* Renew one lock (mutex not held). Returns 0, or the dlock_lost_reason. */
static int renew_one(dlock__etcd_renewer *r, dlock__etcd_renewal *rec, int64_t *next_ns)
{
    dlock_lock *l = rec->lock;
    int64_t now = dlock__now_ns();
    int64_t end = valid_until(l);
    if (end == INT64_MIN) /* adopted: the lease's own TTL bounds it */
        end = now + rec->hold->ttl_s * 1000 * DLOCK__NS_PER_MS;
    /* A confirmation after the lease ended proves nothing. */
    dlock__etcd_hold copy = *rec->hold;
    int rc = now < end ? dlock__etcd_renew(r->e, &copy, end, NULL) : DLOCK_EUNKNOWN;
    if (rc == DLOCK_OK) {
        set_valid_until(l, copy.valid_until_ns);
        *next_ns = dlock__deadline_after_ms(rec->interval_ms);
        return 0;
    }
    if (rc == DLOCK_EEXPIRED || rc == DLOCK_ENOTOWNER)
        return DLOCK_LOST_NOT_OWNER;
    if (dlock__now_ns() >= end)
        return DLOCK_LOST_NO_QUORUM;
    *next_ns = dlock__deadline_after_ms(DLOCK__MIN(RETRY_MS, rec->interval_ms / 4 + 1));
    return 0;
}

/* Held -> lost; 1 if it was held (then on_lost is called, once). */
static int mark_lost(dlock_lock *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    int was_held = l->state == DLOCK_STATE_HELD;
    if (was_held)
        l->state = DLOCK_STATE_LOST;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return was_held;
}

static void unlink_rec(dlock__etcd_renewer *r, dlock__etcd_renewal *rec)
{
    if (rec->prev)
        rec->prev->next = rec->next;
    else
        r->head = rec->next;
    if (rec->next)
        rec->next->prev = rec->prev;
    rec->prev = rec->next = NULL;
    rec->registered = 0;
}

static void *run(void *arg)
{
    dlock__etcd_renewer *r = arg;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&r->mu));
    while (!r->stop) {
        dlock__etcd_renewal *due = NULL;
        int64_t now = dlock__now_ns(), wake = INT64_MAX;
        for (dlock__etcd_renewal *x = r->head; x; x = x->next) {
            if (x->next_ns <= now) {
                due = x;
                break;
            }
            wake = DLOCK__MIN(wake, x->next_ns);
        }
        if (!due) {
            struct timespec ts = dlock__timespec_of(wake);
            int w = wake == INT64_MAX ? pthread_cond_wait(&r->cond, &r->mu)
                                      : pthread_cond_timedwait(&r->cond, &r->mu, &ts);
            if (w != 0 && w != ETIMEDOUT)
                DLOCK__CHECK_PTHREAD(w);
            continue;
        }
        due->in_round = 1;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&r->mu));
        int64_t next = 0;
        int lost = renew_one(r, due, &next);
        if (lost && mark_lost(due->lock) && due->lock->opts.on_lost)
            /* Still in_round: a release or free on another thread waits. */
            due->lock->opts.on_lost(due->lock, (dlock_lost_reason)lost,
                                    due->lock->opts.on_lost_arg);
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&r->mu));
        due->in_round = 0;
        if (due->registered) {
            if (lost)
                unlink_rec(r, due);
            else
                due->next_ns = next;
        }
        DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&r->cond));
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&r->mu));
    return NULL;
}

int dlock__etcd_renewer_start(dlock__etcd_renewer *r)
{
    int rc = DLOCK_OK;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&r->mu));
    if (!r->started) {
        if (pthread_create(&r->thread, NULL, run, r) == 0)
            r->started = 1;
        else
            rc = DLOCK_ENOMEM;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&r->mu));
    return rc;
}

void dlock__etcd_renewer_add(dlock__etcd_renewer *r, dlock__etcd_renewal *rec)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&r->mu));
    if (!rec->registered) {
        rec->registered = 1;
        rec->next_ns = dlock__deadline_after_ms(rec->interval_ms);
        rec->prev = NULL;
        rec->next = r->head;
        if (r->head)
            r->head->prev = rec;
        r->head = rec;
        DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&r->cond));
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&r->mu));
}

void dlock__etcd_renewer_remove(dlock__etcd_renewer *r, dlock__etcd_renewal *rec)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&r->mu));
    int self = r->started && pthread_equal(pthread_self(), r->thread);
    while (rec->in_round && !self) {
        DLOCK__CHECK_PTHREAD(pthread_cond_wait(&r->cond, &r->mu));
    }
    if (rec->registered)
        unlink_rec(r, rec);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&r->mu));
}
