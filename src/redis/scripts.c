/* SPDX-License-Identifier: BSD-3-Clause */
#include <pthread.h>
#include <string.h>

#include "common.h"
#include "scripts.h"

static const char *const names[DLOCK__S_COUNT] = {
    [DLOCK__S_ACQUIRE] = "acquire",
    [DLOCK__S_RELEASE] = "release",
    [DLOCK__S_EXTEND] = "extend",
    [DLOCK__S_RACQUIRE] = "reentrant_acquire",
    [DLOCK__S_RRELEASE] = "reentrant_release",
    [DLOCK__S_REXTEND] = "reentrant_extend",
    [DLOCK__S_RENEW] = "renew_batch",
    [DLOCK__S_FENCE_SYNC] = "fence_sync",
    [DLOCK__S_STATUS] = "status",
    [DLOCK__S_FAIR_ACQUIRE] = "fair_acquire",
    [DLOCK__S_FAIR_RELEASE] = "fair_release",
    [DLOCK__S_FAIR_LEAVE] = "fair_leave",
    [DLOCK__S_RUNDO] = "reentrant_undo",
    [DLOCK__S_RFORGET] = "reentrant_forget",
    [DLOCK__S_X_ACQUIRE] = "exclusive_acquire",
    [DLOCK__S_Z_ACQUIRE] = "shared_acquire",
    [DLOCK__S_Z_RELEASE] = "shared_release",
    [DLOCK__S_Z_EXTEND] = "shared_extend",
    [DLOCK__S_HOLDERS] = "holders",
    [DLOCK__S_RESTORE] = "restore_batch",
    [DLOCK__S_WQ_LEAVE] = "wq_leave",
    [DLOCK__S_BREAK] = "break",
    [DLOCK__S_DELAY_STATUS] = "delay_status",
    [DLOCK__S_ELECT_WRITE] = "elect_write",
    [DLOCK__S_ELECT_READ] = "elect_read",
};

static const dlock__script *by_id[DLOCK__S_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void resolve(void)
{
    for (int i = 0; i < DLOCK__S_COUNT; i++)
        for (const dlock__script *s = dlock__scripts; s->name; s++)
            if (!strcmp(s->name, names[i]))
                by_id[i] = s;
}

const dlock__script *dlock__script_get(dlock__script_id id)
{
    DLOCK__CHECK_PTHREAD(pthread_once(&once, resolve));
    return (unsigned)id < DLOCK__S_COUNT ? by_id[id] : NULL;
}

int dlock__scripts_check(const char **name)
{
    for (int i = 0; i < DLOCK__S_COUNT; i++)
        if (!dlock__script_get((dlock__script_id)i)) {
            if (name)
                *name = names[i];
            return -1;
        }
    return 0;
}
