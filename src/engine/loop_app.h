/* SPDX-License-Identifier: BSD-3-Clause */
/* An application's loop (dlock.h, "Event loops") as a dlock__loop: the
 * engine's six hooks (loop.h) over the adapter's four. Records go to the
 * adapter as they are (dlock_io and dlock_timer are loop.h's records); a
 * deferred record is a timer due now, which every loop fires at its next
 * turn, never inside the call that set it. wake() does nothing: a looped
 * client is used from the loop's thread only (dlock.h), so nothing on
 * another thread has to make the loop turn. The adapter never sees a
 * record cleared that it was not given (the record's `app` flag). */
#ifndef DLOCK_LOOP_APP_H
#define DLOCK_LOOP_APP_H

#include "dlock.h"
#include "loop.h"

typedef struct dlock__loop_app {
    dlock__loop loop; /* the engine's hooks, with data = this */
    dlock_loop hooks; /* the application's, copied */
} dlock__loop_app;

/* Check hooks (version, none NULL) and make la from them: DLOCK_OK, or
 * DLOCK_EINVAL with a message in err. */
int dlock__loop_app_init(dlock__loop_app *la, const dlock_loop *hooks, char *err, size_t len);

#endif
