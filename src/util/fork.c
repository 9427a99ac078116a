/* SPDX-License-Identifier: BSD-3-Clause */
#include <pthread.h>

#include "common.h"
#include "fork.h"

_Atomic unsigned long dlock__fork_gen;

static pthread_once_t watch_once = PTHREAD_ONCE_INIT;

/* Runs in the child only, before fork() returns there: the child has one
 * thread, so a relaxed store cannot race. */
static void in_child(void)
{
    atomic_fetch_add_explicit(&dlock__fork_gen, 1, memory_order_relaxed);
}

static void install(void)
{
    /* glibc registers the handler with this library's DSO handle, so a
     * dlclose() of libdlock removes it again. */
    DLOCK__CHECK_PTHREAD(pthread_atfork(NULL, NULL, in_child));
}

unsigned long dlock__fork_watch(void)
{
    DLOCK__CHECK_PTHREAD(pthread_once(&watch_once, install));
    return dlock__fork_generation();
}
