/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "dedup_orders.h"

/* How long processing an order takes: the window in which a second
 * server, without the lock, would process it too. */
#define WORK_MS 20
#define ID_MAX 64

struct dedup {
    dlock_client *client;
    redisContext *redis; /* plain blocking commands: one round trip each */
    dedup_loop_ops ops;
    int use_lock;
};

typedef struct order {
    dedup *d;
    dedup_conn *conn;
    dlock_lock *lock;
    char id[ID_MAX];
} order;

int dedup_args(int argc, char **argv, int *port, const char **host, int *redis_port,
               int *use_lock)
{
    if (argc < 4 || argc > 5 || (argc == 5 && strcmp(argv[4], "--no-lock") != 0)) {
        fprintf(stderr, "usage: %s PORT REDIS_HOST REDIS_PORT [--no-lock]\n", argv[0]);
        return -1;
    }
    *port = atoi(argv[1]);
    *host = argv[2];
    *redis_port = atoi(argv[3]);
    *use_lock = argc == 4;
    return 0;
}

int dedup_new(dedup **out, const dlock_loop *hooks, const dedup_loop_ops *ops, const char *host,
              int redis_port, int use_lock)
{
    dedup *d = calloc(1, sizeof *d);
    char url[300], err[256] = "";
    if (!d)
        return -1;
    d->ops = *ops;
    d->use_lock = use_lock;
    snprintf(url, sizeof url, "redis://%s:%d", host, redis_port);
    const char *urls[] = {url};
    dlock_client_options opts = DLOCK_CLIENT_OPTIONS_INIT;
    opts.loop = hooks;
    if (dlock_client_new(&d->client, urls, 1, &opts, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "dlock: %s\n", err);
        free(d);
        return -1;
    }
    d->redis = redisConnect(host, redis_port);
    if (!d->redis || d->redis->err) {
        fprintf(stderr, "redis: %s\n", d->redis ? d->redis->errstr : "out of memory");
        redisFree(d->redis);
        dlock_client_free(d->client);
        free(d);
        return -1;
    }
    *out = d;
    return 0;
}

void dedup_conn_drop(dedup_conn *c)
{
    if (--c->refs == 0)
        free(c);
}

static void order_free(order *o)
{
    dedup_conn_drop(o->conn);
    free(o);
}

static void released(dlock_lock *lock, int rc, void *arg)
{
    if (rc != DLOCK_OK)
        fprintf(stderr, "release: %s\n", dlock_strerror(rc));
    dlock_lock_free(lock);
    order_free(arg);
}

/* Answer, then give the lock back (the next server in line then sees the
 * order recorded). */
static void answer(order *o, const char *word)
{
    char line[ID_MAX + 32];
    snprintf(line, sizeof line, "%s %s", word, o->id);
    o->d->ops.reply(o->conn, line);
    if (o->lock)
        dlock_lock_release_start(o->lock, released, o);
    else
        order_free(o);
}

static long long redis_int(dedup *d, const char *cmd, const char *id)
{
    redisReply *r = redisCommand(d->redis, cmd, id);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

/* The work is done: record it. Without the lock another server may have
 * done it too meanwhile (SADD then adds nothing): both answer DONE, the
 * double processing the lock prevents. */
static void processed(void *arg)
{
    order *o = arg;
    answer(o, redis_int(o->d, "SADD dedup:processed %s", o->id) >= 0 ? "DONE" : "ERR");
}

/* Under the lock: the order is new only if no server recorded it. */
static void check(order *o)
{
    long long seen = redis_int(o->d, "SISMEMBER dedup:processed %s", o->id);
    if (seen != 0) {
        answer(o, seen == 1 ? "DUP" : "ERR");
        return;
    }
    o->d->ops.after(WORK_MS, processed, o);
}

static void got(dlock_lock *lock, int rc, void *arg)
{
    order *o = arg;
    if (rc != DLOCK_OK) {
        fprintf(stderr, "order %s: %s\n", o->id, dlock_lock_errmsg(lock));
        dlock_lock_free(lock);
        o->lock = NULL;
        answer(o, "ERR");
        return;
    }
    check(o);
}

void dedup_line(dedup *d, dedup_conn *conn, const char *line)
{
    char name[ID_MAX + 8];
    order *o;
    if (strncmp(line, "ORDER ", 6) != 0 || strlen(line + 6) >= ID_MAX ||
        !(o = calloc(1, sizeof *o))) {
        d->ops.reply(conn, "ERR");
        return;
    }
    o->d = d;
    o->conn = conn;
    strcpy(o->id, line + 6);
    conn->refs++;
    if (!d->use_lock) {
        check(o);
        return;
    }
    dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
    lo.ttl_ms = 5000;
    snprintf(name, sizeof name, "order:%s", o->id);
    if (dlock_lock_new(&o->lock, d->client, name, &lo) != DLOCK_OK ||
        dlock_lock_acquire_start(o->lock, 10000, got, o) != DLOCK_OK) {
        dlock_lock_free(o->lock);
        o->lock = NULL;
        answer(o, "ERR");
    }
}
