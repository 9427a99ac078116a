/* SPDX-License-Identifier: BSD-3-Clause */
/* The handle's public state (dlock_lock_state: unlocked / held / lost)
 * changes only here, by events the engine fires, through one table
 * (fsm.c). A backend never writes the state: it reports a grant's lease
 * end (dlock__lock_granted()) and the engine fires GRANTED when the
 * backend's acquire returns. docs/design.md, "Engine", draws the table. */
#ifndef DLOCK_FSM_H
#define DLOCK_FSM_H

#include <stdint.h>

#include "common.h"

typedef enum dlock__ev {
    DLOCK__EV_GRANTED, /* a hold taken: acquire, re-entry, adopt */
    DLOCK__EV_RENEWED, /* the lease moved: an extend (a renewal round moves validity only) */
    DLOCK__EV_LOST,    /* the watchdog's verdict: not ours, or no majority by the lease end */
    DLOCK__EV_LET_GO,  /* the handle holds nothing: released, dropped, ended, forgotten */
    DLOCK__EV_COUNT
} dlock__ev;

/* next = dlock__fsm_next[state][event] (states in dlock.h's order). */
extern const unsigned char dlock__fsm_next[3][DLOCK__EV_COUNT];

/* Fire ev on the handle: its state becomes the table's next state, and
 * when that is HELD its validity becomes until_ns (INT64_MIN: unknown);
 * LET_GO sets it to 0. Returns the state before. Takes l->mu; the
 * _locked form is for a caller that holds it. */
dlock_lock_state dlock__fsm_fire(dlock_lock *l, dlock__ev ev, int64_t until_ns);
dlock_lock_state dlock__fsm_fire_locked(dlock_lock *l, dlock__ev ev, int64_t until_ns);

#endif
