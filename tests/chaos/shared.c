/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "history.h"
#include "shared.h"

chaos_shared *chaos_shared_new(int unfenced)
{
    chaos_shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return NULL;
    memset(s, 0, sizeof *s);
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) != 0 ||
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) != 0 ||
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) != 0 ||
        pthread_mutex_init(&s->res_mu, &a) != 0) {
        munmap(s, sizeof *s);
        return NULL;
    }
    pthread_mutexattr_destroy(&a);
    s->res_unfenced = unfenced;
    return s;
}

void chaos_shared_free(chaos_shared *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->res_mu);
    munmap(s, sizeof *s);
}

static void res_lock(chaos_shared *s)
{
    int rc = pthread_mutex_lock(&s->res_mu);
    if (rc == EOWNERDEAD) {
        /* The previous writer was killed inside; our state is always
         * consistent between two stores, so carry on. */
        pthread_mutex_consistent(&s->res_mu);
    } else if (rc != 0) {
        fprintf(stderr, "chaos: resource mutex: %s\n", strerror(rc));
        abort();
    }
}

int chaos_resource_write(chaos_shared *s, int hist_fd, int slot, uint32_t proc,
                         uint32_t cs, uint64_t fence)
{
    res_lock(s);
    int64_t seq = ++s->res_seq;
    int accepted = s->res_unfenced || fence >= s->res_max_fence;
    if (accepted && fence > s->res_max_fence)
        s->res_max_fence = fence;
    /* Logged under the lock, so the history knows the resource's order. */
    chaos_history_note(hist_fd, CHAOS_REC_WRITE, slot, proc, cs, fence, seq, accepted);
    pthread_mutex_unlock(&s->res_mu);
    return accepted;
}

void chaos_count_rc(_Atomic long *table, int rc)
{
    int i = rc <= 0 ? -rc : 0;
    if (i >= CHAOS_ERR_CODES)
        i = CHAOS_ERR_CODES - 1;
    atomic_fetch_add(&table[i], 1);
}
