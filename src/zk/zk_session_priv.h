/* SPDX-License-Identifier: BSD-3-Clause */
/* What zk_session.c (the session and its thread) and zk_call.c (its calls
 * and watches) share: the records, the drive of the C client, the watch's
 * reference count. Nothing else includes it. */
#ifndef DLOCK_ZK_SESSION_PRIV_H
#define DLOCK_ZK_SESSION_PRIV_H

#include <pthread.h>
#include <stdint.h>
#include <zookeeper/zookeeper.h>

#include "loop.h"
#include "loop_thread.h"
#include "zk_url.h"

struct dlock__zk_watch {
    struct dlock__zk *z;
    void (*fired)(void *arg); /* set and cleared on loop, under z->mu; NULL once dropped */
    void *arg;
    /* The hop to the waiter's loop: the session thread writes efd (under
     * z->mu, while fired is set), io runs fired there. */
    dlock__loop *loop;
    int efd;
    dlock__io io;
    zhandle_t *zh;      /* the handle it was set on (NULL: not set yet) */
    int refs;           /* the caller's, and the handle's while set: under z->mu */
    struct dlock__zk_watch *next; /* z->watches */
};

struct dlock__zk {
    dlock__zk_url url;
    dlock__loop_thread lt;
    /* The session thread's only. */
    zhandle_t *zh;
    dlock__io io;
    dlock__timer timer;
    dlock__post kick;   /* the first drive */
    dlock__post closer; /* the last: the handle's close (closing) */
    int expired;      /* the session expired: a new one at the next drive */
    int closed;       /* under mu: the handle's close ran (closing) */
    /* Under mu: what other threads read, and the watches. */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int state; /* ZOO_CONNECTED_STATE, ..., as the watcher last saw it */
    int64_t session_ms;
    clientid_t id; /* the session's, as the server gave it at the last connect */
    struct dlock__zk_watch *watches;
};

/* On the session thread, under the library mutex, after every event: an
 * expired session is replaced, then the io record and the timer follow
 * what the C client wants now. */
void dlock__zk_drive(struct dlock__zk *z);
/* A watch the handle or the C client no longer holds: one reference goes,
 * the record with the last. Under z->mu. */
void dlock__zk_watch_unref_locked(struct dlock__zk *z, struct dlock__zk_watch *w);

#endif
