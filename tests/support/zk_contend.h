/* SPDX-License-Identifier: BSD-3-Clause */
/* Test harness for the ZooKeeper tests: dlock clients that contend for one
 * lock or semaphore on threads of their own, each section noted in a chaos
 * history (tests/chaos/history.h), and the history's verdict. Nothing here
 * asserts (the contenders run off the main thread): errors are counted
 * and said on stderr. */
#ifndef DLOCK_TEST_ZK_CONTEND_H
#define DLOCK_TEST_ZK_CONTEND_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <stdatomic.h>

#include "dlock.h"
#include "history.h"

typedef struct zk_contender {
    /* The caller's. */
    const char *url;    /* a client of its own on this URL */
    const char *name;
    unsigned flags;     /* the lock's (DLOCK_SHARED, DLOCK_REENTRANT, ...) */
    unsigned permits;   /* a semaphore's N (0: a lock) */
    int rounds;
    int hold_ms;        /* each section (5 if 0) */
    int reentries;      /* re-entries in each section (reentrant kinds) */
    /* zk_contend_start()'s and the thread's. */
    int slot, fd;
    pthread_t thread;
    int errors;         /* failed acquires, re-entries and releases */
    atomic_int entered; /* sections entered so far */
} zk_contender;

/* A lock (permits 0, with flags) or a semaphore of `permits` on c, or NULL. */
dlock_lock *zk_test_lock(dlock_client *c, const char *name, unsigned flags, unsigned permits);

/* Start k[0..n) (slots 0..n-1) noting into history fd: 0, or -1. */
int zk_contend_start(zk_contender *k, int n, int fd);

/* Join them: their errors, summed. */
int zk_contend_join(zk_contender *k, int n);

/* A new history file in $TMPDIR named after stem (its path in path): its
 * fd for appending, or -1. */
int zk_history_new(char *path, size_t cap, const char *stem);

/* Check the history at path (then removed), print its figures: 0, or -1. */
int zk_history_verdict(const char *path, chaos_verdict *v);

/* A holder in a child process (forked: call it before the test makes a
 * thread): a client of its own on url takes lock name and keeps it, with
 * no release and no close, until the child is killed (by *pid). The
 * hold's fence, or 0 when the child did not get the lock. */
uint64_t zk_hold_in_child(const char *url, const char *name, pid_t *pid);

#endif
