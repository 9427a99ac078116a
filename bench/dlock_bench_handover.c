/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock-bench-handover: the hand-over limit of issue 20, measured.
 *
 *   dlock-bench-handover PORT PROCS SECONDS CHANNEL HOP
 *
 * PROCS processes pass a turn round a ring through one redis-server's
 * pub/sub, with no lock at all: each waits for a message naming it, then
 * PUBLISHes the next one's name (its "release") and waits for the reply.
 * That is the least a lock hand-over can cost here: a release, a publish,
 * and the next holder already knows. Prints the turns passed per second.
 *
 * CHANNEL "one": every process subscribes to one channel and drops the
 * messages for the others, as dlock's waiters share a lock's channel;
 * "own": a channel per process. HOP 1: a second thread reads the
 * subscription and wakes the main thread, as dlock's wake-up thread wakes
 * the acquiring one; HOP 0: the main thread reads it itself. */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct ring {
    int port, procs, own, hop, me;
    redisContext *sub, *cmd;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int turns_due; /* hop: turns the reader saw, not yet taken */
} ring;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "dlock-bench-handover: %s\n", what);
    exit(2);
}

static void channel_of(const ring *r, int who, char *buf, size_t len)
{
    if (r->own)
        snprintf(buf, len, "handover:%d", who);
    else
        snprintf(buf, len, "handover");
}

/* Block for the next message; 1 if it names this process. */
static int read_turn(ring *r)
{
    redisReply *m = NULL;
    if (redisGetReply(r->sub, (void **)&m) != REDIS_OK || !m)
        die("subscriber connection lost");
    int mine = m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
               m->element[2]->type == REDIS_REPLY_STRING && atoi(m->element[2]->str) == r->me;
    freeReplyObject(m);
    return mine;
}

static void *reader(void *arg)
{
    ring *r = arg;
    for (;;) {
        if (!read_turn(r))
            continue;
        pthread_mutex_lock(&r->mu);
        r->turns_due++;
        pthread_cond_signal(&r->cond);
        pthread_mutex_unlock(&r->mu);
    }
    return NULL;
}

static void wait_turn(ring *r)
{
    if (!r->hop) {
        while (!read_turn(r))
            ;
        return;
    }
    pthread_mutex_lock(&r->mu);
    while (r->turns_due == 0)
        pthread_cond_wait(&r->cond, &r->mu);
    r->turns_due--;
    pthread_mutex_unlock(&r->mu);
}

/* Pass the turn from member `from` to the next one. */
static void pass_turn(ring *r, int from)
{
    int next = (from + 1) % r->procs;
    char ch[32], who[16];
    channel_of(r, next, ch, sizeof ch);
    snprintf(who, sizeof who, "%d", next);
    redisReply *rep = redisCommand(r->cmd, "PUBLISH %s %s", ch, who);
    if (!rep)
        die("command connection lost");
    freeReplyObject(rep);
}

/* One ring member: subscribe, say ready, wait for the start time, then
 * take and pass turns until `end`; the first turn after it is passed on so
 * that every member gets one and ends. Writes its count to `out`. */
static void member(ring *r, int ready_fd, int go_fd, int out_fd, unsigned limit_s)
{
    alarm(limit_s); /* a lost turn ends the run instead of hanging it */
    r->sub = redisConnect("127.0.0.1", r->port);
    r->cmd = redisConnect("127.0.0.1", r->port);
    if (!r->sub || r->sub->err || !r->cmd || r->cmd->err)
        die("cannot connect");
    char ch[32];
    channel_of(r, r->me, ch, sizeof ch);
    redisReply *rep = redisCommand(r->sub, "SUBSCRIBE %s", ch);
    if (!rep)
        die("SUBSCRIBE failed");
    freeReplyObject(rep);
    pthread_t t;
    if (r->hop && pthread_create(&t, NULL, reader, r) != 0)
        die("pthread_create");
    char b = 1;
    double end;
    if (write(ready_fd, &b, 1) != 1 || read(go_fd, &end, sizeof end) != sizeof end)
        die("start pipe");
    if (r->me == 0)
        pass_turn(r, r->procs - 1); /* the first turn goes to member 0 */
    long turns = 0;
    for (;;) {
        wait_turn(r);
        if (now_s() >= end)
            break;
        turns++;
        pass_turn(r, r->me);
    }
    pass_turn(r, r->me);
    if (write(out_fd, &turns, sizeof turns) != sizeof turns)
        die("result pipe");
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc != 6)
        die("usage: dlock-bench-handover PORT PROCS SECONDS one|own HOP(0|1)");
    ring r = {.port = atoi(argv[1]), .procs = atoi(argv[2]), .own = !strcmp(argv[4], "own"),
              .hop = atoi(argv[5])};
    double secs = atof(argv[3]);
    if (r.port <= 0 || r.procs < 2 || r.procs > 64 || secs <= 0 ||
        (strcmp(argv[4], "one") && strcmp(argv[4], "own")))
        die("bad arguments");
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cond, NULL);
    int ready[2], go[2], out[2];
    if (pipe(ready) || pipe(go) || pipe(out))
        die("pipe");
    unsigned limit_s = (unsigned)secs + 20;
    alarm(limit_s);
    for (int i = 0; i < r.procs; i++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            r.me = i;
            member(&r, ready[1], go[0], out[1], limit_s);
        }
    }
    close(ready[1]);
    close(out[1]);
    char b;
    for (int i = 0; i < r.procs; i++)
        if (read(ready[0], &b, 1) != 1)
            die("a member did not start");
    double end = now_s() + secs;
    for (int i = 0; i < r.procs; i++)
        if (write(go[1], &end, sizeof end) != sizeof end)
            die("start pipe");
    long total = 0, turns;
    for (int i = 0; i < r.procs; i++) {
        if (read(out[0], &turns, sizeof turns) != sizeof turns)
            die("a member did not report");
        total += turns;
    }
    while (wait(NULL) > 0)
        ;
    printf("%.0f\n", (double)total / secs);
    return 0;
}
