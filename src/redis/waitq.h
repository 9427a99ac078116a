/* SPDX-License-Identifier: BSD-3-Clause */
/* The waiting protocol's numbers (lib/waitq.lua, docs/waiting.md), as the
 * strings the scripts get: shared by the steps that send them (attempt.c,
 * release.c) and the waits that keep them (wait.c, fair.c), so that the
 * steps need not include the waits. */
#ifndef DLOCK_WAITQ_H
#define DLOCK_WAITQ_H

/* How long a subscribed waiter's entry in the lock's waiter list lives
 * unless it looks again (lib/waitq.lua), in ms, as the string the acquire
 * scripts get: two looks (SAFETY_POLL_MS in wait.c), so a live waiter that
 * looks on time stays listed, and a dead one drops out soon. */
#define DLOCK__WAIT_ENTRY_MS_S "400"

/* Runs and turns (plain locks on one node; lib/waitq.lua, docs/waiting.md
 * "Runs and turns"), as the strings the release script gets: a contended
 * holder keeps the lock for DLOCK__RUN_US_S microseconds past its first
 * release before the release hands it to the longest waiter, which has
 * DLOCK__TURN_MS_S ms to take it. */
#define DLOCK__RUN_US_S "1000"
#define DLOCK__TURN_MS_S "50"

/* A cancel must end a wait at once: the best-effort step that takes a
 * cancelled waiter out of a list or line (wq_leave.lua, fair_leave.lua)
 * gets this long, in ms, and otherwise its entry lapses by itself or, in
 * fair mode, the handle's next acquire or free cleans up. */
#define DLOCK__CANCEL_LEAVE_MS 100

#endif
