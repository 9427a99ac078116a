/* SPDX-License-Identifier: BSD-3-Clause */
/* The blocking fan-out calls (fanout.h): a run (fanout_run.h) on a
 * private poll loop, turned on the calling thread until the run is done. */
#include "fanout_run.h"

typedef dlock__fan fan;

typedef struct blocking_run {
    fan f;
    int over;
} blocking_run;

static void blocking_done(fan *f)
{
    DLOCK__OWNER(f, blocking_run, f)->over = 1;
}

static int blocking_over(void *arg)
{
    return ((blocking_run *)arg)->over;
}

static int run(struct dlock_client *client, const dlock__req *reqs, uint32_t nreqs,
               const dlock__fanout_opts *o, int cancel_fd, dlock__conn **kept,
               int keep_timed_out, dlock__on_reply cb, void *arg)
{
    blocking_run b;
    dlock__loop_poll lp;
    dlock__loop_poll_init(&lp);
    dlock__fan_init(&b.f, client, reqs, nreqs, o, cb, arg);
    b.f.cancel_fd = cancel_fd;
    b.f.kept = kept;
    b.f.keep_timed_out = keep_timed_out;
    b.over = 0;
    dlock__fan_start(&b.f, &lp.loop, blocking_done);
    dlock__loop_poll_run(&lp, blocking_over, &b, INT64_MAX);
    dlock__loop_poll_close(&lp);
    return b.f.rc;
}

int dlock__fanout(struct dlock_client *client, const dlock__req *reqs,
                  uint32_t nreqs, const dlock__fanout_opts *o,
                  dlock__on_reply cb, void *arg)
{
    return dlock__fanout_cancellable(client, reqs, nreqs, o, -1, NULL, cb, arg);
}

int dlock__fanout_cancellable(struct dlock_client *client, const dlock__req *reqs,
                              uint32_t nreqs, const dlock__fanout_opts *o, int cancel_fd,
                              dlock__conn **kept, dlock__on_reply cb, void *arg)
{
    return run(client, reqs, nreqs, o, cancel_fd, kept, 0, cb, arg);
}

int dlock__fanout_attempt(struct dlock_client *client, const dlock__req *reqs,
                          uint32_t nreqs, const dlock__fanout_opts *o, int cancel_fd,
                          dlock__conn **kept, dlock__on_reply cb, void *arg)
{
    return run(client, reqs, nreqs, o, cancel_fd, kept, 1, cb, arg);
}
