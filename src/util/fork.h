/* SPDX-License-Identifier: BSD-3-Clause */
/* Fork detection without a system call.
 *
 * A client belongs to the process that made it (a child of fork() shares
 * its sockets with the parent). Asking getpid() on every public call cost a
 * system call per call; instead a pthread_atfork() child handler bumps a
 * process-wide generation, and a client remembers the generation it was
 * made in. A process made by a raw clone()/syscall(SYS_fork), which skips
 * the atfork handlers, is not detected: glibc's fork(), posix_spawn() and
 * the exec family are the supported ways to start a child. */
#ifndef DLOCK_FORK_H
#define DLOCK_FORK_H

#include <stdatomic.h>

/* Bumped in every child of fork(). Read through dlock__fork_generation(). */
extern _Atomic unsigned long dlock__fork_gen;

/* Install the atfork handler (once per process) and return the current
 * generation. Call it when making a client. */
unsigned long dlock__fork_watch(void);

/* The current generation: a relaxed atomic load, no system call. */
static inline unsigned long dlock__fork_generation(void)
{
    return atomic_load_explicit(&dlock__fork_gen, memory_order_relaxed);
}

#endif
