/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <unistd.h>

#include "proc.h"
#include "test_util.h"
#include "zk_contend.h"

dlock_lock *zk_test_lock(dlock_client *c, const char *name, unsigned flags, unsigned permits)
{
    dlock_lock *l = NULL;
    dlock_lock_options o = DLOCK_LOCK_OPTIONS_INIT;
    o.flags = flags;
    int rc = permits ? dlock_semaphore_new(&l, c, name, permits, &o)
                     : dlock_lock_new(&l, c, name, &o);
    if (rc != DLOCK_OK)
        fprintf(stderr, "zk_contend: %s: %s\n", name, dlock_strerror(rc));
    return rc == DLOCK_OK ? l : NULL;
}

/* One section: entered, re-entered, held, left, noted. */
static void section(zk_contender *k, dlock_lock *l, uint32_t cs, int kind)
{
    uint64_t fence = dlock_lock_fence(l);
    chaos_history_note(k->fd, CHAOS_REC_ENTER, k->slot, (uint32_t)k->slot + 1, cs, fence, kind,
                       0);
    atomic_fetch_add(&k->entered, 1);
    for (int r = 0; r < k->reentries; r++)
        if (dlock_lock_acquire(l, 0) != DLOCK_OK || dlock_lock_fence(l) != fence)
            k->errors++;
    test_sleep_ms(k->hold_ms ? k->hold_ms : 5);
    for (int r = 0; r < k->reentries; r++)
        if (dlock_lock_release(l) != DLOCK_OK)
            k->errors++;
    chaos_history_note(k->fd, CHAOS_REC_EXIT, k->slot, (uint32_t)k->slot + 1, cs, fence, 0, 0);
}

static void *contend(void *arg)
{
    zk_contender *k = arg;
    const char *u = k->url;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    if (dlock_client_new(&c, &u, 1, NULL, NULL, 0) != DLOCK_OK ||
        !(l = zk_test_lock(c, k->name, k->flags, k->permits))) {
        k->errors++;
        dlock_client_free(c);
        return NULL;
    }
    int kind = k->permits                ? CHAOS_KIND_PERMIT
               : k->flags & DLOCK_SHARED ? CHAOS_KIND_SHARED
                                         : CHAOS_KIND_EXCLUSIVE;
    for (uint32_t cs = 0; cs < (uint32_t)k->rounds; cs++) {
        int rc = dlock_lock_acquire(l, 60000);
        if (rc == DLOCK_OK) {
            section(k, l, cs, kind);
            rc = dlock_lock_release(l);
        }
        if (rc != DLOCK_OK) {
            fprintf(stderr, "slot %d: %s (%s)\n", k->slot, dlock_strerror(rc),
                    dlock_lock_errmsg(l));
            k->errors++;
        }
    }
    dlock_lock_free(l);
    dlock_client_free(c);
    return NULL;
}

int zk_contend_start(zk_contender *k, int n, int fd)
{
    for (int i = 0; i < n; i++) {
        k[i].slot = i;
        k[i].fd = fd;
        if (pthread_create(&k[i].thread, NULL, contend, &k[i]) != 0)
            return -1;
    }
    return 0;
}

int zk_contend_join(zk_contender *k, int n)
{
    int errors = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(k[i].thread, NULL);
        errors += k[i].errors;
    }
    return errors;
}

int zk_history_new(char *path, size_t cap, const char *stem)
{
    test_tmp_path(path, cap, stem);
    unlink(path);
    return chaos_history_open(path);
}

int zk_history_verdict(const char *path, chaos_verdict *v)
{
    int rc = chaos_history_check(path, v);
    unlink(path);
    if (rc == 0)
        printf("%ld sections, %ld overlaps, at most %ld at once (%ld readers, %ld permits), "
               "%ld fence violations\n",
               v->cs, v->overlaps, v->max_concurrent, v->max_readers, v->max_permits,
               v->fence_violations);
    return rc;
}

uint64_t zk_hold_in_child(const char *url, const char *name, pid_t *pid)
{
    int p[2];
    uint64_t fence = 0;
    if (pipe(p) != 0)
        return 0;
    if ((*pid = test_fork_child()) == 0) {
        close(p[0]);
        dlock_client *c = NULL;
        dlock_lock *l = NULL;
        if (dlock_client_new(&c, &url, 1, NULL, NULL, 0) == DLOCK_OK &&
            dlock_lock_new(&l, c, name, NULL) == DLOCK_OK && dlock_lock_acquire(l, 0) == DLOCK_OK)
            fence = dlock_lock_fence(l);
        if (write(p[1], &fence, sizeof fence) != (ssize_t)sizeof fence)
            _exit(2);
        for (;;)
            pause();
    }
    close(p[1]);
    if (read(p[0], &fence, sizeof fence) != (ssize_t)sizeof fence)
        fence = 0;
    close(p[0]);
    return fence;
}
