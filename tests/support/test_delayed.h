/* SPDX-License-Identifier: BSD-3-Clause */
/* Faults on a timer: an admin command (DEBUG SLEEP, CLIENT KILL, ...) sent
 * to a server from a helper thread after a delay, while the main thread is
 * inside a dlock call; and the cut-off that makes that call's outcome
 * unknown. The helper thread asserts nothing; test_delayed_join() does. */
#ifndef DLOCK_TEST_DELAYED_H
#define DLOCK_TEST_DELAYED_H

#include <pthread.h>

#include "redis_server.h"

typedef struct test_delayed {
    const test_redis *srv;
    int delay_ms;
    const char *cmd;
    int ok; /* the command got a reply that is not an error */
    pthread_t th;
} test_delayed;

/* Send cmd to srv delay_ms from now, from a helper thread. */
void test_delayed_start(test_delayed *d, const test_redis *srv, int delay_ms, const char *cmd);
/* Wait for it; the command must have succeeded. */
void test_delayed_join(test_delayed *d);

/* Pause srv's writes for 600 ms and, 150 ms into the pause, kill its
 * normal clients' connections: a command sent now reaches the server and
 * is cut off before it runs (outcome unknown). test_delayed_join(d) after
 * the call. */
void test_cut_off_next_command(test_delayed *d, const test_redis *srv);

#endif
