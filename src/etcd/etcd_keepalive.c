/* SPDX-License-Identifier: BSD-3-Clause */
/* One keep-alive per session for the watchdog's renewals
 * (etcd_keepalive.h). */
#include "clock.h"
#include "common.h"
#include "etcd_keepalive.h"
#include "etcd_kv.h"
#include "etcd_request.h"
#include "etcd_session.h"

typedef dlock__etcd_ka_join join;

typedef struct dlock__etcd_keeper {
    dlock__etcd_session *s; /* one user of it while the keeper lives */
    dlock__etcd *e;
    dlock__loop *loop;
    dlock__timer send;   /* deferred: the look's other renewals join first */
    int send_armed, in_flight;
    join *waiting;       /* for the next keep-alive */
    join *riding;        /* on the one in flight */
    int64_t sent_ns;
    dlock__errbuf why;   /* what the keep-alive's reply said */
    dlock__etcd_req q;
} keeper;

static void lock(dlock__etcd_session *s)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&s->ec->mu));
}

static void unlock(dlock__etcd_session *s)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&s->ec->mu));
}

/* Each renewal in list gets the outcome (each may join again from its
 * done: a round's end may start the next round). */
static void hand_out(keeper *k, join *list, int rc, int64_t ttl_s)
{
    while (list) {
        join *j = list;
        list = j->next;
        j->next = NULL;
        j->k = NULL;
        j->rc = rc;
        j->ttl_s = ttl_s;
        j->sent_ns = k->sent_ns;
        if (rc != DLOCK_OK && j->err)
            dlock__err_set(j->err, "%s", dlock__err_str(&k->why));
        j->done(j);
    }
}

/* Nobody waits any more: the keeper goes (the session lets go of it
 * first, so a renewal joining meanwhile makes a new one). */
static int retire_if_idle(keeper *k)
{
    lock(k->s);
    int idle = !k->waiting && !k->riding && !k->in_flight && !k->send_armed;
    if (idle && k->s->keeper == k)
        k->s->keeper = NULL;
    unlock(k->s);
    return idle;
}

static void retire(keeper *k)
{
    (void)dlock__etcd_session_put(k->s); /* a tainted one lapses: etcd_session.h */
    dlock__err_free(&k->why);
    dlock__free(k);
}

static void arm(keeper *k)
{
    if (k->send_armed || k->in_flight)
        return;
    k->send_armed = 1;
    dlock__defer(k->loop, &k->send);
}

static void kept(dlock__etcd_req *q)
{
    keeper *k = DLOCK__OWNER(q, keeper, q);
    int64_t ttl_s = 0;
    int rc = q->rc;
    if (rc == DLOCK_OK) {
        rc = dlock__etcd_keepalive_reply(q->out, k->s->lease, &ttl_s, &k->why);
        json_decref(q->out);
    }
    k->in_flight = 0;
    join *list = k->riding;
    k->riding = NULL;
    if (k->waiting)
        arm(k); /* joined while this one was in flight: a keep-alive of their own */
    hand_out(k, list, rc, ttl_s);
    if (retire_if_idle(k))
        retire(k);
}

static void send_now(dlock__timer *t)
{
    keeper *k = DLOCK__OWNER(t, keeper, send);
    k->send_armed = 0;
    if (!k->waiting) { /* all left */
        if (retire_if_idle(k))
            retire(k);
        return;
    }
    k->riding = k->waiting;
    k->waiting = NULL;
    int64_t deadline = INT64_MIN;
    for (join *j = k->riding; j; j = j->next)
        deadline = DLOCK__MAX(deadline, j->deadline_ns);
    dlock__err_clear(&k->why);
    k->q.err = &k->why;
    k->q.done = kept;
    /* From now, not from the renewals' starts: etcd counts the TTL from
     * its receipt, which is later still. */
    k->sent_ns = dlock__now_ns();
    k->in_flight = 1;
    if (dlock__etcd_req_post(&k->q, k->e, k->loop, "/v3/lease/keepalive",
                             dlock__etcd_keepalive_body(k->s->lease), deadline) != DLOCK_OK) {
        k->in_flight = 0;
        join *list = k->riding;
        k->riding = NULL;
        hand_out(k, list, DLOCK_ENOMEM, 0);
        if (retire_if_idle(k))
            retire(k);
    }
}

int dlock__etcd_keepalive_join(join *j, dlock__etcd_session *s, dlock__etcd *e, dlock__loop *loop)
{
    keeper *fresh = NULL;
    lock(s);
    keeper *k = s->keeper;
    if (!k) {
        /* allocated under mu: rare (once per keep-alive at most) and small */
        if (!(fresh = dlock__calloc(1, sizeof *fresh))) {
            unlock(s);
            return DLOCK_ENOMEM;
        }
        *fresh = (keeper){.s = s, .e = e, .loop = loop};
        fresh->send.fire = send_now;
        s->refs++; /* the keeper's use of the session */
        s->keeper = k = fresh;
    }
    unlock(s);
    if (k->loop != loop)
        return DLOCK_EINVAL;
    j->k = k;
    j->next = k->waiting;
    k->waiting = j;
    arm(k);
    return DLOCK_OK;
}

static int unlink_from(join **list, join *j)
{
    for (join **p = list; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            j->next = NULL;
            return 1;
        }
    return 0;
}

void dlock__etcd_keepalive_leave(join *j)
{
    keeper *k = j->k;
    if (!k)
        return;
    j->k = NULL;
    if (!unlink_from(&k->waiting, j))
        (void)unlink_from(&k->riding, j);
    /* The keep-alive in flight, if any, goes on (its answer finds the
     * keeper with nobody on it); an armed send finds nobody to send for. */
}

void dlock__etcd_keeper_forget(keeper *k)
{
    dlock__err_free(&k->why);
    dlock__free(k);
}
