/* SPDX-License-Identifier: BSD-3-Clause */
/* A fan-out run's end (fanout_run.h): once over (stopped, cancelled, or
 * nothing left to wait for), from the loop's next turn, the cancel's
 * reports, every connection handed back (to its pool, its pipe, or the
 * caller's kept[]), then done(). */
#include "fanout_run.h"

typedef dlock__fan fan;
typedef dlock__fan_slot slot;

/* A slot still waits: for replies, or for its discovery. */
static int any_live(const fan *f)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->slots[i].state == SLOT_LIVE || f->slots[i].state == SLOT_DISCOVERING)
            return 1;
    return 0;
}

/* Cancelled: stop waiting now. What was sent may still run; the caller
 * queues its undo behind it on the same connections
 * (dlock__fanout_send_behind). A discovery is stopped (a flight of ours
 * lands for its observers). */
static void run_cancel(fan *f)
{
    for (size_t i = 0; i < f->n; i++)
        f->cut_live |= f->slots[i].state == SLOT_LIVE;
    for (size_t i = 0; i < f->n && !f->stop; i++) {
        slot *s = &f->slots[i];
        if (s->state == SLOT_DISCOVERING) {
            /* Nothing was sent; a relearn's failure keeps its code. */
            dlock__discover_stop(s->disc);
            snprintf(s->disc->err, sizeof s->disc->err, "%s",
                     f->client->nodes[s->node].cluster
                         ? "cancelled while learning the cluster's slot map"
                         : "cancelled while asking the sentinels for the primary");
            f->stop = dlock__fan_fail_node(f, s, s->relearn ? s->fail_code : DLOCK_EIO, SLOT_FAILED);
        } else if (s->state == SLOT_LIVE) {
            f->stop = dlock__fan_fail_node(f, s, dlock__fan_sent(s) ? DLOCK_EUNKNOWN : DLOCK_EIO,
                                SLOT_FAILED);
        }
    }
}

/* Every connection goes back to its node's pool, or to the caller (kept). */
static void run_finish(fan *f)
{
    int canceled = f->cancel.raised && f->cut_live;
    dlock__fd_flag_clear(f->loop, &f->cancel);
    for (size_t i = 0; i < f->n; i++) {
        slot *s = &f->slots[i];
        if (s->disc) {
            /* Stopped, off the loop: a flight of ours lands. */
            dlock__discover_stop(s->disc);
            dlock__free(s->disc);
            s->disc = NULL;
        }
        dlock__io_clear(f->loop, &s->io);
        dlock__timer_clear(f->loop, &s->timer);
    }
    for (size_t i = 0; i < f->n; i++) {
        slot *s = &f->slots[i];
        dlock__conn *c = s->conn;
        if (s->held)
            freeReplyObject(s->held);
        if (!c)
            continue;
        if (s->pc) {
            /* An undo owed goes behind on the same shared connection. */
            if (f->kept && c->state != DLOCK__CS_BROKEN && (canceled || s->kept)) {
                f->kept[i] = c;
                dlock__pipe_ref(s->pc);
            }
            dlock__pipe_leave(s->pc, &s->pu);
            s->pc = NULL;
            s->conn = NULL;
            continue;
        }
        if (f->kept && c->state == DLOCK__CS_OPEN && c->caller_sent && (canceled || s->kept)) {
            f->kept[i] = c;
            continue;
        }
        if (c->state == DLOCK__CS_OPEN && dlock__conn_has_output(c)) {
            /* Unsent commands must not go out later on a reused connection,
             * out of order with what the caller does next. */
            dlock__conn_fail(c, DLOCK_EIO, "abandoned with unsent output");
        }
        dlock__conn_abandon(c);
        dlock__node_checkin(&f->client->nodes[i], c);
    }
}

/* The run is over (fanout_run.h): after the cancel's reports, every
 * connection is handed back, then done() runs. Always from the loop's
 * next turn: a run that ends inside its start, or inside a discovery's
 * callback (whose sub-request is freed here), ends after it returned. */
static void run_end(dlock__timer *t)
{
    fan *f = DLOCK__OWNER(t, fan, fin);
    if (f->cancel.raised)
        run_cancel(f);
    run_finish(f);
    /* A cancel that found only discoveries cut nothing in flight: their
     * slots failed (DLOCK_EIO, nothing sent), and the caller's wait
     * consumes the cancel as it did when discovery came first. */
    f->rc = f->cancel.raised && f->cut_live ? DLOCK_ECANCELED : DLOCK_OK;
    f->done(f);
}

/* After every step: a run that is over (stopped, cancelled, or nothing
 * left to wait for) ends at the loop's next turn, and hears nothing more
 * meanwhile (f->ending). */
void dlock__fan_check(fan *f)
{
    if (f->ending || !(f->stop || f->cancel.raised || !any_live(f)))
        return;
    f->ending = 1;
    f->fin.fire = run_end;
    dlock__defer(f->loop, &f->fin);
}
