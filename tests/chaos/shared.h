/* SPDX-License-Identifier: BSD-3-Clause */
/* State shared by the driver and its worker processes: one anonymous
 * MAP_SHARED mapping made before the workers are forked.
 *
 * It holds the two things the critical sections touch:
 *   - a deliberately non-atomic counter (read, sleep, write): an increment
 *     that overlaps another one loses an update, which the history shows;
 *   - a fenced resource: it remembers the largest fencing token it accepted
 *     and refuses writes with a smaller one (Kleppmann's fencing). Its
 *     decisions are logged, in its own order (seq), to the history.
 * and what the driver needs to aim faults: which worker is inside its
 * critical section right now, and its pid. */
#ifndef DLOCK_CHAOS_SHARED_H
#define DLOCK_CHAOS_SHARED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define CHAOS_MAX_WORKERS 16
#define CHAOS_ERR_CODES 20 /* -dlock codes 0..19 */

typedef struct chaos_slot {
    _Atomic int pid;
    _Atomic uint32_t proc;     /* incarnation id of the process in the slot */
    _Atomic int in_cs;         /* 1 between ENTER and EXIT */
    _Atomic int64_t enter_ns;
    _Atomic long done;         /* critical sections completed by the slot */
} chaos_slot;

typedef struct chaos_shared {
    pthread_mutex_t res_mu; /* robust and process-shared: a worker killed
                               while holding it does not wedge the others */
    uint64_t res_max_fence;
    int64_t res_seq;
    int res_unfenced; /* negative control: accept every write */
    volatile int64_t counter;
    _Atomic int stop;
    _Atomic int faults_done; /* workers go on past their count until then */
    _Atomic uint32_t next_proc;
    chaos_slot slot[CHAOS_MAX_WORKERS];
    /* Outcomes of acquire calls, by -code. */
    _Atomic long acq_rc[CHAOS_ERR_CODES];
    _Atomic long rel_rc[CHAOS_ERR_CODES];
    _Atomic long aborted; /* sections left early: validity ran short */
    /* Liveness rows: sections tried as `dlock run -w` would (try once,
     * then wait), those that did not get the lock, the longest wait. */
    _Atomic long live_tried;
    _Atomic long live_failed;
    _Atomic long live_wait_failed; /* of those, after waiting (not the try-once) */
    _Atomic int64_t live_max_wait_ns;
    _Atomic long live_cancelled; /* waits a second thread cancelled */
    /* Liveness of the ownership rows (issue 22): the longest a worker
     * waited from wanting the lock to its section; fork row: children
     * forked by holders, and those that misbehaved with the inherited
     * client (an acquire or release not refused, or a hang). */
    _Atomic int64_t max_wait_ns;
    _Atomic long forks;
    _Atomic long fork_bad;
    /* Cluster rows: background locks held (one per worker per master) and
     * those reported lost (on_lost), by master tag. */
    _Atomic long bg_held[3];
    _Atomic long bg_lost[3];
} chaos_shared;

/* Map and initialise; NULL on failure. */
chaos_shared *chaos_shared_new(int unfenced);
void chaos_shared_free(chaos_shared *s);

/* The fenced write: accepted (1) when fence >= the largest accepted so far
 * (or always, for the unfenced control); refused (0) otherwise. Logs a
 * WRITE record to the history under the resource's lock. */
int chaos_resource_write(chaos_shared *s, int hist_fd, int slot, uint32_t proc,
                         uint32_t cs, uint64_t fence);

void chaos_count_rc(_Atomic long *table, int rc);

#endif
