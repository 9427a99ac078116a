/* SPDX-License-Identifier: BSD-3-Clause */
/* A wake-up subscriber's frames read and acted on (wakeup_frames.c). */
#ifndef DLOCK_WAKEUP_FRAMES_H
#define DLOCK_WAKEUP_FRAMES_H

#include <stddef.h>

#include "wakeup_thread.h"

/* Handle the frames buffered on node i's subscriber: confirmations,
 * messages, refusals, dropped channels. DLOCK_OK, or an error after which
 * the caller drops the connection (node_down). On the thread, wk->mu
 * held. */
int dlock__wakeup_read_frames(dlock_client *c, dlock__wakeup *wk, size_t i);

#endif
