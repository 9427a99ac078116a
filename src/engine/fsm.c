/* SPDX-License-Identifier: BSD-3-Clause */
/* The handle's state table (fsm.h). Every cell is a transition the
 * engine may meet; none is refused:
 * - LOST stays LOST until the holder lets go: a re-entry's grant or an
 *   extend that raced the watchdog's verdict does not take back a loss
 *   that on_lost has reported (the next release says DLOCK_ELOST).
 * - UNLOCKED ignores a late loss verdict (on_lost released the lock
 *   first) and a late RENEWED (an extend that raced an on_lost release on
 *   the renewing thread). */
#include <pthread.h>

#include "fsm.h"
#include "handle.h"

enum { U = DLOCK_STATE_UNLOCKED, H = DLOCK_STATE_HELD, L = DLOCK_STATE_LOST };

const unsigned char dlock__fsm_next[3][DLOCK__EV_COUNT] = {
    /*                          GRANTED RENEWED LOST LET_GO */
    [DLOCK_STATE_UNLOCKED] = {H, U, U, U},
    [DLOCK_STATE_HELD] = {H, H, L, U},
    [DLOCK_STATE_LOST] = {L, L, L, U},
};

dlock_lock_state dlock__fsm_fire_locked(dlock_lock *l, dlock__ev ev, int64_t until_ns)
{
    dlock_lock_state before = l->state;
    dlock_lock_state next = (dlock_lock_state)dlock__fsm_next[before][ev];
    l->state = next;
    if (ev == DLOCK__EV_LET_GO)
        l->valid_until_ns = 0;
    else if (next == DLOCK_STATE_HELD && (ev == DLOCK__EV_GRANTED || ev == DLOCK__EV_RENEWED))
        l->valid_until_ns = until_ns;
    return before;
}

dlock_lock_state dlock__fsm_fire(dlock_lock *l, dlock__ev ev, int64_t until_ns)
{
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(&l->mu));
    dlock_lock_state before = dlock__fsm_fire_locked(l, ev, until_ns);
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(&l->mu));
    return before;
}
