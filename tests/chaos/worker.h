/* SPDX-License-Identifier: BSD-3-Clause */
/* A chaos worker: a process that takes the lock, runs a critical section
 * that touches the shared counter and the fenced resource, logs ENTER/EXIT
 * to the history, and releases; `todo` times or until told to stop. */
#ifndef DLOCK_CHAOS_WORKER_H
#define DLOCK_CHAOS_WORKER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shared.h"

/* Reentrant rows: handles beyond the first that each worker takes. */
#define CHAOS_MORE_HANDLES 2

typedef enum chaos_mode {
    /* dlock, used as documented. */
    CHAOS_MODE_DLOCK = 0,
    /* Negative control: SET NX PX to take, INCR for a token, and a plain
     * DEL to release (no token check): a holder whose lease ran out deletes
     * its successor's lock. */
    CHAOS_MODE_RAW_DEL = 1,
    /* dlock, and every third section the holder forks a child that tries
     * the inherited client and handle (must be refused), frees them (must
     * release nothing and return at once) and exits, while the parent
     * holds on. */
    CHAOS_MODE_FORK = 2,
    /* A read-write lock (issue 17): even slots read (DLOCK_SHARED: no
     * counter, no fenced write), odd slots write (DLOCK_EXCLUSIVE). */
    CHAOS_MODE_RW = 3,
    /* A semaphore of CHAOS_SEM_PERMITS permits: every slot holds a
     * permit; sections are counted, never more than N at once. */
    CHAOS_MODE_SEM = 4,
    /* A set of CHAOS_SET_NAMES names (dlock_lock_new_multi()): the lock
     * name and two more, all taken by every worker, all or none; the
     * set's fence is its first name's (the lock name sorts first). */
    CHAOS_MODE_SET = 5,
    /* An election (issue 39, docs/elections.md): every slot a candidate;
     * a section is a term, entered when the campaign returns and left
     * before the resign, with the term's fence. */
    CHAOS_MODE_ELECT = 6
} chaos_mode;

#define CHAOS_SET_NAMES 3

#define CHAOS_SEM_PERMITS 2

typedef struct chaos_worker_cfg {
    const char *urls[8];
    size_t n_urls;
    const char *lock_name;
    int64_t ttl_ms;
    int64_t hold_ms;        /* length of one critical section */
    unsigned flags;         /* dlock_lock_options.flags */
    chaos_mode mode;
    /* Leave a section early when dlock_lock_validity_ms() gets short, as a
     * careful caller with a long (auto-renewed) section does. */
    int check_validity;
    int64_t min_uptime_ms;  /* dlock_client_options.min_node_uptime_ms */
    int io_timeout_ms;      /* 0: default */
    /* > 0: liveness mode. Each section is one `dlock run -w` as a user
     * runs it: try once, then wait up to this long; a section that does
     * not get the lock counts as failed (and is not retried). */
    int64_t section_wait_ms;
    int cancel_pct;         /* chaos_liveness.cancel_pct */
    int64_t deadline_ns;    /* hard stop, monotonic */
    /* Cluster rows: the URLs are seeds of one Redis Cluster; and, with
     * n_bg > 0, each worker holds an auto-renewed lock "{tag}-wSLOT-pPROC"
     * per tag for its whole life (a tag per master): one reported lost
     * counts in chaos_shared.bg_lost[tag]. */
    int cluster;
    /* A looped client on a libuv loop (worker_loop.h) instead of the
     * blocking verbs. */
    int looped;
    const char *bg_tags[3];
    int n_bg;
    char history_path[512];
} chaos_worker_cfg;

/* Fork a worker for `slot` that runs `todo` sections; returns its pid or -1.
 * The child dies with the driver (PR_SET_PDEATHSIG). */
pid_t chaos_worker_spawn(const chaos_worker_cfg *cfg, chaos_shared *sh,
                         int slot, long todo);

#endif
