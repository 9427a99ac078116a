/* SPDX-License-Identifier: BSD-3-Clause */
/* A lock handle's state and owner token (handle.h), and the public
 * getters that read them. */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "handle.h"
#include "rand.h"
#include "watchdog.h"

void dlock__lock_granted(dlock_lock *l, int64_t until_ns)
{
    l->granted_until_ns = until_ns;
}

dlock_lock_state dlock__lock_get_state(dlock_lock *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    dlock_lock_state st = l->state;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return st;
}

void dlock__lock_waiter_wake(dlock_lock *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    l->waiter.woken++;
    DLOCK__CHECK_PTHREAD(pthread_cond_broadcast(&l->cond));
    if (l->waiter.wake)
        l->waiter.wake(l->waiter.wake_arg);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
}

void dlock__lock_sleep_until(dlock_lock *l, unsigned woken, int64_t wake_at_ns)
{
    struct timespec ts = dlock__timespec_of(wake_at_ns);
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    while (!l->canceled && !l->waiter.handed_over && l->waiter.woken == woken &&
           dlock__now_ns() < wake_at_ns) {
        int w = pthread_cond_timedwait(&l->cond, &l->mu, &ts);
        if (w != 0 && w != ETIMEDOUT)
            DLOCK__CHECK_PTHREAD(w);
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
}

int dlock__lock_begin_acquire(dlock_lock *l, int64_t wait_ms)
{
    if (wait_ms != 0) {
        DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
        int canceled = l->canceled;
        l->canceled = 0;
        DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
        if (canceled) {
            dlock__err_set(&l->err, "cancelled");
            return DLOCK_ECANCELED;
        }
    }
    if ((l->opts.flags & DLOCK_AUTO_RENEW) && dlock__watchdog_start(l->client) != DLOCK_OK) {
        dlock__err_set(&l->err, "could not start the watchdog thread");
        return DLOCK_ENOMEM;
    }
    return DLOCK_OK;
}

int64_t dlock__lock_renew_lease_end(void *owner)
{
    dlock_lock *l = owner;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    int64_t end = l->valid_until_ns == INT64_MIN ? INT64_MAX : l->valid_until_ns;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return end;
}

int dlock__lock_open_cancel(dlock_lock *l, int64_t wait_ms)
{
    /* An eventfd: one descriptor and one close per wait where a pipe took
     * two (a loop with 10,000 waiters holds 10,000, not 20,000). */
    int fd = wait_ms == 0 ? -1 : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0)
        return -1;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    l->cancel_fd[0] = l->cancel_fd[1] = fd;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return fd;
}

int dlock__lock_wake_fd(dlock_lock *l)
{
    if (l->wake_fd < 0)
        l->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return l->wake_fd;
}

void dlock__lock_close_cancel(dlock_lock *l, int64_t wait_ms)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    int fd = l->cancel_fd[0];
    l->cancel_fd[0] = l->cancel_fd[1] = -1;
    if (wait_ms != 0)
        l->canceled = 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    if (fd >= 0)
        close(fd);
}

int dlock__lock_use_cancel(dlock_lock *l)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    int canceled = l->canceled;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    if (canceled)
        dlock__lock_take_cancel(l);
    return canceled;
}

void dlock__lock_take_cancel(dlock_lock *l)
{
    uint64_t n;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    l->canceled = 0;
    if (l->cancel_fd[0] >= 0) /* its count back to 0: not readable */
        while (read(l->cancel_fd[0], &n, sizeof n) < 0 && errno == EINTR)
            ;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
}

void dlock__lock_inline_token(dlock_lock *l)
{
    if (l->token != l->token_inline) {
        dlock__free(l->token);
        l->token = l->token_inline;
        /* The long token is gone: until the caller writes a new one the
         * handle has none (an adopt out of memory stops here), never a
         * length the inline buffer does not hold. */
        l->token_inline[0] = '\0';
        l->token_len = 0;
    }
}

int dlock__lock_new_token(dlock_lock *l)
{
    dlock__lock_inline_token(l);
    int rc = dlock__token_hex(l->token);
    if (rc == DLOCK_OK)
        l->token_len = DLOCK_TOKEN_HEX_LEN;
    return rc;
}

/* The calling thread's number (handle.h): the owner of counted holds. */
static _Atomic unsigned long next_thread_no = 1;
static _Thread_local unsigned long thread_no;

/* Counted operations (acquire attempts and releases) are numbered from
 * one sequence per process, so each owner's (client x thread) numbers
 * grow whichever thread sends them: a handle whose hold was taken on one
 * thread may be released from another (one at a time). Per-thread
 * numbers let such a release fall below the grant's, and the scripts took
 * it for a copy already applied (test_reentrant). */
static _Atomic uint64_t op_no;

unsigned long dlock__thread_no(void)
{
    if (thread_no == 0)
        thread_no = atomic_fetch_add(&next_thread_no, 1);
    return thread_no;
}

unsigned long dlock__lock_owner_no(const dlock_lock *l)
{
    return l->owner_no ? l->owner_no : dlock__thread_no();
}

void dlock__lock_owner_id(dlock_lock *l)
{
    dlock__lock_inline_token(l);
    l->token_len = (size_t)snprintf(l->token, sizeof l->token_inline, "%s:%lu",
                                    l->client->id, dlock__lock_owner_no(l));
}

int dlock__lock_owner_token(dlock_lock *l)
{
    char r[33];
    int rc = dlock__token_hex(r);
    if (rc != DLOCK_OK)
        return rc;
    dlock__lock_owner_id(l);
    /* OWNER#RANDOM in the inline buffer: the random part keeps what room
     * the owner id leaves (16 hex digits with the usual thread numbers);
     * the owner id alone already tells this thread's tokens from others'. */
    int room = (int)sizeof l->token_inline - (int)l->token_len - 2;
    if (room < 8)
        return DLOCK_EINVAL;
    int n = snprintf(l->token + l->token_len, sizeof l->token_inline - l->token_len, "#%.*s",
                     room < 16 ? room : 16, r);
    l->token_len += (size_t)n;
    return DLOCK_OK;
}

uint64_t dlock__lock_next_op_no(void)
{
    return atomic_fetch_add_explicit(&op_no, 1, memory_order_relaxed) + 1;
}

/* ---- the public getters (dlock.h) ---------------------------------------- */

dlock_lock_state dlock_lock_state_get(dlock_lock *l)
{
    return l && !dlock__client_forked(l->client) ? dlock__lock_get_state(l) : DLOCK_STATE_UNLOCKED;
}

int64_t dlock_lock_validity_ms(dlock_lock *l)
{
    if (!l || dlock__client_forked(l->client))
        return 0;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    dlock_lock_state st = l->state;
    int64_t end = l->valid_until_ns;
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    if (st != DLOCK_STATE_HELD)
        return 0;
    if (end == INT64_MIN)
        return -1;
    int64_t left = end - dlock__now_ns();
    return left > 0 ? left / DLOCK__NS_PER_MS : 0;
}

const char *dlock_lock_token(const dlock_lock *l)
{
    return l && l->holds > 0 && !dlock__client_forked(l->client) ? l->token : NULL;
}

uint64_t dlock_lock_fence(const dlock_lock *l)
{
    return l && l->holds > 0 && !dlock__client_forked(l->client) ? l->fence : 0;
}

const char *dlock_lock_name(const dlock_lock *l)
{
    return l ? l->name + l->prefix_len : NULL;
}

unsigned dlock_lock_hold_count(const dlock_lock *l)
{
    return l && !dlock__client_forked(l->client) ? l->holds : 0;
}

int64_t dlock_lock_holder_ttl_ms(const dlock_lock *l)
{
    return l ? l->holder_ttl_ms : -1;
}

const char *dlock_lock_errmsg(const dlock_lock *l)
{
    return l ? dlock__err_str(&l->err) : "NULL lock handle";
}

int dlock__lock_check_wait_ms(dlock_lock *l, int64_t wait_ms)
{
    if (wait_ms >= 0 || wait_ms == DLOCK_WAIT_FOREVER)
        return DLOCK_OK;
    dlock__err_set(&l->err, "wait_ms must be >= 0 or DLOCK_WAIT_FOREVER");
    return DLOCK_EINVAL;
}

int dlock__lock_check_ttl_ms(dlock_lock *l, int64_t ttl_ms)
{
    if (ttl_ms >= 0 && ttl_ms <= DLOCK_TTL_MAX_MS)
        return DLOCK_OK;
    dlock__err_set(&l->err, "ttl_ms must be 1..%" PRId64 " (or 0 for the lock's TTL)",
                   DLOCK_TTL_MAX_MS);
    return DLOCK_EINVAL;
}
