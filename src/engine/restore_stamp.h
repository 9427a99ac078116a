/* SPDX-License-Identifier: BSD-3-Clause */
/* A stamp written back with a key the watchdog puts back on a node that
 * lost it (a Redlock election's value: its last write that a majority
 * took, restore_batch.lua; docs/elections.md, "Redlock"). The owner
 * replaces it after each such write while a renewal round on the
 * watchdog's thread may copy it, so both go under its mutex. Counted: a
 * looped client's write in flight keeps the one it will set, as its
 * handle may be freed first (backend.h, elect_write_start). The bytes are
 * the backend's; the engine only keeps them. */
#ifndef DLOCK_RESTORE_STAMP_H
#define DLOCK_RESTORE_STAMP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

typedef struct dlock__restore_stamp {
    pthread_mutex_t mu;
    atomic_int refs;
    char *bytes; /* NULL: none yet */
    size_t len;
} dlock__restore_stamp;

/* A stamp without bytes and one reference, or NULL out of memory. */
dlock__restore_stamp *dlock__restore_stamp_new(void);
/* Another reference to s (NULL: none); returns s. */
dlock__restore_stamp *dlock__restore_stamp_ref(dlock__restore_stamp *s);
/* Drop a reference; the last one frees s. NULL is ignored. forked: in
 * a child of fork(), where the mutex may be held by a thread not copied
 * (memory only, the mutex not destroyed). */
void dlock__restore_stamp_unref(dlock__restore_stamp *s, int forked);
/* Replace s's bytes with `bytes` (taken over, dlock__malloc'd). */
void dlock__restore_stamp_set(dlock__restore_stamp *s, char *bytes, size_t len);
/* Append s's bytes, then tail's tail_len bytes, to *buf at offset at,
 * growing *buf (room *cap) to fit: measured, grown and copied in one
 * hold of s's mutex, so a set meanwhile cannot make the copy miss. The
 * bytes appended, or 0 (s has none, or out of memory: *buf unchanged,
 * though a grown *buf may have moved). */
size_t dlock__restore_stamp_append(dlock__restore_stamp *s, char **buf, size_t *cap, size_t at,
                                   const char *tail, size_t tail_len);

#endif
