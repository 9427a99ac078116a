/* SPDX-License-Identifier: BSD-3-Clause */
/* Redis Cluster (cluster.h): learning the slot map, a sub-request on the
 * loop of the request that needs it. The masters known and
 * the seeds are asked for CLUSTER SLOTS healthy ones first, in an order that
 * rotates, and staggered: the first node asked answers alone for
 * DLOCK__CLUSTER_ASK_MS, then the next is asked as well, and so on, each
 * keeping its whole connect timeout; the first answer wins. A stalled master
 * asked first so costs a relearn DLOCK__CLUSTER_ASK_MS, not its timeout,
 * and a cluster whose every node is slower than that (a distant or busy
 * one) still answers (review 34 item 1: a hard per-node cap of
 * DLOCK__CLUSTER_ASK_MS made such a cluster unusable). */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "common.h"
#include "error.h"
#include "exchange.h"
#include "cluster.h"
#include "stats.h"

#define MAX_CANDIDATES (DLOCK__CLUSTER_MAX_MASTERS + DLOCK__CLUSTER_MAX_SEEDS)

/* One node that may be asked for the map: a master known or a seed. */
typedef struct candidate {
    char host[256];
    int port;
    int master; /* master index, or -1 */
    int seed;   /* seed index, or -1 */
    int64_t failed_ns;
    /* While asked: */
    int asking;
    int64_t asked_ns;
    dlock__exchange x; /* CLUSTER SLOTS, on the learning's loop */
    struct dlock__cluster_learning *learning;
} candidate;

/* The nodes to ask, each address once: masters known and seeds, starting
 * at a place that moves on with every relearn (so no one node takes every
 * question), those that failed last (a stalled or dead master) at the end.
 * Under c->mu. Returns how many. */
static size_t candidates(dlock__cluster *c, candidate *out)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_masters; i++) {
        candidate *k = &out[n++];
        memcpy(k->host, c->master[i].host, sizeof k->host);
        k->port = c->master[i].port;
        k->master = (int)i;
        k->seed = -1;
        k->failed_ns = c->master[i].failed_ns;
    }
    for (size_t j = 0; j < c->n_seeds; j++) {
        size_t i = 0;
        while (i < n && !(out[i].port == c->seed[j].port && !strcmp(out[i].host, c->seed[j].host)))
            i++;
        if (i < n) { /* a seed that is a known master: asked once */
            out[i].seed = (int)j;
            if (c->seed_failed_ns[j] > out[i].failed_ns)
                out[i].failed_ns = c->seed_failed_ns[j];
            continue;
        }
        if (strlen(c->seed[j].host) >= sizeof out[n].host)
            continue;
        candidate *k = &out[n++];
        snprintf(k->host, sizeof k->host, "%s", c->seed[j].host);
        k->port = c->seed[j].port;
        k->master = -1;
        k->seed = (int)j;
        k->failed_ns = c->seed_failed_ns[j];
    }
    if (n == 0)
        return 0;
    /* Rotate, then move the failed ones to the end, keeping the order. */
    size_t first = c->next_ask++ % n;
    candidate *tmp = dlock__malloc(n * sizeof *tmp);
    if (!tmp)
        return n; /* unrotated: still every node, healthy or not */
    size_t m = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            const candidate *k = &out[(first + i) % n];
            if ((k->failed_ns != 0) == pass)
                tmp[m++] = *k;
        }
    memcpy(out, tmp, n * sizeof *tmp);
    dlock__free(tmp);
    return n;
}

/* Note how a node asked for the map did: failed_ns set (asked last next
 * time) or cleared. */
static void note_asked(dlock__cluster *c, const candidate *k, int answered)
{
    int64_t t = answered ? 0 : dlock__now_ns();
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    /* The entry may have been reused for another address meanwhile. */
    if (k->master >= 0 && c->master[k->master].port == k->port &&
        !strcmp(c->master[k->master].host, k->host))
        c->master[k->master].failed_ns = t;
    if (k->seed >= 0)
        c->seed_failed_ns[k->seed] = t;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
}


struct dlock__cluster_learning {
    dlock__cluster *c;
    const dlock__url *tmpl;
    dlock__tls_ctx *tls;
    dlock__loop *loop;
    int64_t stagger_ns;
    int64_t next_ns; /* when the next node is asked */
    size_t n, next;  /* candidates, and the next one to ask */
    size_t asking;   /* asked and not done */
    int rc;          /* what is reported if no node answers */
    int finished;
    char err[512];
    dlock__timer kick;     /* the first ask (deferred), then the stagger */
    dlock__timer deadline; /* the request's deadline */
    void (*done)(void *arg, int rc, const char *err);
    void *arg;
    candidate cand[MAX_CANDIDATES];
};

typedef struct dlock__cluster_learning learning;

/* Done with node k (answered or not). */
static void drop(candidate *k)
{
    if (!k->asking)
        return;
    k->asking = 0;
    k->learning->asking--;
    dlock__exchange_stop(&k->x);
}

/* Node k failed to answer (why in its connection's err): the reason into
 * err, and it is asked last next time. Returns the code the learning
 * reports if no node answers. */
static int failed(learning *L, candidate *k, int got)
{
    snprintf(L->err, sizeof L->err, "%s:%d: %s", k->host, k->port, k->x.conn->err);
    note_asked(L->c, k, 0);
    drop(k);
    return got == DLOCK_EAUTH || got == DLOCK_ETLS ? got : DLOCK_EIO;
}

/* A map learned again (not the client's first): a topology change for the
 * observer, named by the node that answered. */
static void relearned(learning *L, const candidate *k)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&L->c->mu));
    int again = L->c->refreshes > 1;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&L->c->mu));
    if (!again || !L->c->obs)
        return;
    char name[300];
    snprintf(name, sizeof name, "%s:%d", k->host, k->port);
    dlock__stats_topology(L->c->obs, DLOCK_NODE_SLOTS_RELEARNED, name);
}

/* Node k answered r: the map, or why not. */
static int answered(learning *L, candidate *k, redisReply *r)
{
    int rc;
    if (r->type == REDIS_REPLY_ERROR) {
        /* "ERR This instance has cluster support disabled" */
        snprintf(L->err, sizeof L->err, "%s:%d: CLUSTER SLOTS: %.120s", k->host, k->port, r->str);
        rc = dlock__map_redis_error(r->str, r->len);
    } else if ((rc = dlock__cluster_apply_slots(L->c, r, k->host)) != DLOCK_OK) {
        snprintf(L->err, sizeof L->err, "%s:%d: unexpected CLUSTER SLOTS reply", k->host,
                 k->port);
    } else {
        relearned(L, k);
    }
    if (rc != DLOCK_ENOMEM)
        note_asked(L->c, k, 1);
    freeReplyObject(r);
    drop(k);
    return rc;
}

/* The learning ends with rc: the nodes still asked are dropped, then the
 * callback (from the loop: every caller is a loop callback). */
static void finish(learning *L, int rc)
{
    int64_t now = dlock__now_ns();
    L->finished = 1;
    dlock__timer_clear(L->loop, &L->kick);
    dlock__timer_clear(L->loop, &L->deadline);
    if (rc == DLOCK_ENOMEM)
        snprintf(L->err, sizeof L->err, "out of memory");
    for (size_t i = 0; i < L->next; i++) {
        candidate *k = &L->cand[i];
        /* Still silent after its time alone while another node answered:
         * asked after the quicker ones next time. A node cut short by a
         * failure or the deadline is not judged. */
        if (k->asking && rc == DLOCK_OK && now - k->asked_ns >= L->stagger_ns)
            note_asked(L->c, k, 0);
        drop(k);
    }
    L->done(L->arg, rc, L->err);
}

static void on_answer(dlock__exchange *x, int got, redisReply *r);

/* Ask node k: connect and send CLUSTER SLOTS. 1 when asked, 0 when the
 * node failed at once (L->rc set), -1 when the loop has no room now (ask
 * it later), or DLOCK_ENOMEM. */
static int ask(learning *L, candidate *k, int64_t now)
{
    dlock__conn *conn = dlock__cluster_connect_to(L->tmpl, L->tls, k->host, k->port, 0, 0);
    if (!conn)
        return DLOCK_ENOMEM;
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    k->learning = L;
    k->asked_ns = now;
    k->asking = 1;
    L->asking++;
    k->x.done = on_answer;
    int64_t until = now + (int64_t)L->c->timeout_ms * DLOCK__NS_PER_MS;
    int rc = dlock__exchange_start(&k->x, L->loop, conn, 2, argv, until);
    if (rc == DLOCK_OK)
        return 1;
    if (rc == DLOCK_ENOMEM) {
        drop(k);
        return L->asking > 0 ? -1 : DLOCK_ENOMEM;
    }
    L->rc = failed(L, k, rc);
    return 0;
}

/* Ask the nodes whose turn came, or the next at once when every node
 * asked so far has failed; then the learning waits, or fails if nobody is
 * left to ask. */
static void ask_due(learning *L)
{
    int64_t now = dlock__now_ns();
    if (now >= L->deadline.due_ns) {
        snprintf(L->err, sizeof L->err, "no cluster node answered CLUSTER SLOTS in time");
        finish(L, DLOCK_EIO);
        return;
    }
    while (L->next < L->n && (now >= L->next_ns || L->asking == 0)) {
        int got = ask(L, &L->cand[L->next], now);
        if (got == DLOCK_ENOMEM) {
            finish(L, got);
            return;
        }
        if (got < 0) { /* no room in the loop: when the next is due */
            L->next_ns = now + L->stagger_ns;
            break;
        }
        if (got == 1)
            L->next_ns = now + L->stagger_ns;
        L->next++;
    }
    if (L->asking == 0) {
        finish(L, L->rc); /* every node failed */
        return;
    }
    if (L->next < L->n) {
        L->kick.due_ns = L->next_ns;
        (void)dlock__timer_set(L->loop, &L->kick);
    }
}

static void on_answer(dlock__exchange *x, int got, redisReply *r)
{
    candidate *k = DLOCK__OWNER(x, candidate, x);
    learning *L = k->learning;
    int rc = got > 0 ? answered(L, k, r) : failed(L, k, got);
    if (rc == DLOCK_OK || rc == DLOCK_ENOMEM) {
        finish(L, rc);
        return;
    }
    L->rc = rc;
    ask_due(L);
}

static void kick(dlock__timer *t)
{
    ask_due(DLOCK__OWNER(t, learning, kick));
}

static void deadline(dlock__timer *t)
{
    learning *L = DLOCK__OWNER(t, learning, deadline);
    snprintf(L->err, sizeof L->err, "no cluster node answered CLUSTER SLOTS in time");
    finish(L, DLOCK_EIO);
}

int dlock__cluster_learn_start(dlock__cluster_learning **out, dlock__cluster *c,
                               const dlock__url *tmpl, dlock__tls_ctx *tls, dlock__loop *l,
                               int64_t deadline_ns,
                               void (*done)(void *arg, int rc, const char *err), void *arg)
{
    learning *L = dlock__calloc(1, sizeof *L);
    *out = L;
    if (!L)
        return DLOCK_ENOMEM;
    L->c = c;
    L->tmpl = tmpl;
    L->tls = tls;
    L->loop = l;
    L->done = done;
    L->arg = arg;
    L->rc = DLOCK_EIO;
    L->stagger_ns = (int64_t)DLOCK__MIN(c->timeout_ms, DLOCK__CLUSTER_ASK_MS) * DLOCK__NS_PER_MS;
    snprintf(L->err, sizeof L->err, "no cluster node answered CLUSTER SLOTS");
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    L->n = candidates(c, L->cand);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
    L->kick.fire = kick;
    L->deadline.fire = deadline;
    L->deadline.due_ns = deadline_ns;
    if (deadline_ns != INT64_MAX)
        (void)dlock__timer_set(l, &L->deadline);
    dlock__defer(l, &L->kick); /* the first question, from the loop */
    return DLOCK_OK;
}

void dlock__cluster_learn_stop(dlock__cluster_learning *L)
{
    if (!L)
        return;
    if (!L->finished) {
        dlock__timer_clear(L->loop, &L->kick);
        dlock__timer_clear(L->loop, &L->deadline);
        for (size_t i = 0; i < L->next; i++)
            drop(&L->cand[i]);
    }
    dlock__free(L);
}
