/* SPDX-License-Identifier: BSD-3-Clause */
/* One acquire attempt on Redis (every node, decided by majority) and the
 * undo of what a failed or cancelled attempt may have taken. */
#ifndef DLOCK_ATTEMPT_H
#define DLOCK_ATTEMPT_H

#include <stdint.h>

#include "common.h"

/* One attempt (backend.h, attempt). *retry is set when waiting longer
 * could help. */
int dlock__attempt(dlock_lock *l, int *retry);

/* Counted kinds: send the undo of the pending attempt to the nodes that
 * have not answered it yet. Returns 1 while some node still has not, also
 * when cancel_fd (a waiting acquire's cancel pipe; -1: none) became
 * readable first: the undo then runs unheard. */
int dlock__send_undo(dlock_lock *l, int64_t timeout_ms, int cancel_fd);

#endif
