/* SPDX-License-Identifier: BSD-3-Clause */
/* The table of lock kinds (kinds.h). */
#include "kinds.h"

static const dlock__kind kinds[DLOCK__KIND_COUNT] = {
    [DLOCK__KIND_PLAIN] = {DLOCK__KIND_PLAIN, "plain", 0, 1, DLOCK__S_ACQUIRE, DLOCK__S_RELEASE,
                           DLOCK__S_EXTEND, DLOCK__S_RELEASE, DLOCK__S_NONE, DLOCK__S_NONE, "p",
                           DLOCK__WAIT_RETRY},
    [DLOCK__KIND_COUNTED] = {DLOCK__KIND_COUNTED, "counted", 1, 1, DLOCK__S_RACQUIRE,
                             DLOCK__S_RRELEASE, DLOCK__S_REXTEND, DLOCK__S_RUNDO,
                             DLOCK__S_RFORGET, DLOCK__S_NONE, "r", DLOCK__WAIT_RETRY},
    /* Fair mode keeps its queue in one node's memory; a queue shared by
     * independent masters would need an agreement protocol of its own
     * (docs/waiting.md). */
    [DLOCK__KIND_FAIR] = {DLOCK__KIND_FAIR, "fair", 0, 0, DLOCK__S_FAIR_ACQUIRE,
                          DLOCK__S_FAIR_RELEASE, DLOCK__S_EXTEND, DLOCK__S_FAIR_RELEASE,
                          DLOCK__S_NONE, DLOCK__S_FAIR_LEAVE, "p", DLOCK__WAIT_QUEUE},
};

const dlock__kind *dlock__kind_of(unsigned flags)
{
    if ((flags & DLOCK_FAIR) && (flags & DLOCK_REENTRANT))
        return NULL;
    if (flags & DLOCK_FAIR)
        return &kinds[DLOCK__KIND_FAIR];
    if (flags & DLOCK_REENTRANT)
        return &kinds[DLOCK__KIND_COUNTED];
    return &kinds[DLOCK__KIND_PLAIN];
}
