/* SPDX-License-Identifier: BSD-3-Clause */
/* What an election (election.c) and the backends' election calls
 * (backend.h: elect_read, elect_watch) share. */
#ifndef DLOCK_ELECTION_H
#define DLOCK_ELECTION_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* A look at the leader (elect_read). fence 0: nobody leads (or a holder
 * that has not written its term's value yet: not shown). value is the
 * backend's allocation (dlock__malloc), freed with dlock__leader_clear();
 * ttl_ms the leader's lease left, -1 unknown: a watch that sees no
 * message for it looks again then (a leader that died says nothing). */
typedef struct dlock__leader {
    uint64_t fence;
    int64_t ttl_ms;
    char *value;
    size_t value_len;
} dlock__leader;

void dlock__leader_clear(dlock__leader *ld);

struct dlock__elect_watch;
struct dlock__campaign;

/* An observe in progress, for dlock_election_cancel(). */
typedef struct dlock__observer {
    struct dlock__elect_watch *w;
    struct dlock__observer *next;
} dlock__observer;

struct dlock_election {
    dlock_client *client;
    dlock_lock *lock; /* the term's lock */
    char *value;      /* the value of our campaign (a copy), or NULL */
    size_t value_len;
    pthread_mutex_t mu; /* guards observers, observes and cancels */
    dlock__observer *observers;
    int observes;     /* observe calls in progress, registered or not yet */
    unsigned cancels; /* dlock_election_cancel() calls so far */
    atomic_int campaigning;
    /* A looped client's campaign or resign in flight (election_loop.c). */
    struct dlock__campaign *pending;
};

/* election.c's, for election_loop.c: a value's length (SIZE_MAX: over
 * DLOCK_ELECTION_VALUE_MAX); keep value as the campaign's (the term
 * lock's elect_value): DLOCK_OK or DLOCK_ENOMEM. */
size_t dlock__election_value_length(const char *value);
int dlock__election_keep_value(dlock_election *e, const char *value, size_t len);

/* election_loop.c's, for election.c: a free's and a cancel's part on a
 * looped client (nothing without a pending campaign or resign). */
void dlock__election_loop_free(dlock_election *e);
void dlock__election_loop_cancel(dlock_election *e);

/* An observer's wake-ups (elect_watch). The backend bumps woken under mu
 * and broadcasts cond (a monotonic one) on every message that may mean a
 * change, and on a lost link; rec is its own record. */
typedef struct dlock__elect_watch {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    unsigned woken;
    int canceled; /* dlock_election_cancel(), under mu */
    void *rec;
} dlock__elect_watch;

/* Any thread not holding w->mu: one wake-up of w's observer (woken
 * bumped, cond broadcast). */
void dlock__elect_watch_bump(dlock__elect_watch *w);

#endif
