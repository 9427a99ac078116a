/* SPDX-License-Identifier: BSD-3-Clause */
/* The waiting acquire of the plain and counted kinds (wait.h). */
#include <errno.h>
#include <inttypes.h>

#include "backend.h"
#include "client.h"
#include "clock.h"
#include "handle.h"
#include "rand.h"
#include "wait.h"
#include "wakeup.h"

/* A waiter still gets a look at least this often: its subscription may
 * have broken without a message, or the holder is another library's lock
 * on the same key (a plain SET NX PX), which publishes nothing on release.
 * 200 ms: such a release is seen within 250 ms, for 5 looks a second per
 * waiter (issue 20; it was 1 s). */
#define SAFETY_POLL_MS 200

int dlock__wait_sleep_until(dlock_lock *l, unsigned woken, int64_t wake_at)
{
    struct timespec ts = dlock__timespec_of(wake_at);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    while (!l->canceled && !l->waiter.handed_over && l->waiter.woken == woken &&
           dlock__now_ns() < wake_at) {
        int w = pthread_cond_timedwait(&l->cond, &l->mu, &ts);
        if (w != 0 && w != ETIMEDOUT)
            DLOCK__CHECK_PTHREAD(w);
    }
    int canceled = l->canceled;
    l->canceled = 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return canceled;
}

unsigned dlock__wait_woken(dlock_lock *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    unsigned w = l->waiter.woken;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return w;
}

int dlock__wait_watch(dlock_lock *l, int fair)
{
    /* The record's constant part; its thread part is under l->mu. */
    l->waiter.channel = l->channel;
    l->waiter.channel_len = l->channel_len;
    l->waiter.token = fair ? l->token : NULL;
    l->waiter.token_len = fair ? l->token_len : 0;
    l->waiter.mu = &l->mu;
    l->waiter.cond = &l->cond;
    l->waiter.canceled = &l->canceled;
    return dlock__wakeup_watch(l->client, &l->waiter);
}

void dlock__wait_unwatch(dlock_lock *l)
{
    dlock__wakeup_unwatch(l->client, &l->waiter);
}

int dlock__wait_acquire(dlock_lock *l, int64_t wait_ms, int64_t deadline)
{
    int watching = 0;
    unsigned attempts = 0;
    int rc;
    for (;;) {
        unsigned woken = dlock__wait_woken(l);
        int retry;
        rc = l->backend->attempt(l, &retry);
        if (rc == DLOCK_OK || wait_ms == 0 || !retry)
            break;
        int64_t now = dlock__now_ns();
        if (now >= deadline) {
            if (rc == DLOCK_ENOTACQUIRED) {
                rc = DLOCK_ETIMEDOUT;
                dlock__err_append(&l->err, "gave up after %" PRId64 " ms", wait_ms);
            }
            break;
        }
        /* Subscribe before the next attempt, so that a release between
         * that attempt and the sleep still wakes us. */
        if (!watching && l->client->opts.wakeups && rc == DLOCK_ENOTACQUIRED) {
            watching = dlock__wait_watch(l, 0) == DLOCK_OK;
            if (watching)
                continue;
        }
        int64_t sleep_ms;
        if (rc == DLOCK_ENOTACQUIRED && l->split_vote)
            sleep_ms = dlock__backoff_ms(attempts++, l->opts.retry_min_ms, l->opts.retry_max_ms);
        else if (watching && l->holder_ttl_ms >= 0)
            /* The release message comes first; the holder's expiry is the
             * latest we need to look (a crashed holder never publishes). */
            sleep_ms = DLOCK__MIN(l->holder_ttl_ms + 1, SAFETY_POLL_MS);
        else {
            sleep_ms = dlock__backoff_ms(attempts++, l->opts.retry_min_ms, l->opts.retry_max_ms);
            if (l->holder_ttl_ms >= 0 && l->holder_ttl_ms + 1 < sleep_ms)
                sleep_ms = l->holder_ttl_ms + 1;
        }
        if (dlock__wait_sleep_until(l, woken,
                                    DLOCK__MIN(deadline, now + sleep_ms * DLOCK__NS_PER_MS))) {
            rc = DLOCK_ECANCELED;
            dlock__err_set(&l->err, "cancelled while waiting for \"%s\"", l->name);
            break;
        }
    }
    if (watching)
        dlock__wait_unwatch(l);
    return rc;
}
