/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stock_demo - why a distributed lock matters, in two runs of the same shop.
 *
 * Several worker processes sell items from one stock counter kept in Redis.
 * Each sale is a deliberately non-atomic read-modify-write:
 *
 *     n = GET stock;  if n <= 0 stop;  (think for 200 us);  SET stock n-1;
 *     INCR sold
 *
 * Phase 1 runs it without a lock: two workers read the same n, both sell,
 * and the shop sells more items than it had. Phase 2 wraps the same code in
 * a dlock lock (a waiting acquire with a deadline): exactly the stock is
 * sold.
 *
 * The counter uses plain hiredis; only the lock comes from dlock, through
 * the public API. Every worker is a separate process (fork) with its own
 * Redis connection and its own dlock client, as separate machines would be.
 *
 *   usage: stock_demo [-r redis://host:port] [-w workers] [-s stock]
 *
 * Exit status: 0 when phase 2 sold exactly the stock, 1 when it did not,
 * 2 on a usage or connection error.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "dlock.h"

#define KEY_STOCK "dlock-demo:stock"
#define KEY_SOLD "dlock-demo:sold"
#define LOCK_NAME "dlock-demo:stock-lock"

#define MAX_WORKERS 64
#define THINK_US 200          /* widens the race window of phase 1 */
#define PACK_US 1000          /* work after a sale, outside the lock */
#define LOCK_TTL_MS 5000      /* far longer than one sale takes */
#define ACQUIRE_WAIT_MS 10000 /* the deadline of each waiting acquire */

/* What one worker reports to the parent through a pipe. The struct is far
 * smaller than PIPE_BUF, so each write arrives whole. */
typedef struct worker_report {
    int worker;
    int failed;              /* 1: the worker hit an error (see msg) */
    long sold;               /* sales this worker made */
    long acquisitions;       /* successful dlock_lock_acquire calls */
    int64_t wait_ns_total;   /* time spent inside dlock_lock_acquire */
    int64_t wait_ns_max;
    char msg[256];
} worker_report;

/* ---- a small parser for the -r URL, for the hiredis connection -------- */

/* dlock parses the URL itself; the counter's own hiredis connection needs
 * host, port, password and db. Accepted: redis://[[user]:password@]host
 * [:port][/db] and unix:///path[?db=N]. (Percent-escapes are not decoded
 * here; use a password without them for this demo.) */
typedef struct redis_target {
    char host[256]; /* or socket path when unix */
    int port;
    int unix_socket;
    char user[128];
    char password[256];
    int db;
} redis_target;

static int copy_span(char *dst, size_t cap, const char *src, size_t len)
{
    if (len >= cap)
        return -1;
    memcpy(dst, src, len);
    dst[len] = '\0';
    return 0;
}

static int parse_target(redis_target *t, const char *url)
{
    memset(t, 0, sizeof *t);
    t->port = 6379;
    if (strncmp(url, "unix://", 7) == 0) {
        const char *path = url + 7, *q = strchr(path, '?');
        t->unix_socket = 1;
        if (copy_span(t->host, sizeof t->host, path, q ? (size_t)(q - path) : strlen(path)))
            return -1;
        if (q && strncmp(q, "?db=", 4) == 0)
            t->db = atoi(q + 4);
        return t->host[0] ? 0 : -1;
    }
    if (strncmp(url, "redis://", 8) != 0)
        return -1;
    const char *p = url + 8;
    const char *at = strrchr(p, '@');
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon) {
            if (copy_span(t->user, sizeof t->user, p, (size_t)(colon - p)) ||
                copy_span(t->password, sizeof t->password, colon + 1,
                          (size_t)(at - colon - 1)))
                return -1;
        } else if (copy_span(t->password, sizeof t->password, p, (size_t)(at - p))) {
            return -1;
        }
        p = at + 1;
    }
    const char *end = p + strcspn(p, "/");
    const char *colon = NULL;
    if (*p == '[') { /* [::1]:6379 */
        const char *close = memchr(p, ']', (size_t)(end - p));
        if (!close || copy_span(t->host, sizeof t->host, p + 1, (size_t)(close - p - 1)))
            return -1;
        colon = close + 1 < end && close[1] == ':' ? close + 1 : NULL;
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        if (copy_span(t->host, sizeof t->host, p, colon ? (size_t)(colon - p) : (size_t)(end - p)))
            return -1;
    }
    if (colon) {
        char *stop;
        long port = strtol(colon + 1, &stop, 10);
        if (stop != end || port < 1 || port > 65535)
            return -1;
        t->port = (int)port;
    }
    if (*end == '/' && end[1])
        t->db = atoi(end + 1);
    if (!t->host[0])
        snprintf(t->host, sizeof t->host, "127.0.0.1");
    return 0;
}

/* Connect, authenticate and select the db. Returns NULL and prints why on
 * failure. */
static redisContext *connect_target(const redis_target *t)
{
    struct timeval tv = {2, 0};
    redisContext *c = t->unix_socket ? redisConnectUnixWithTimeout(t->host, tv)
                                     : redisConnectWithTimeout(t->host, t->port, tv);
    if (!c || c->err) {
        fprintf(stderr, "stock_demo: cannot connect to %s%s%d: %s\n", t->host,
                t->unix_socket ? "" : ":", t->unix_socket ? 0 : t->port,
                c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    redisReply *r = NULL;
    if (t->password[0]) {
        r = t->user[0] ? redisCommand(c, "AUTH %s %s", t->user, t->password)
                       : redisCommand(c, "AUTH %s", t->password);
        if (!r || r->type == REDIS_REPLY_ERROR)
            goto fail;
        freeReplyObject(r);
    }
    if (t->db) {
        r = redisCommand(c, "SELECT %d", t->db);
        if (!r || r->type == REDIS_REPLY_ERROR)
            goto fail;
        freeReplyObject(r);
    }
    return c;
fail:
    fprintf(stderr, "stock_demo: %s\n",
            r ? r->str : c->errstr[0] ? c->errstr : "connection lost");
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return NULL;
}

/* ---- the counter: plain hiredis --------------------------------------- */

/* Check a reply that must not be an error; on failure, say so in rep,
 * free the reply and return NULL. */
static redisReply *must(redisContext *c, redisReply *r, worker_report *rep, const char *what)
{
    if (!r || r->type == REDIS_REPLY_ERROR) {
        snprintf(rep->msg, sizeof rep->msg, "%s: %s", what,
                 r ? r->str : c->errstr[0] ? c->errstr : "no reply");
        if (r)
            freeReplyObject(r);
        rep->failed = 1;
        return NULL;
    }
    return r;
}

/* Sell one item the non-atomic way. Returns 1 when an item was sold, 0
 * when the stock was empty, -1 on error. */
static int sell_one(redisContext *c, worker_report *rep)
{
    redisReply *r = must(c, redisCommand(c, "GET %s", KEY_STOCK), rep, "GET");
    if (!r)
        return -1;
    long n = r->type == REDIS_REPLY_STRING ? strtol(r->str, NULL, 10) : 0;
    freeReplyObject(r);
    if (n <= 0)
        return 0;

    /* "Check the payment", "reserve the shelf": whatever a real shop does
     * between reading the stock and writing it back. */
    struct timespec think = {0, THINK_US * 1000L};
    nanosleep(&think, NULL);

    if (!(r = must(c, redisCommand(c, "SET %s %ld", KEY_STOCK, n - 1), rep, "SET")))
        return -1;
    freeReplyObject(r);
    if (!(r = must(c, redisCommand(c, "INCR %s", KEY_SOLD), rep, "INCR")))
        return -1;
    freeReplyObject(r);
    return 1;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- one worker process ------------------------------------------------ */

static void worker_main(int id, int use_lock, const char *url, const redis_target *t,
                        int gate_fd, int report_fd)
{
    worker_report rep;
    memset(&rep, 0, sizeof rep);
    rep.worker = id;

    redisContext *c = connect_target(t);
    dlock_client *client = NULL;
    dlock_lock *lock = NULL;
    if (!c) {
        rep.failed = 1;
        snprintf(rep.msg, sizeof rep.msg, "cannot connect to Redis");
        goto out;
    }
    if (use_lock) {
        /* Each process makes its own client after fork: a dlock client has
         * threads and connections that must not be shared across fork. */
        char err[200] = "";
        int rc = dlock_client_new(&client, &url, 1, NULL, err, sizeof err);
        if (rc != DLOCK_OK) {
            rep.failed = 1;
            snprintf(rep.msg, sizeof rep.msg, "dlock_client_new: %s: %s",
                     dlock_strerror(rc), err);
            goto out;
        }
        dlock_lock_options lo = DLOCK_LOCK_OPTIONS_INIT;
        lo.ttl_ms = LOCK_TTL_MS;
        /* Sales take about a millisecond, so poll for a busy lock often. */
        lo.retry_min_ms = 1;
        lo.retry_max_ms = 10;
        if ((rc = dlock_lock_new(&lock, client, LOCK_NAME, &lo)) != DLOCK_OK) {
            rep.failed = 1;
            snprintf(rep.msg, sizeof rep.msg, "dlock_lock_new: %s", dlock_strerror(rc));
            goto out;
        }
        /* Connect now, before the start, so that the first wait measured
         * is a wait for the lock and not for a TCP handshake. */
        dlock_node_status st;
        if ((rc = dlock_client_status(client, LOCK_NAME, 1, &st, NULL)) != DLOCK_OK) {
            rep.failed = 1;
            snprintf(rep.msg, sizeof rep.msg, "dlock_client_status: %s", dlock_strerror(rc));
            goto out;
        }
    }

    /* Wait at the gate until every worker is ready: EOF means "go". */
    char b;
    while (read(gate_fd, &b, 1) < 0 && errno == EINTR)
        ;

    for (;;) {
        int sold;
        if (!use_lock) {
            sold = sell_one(c, &rep);
        } else {
            int64_t t0 = now_ns();
            int rc = dlock_lock_acquire(lock, ACQUIRE_WAIT_MS);
            int64_t waited = now_ns() - t0;
            if (rc != DLOCK_OK) {
                rep.failed = 1;
                snprintf(rep.msg, sizeof rep.msg, "acquire: %s (%s)", dlock_strerror(rc),
                         dlock_lock_errmsg(lock));
                break;
            }
            rep.acquisitions++;
            rep.wait_ns_total += waited;
            if (waited > rep.wait_ns_max)
                rep.wait_ns_max = waited;

            sold = sell_one(c, &rep);

            rc = dlock_lock_release(lock);
            if (rc != DLOCK_OK && sold >= 0) {
                /* DLOCK_EEXPIRED here would mean the sale outlasted the
                 * lease: another worker may have sold meanwhile. */
                rep.failed = 1;
                snprintf(rep.msg, sizeof rep.msg, "release: %s (%s)", dlock_strerror(rc),
                         dlock_lock_errmsg(lock));
                if (sold > 0)
                    rep.sold++;
                break;
            }
        }
        if (sold <= 0)
            break;
        rep.sold++;
        /* Pack the parcel: work that needs no lock, so it is done after
         * the release and other workers get their turn meanwhile. */
        struct timespec pack = {0, PACK_US * 1000L};
        nanosleep(&pack, NULL);
    }

out:
    dlock_lock_free(lock);
    dlock_client_free(client);
    if (c)
        redisFree(c);
    if (write(report_fd, &rep, sizeof rep) != (ssize_t)sizeof rep)
        _exit(3);
    _exit(rep.failed ? 1 : 0);
}

/* ---- one phase: reset the counter, run the workers, collect ------------ */

typedef struct phase_result {
    long sold_counter;   /* KEY_SOLD at the end */
    long stock_left;     /* KEY_STOCK at the end */
    long sold_by_worker[MAX_WORKERS];
    long sold_sum;       /* sum of the workers' own counts */
    long acquisitions;
    int64_t wait_ns_total, wait_ns_max;
    int64_t elapsed_ns;
    int failures;
} phase_result;

static long get_long(redisContext *c, const char *key)
{
    redisReply *r = redisCommand(c, "GET %s", key);
    long v = r && r->type == REDIS_REPLY_STRING ? strtol(r->str, NULL, 10) : 0;
    if (r)
        freeReplyObject(r);
    return v;
}

static int set_counters(const redis_target *t, long stock)
{
    redisContext *c = connect_target(t);
    if (!c)
        return -1;
    redisReply *r = redisCommand(c, "MSET %s %ld %s 0", KEY_STOCK, stock, KEY_SOLD);
    int ok = r && r->type != REDIS_REPLY_ERROR;
    if (!ok)
        fprintf(stderr, "stock_demo: MSET: %s\n", r ? r->str : c->errstr);
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return ok ? 0 : -1;
}

static int run_phase(int use_lock, const char *url, const redis_target *t, int workers,
                     long stock, phase_result *res)
{
    memset(res, 0, sizeof *res);
    if (set_counters(t, stock) != 0)
        return -1;

    int gate[2], report[2];
    if (pipe(gate) != 0 || pipe(report) != 0) {
        perror("stock_demo: pipe");
        return -1;
    }
    pid_t pids[MAX_WORKERS];
    int started = 0;
    fflush(NULL); /* or the children would print our buffered output again */
    for (int i = 0; i < workers; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("stock_demo: fork");
            break;
        }
        if (pid == 0) {
            close(gate[1]);
            close(report[0]);
            worker_main(i, use_lock, url, t, gate[0], report[1]);
        }
        pids[started++] = pid;
    }
    close(gate[0]);
    close(report[1]);
    int64_t t0 = now_ns();
    close(gate[1]); /* open the gate: every worker starts now */

    int got = 0;
    worker_report rep;
    for (;;) {
        ssize_t n = read(report[0], &rep, sizeof rep);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != (ssize_t)sizeof rep)
            break; /* EOF: every worker is done */
        got++;
        if (rep.worker >= 0 && rep.worker < MAX_WORKERS)
            res->sold_by_worker[rep.worker] = rep.sold;
        res->sold_sum += rep.sold;
        res->acquisitions += rep.acquisitions;
        res->wait_ns_total += rep.wait_ns_total;
        if (rep.wait_ns_max > res->wait_ns_max)
            res->wait_ns_max = rep.wait_ns_max;
        if (rep.failed) {
            res->failures++;
            fprintf(stderr, "  worker %d: %s\n", rep.worker, rep.msg);
        }
    }
    res->elapsed_ns = now_ns() - t0;
    close(report[0]);
    for (int i = 0; i < started; i++)
        while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
            ;
    res->failures += started - got + (workers - started);

    redisContext *c = connect_target(t);
    if (!c)
        return -1;
    res->sold_counter = get_long(c, KEY_SOLD);
    res->stock_left = get_long(c, KEY_STOCK);
    redisReply *r = redisCommand(c, "DEL %s %s", KEY_STOCK, KEY_SOLD);
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return 0;
}

static void print_split(const phase_result *r, int workers)
{
    printf("               per worker:");
    for (int i = 0; i < workers && i < 16; i++)
        printf(" %ld", r->sold_by_worker[i]);
    if (workers > 16)
        printf(" ... (%d more)", workers - 16);
    printf("  (%.0f ms)\n", (double)r->elapsed_ns / 1e6);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: stock_demo [-r redis://host:port] [-w workers] [-s stock]\n"
               "  -r URL  Redis to use (default redis://127.0.0.1:6379); keys "
               "dlock-demo:* are overwritten\n"
               "  -w N    worker processes, 2..%d (default 8)\n"
               "  -s N    items in stock, 1..1000000 (default 100)\n",
            MAX_WORKERS);
}

int main(int argc, char **argv)
{
    const char *url = "redis://127.0.0.1:6379";
    int workers = 8;
    long stock = 100;
    int opt;
    char *end;

    while ((opt = getopt(argc, argv, "r:w:s:h")) != -1) {
        switch (opt) {
        case 'r':
            url = optarg;
            break;
        case 'w':
            workers = (int)strtol(optarg, &end, 10);
            if (*end || workers < 2 || workers > MAX_WORKERS) {
                usage(stderr);
                return 2;
            }
            break;
        case 's':
            stock = strtol(optarg, &end, 10);
            if (*end || stock < 1 || stock > 1000000) {
                usage(stderr);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    redis_target target;
    if (parse_target(&target, url) != 0) {
        fprintf(stderr, "stock_demo: cannot parse URL %s\n", url);
        return 2;
    }
    /* A worker that dies must not kill us with SIGPIPE on a pipe write. */
    signal(SIGPIPE, SIG_IGN);
    redisContext *probe = connect_target(&target);
    if (!probe)
        return 2;
    redisFree(probe);

    printf("stock_demo (dlock %s): %d worker processes sell from a stock of %ld in %s\n"
           "each sale: GET stock, think %d us, SET stock n-1, INCR sold; then pack "
           "for %d us\n\n",
           dlock_version(), workers, stock, url, THINK_US, PACK_US);

    phase_result p1, p2;
    if (run_phase(0, url, &target, workers, stock, &p1) != 0)
        return 2;
    long over1 = p1.sold_counter - stock;
    printf("without lock: %d workers sold %ld items from a stock of %ld  -> ", workers,
           p1.sold_counter, stock);
    if (over1 > 0)
        printf("OVERSOLD by %ld\n", over1);
    else if (over1 < 0)
        printf("undersold by %ld (a worker failed)\n", -over1);
    else
        printf("no oversell this time (the race is timing-dependent; run again "
               "or add workers)\n");
    print_split(&p1, workers);

    if (run_phase(1, url, &target, workers, stock, &p2) != 0)
        return 2;
    long over2 = p2.sold_counter - stock;
    int correct = over2 == 0 && p2.stock_left == 0 && p2.sold_sum == p2.sold_counter &&
                  p2.failures == 0;
    printf("with dlock:   %d workers sold %ld items from a stock of %ld  -> ", workers,
           p2.sold_counter, stock);
    if (correct)
        printf("correct\n");
    else if (over2 > 0)
        printf("OVERSOLD by %ld (this is a bug in the lock)\n", over2);
    else
        printf("WRONG (stock left %ld, %d worker(s) failed)\n", p2.stock_left, p2.failures);
    print_split(&p2, workers);
    printf("               lock: %ld acquisitions (%ld sales, %ld found the stock empty), "
           "average wait %.2f ms, longest %.2f ms\n",
           p2.acquisitions, p2.sold_sum, p2.acquisitions - p2.sold_sum,
           p2.acquisitions ? (double)p2.wait_ns_total / 1e6 / (double)p2.acquisitions : 0.0,
           (double)p2.wait_ns_max / 1e6);
    return correct ? 0 : 1;
}
