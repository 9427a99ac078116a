/* Placeholder until the subscriber thread lands (issue: wake-ups): waiting
 * acquires fall back to randomized backoff polling. */
#include "common.h"
#include "wakeup.h"

int dlock__wakeup_watch(struct dlock_client *c, struct dlock_lock *lock)
{
    (void)c;
    (void)lock;
    return DLOCK_ENOTSUP;
}

void dlock__wakeup_unwatch(struct dlock_client *c, struct dlock_lock *lock)
{
    (void)c;
    (void)lock;
}

void dlock__wakeup_stop(struct dlock_client *c)
{
    (void)c;
}
