/* SPDX-License-Identifier: BSD-3-Clause */
/* The order-dedup service on libuv: a TCP server (127.0.0.1:PORT) whose
 * clients send lines "ORDER <id>"; each order is handled under lock
 * "order:<id>" by dedup_orders.c, on this loop, with no thread.
 *
 *     uv_dedup 7000 127.0.0.1 6379     (and another on 7001: an order sent
 *                                       to both is processed once) */
#include <stdlib.h>
#include <string.h>

#include <dlock/libuv.h>

#include "dedup_orders.h"

#define LINE_MAX_BYTES 256

static uv_loop_t *loop;
static dedup *service;

typedef struct conn {
    dedup_conn head; /* first: freed by its last drop */
    uv_tcp_t tcp;
    int closed;
    size_t len;
    char buf[LINE_MAX_BYTES];
} conn;

static void conn_closed(uv_handle_t *h)
{
    dedup_conn_drop(h->data);
}

static void written(uv_write_t *w, int status)
{
    (void)status;
    free(w); /* the line is in the same block */
}

static void conn_reply(dedup_conn *head, const char *line)
{
    conn *c = (conn *)head;
    size_t n = strlen(line);
    uv_write_t *w = malloc(sizeof *w + n + 1);
    if (c->closed || !w) {
        free(w);
        return;
    }
    char *text = (char *)(w + 1);
    memcpy(text, line, n);
    text[n] = '\n';
    uv_buf_t buf = uv_buf_init(text, (unsigned)(n + 1));
    if (uv_write(w, (uv_stream_t *)&c->tcp, &buf, 1, written) != 0)
        free(w);
}

typedef struct later {
    uv_timer_t t;
    void (*fn)(void *);
    void *arg;
} later;

static void later_free(uv_handle_t *h)
{
    free(h->data);
}

static void later_cb(uv_timer_t *t)
{
    later *l = t->data;
    l->fn(l->arg);
    uv_close((uv_handle_t *)t, later_free);
}

static void after(int ms, void (*fn)(void *), void *arg)
{
    later *l = malloc(sizeof *l);
    if (!l)
        abort(); /* an example: a real service answers ERR */
    l->fn = fn;
    l->arg = arg;
    uv_timer_init(loop, &l->t);
    l->t.data = l;
    uv_timer_start(&l->t, later_cb, (uint64_t)ms, 0);
}

static void alloc_cb(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
    conn *c = h->data;
    (void)size;
    *buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof c->buf - c->len));
}

static void conn_close(conn *c)
{
    c->closed = 1;
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

/* Each complete line is an order; a line longer than the buffer closes. */
static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    conn *c = s->data;
    char *nl;
    (void)buf;
    if (n < 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t)n;
    while ((nl = memchr(c->buf, '\n', c->len)) != NULL) {
        *nl = '\0';
        if (nl > c->buf && nl[-1] == '\r')
            nl[-1] = '\0';
        dedup_line(service, &c->head, c->buf);
        c->len -= (size_t)(nl + 1 - c->buf);
        memmove(c->buf, nl + 1, c->len);
    }
    if (c->len == sizeof c->buf)
        conn_close(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    conn *c = calloc(1, sizeof *c);
    if (status < 0 || !c) {
        free(c);
        return;
    }
    c->head.refs = 1;
    uv_tcp_init(loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) != 0)
        conn_close(c);
}

int main(int argc, char **argv)
{
    int port, redis_port, use_lock;
    const char *host;
    if (dedup_args(argc, argv, &port, &host, &redis_port, &use_lock) != 0)
        return 64;
    loop = uv_default_loop();
    dlock_loop hooks = dlock_libuv_loop(loop);
    dedup_loop_ops ops = {conn_reply, after};
    if (dedup_new(&service, &hooks, &ops, host, redis_port, use_lock) != 0)
        return 1;
    uv_tcp_t server;
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", port, &addr);
    uv_tcp_init(loop, &server);
    if (uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0) != 0 ||
        uv_listen((uv_stream_t *)&server, 128, on_connection) != 0) {
        fprintf(stderr, "uv_dedup: cannot listen on port %d\n", port);
        return 1;
    }
    return uv_run(loop, UV_RUN_DEFAULT);
}
