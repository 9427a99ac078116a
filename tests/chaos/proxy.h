/* SPDX-License-Identifier: BSD-3-Clause */
/* A small TCP fault proxy for the chaos tests: a forked process that listens
 * on 127.0.0.1 (a free port) and forwards every connection to one Redis node
 * on 127.0.0.1, driven by poll(). The driver switches its mode through a
 * pipe and waits for the proxy's acknowledgement, so a fault is in effect
 * when chaos_proxy_set() returns. (This kernel has no tc netem.)
 *
 * Modes:
 *   PASS       forward both ways
 *   DELAY      hold every chunk for delay_ms before forwarding it (in order)
 *   DROP       close every connection (FIN), and new ones on accept
 *   BLACKHOLE  keep connections open, read and discard everything, forward
 *              nothing; a connection that lost bytes stays blackholed until
 *              it is closed, so a byte stream is never resumed with a gap
 *   RESET      abort every connection with RST (SO_LINGER 0), new ones too
 *   DEAF       forward requests to the node, discard its replies: the
 *              command runs and the client never hears of it (not drawn
 *              by the chaos rounds, which pick among the modes above)
 */
#ifndef DLOCK_CHAOS_PROXY_H
#define DLOCK_CHAOS_PROXY_H

#include <sys/types.h>

typedef enum chaos_proxy_mode {
    CHAOS_PROXY_PASS = 0,
    CHAOS_PROXY_DELAY,
    CHAOS_PROXY_DROP,
    CHAOS_PROXY_BLACKHOLE,
    CHAOS_PROXY_RESET,
    CHAOS_PROXY_MODES,
    CHAOS_PROXY_DEAF = CHAOS_PROXY_MODES
} chaos_proxy_mode;

typedef struct chaos_proxy {
    pid_t pid;
    int port;        /* where clients connect */
    int target_port; /* the node */
    int ctl;         /* write end of the control pipe */
    int ack;         /* read end of the acknowledgement pipe */
} chaos_proxy;

/* Start a proxy in front of 127.0.0.1:target_port. 0 or -1. */
int chaos_proxy_start(chaos_proxy *p, int target_port);

/* Switch mode (delay_ms is used by DELAY). 0 once applied, -1 on error. */
int chaos_proxy_set(chaos_proxy *p, chaos_proxy_mode mode, int delay_ms);

/* Stop it (by pid) and reap it. Safe to call twice. */
void chaos_proxy_stop(chaos_proxy *p);

const char *chaos_proxy_mode_name(chaos_proxy_mode mode);

#endif
