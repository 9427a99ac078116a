/* SPDX-License-Identifier: BSD-3-Clause */
/* Redis Cluster (cluster.h): learning the slot map. The masters known and
 * the seeds are asked for CLUSTER SLOTS healthy ones first, in an order that
 * rotates, and staggered: the first node asked answers alone for
 * DLOCK__CLUSTER_ASK_MS, then the next is asked as well, and so on, each
 * keeping its whole connect timeout; the first answer wins. A stalled master
 * asked first so costs a relearn DLOCK__CLUSTER_ASK_MS, not its timeout,
 * and a cluster whose every node is slower than that (a distant or busy
 * one) still answers (review 34 item 1: a hard per-node cap of
 * DLOCK__CLUSTER_ASK_MS made such a cluster unusable). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "common.h"
#include "error.h"
#include "cluster.h"

#define MAX_CANDIDATES (DLOCK__CLUSTER_MAX_MASTERS + DLOCK__CLUSTER_MAX_SEEDS)

/* One node that may be asked for the map: a master known or a seed. */
typedef struct candidate {
    char host[256];
    int port;
    int master; /* master index, or -1 */
    int seed;   /* seed index, or -1 */
    int64_t failed_ns;
    /* While asked: */
    dlock__conn *conn;
    int64_t asked_ns, until_ns;
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

/* Done with node k (answered or not). */
static void drop(candidate *k)
{
    dlock__conn_free(k->conn);
    k->conn = NULL;
}

/* Node k failed to answer (why in k->conn->err): the reason into err,
 * and it is asked last next time. Returns the code learn() reports if no
 * node answers. */
static int failed(dlock__cluster *c, candidate *k, int got, char *err, size_t err_len)
{
    snprintf(err, err_len, "%s:%d: %s", k->host, k->port, k->conn->err);
    note_asked(c, k, 0);
    drop(k);
    return got == DLOCK_EAUTH || got == DLOCK_ETLS ? got : DLOCK_EIO;
}

/* Node k answered r: the map, or why not. */
static int answered(dlock__cluster *c, candidate *k, redisReply *r, char *err, size_t err_len)
{
    int rc;
    if (r->type == REDIS_REPLY_ERROR) {
        /* "ERR This instance has cluster support disabled" */
        snprintf(err, err_len, "%s:%d: CLUSTER SLOTS: %.120s", k->host, k->port, r->str);
        rc = dlock__map_redis_error(r->str, r->len);
    } else if ((rc = dlock__cluster_apply_slots(c, r, k->host)) != DLOCK_OK) {
        snprintf(err, err_len, "%s:%d: unexpected CLUSTER SLOTS reply", k->host, k->port);
    }
    if (rc != DLOCK_ENOMEM)
        note_asked(c, k, 1);
    freeReplyObject(r);
    drop(k);
    return rc;
}

/* Ask node k: connect and queue CLUSTER SLOTS. DLOCK_OK (asked), or the
 * code of a failure (DLOCK_ENOMEM, or the node failed at once). */
static int ask(dlock__cluster *c, const dlock__url *tmpl, dlock__tls_ctx *tls, candidate *k,
               int64_t now, char *err, size_t err_len)
{
    k->conn = dlock__cluster_connect_to(tmpl, tls, k->host, k->port, 0, 0);
    if (!k->conn)
        return DLOCK_ENOMEM;
    k->asked_ns = now;
    k->until_ns = now + (int64_t)c->timeout_ms * DLOCK__NS_PER_MS;
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    int rc = k->conn->state == DLOCK__CS_BROKEN ? DLOCK_EIO
                                                  : dlock__conn_append(k->conn, 2, argv, NULL, 0);
    if (rc == DLOCK_ENOMEM) {
        drop(k);
        return rc;
    }
    return rc == DLOCK_OK ? DLOCK_OK : failed(c, k, rc, err, err_len);
}

/* Node k's socket is ready (revents) or its time is up: 1 when it is done
 * with *rc set (DLOCK_OK: the map is learned), else 0. */
static int step(dlock__cluster *c, candidate *k, short revents, int64_t now, int *rc, char *err,
                size_t err_len)
{
    int got = revents ? dlock__conn_io(k->conn, revents) : DLOCK_OK;
    if (got == DLOCK_OK) {
        redisReply *r = NULL;
        uint32_t idx;
        got = dlock__conn_take(k->conn, &r, &idx);
        if (got > 0) {
            *rc = answered(c, k, r, err, err_len);
            return 1;
        }
        if (got == 0 && k->conn->state != DLOCK__CS_BROKEN && !dlock__conn_events(k->conn))
            got = dlock__conn_fail(k->conn, DLOCK_EIO, "connection failed");
        else if (got == 0 && now >= k->until_ns)
            got = dlock__conn_fail(k->conn, DLOCK_EIO, "%s timed out", dlock__conn_phase(k->conn));
    }
    if (got >= 0 && k->conn->state != DLOCK__CS_BROKEN)
        return 0;
    *rc = failed(c, k, got < 0 ? got : DLOCK_EIO, err, err_len);
    return 1;
}

/* Whether a byte is waiting on fd (a cancel). */
static int readable(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

/* Ask cand[0..n) staggered until one answers (the comment at the top). */
static int ask_all(dlock__cluster *c, const dlock__url *tmpl, dlock__tls_ctx *tls,
                   candidate *cand, size_t n, int cancel_fd, int64_t deadline_ns, char *err,
                   size_t err_len)
{
    int64_t stagger_ns = (int64_t)DLOCK__MIN(c->timeout_ms, DLOCK__CLUSTER_ASK_MS) *
                         DLOCK__NS_PER_MS;
    struct pollfd pfd[MAX_CANDIDATES + 1];
    size_t pidx[MAX_CANDIDATES];
    size_t next = 0; /* the next node to ask */
    int64_t next_ns = dlock__now_ns();
    int rc = DLOCK_EIO;
    snprintf(err, err_len, "no cluster node answered CLUSTER SLOTS");
    for (;;) {
        int64_t now = dlock__now_ns();
        if (now >= deadline_ns) {
            snprintf(err, err_len, "no cluster node answered CLUSTER SLOTS in time");
            return DLOCK_EIO;
        }
        size_t k = 0;
        for (size_t i = 0; i < next; i++)
            k += cand[i].conn != NULL;
        /* The next node is asked when its turn comes, or at once when
         * every node asked so far has failed. */
        while (next < n && (now >= next_ns || k == 0)) {
            int got = ask(c, tmpl, tls, &cand[next], now, err, err_len);
            if (got == DLOCK_ENOMEM)
                return got;
            if (got == DLOCK_OK) {
                k++;
                next_ns = now + stagger_ns;
            } else {
                rc = got;
            }
            next++;
        }
        if (k == 0)
            return rc; /* every node failed */
        int64_t wake = next < n ? next_ns : INT64_MAX;
        k = 0;
        for (size_t i = 0; i < next; i++) {
            if (!cand[i].conn)
                continue;
            pfd[k] = (struct pollfd){cand[i].conn->ctx->fd, dlock__conn_events(cand[i].conn), 0};
            pidx[k++] = i;
            wake = DLOCK__MIN(wake, cand[i].until_ns);
        }
        wake = DLOCK__MIN(wake, deadline_ns);
        size_t kc = k;
        if (cancel_fd >= 0)
            pfd[kc++] = (struct pollfd){cancel_fd, POLLIN, 0};
        int pr = poll(pfd, (nfds_t)kc, dlock__ms_until(wake));
        if (pr < 0 && errno != EINTR) {
            snprintf(err, err_len, "poll: %s", strerror(errno));
            return DLOCK_EIO;
        }
        if (pr > 0 && kc > k && pfd[k].revents) {
            snprintf(err, err_len, "cancelled while learning the cluster's slot map");
            return DLOCK_ECANCELED;
        }
        now = dlock__now_ns();
        for (size_t m = 0; m < k; m++) {
            short rev = pr > 0 ? pfd[m].revents : 0;
            if (!step(c, &cand[pidx[m]], rev, now, &rc, err, err_len))
                continue;
            if (rc == DLOCK_OK || rc == DLOCK_ENOMEM)
                return rc;
        }
    }
}

int dlock__cluster_learn(dlock__cluster *c, const dlock__url *tmpl, dlock__tls_ctx *tls,
                         int cancel_fd, int64_t deadline_ns, char *err, size_t err_len)
{
    if (readable(cancel_fd)) {
        snprintf(err, err_len, "cancelled before the cluster's slot map was learned");
        return DLOCK_ECANCELED;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->refresh_mu));
    candidate *cand = dlock__calloc(MAX_CANDIDATES, sizeof *cand);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&c->mu));
    int stale = c->stale; /* another thread may have learned it meanwhile */
    size_t n = cand && stale ? candidates(c, cand) : 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->mu));
    int rc = DLOCK_OK;
    if (!cand) {
        rc = DLOCK_ENOMEM;
        snprintf(err, err_len, "out of memory");
    } else if (stale) {
        rc = ask_all(c, tmpl, tls, cand, n, cancel_fd, deadline_ns, err, err_len);
        if (rc == DLOCK_ENOMEM)
            snprintf(err, err_len, "out of memory");
        int64_t now = dlock__now_ns();
        for (size_t i = 0; i < n; i++) {
            if (!cand[i].conn)
                continue;
            /* Still silent after its time alone while another node
             * answered: asked after the quicker ones next time. A node cut
             * short by a cancel or the deadline is not judged. */
            if (rc == DLOCK_OK && now - cand[i].asked_ns >= (int64_t)DLOCK__MIN(
                                                               c->timeout_ms,
                                                               DLOCK__CLUSTER_ASK_MS) *
                                                               DLOCK__NS_PER_MS)
                note_asked(c, &cand[i], 0);
            drop(&cand[i]);
        }
    }
    dlock__free(cand);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&c->refresh_mu));
    return rc;
}
