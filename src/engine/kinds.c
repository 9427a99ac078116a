/* SPDX-License-Identifier: BSD-3-Clause */
/* The table of lock kinds (kinds.h). */
#include <inttypes.h>
#include <stdio.h>

#include "kinds.h"

/* Which script each step runs, with its arguments and decoder, is the
 * backend's (src/redis/kind_steps.c); a row here holds what every backend
 * and the engine may ask of a kind. */
static const dlock__kind kinds[DLOCK__KIND_COUNT] = {
    [DLOCK__KIND_PLAIN] = {.id = DLOCK__KIND_PLAIN, .name = "plain", .multi_node = 1,
                           .leave = DLOCK__S_NONE, .renew_mode = "p", .wait = DLOCK__WAIT_RETRY,
                           .fenced = 1, .adopt = 1, .wake_one = 1, .runs = 1, .inbox = 1,
                           .raw_first_try = 1, .ident = 1, .in_line = DLOCK__KIND_PLAIN},
    [DLOCK__KIND_COUNTED] = {.id = DLOCK__KIND_COUNTED, .name = "counted", .counted = 1,
                             .multi_node = 1, .leave = DLOCK__S_NONE, .renew_mode = "r",
                             .wait = DLOCK__WAIT_RETRY, .fenced = 1, .wake_one = 1, .inbox = 1,
                             .ident = 1, .in_line = DLOCK__KIND_COUNTED},
    /* Fair mode keeps its queue in one node's memory; a queue shared by
     * independent masters would need an agreement protocol of its own
     * (docs/waiting.md). */
    [DLOCK__KIND_FAIR] = {.id = DLOCK__KIND_FAIR, .name = "fair", .leave = DLOCK__S_FAIR_LEAVE,
                          .renew_mode = "p", .wait = DLOCK__WAIT_QUEUE, .fenced = 1, .adopt = 1,
                          .inbox = 1, .ident = 1, .in_line = DLOCK__KIND_FAIR},
    /* The writer of a read-write lock holds exactly a plain lock (so plain
     * release, extend, renewal and fencing serve it); only its acquire
     * differs: shared holders keep it out, and it leaves the
     * writer-waiting mark (docs/primitives.md). A writer and a reader are
     * excluded node by node, and any two majorities share a node, so it
     * works on several masters. */
    [DLOCK__KIND_EXCLUSIVE] = {.id = DLOCK__KIND_EXCLUSIVE, .name = "exclusive", .multi_node = 1,
                               .leave = DLOCK__S_NONE, .renew_mode = "p",
                               .wait = DLOCK__WAIT_RETRY, .fenced = 1, .adopt = 1,
                               .aux_key = "ww", .aux_arg = DLOCK__AUX_MARK_MS, .wake_one = 1,
                               .ident = 1, .in_line = DLOCK__KIND_EXCLUSIVE},
    /* Readers hold no fencing token: they do not write (docs/fencing.md).
     * Their grants still raise the name's counter (guards): what a
     * guarded break of a name its readers hold compares (break.lua). In a
     * line of owners (etcd) readers and writers are keys of their role,
     * and a reader waits only behind the keys that are not readers'
     * (etcd_lock.h; docs/backends.md). */
    [DLOCK__KIND_SHARED] = {.id = DLOCK__KIND_SHARED, .name = "shared", .multi_node = 1,
                            .leave = DLOCK__S_NONE, .renew_mode = "z", .wait = DLOCK__WAIT_RETRY,
                            .guards = 1, .adopt = 1, .aux_key = "ww",
                            .aux_arg = DLOCK__AUX_ZERO, .ident = 1,
                            .in_line = DLOCK__KIND_SHARED},
    /* N permits counted per node do not add up over several masters: with
     * N = 2 and three nodes, three holders can each win a different pair
     * of nodes while no node sees more than two (docs/primitives.md). */
    /* In a line of owners (etcd) a semaphore is itself: the holders are
     * the N first keys (etcd_wait.c; docs/primitives.md). */
    [DLOCK__KIND_SEMAPHORE] = {.id = DLOCK__KIND_SEMAPHORE, .name = "semaphore",
                               .leave = DLOCK__S_NONE, .renew_mode = "z",
                               .wait = DLOCK__WAIT_RETRY, .adopt = 1,
                               .aux_arg = DLOCK__AUX_PERMITS, .ident = 1,
                               .in_line = DLOCK__KIND_SEMAPHORE},
    /* A reentrant reader: the shared kind's scripts, with re-entry counted
     * in the handle (kinds.h, reenter; docs/primitives.md). No adopt: an
     * adopted token would not carry the owner id. */
    [DLOCK__KIND_SHARED_COUNTED] = {.id = DLOCK__KIND_SHARED_COUNTED, .name = "shared-counted",
                                    .reenter = 1, .multi_node = 1, .leave = DLOCK__S_NONE,
                                    .renew_mode = "z", .wait = DLOCK__WAIT_RETRY,
                                    .guards = 1, .aux_key = "ww", .aux_arg = DLOCK__AUX_ZERO,
                                    .ident = 1, .in_line = DLOCK__KIND_SHARED_COUNTED},
    /* A reentrant writer: still a plain string (readers see a writer, and
     * plain release, extend, renewal and fencing serve it), its token
     * OWNER#RANDOM; re-entry counted in the handle (kinds.h, reenter); the
     * fencing token is the first hold's. */
    [DLOCK__KIND_EXCLUSIVE_COUNTED] = {.id = DLOCK__KIND_EXCLUSIVE_COUNTED,
                                       .name = "exclusive-counted", .reenter = 1,
                                       .multi_node = 1, .leave = DLOCK__S_NONE,
                                       .renew_mode = "p", .wait = DLOCK__WAIT_RETRY, .fenced = 1,
                                       .aux_key = "ww", .aux_arg = DLOCK__AUX_MARK_MS,
                                       .wake_one = 1, .ident = 1,
                                       .in_line = DLOCK__KIND_EXCLUSIVE_COUNTED},
};

const dlock__kind *dlock__kind_of(unsigned flags, unsigned permits)
{
    unsigned modes = flags & (DLOCK_FAIR | DLOCK_REENTRANT | DLOCK_SHARED | DLOCK_EXCLUSIVE);
    if (permits)
        return modes ? NULL : &kinds[DLOCK__KIND_SEMAPHORE];
    if (modes == (DLOCK_SHARED | DLOCK_REENTRANT))
        return &kinds[DLOCK__KIND_SHARED_COUNTED];
    if (modes == (DLOCK_EXCLUSIVE | DLOCK_REENTRANT))
        return &kinds[DLOCK__KIND_EXCLUSIVE_COUNTED];
    if (modes & (modes - 1)) /* more than one mode */
        return NULL;
    switch (modes) {
    case DLOCK_FAIR:
        return &kinds[DLOCK__KIND_FAIR];
    case DLOCK_REENTRANT:
        return &kinds[DLOCK__KIND_COUNTED];
    case DLOCK_SHARED:
        return &kinds[DLOCK__KIND_SHARED];
    case DLOCK_EXCLUSIVE:
        return &kinds[DLOCK__KIND_EXCLUSIVE];
    default:
        return &kinds[DLOCK__KIND_PLAIN];
    }
}

const dlock__kind *dlock__kind_in_line(const dlock__kind *kind)
{
    return kind->in_line == DLOCK__KIND_COUNT ? NULL : &kinds[kind->in_line];
}

size_t dlock__kind_aux_arg(const dlock__kind *kind, int64_t retry_max_ms, unsigned permits,
                           char *buf, size_t cap)
{
    int n = 0;
    switch (kind->aux_arg) {
    case DLOCK__AUX_MARK_MS:
        /* The writer-waiting mark outlives a waiting writer's longest
         * sleep between two looks (a wake-up, the safety poll of 1 s, or a
         * backoff up to retry_max_ms), which refresh it; a writer that
         * gave up or died holds readers back this long at most. */
        n = snprintf(buf, cap, "%" PRId64, 2000 + 2 * retry_max_ms);
        break;
    case DLOCK__AUX_ZERO:
        n = snprintf(buf, cap, "0");
        break;
    case DLOCK__AUX_PERMITS:
        n = snprintf(buf, cap, "%u", permits);
        break;
    default:
        buf[0] = '\0';
    }
    return n > 0 ? (size_t)n : 0;
}
