/* SPDX-License-Identifier: BSD-3-Clause */
/* What an election (election.c) and the backends' election calls
 * (backend.h: elect_read, elect_watch) share. */
#ifndef DLOCK_ELECTION_H
#define DLOCK_ELECTION_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
