/* SPDX-License-Identifier: BSD-3-Clause */
/* Single flight: one discovery of a kind at a time per client (one CLUSTER
 * SLOTS learn per cluster, one round of Sentinel questions per sentinel
 * node), whatever the threads. A request that finds one in flight
 * observes it instead of starting another: it waits, on its own loop, for
 * the flight to land, then looks again (the map may be known now, or it
 * starts the next flight itself). Nothing is shared with the flight but
 * its end: a request that stops early (cancel, deadline) leaves nobody
 * stranded, since observers only learn that it ended.
 *
 * The state is guarded by the owner's mutex, held only to change it,
 * never across I/O. An observer is an io record on an eventfd of its own
 * (made only to observe): the flight's end writes it from the flying
 * thread, and the observer's loop calls it back. */
#ifndef DLOCK_FLIGHT_H
#define DLOCK_FLIGHT_H

#include <pthread.h>

#include "loop.h"

typedef struct dlock__flight_obs {
    struct dlock__flight_obs *next, **pprev; /* in the flight's list; pprev NULL: in none */
    int efd;                                 /* -1 when not observing */
    dlock__io io;                            /* the eventfd, on the observer's loop */
    dlock__loop *loop;
} dlock__flight_obs;

typedef struct dlock__flight {
    int busy; /* a discovery is in flight */
    dlock__flight_obs *obs;
} dlock__flight;

/* Under the guarding mutex: wait on loop l (ready: the callback) for the
 * flight to land. DLOCK_OK, or DLOCK_EIO (no eventfd) / DLOCK_ENOMEM (the
 * loop is full), nothing set. */
int dlock__flight_observe(dlock__flight *f, dlock__flight_obs *o, dlock__loop *l,
                          void (*ready)(dlock__io *io, unsigned events));

/* Stop observing (the observer's thread; takes mu itself). Called from
 * the observer's ready callback too, once it landed. */
void dlock__flight_unobserve(dlock__flight_obs *o, pthread_mutex_t *mu);

/* Under the guarding mutex: the flight landed (or was abandoned); every
 * observer is told. */
void dlock__flight_land(dlock__flight *f);

#endif
