/* SPDX-License-Identifier: BSD-3-Clause */
/* The chaos history: an append-only file of fixed-size records that worker
 * processes and the fault driver write (one write(2) per record, O_APPEND),
 * and the checker that reads it back and counts what went wrong.
 *
 * All times come from CLOCK_MONOTONIC on one host, so records written by
 * different processes compare directly. A critical section is the interval
 * from its ENTER record (time taken after the acquire returned) to its EXIT
 * record (time taken before the release was sent), or to the KILLED record
 * the driver writes after it reaped a worker killed mid-section. Each
 * interval therefore lies inside the time the worker believed it held the
 * lock; two intervals that overlap are a violation of mutual exclusion. */
#ifndef DLOCK_CHAOS_HISTORY_H
#define DLOCK_CHAOS_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#define CHAOS_REC_MAGIC 0x64436831u /* "dCh1" */

typedef enum chaos_rec_type {
    CHAOS_REC_ENTER = 1, /* entered a critical section; fence = its token */
    CHAOS_REC_EXIT,      /* left it */
    CHAOS_REC_COUNTER,   /* non-atomic counter: read a, wrote a + 1 */
    CHAOS_REC_WRITE,     /* fenced resource: seq a, accepted b (1/0) */
    CHAOS_REC_KILLED,    /* driver: worker process `proc` killed and reaped */
    CHAOS_REC_FAULT      /* driver: one fault injected; a = its kind */
} chaos_rec_type;

/* What an ENTER record's `a` says the section holds: exclusive sections
 * exclude every other; shared ones exclude exclusive ones only; permits
 * (a semaphore) are counted, at most N at once (issue 17). */
#define CHAOS_KIND_EXCLUSIVE 0
#define CHAOS_KIND_SHARED 1
#define CHAOS_KIND_PERMIT 2

/* 64 bytes: one write(2) each, never torn on a local file system. */
typedef struct chaos_rec {
    uint32_t magic;
    uint16_t type;
    uint16_t slot;  /* worker slot */
    uint32_t proc;  /* worker process incarnation, unique in one history */
    uint32_t cs;    /* critical section number within that process */
    int64_t t_ns;   /* CLOCK_MONOTONIC */
    uint64_t fence; /* fencing token (ENTER, COUNTER, WRITE) */
    int64_t a;
    int64_t b;
    int32_t pid;
    uint8_t pad[12];
} chaos_rec;

/* What the checker found. */
typedef struct chaos_verdict {
    long records;
    long torn;             /* trailing bytes or bad magic: should be 0 */
    long cs;               /* critical sections entered */
    long cs_killed;        /* ... ended by a kill -9 */
    long cs_unclosed;      /* ... with neither EXIT nor KILLED: should be 0 */
    long overlaps;         /* sections that began while another was open */
    long max_concurrent;   /* most sections open at one time */
    long counter_writes;   /* increments of the non-atomic counter */
    long lost_updates;     /* increments that read a value already read */
    long writes_accepted;  /* fenced resource */
    long writes_refused;
    long stale_writes;     /* accepted with a token below an accepted one */
    long fence_violations; /* a later section with a token <= an earlier */
    long faults;           /* FAULT records */
    long kills;            /* KILLED records */
    long max_readers;      /* most shared sections open at once */
    long max_permits;      /* most permit sections open at once */
} chaos_verdict;

int64_t chaos_now_ns(void);

/* Open (create) a history file for appending; -1 on error. */
int chaos_history_open(const char *path);

/* Append one record (magic and time filled in if zero). 0 or -1. */
int chaos_history_log(int fd, chaos_rec *r);

/* Convenience: a record of `type` for worker slot/proc/cs. */
int chaos_history_note(int fd, chaos_rec_type type, int slot, uint32_t proc,
                       uint32_t cs, uint64_t fence, int64_t a, int64_t b);

/* Check records in memory (sorted or not). 0, or -1 if out of memory. */
int chaos_history_check_recs(const chaos_rec *recs, size_t n,
                             chaos_verdict *out);

/* Read the file and check it. 0, or -1 (message on stderr). */
int chaos_history_check(const char *path, chaos_verdict *out);

/* Self-test of the checker on hand-made histories (each must be caught).
 * Returns the number of failed cases. */
int chaos_history_selftest(void);

#endif
