/* SPDX-License-Identifier: BSD-3-Clause */
/* The handle's state table (src/engine/fsm.c): each (state, event) cell,
 * and what a transition does to the handle's validity. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fsm.h"
#include "handle.h"

enum { U = DLOCK_STATE_UNLOCKED, H = DLOCK_STATE_HELD, L = DLOCK_STATE_LOST };

/* The table as docs/design.md ("Engine") states it, written out again so
 * that a change to one is a change to the other. */
static const struct {
    int from, ev, to;
} spec[] = {
    {U, DLOCK__EV_GRANTED, H}, {U, DLOCK__EV_RENEWED, U}, {U, DLOCK__EV_LOST, U},
    {U, DLOCK__EV_LET_GO, U},  {H, DLOCK__EV_GRANTED, H}, {H, DLOCK__EV_RENEWED, H},
    {H, DLOCK__EV_LOST, L},    {H, DLOCK__EV_LET_GO, U},  {L, DLOCK__EV_GRANTED, L},
    {L, DLOCK__EV_RENEWED, L}, {L, DLOCK__EV_LOST, L},    {L, DLOCK__EV_LET_GO, U},
};

static void every_cell_is_the_documented_transition(void **state)
{
    (void)state;
    size_t n = sizeof spec / sizeof spec[0];
    assert_int_equal(n, 3 * DLOCK__EV_COUNT); /* every cell, once */
    for (size_t i = 0; i < n; i++)
        assert_int_equal(dlock__fsm_next[spec[i].from][spec[i].ev], spec[i].to);
}

static void fire_moves_the_handle_and_says_where_it_was(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof spec / sizeof spec[0]; i++) {
        struct dlock_lock l;
        memset(&l, 0, sizeof l);
        assert_int_equal(pthread_mutex_init(&l.mu, NULL), 0);
        l.state = (dlock_lock_state)spec[i].from;
        l.valid_until_ns = 1000;
        assert_int_equal(dlock__fsm_fire(&l, (dlock__ev)spec[i].ev, 5000), spec[i].from);
        assert_int_equal(l.state, spec[i].to);
        /* The validity is the event's only when the handle ends up HELD
         * by a grant or an extend; letting go clears it; a loss keeps it
         * (the watchdog's reports read it). */
        int64_t want = spec[i].ev == DLOCK__EV_LET_GO ? 0
                       : spec[i].to == H && spec[i].ev != DLOCK__EV_LOST ? 5000
                                                                         : 1000;
        assert_int_equal(l.valid_until_ns, want);
        pthread_mutex_destroy(&l.mu);
    }
}

static void a_loss_is_never_taken_back_but_by_letting_go(void **state)
{
    (void)state;
    for (int ev = 0; ev < DLOCK__EV_COUNT; ev++)
        assert_int_equal(dlock__fsm_next[L][ev], ev == DLOCK__EV_LET_GO ? U : L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_cell_is_the_documented_transition),
        cmocka_unit_test(fire_moves_the_handle_and_says_where_it_was),
        cmocka_unit_test(a_loss_is_never_taken_back_but_by_letting_go),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
