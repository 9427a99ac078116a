/* SPDX-License-Identifier: BSD-3-Clause */
/* The order-dedup service's work, the same on any event loop (uv_dedup.c,
 * event_dedup.c): for each "ORDER <id>" line, take lock "order:<id>",
 * look in Redis whether the order was processed, process it (a few ms of
 * work on the loop) and record it, answer "DONE <id>" or "DUP <id>", and
 * give the lock back. Two server processes share the Redis server: the
 * lock is what keeps them from both processing an order sent to each. */
#ifndef DEDUP_ORDERS_H
#define DEDUP_ORDERS_H

#include <dlock.h>

/* The first member of a loop's connection record: the connection holds
 * one reference and each order in flight one; the last drop frees the
 * record (malloc'd). */
typedef struct dedup_conn {
    int refs;
} dedup_conn;

void dedup_conn_drop(dedup_conn *c);

/* What the loop's side gives the orders' side. */
typedef struct dedup_loop_ops {
    /* Answer line (no newline) on connection conn, unless it closed. */
    void (*reply)(dedup_conn *conn, const char *line);
    /* Call fn(arg) once from the loop, ms from now. */
    void (*after)(int ms, void (*fn)(void *), void *arg);
} dedup_loop_ops;

typedef struct dedup dedup;

/* Parse "PORT REDIS_HOST REDIS_PORT [--no-lock]" (--no-lock: the broken
 * control, processing without the lock). 0, or -1 after a usage line. */
int dedup_args(int argc, char **argv, int *port, const char **host, int *redis_port,
               int *use_lock);

/* The service on the loop of hooks: a looped dlock client and a hiredis
 * connection to host:redis_port. 0, or -1 after a message. */
int dedup_new(dedup **out, const dlock_loop *hooks, const dedup_loop_ops *ops, const char *host,
              int redis_port, int use_lock);

/* One line a connection sent: "ORDER <id>" starts its order. */
void dedup_line(dedup *d, dedup_conn *conn, const char *line);

#endif
