/* SPDX-License-Identifier: BSD-3-Clause */
/* The order-dedup service on libevent: a TCP server (127.0.0.1:PORT) whose
 * clients send lines "ORDER <id>"; each order is handled under lock
 * "order:<id>" by dedup_orders.c, on this event_base, with no thread.
 *
 *     event_dedup 7000 127.0.0.1 6379  (and another on 7001: an order sent
 *                                       to both is processed once) */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include <dlock/libevent.h>

#include "dedup_orders.h"

#define LINE_MAX_BYTES 256

static struct event_base *base;
static dedup *service;

typedef struct conn {
    dedup_conn head;         /* first: freed by its last drop */
    struct bufferevent *bev; /* NULL once closed */
} conn;

static void conn_reply(dedup_conn *head, const char *line)
{
    conn *c = (conn *)head;
    if (c->bev) {
        bufferevent_write(c->bev, line, strlen(line));
        bufferevent_write(c->bev, "\n", 1);
    }
}

static void conn_close(conn *c)
{
    bufferevent_free(c->bev);
    c->bev = NULL;
    dedup_conn_drop(&c->head);
}

typedef struct later {
    struct event *e;
    void (*fn)(void *);
    void *arg;
} later;

static void later_cb(evutil_socket_t fd, short what, void *arg)
{
    later *l = arg;
    (void)fd;
    (void)what;
    l->fn(l->arg);
    event_free(l->e);
    free(l);
}

static void after(int ms, void (*fn)(void *), void *arg)
{
    later *l = malloc(sizeof *l);
    if (!l || !(l->e = evtimer_new(base, later_cb, l)))
        abort(); /* an example: a real service answers ERR */
    l->fn = fn;
    l->arg = arg;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(l->e, &tv);
}

/* Each complete line is an order; a line longer than that closes. */
static void read_cb(struct bufferevent *bev, void *arg)
{
    conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    char *line;
    while ((line = evbuffer_readln(in, NULL, EVBUFFER_EOL_CRLF)) != NULL) {
        dedup_line(service, &c->head, line);
        free(line);
    }
    if (evbuffer_get_length(in) >= LINE_MAX_BYTES)
        conn_close(c);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        conn_close(arg);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                      int len, void *arg)
{
    conn *c = calloc(1, sizeof *c);
    (void)l;
    (void)sa;
    (void)len;
    (void)arg;
    if (!c || !(c->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE))) {
        evutil_closesocket(fd);
        free(c);
        return;
    }
    c->head.refs = 1;
    bufferevent_setcb(c->bev, read_cb, NULL, event_cb, c);
    bufferevent_enable(c->bev, EV_READ);
}

int main(int argc, char **argv)
{
    int port, redis_port, use_lock;
    const char *host;
    if (dedup_args(argc, argv, &port, &host, &redis_port, &use_lock) != 0)
        return 64;
    base = event_base_new();
    if (!base)
        return 1;
    dlock_loop hooks = dlock_libevent_loop(base);
    dedup_loop_ops ops = {conn_reply, after};
    if (dedup_new(&service, &hooks, &ops, host, redis_port, use_lock) != 0)
        return 1;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!evconnlistener_new_bind(base, on_accept, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                                 128, (struct sockaddr *)&addr, sizeof addr)) {
        fprintf(stderr, "event_dedup: cannot listen on port %d\n", port);
        return 1;
    }
    return event_base_dispatch(base);
}
