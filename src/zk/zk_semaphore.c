/* SPDX-License-Identifier: BSD-3-Clause */
/* A semaphore on ZooKeeper: Curator's InterProcessSemaphoreV2, so that a
 * Curator client and dlock share one. Under the lock's path:
 *
 *   locks/_c_<uuid>-lock-<seq>    an InterProcessMutex line: one waiter
 *                                 at a time goes on to a lease
 *   leases/_c_<uuid>-lease-<seq>  one node per lease, taken or asked for
 *
 * The waiter first in the locks line (zk_wait.c: the mutex's begin and
 * looks, in d->line) creates its lease node, then reads the leases with a
 * watch on them: at most N (its own among them), the lease is its hold
 * and it leaves the locks line; more, it sleeps until a lease goes (the
 * watch) and reads them again. So a lease is the N first nodes' only in
 * the sense Curator's is: the count includes every lease asked for, and
 * the one waiter that may ask is the locks line's first. The lease node
 * is the hold's node (extend, renewal, release: zk_backend.c); leases
 * hold no fence. */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "engine.h"
#include "handle.h"
#include "kinds.h"
#include "rand.h"
#include "zk_lock.h"

#define LD DLOCK__ZK_LD

/* Read the leases again at least this often (a watch lost with a
 * connection that came back late). */
#define RECHECK_MS 2000

enum {
    SEM_PARENTS = DLOCK__ZK_SEM_STEP, /* the leases' parent made */
    SEM_CREATE,                       /* our lease node */
    SEM_COUNT,                        /* the leases read, watched */
    SEM_UNLOCK,                       /* granted: our node in the locks line goes */
    SEM_GIVE_UP,                      /* a try-once's or a leave's lease goes */
    SEM_LEAVE
};

static int leases_path(const dlock_lock *l, char *out)
{
    return dlock__zk_path_set(out, LD(l)->path, "/leases");
}

/* Our lease node: Curator's protected name for a lease. */
static int create_lease(dlock_lock *l)
{
    char hex[33], name[DLOCK__ZK_PATH_MAX];
    if (dlock__token_hex(hex) != DLOCK_OK || !leases_path(l, name))
        return DLOCK_EIO;
    char tail[64];
    snprintf(tail, sizeof tail, "/_c_%.8s-%.4s-4%.3s-a%.3s-%.12s-lease-", hex, hex + 8, hex + 12,
             hex + 15, hex + 18);
    if (!dlock__zk_path_set(name, name, tail))
        return DLOCK_EINVAL;
    return dlock__zk_wait_call(l, SEM_CREATE, DLOCK__ZK_CREATE, name);
}

static int count_leases(dlock_lock *l)
{
    dlock__zk_lockdata *d = LD(l);
    char path[DLOCK__ZK_PATH_MAX];
    (void)leases_path(l, path);
    dlock__zk_watch_drop(d->z, d->watch);
    d->watch = dlock__zk_watch_new(d->z, d->op->loop, dlock__zk_wait_woken, l);
    d->call.watch = d->watch;
    if (!d->watch)
        return DLOCK_ENOMEM;
    return dlock__zk_wait_call(l, SEM_COUNT, DLOCK__ZK_WATCH_CHILDREN, path);
}

void dlock__zk_sem_first(dlock_lock *l)
{
    int rc = LD(l)->lease[0] ? count_leases(l) : create_lease(l);
    if (rc != DLOCK_OK)
        dlock__zk_wait_answer(l, rc == DLOCK_ENOMEM ? rc : DLOCK_EIO,
                              DLOCK__V_RETRY | DLOCK__V_QUEUED, 0);
}

static void lease_created(dlock_lock *l, dlock__zk_call *c)
{
    dlock__zk_lockdata *d = LD(l);
    if (c->zrc == ZNONODE && !d->parents_made) { /* no leases node yet */
        char path[DLOCK__ZK_PATH_MAX];
        d->parents_made = 1;
        (void)leases_path(l, path);
        if (dlock__zk_wait_call(l, SEM_PARENTS, DLOCK__ZK_PARENTS, path) != DLOCK_OK)
            dlock__zk_wait_answer(l, DLOCK_EIO, DLOCK__V_RETRY | DLOCK__V_QUEUED, 0);
        return;
    }
    if (c->zrc != ZOK) {
        if (c->zrc == ZCONNECTIONLOSS || c->zrc == ZOPERATIONTIMEOUT)
            (void)dlock__zk_path_set(d->lost, c->path, NULL); /* zk_lock.h, lost */
        dlock__zk_wait_failed(l, c->zrc);
        return;
    }
    (void)dlock__zk_path_set(d->lease, c->created, NULL);
    d->lease_czxid = c->stat.czxid;
    d->lease_owner = c->stat.ephemeralOwner;
    if (count_leases(l) != DLOCK_OK)
        dlock__zk_wait_answer(l, DLOCK_EIO, DLOCK__V_RETRY | DLOCK__V_QUEUED, 0);
}

/* The leases read: ours among at most N, granted (once our locks node
 * went); else a try-once gives both nodes back, a waiter sleeps. */
static void counted(dlock_lock *l, dlock__zk_call *c)
{
    dlock__zk_lockdata *d = LD(l);
    if (c->zrc != ZOK) {
        dlock__zk_wait_failed(l, c->zrc);
        return;
    }
    const char *ours = strrchr(d->lease, '/') + 1;
    int found = 0;
    for (size_t i = 0; i < c->n_children; i++)
        found |= strcmp(c->children[i], ours) == 0;
    if (!found) { /* gone with our session: the next look asks again */
        d->lease[0] = '\0';
        dlock__zk_wait_answer(l, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY | DLOCK__V_QUEUED, 0);
        return;
    }
    if (c->n_children <= l->permits) {
        if (dlock__zk_wait_call(l, SEM_UNLOCK, DLOCK__ZK_DELETE, d->node) != DLOCK_OK)
            dlock__zk_wait_answer(l, DLOCK_EIO, DLOCK__V_RETRY | DLOCK__V_QUEUED, 0);
        return;
    }
    if (l->try_once) {
        dlock__err_set(&l->err, "all %u permits are taken", l->permits);
        if (!dlock__zk_sem_leave(l, 1))
            dlock__zk_wait_give_up(l);
        return;
    }
    dlock__zk_wait_answer(l, DLOCK_ENOTACQUIRED, DLOCK__V_RETRY | DLOCK__V_QUEUED, RECHECK_MS);
}

/* Out of the locks line with a lease: the lease node is the hold. */
static void granted(dlock_lock *l, dlock__zk_call *c)
{
    dlock__zk_lockdata *d = LD(l);
    if (c->zrc != ZOK && c->zrc != ZNONODE)
        (void)dlock__zk_path_set(d->owed, d->node, NULL); /* the next create deletes it */
    (void)dlock__zk_path_set(d->node, d->lease, NULL);
    d->lease[0] = '\0';
    d->czxid = d->lease_czxid;
    d->owner_session = d->lease_owner;
    const char *name = strrchr(d->node, '/') + 1;
    memcpy(l->token_inline, name, strlen(name) + 1);
    l->token = l->token_inline;
    l->token_len = strlen(l->token_inline);
    l->fence = 0; /* leases hold no fence */
    l->holds = 1;
    dlock__lock_granted(l, c->sent_ns + dlock__zk_session_ms(d->z) * DLOCK__NS_PER_MS);
    dlock__zk_wait_answer(l, DLOCK_OK, 0, -1);
}

int dlock__zk_sem_leave(dlock_lock *l, int refuse)
{
    dlock__zk_lockdata *d = LD(l);
    return d->lease[0] &&
           dlock__zk_wait_call(l, refuse ? SEM_GIVE_UP : SEM_LEAVE, DLOCK__ZK_DELETE,
                               d->lease) == DLOCK_OK;
}

void dlock__zk_sem_done(dlock_lock *l, dlock__zk_call *c)
{
    dlock__zk_lockdata *d = LD(l);
    switch (d->step) {
    case SEM_PARENTS:
        if (c->zrc != ZOK)
            dlock__zk_wait_failed(l, c->zrc);
        else if (create_lease(l) != DLOCK_OK)
            dlock__zk_wait_answer(l, DLOCK_EIO, DLOCK__V_RETRY | DLOCK__V_QUEUED, 0);
        break;
    case SEM_CREATE:
        lease_created(l, c);
        break;
    case SEM_COUNT:
        counted(l, c);
        break;
    case SEM_UNLOCK:
        granted(l, c);
        break;
    default: /* SEM_GIVE_UP, SEM_LEAVE: the lease goes, or is owed */
        if (c->zrc != ZOK && c->zrc != ZNONODE && c->zrc != ZINVALIDSTATE &&
            c->zrc != ZSESSIONEXPIRED && !d->owed[0])
            (void)dlock__zk_path_set(d->owed, d->lease, NULL);
        d->lease[0] = '\0';
        if (d->step == SEM_GIVE_UP && d->node[0]) {
            dlock__zk_wait_give_up(l); /* then our node in the locks line */
        } else if (d->step == SEM_GIVE_UP) {
            dlock__zk_wait_answer(l, DLOCK_ENOTACQUIRED, 0, -1);
        } else {
            d->step = 0;
            dlock__op_complete(d->op);
        }
    }
}
