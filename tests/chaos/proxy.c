/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "history.h"
#include "proc.h"
#include "proxy.h"

#define MAX_PAIRS 256
#define MAX_QUEUED (256 * 1024) /* per direction: stop reading beyond it */

typedef struct ctl_msg {
    int mode;
    int delay_ms;
} ctl_msg;

typedef struct chunk {
    struct chunk *next;
    int64_t due_ns;
    size_t len, off;
    char data[];
} chunk;

typedef struct queue {
    chunk *head, *tail;
    size_t bytes;
} queue;

typedef struct pair {
    int used;
    int cfd, sfd;
    int connecting; /* sfd's connect() in progress */
    int blackholed;
    queue to_srv, to_cli;
} pair;

typedef struct proxy_state {
    int mode, delay_ms, target_port;
    pair pairs[MAX_PAIRS];
} proxy_state;

const char *chaos_proxy_mode_name(chaos_proxy_mode m)
{
    static const char *names[] = {"pass", "delay", "drop", "blackhole", "reset", "deaf"};
    return (unsigned)m <= CHAOS_PROXY_DEAF ? names[m] : "?";
}

static void queue_clear(queue *q)
{
    while (q->head) {
        chunk *c = q->head;
        q->head = c->next;
        free(c);
    }
    q->tail = NULL;
    q->bytes = 0;
}

static void close_fd(int *fd, int rst)
{
    if (*fd < 0)
        return;
    if (rst) {
        struct linger lg = {1, 0};
        setsockopt(*fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    close(*fd);
    *fd = -1;
}

static void pair_close(pair *p, int rst)
{
    close_fd(&p->cfd, rst);
    close_fd(&p->sfd, rst);
    queue_clear(&p->to_srv);
    queue_clear(&p->to_cli);
    p->used = 0;
}

static void blackhole(pair *p)
{
    p->blackholed = 1;
    close_fd(&p->sfd, 0);
    queue_clear(&p->to_srv);
    queue_clear(&p->to_cli);
}

static int connect_target(int port, int *connecting)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        *connecting = 0;
        return fd;
    }
    if (errno == EINPROGRESS) {
        *connecting = 1;
        return fd;
    }
    close(fd);
    return -1;
}

static void on_accept(proxy_state *st, int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    pair *p = NULL;
    for (int i = 0; i < MAX_PAIRS && !p; i++)
        if (!st->pairs[i].used)
            p = &st->pairs[i];
    if (!p || st->mode == CHAOS_PROXY_DROP || st->mode == CHAOS_PROXY_RESET) {
        close_fd(&fd, !p || st->mode == CHAOS_PROXY_RESET);
        return;
    }
    memset(p, 0, sizeof *p);
    p->used = 1;
    p->cfd = fd;
    p->sfd = -1;
    if (st->mode == CHAOS_PROXY_BLACKHOLE) {
        p->blackholed = 1;
        return;
    }
    p->sfd = connect_target(st->target_port, &p->connecting);
    if (p->sfd < 0)
        pair_close(p, 1); /* the node is down: the client sees a reset */
}

static void apply_mode(proxy_state *st, const ctl_msg *m)
{
    st->mode = m->mode;
    st->delay_ms = m->mode == CHAOS_PROXY_DELAY ? m->delay_ms : 0;
    for (int i = 0; i < MAX_PAIRS; i++) {
        pair *p = &st->pairs[i];
        if (!p->used)
            continue;
        if (m->mode == CHAOS_PROXY_DROP || m->mode == CHAOS_PROXY_RESET)
            pair_close(p, m->mode == CHAOS_PROXY_RESET);
        else if (m->mode == CHAOS_PROXY_BLACKHOLE)
            blackhole(p);
    }
}

/* Read what fd has; queue it for the other side (or discard it). -1: closed. */
static int pump_in(proxy_state *st, pair *p, int fd, queue *q)
{
    char buf[16384];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return -1;
    if (n < 0 || p->blackholed || (st->mode == CHAOS_PROXY_DEAF && fd == p->sfd))
        return 0;
    chunk *c = malloc(sizeof *c + (size_t)n);
    if (!c)
        return -1;
    c->next = NULL;
    c->due_ns = chaos_now_ns() + (int64_t)st->delay_ms * 1000000;
    c->len = (size_t)n;
    c->off = 0;
    memcpy(c->data, buf, (size_t)n);
    if (q->tail)
        q->tail->next = c;
    else
        q->head = c;
    q->tail = c;
    q->bytes += (size_t)n;
    return 0;
}

/* Write the due chunks of q to fd. -1: broken. */
static int pump_out(int fd, queue *q)
{
    int64_t now = chaos_now_ns();
    while (q->head && q->head->due_ns <= now) {
        chunk *c = q->head;
        ssize_t n = send(fd, c->data + c->off, c->len - c->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        c->off += (size_t)n;
        q->bytes -= (size_t)n;
        if (c->off < c->len)
            return 0;
        q->head = c->next;
        if (!q->head)
            q->tail = NULL;
        free(c);
    }
    return 0;
}

static int due(const queue *q, int64_t now, int64_t *next)
{
    if (!q->head)
        return 0;
    if (q->head->due_ns <= now)
        return 1;
    if (q->head->due_ns < *next)
        *next = q->head->due_ns;
    return 0;
}

static void proxy_main(int lfd, int ctl, int ack, int target_port)
{
    static proxy_state st;
    struct pollfd pfd[2 + 2 * MAX_PAIRS];
    int owner[2 + 2 * MAX_PAIRS];
    st.target_port = target_port;
    for (;;) {
        int64_t now = chaos_now_ns(), next = now + 1000000000;
        int k = 0;
        pfd[k++] = (struct pollfd){ctl, POLLIN, 0};
        pfd[k++] = (struct pollfd){lfd, POLLIN, 0};
        for (int i = 0; i < MAX_PAIRS; i++) {
            pair *p = &st.pairs[i];
            if (!p->used)
                continue;
            short ce = POLLIN, se = 0;
            if (!p->blackholed && p->to_srv.bytes > MAX_QUEUED)
                ce = 0;
            if (due(&p->to_cli, now, &next))
                ce |= POLLOUT;
            if (p->sfd >= 0) {
                se = p->connecting ? POLLOUT : (p->to_cli.bytes > MAX_QUEUED ? 0 : POLLIN);
                if (!p->connecting && due(&p->to_srv, now, &next))
                    se |= POLLOUT;
            }
            owner[k] = i;
            pfd[k++] = (struct pollfd){p->cfd, ce, 0};
            if (p->sfd >= 0) {
                owner[k] = i;
                pfd[k++] = (struct pollfd){p->sfd, se, 0};
            }
        }
        int timeout = (int)((next - now + 999999) / 1000000);
        if (poll(pfd, (nfds_t)k, timeout < 1 ? 1 : timeout) < 0 && errno != EINTR)
            return;
        if (pfd[0].revents) {
            ctl_msg m;
            ssize_t n = read(ctl, &m, sizeof m);
            if (n != (ssize_t)sizeof m)
                return; /* the driver closed the pipe (or died): stop */
            apply_mode(&st, &m);
            char b = 1;
            (void)!write(ack, &b, 1);
            continue; /* fds may have been closed: poll again */
        }
        if (pfd[1].revents & POLLIN)
            on_accept(&st, lfd);
        for (int m = 2; m < k; m++) {
            pair *p = &st.pairs[owner[m]];
            short re = pfd[m].revents;
            if (!p->used || !re)
                continue;
            int is_cli = pfd[m].fd == p->cfd;
            int rc = 0;
            if (!is_cli && p->connecting && (re & (POLLOUT | POLLERR | POLLHUP))) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(p->sfd, SOL_SOCKET, SO_ERROR, &err, &len);
                rc = err ? -1 : 0;
                p->connecting = 0;
                re &= (short)~POLLOUT;
            }
            if (rc == 0 && (re & (POLLIN | POLLERR | POLLHUP)))
                rc = pump_in(&st, p, pfd[m].fd, is_cli ? &p->to_srv : &p->to_cli);
            if (rc == 0 && (re & POLLOUT) && p->used && !p->blackholed)
                rc = pump_out(pfd[m].fd, is_cli ? &p->to_cli : &p->to_srv);
            if (rc < 0 && is_cli && p->sfd >= 0 && !p->connecting && !p->blackholed)
                /* What a client wrote before it closed reaches the node,
                 * as over TCP (its due part: a delayed chunk is lost). */
                (void)pump_out(p->sfd, &p->to_srv);
            if (rc < 0)
                pair_close(p, 0);
        }
    }
}

int chaos_proxy_start(chaos_proxy *p, int target_port)
{
    int ctl[2], ack[2];
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(p, 0, sizeof *p);
    p->pid = -1;
    p->target_port = target_port;
    int lfd = -1;
    for (int tries = 0; tries < 20 && lfd < 0; tries++) {
        /* Below the ephemeral range, as every test server (proc.h). */
        int port = test_free_port();
        lfd = port > 0 ? socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) : -1;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (lfd >= 0 && (bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
                         listen(lfd, 128) != 0 ||
                         getsockname(lfd, (struct sockaddr *)&a, &len) != 0)) {
            close(lfd);
            lfd = -1;
        }
    }
    if (lfd < 0)
        return -1;
    if (pipe2(ctl, O_CLOEXEC) != 0)
        return close(lfd), -1;
    if (pipe2(ack, O_CLOEXEC) != 0)
        return close(lfd), close(ctl[0]), close(ctl[1]), -1;
    p->port = ntohs(a.sin_port);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        signal(SIGPIPE, SIG_IGN);
        close(ctl[1]);
        close(ack[0]);
        proxy_main(lfd, ctl[0], ack[1], target_port);
        _exit(0);
    }
    close(lfd);
    close(ctl[0]);
    close(ack[1]);
    if (pid < 0) {
        close(ctl[1]);
        close(ack[0]);
        return -1;
    }
    p->pid = pid;
    p->ctl = ctl[1];
    p->ack = ack[0];
    return 0;
}

int chaos_proxy_set(chaos_proxy *p, chaos_proxy_mode mode, int delay_ms)
{
    ctl_msg m = {(int)mode, delay_ms};
    if (p->pid <= 0 || write(p->ctl, &m, sizeof m) != (ssize_t)sizeof m)
        return -1;
    struct pollfd pfd = {p->ack, POLLIN, 0};
    char b;
    if (poll(&pfd, 1, 2000) != 1 || read(p->ack, &b, 1) != 1)
        return -1;
    return 0;
}

void chaos_proxy_stop(chaos_proxy *p)
{
    if (p->pid <= 0)
        return;
    close(p->ctl);
    close(p->ack);
    for (int i = 0; i < 200; i++) {
        if (waitpid(p->pid, NULL, WNOHANG) == p->pid) {
            p->pid = -1;
            return;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    p->pid = -1;
}
