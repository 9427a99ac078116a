/* SPDX-License-Identifier: BSD-3-Clause */
/* Single flight of a discovery (flight.h). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common.h"
#include "flight.h"

int dlock__flight_observe(dlock__flight *f, dlock__flight_obs *o, dlock__loop *l,
                          void (*ready)(dlock__io *io, unsigned events))
{
    o->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (o->efd < 0)
        return DLOCK_EIO;
    o->loop = l;
    o->io = (dlock__io){0};
    o->io.fd = o->efd;
    o->io.want = DLOCK__IO_READ;
    o->io.ready = ready;
    if (dlock__io_set(l, &o->io) != DLOCK_OK) {
        close(o->efd);
        o->efd = -1;
        return DLOCK_ENOMEM;
    }
    o->next = f->obs;
    if (f->obs)
        f->obs->pprev = &o->next;
    o->pprev = &f->obs;
    f->obs = o;
    return DLOCK_OK;
}

void dlock__flight_unobserve(dlock__flight_obs *o, pthread_mutex_t *mu)
{
    if (o->efd < 0)
        return;
    DLOCK__CHECK_PTHREAD(pthread_mutex_lock(mu));
    if (o->pprev) {
        *o->pprev = o->next;
        if (o->next)
            o->next->pprev = o->pprev;
        o->next = NULL;
        o->pprev = NULL;
    }
    DLOCK__CHECK_PTHREAD(pthread_mutex_unlock(mu));
    /* No writer after this: the flight writes only to listed observers,
     * under mu. */
    dlock__io_clear(o->loop, &o->io);
    close(o->efd);
    o->efd = -1;
}

void dlock__flight_land(dlock__flight *f)
{
    f->busy = 0;
    while (f->obs) {
        dlock__flight_obs *o = f->obs;
        f->obs = o->next;
        if (f->obs)
            f->obs->pprev = &f->obs;
        o->next = NULL;
        o->pprev = NULL;
        uint64_t one = 1;
        /* EAGAIN: the counter is full, so it is readable anyway. */
        if (write(o->efd, &one, sizeof one) < 0 && errno != EAGAIN)
            dlock__misuse("flight: eventfd write: %s", strerror(errno));
    }
}
