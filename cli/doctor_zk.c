/* SPDX-License-Identifier: BSD-3-Clause */
/* dlock doctor on a ZooKeeper ensemble (zk://): each member asked with
 * ZooKeeper's own "srvr" command (its version, its mode in the ensemble,
 * its znode count; the one four-letter word ZooKeeper whitelists by
 * default), whether a majority answers, whether the ensemble is one
 * server, and a lock taken and given back through the library, timed,
 * with its fence. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "doctor.h"

int doc_is_zk(const char *url)
{
    return !strncmp(url, "zk://", 5);
}

/* Wait for fd to be ready for events, timeout_ms at most: 1, 0 (timed
 * out) or -1. */
static int wait_fd(int fd, short events, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = events};
    int n;
    do
        n = poll(&p, 1, timeout_ms);
    while (n < 0 && errno == EINTR);
    return n;
}

/* Send "srvr" to host:port and read the reply until the member closes
 * (it always does): 0, or -1 with err. */
static int srvr(const char *host, const char *port, int timeout_ms, char *out, size_t len,
                char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0) {
        snprintf(err, errlen, "%s", gai_strerror(rc));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    size_t got = 0;
    int ok = fd >= 0 && (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS);
    freeaddrinfo(ai);
    if (ok && wait_fd(fd, POLLOUT, timeout_ms) == 1) {
        int so = 0;
        socklen_t sl = sizeof so;
        ok = getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) == 0 && so == 0 &&
             send(fd, "srvr", 4, MSG_NOSIGNAL) == 4;
        if (!ok && so)
            errno = so;
    } else {
        ok = 0;
        errno = errno ? errno : ETIMEDOUT;
    }
    while (ok && got + 1 < len && wait_fd(fd, POLLIN, timeout_ms) == 1) {
        ssize_t n = recv(fd, out + got, len - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    out[got] = '\0';
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (!ok) {
        snprintf(err, errlen, "%s", strerror(e));
        return -1;
    }
    return 0;
}

/* The value of "name: value" in a srvr reply, or "?". */
static void field(const char *reply, const char *name, char *out, size_t len)
{
    const char *at = strstr(reply, name);
    snprintf(out, len, "?");
    if (!at)
        return;
    at += strlen(name);
    size_t n = strcspn(at, "\r\n");
    snprintf(out, len, "%.*s", (int)(n < len - 1 ? n : len - 1), at);
}

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A lock taken and given back through the library, as the programs that
 * use this ensemble would take theirs. */
static void lock_round_trip(const char *url, const char *who, const doc_settings *s)
{
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    char err[256] = "", name[64];
    snprintf(name, sizeof name, "dlock-doctor/%ld", (long)getpid());
    double t0 = mono_ms();
    int rc = dlock_client_new(&c, &url, 1, &s->g->copts, err, sizeof err);
    if (rc == DLOCK_OK && (rc = dlock_lock_new(&l, c, name, NULL)) == DLOCK_OK)
        rc = dlock_lock_acquire(l, 0);
    double took = mono_ms() - t0;
    if (rc == DLOCK_OK) {
        uint64_t fence = dlock_lock_fence(l);
        rc = dlock_lock_release(l);
        doc_add(who, "lock", rc == DLOCK_OK ? DOC_OK : DOC_FAIL,
                rc == DLOCK_OK ? NULL : "a lock could be taken but not given back", NULL,
                "a lock on /%s taken in %.1f ms (session included) and given back; fence "
                "%llu (its node's czxid)%s%s",
                name, took, (unsigned long long)fence, rc == DLOCK_OK ? "" : ": ",
                rc == DLOCK_OK ? "" : dlock_errname(rc));
    } else {
        doc_add(who, "lock", DOC_FAIL, "every lock would fail the same way", NULL,
                "no lock taken: %s (%s)", *err ? err : l ? dlock_lock_errmsg(l) : "",
                dlock_errname(rc));
    }
    dlock_lock_free(l);
    dlock_client_free(c);
}

int doc_zk_check(const char *url, const doc_settings *s)
{
    char red[1024], hosts[1024];
    cli_redact_url(url, red, sizeof red);
    const char *h = url + 5, *at = strchr(h, '@'), *end = h + strcspn(h, "/?");
    if (at && at < end)
        h = at + 1;
    snprintf(hosts, sizeof hosts, "%.*s", (int)(end - h), h);
    int members = 0, answered = 0, standalone = 0;
    int timeout_ms = s->g->copts.connect_timeout_ms + s->g->copts.io_timeout_ms;
    for (char *save = NULL, *m = strtok_r(hosts, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        char host[300], *colon = strrchr(m, ':'), reply[4096], err[256], v[80], mode[40], n[40];
        members++;
        if (!colon) {
            doc_add(m, "member", DOC_FAIL, "no port", "give host:port", "not host:port");
            continue;
        }
        snprintf(host, sizeof host, "%.*s", (int)(colon - m), m);
        if (srvr(host, colon + 1, timeout_ms, reply, sizeof reply, err, sizeof err) != 0) {
            doc_add(m, "member", DOC_FAIL, "an unreachable member cannot serve sessions", NULL,
                    "no answer: %s", err);
            continue;
        }
        if (!strstr(reply, "Mode: ")) {
            doc_add(m, "member", DOC_SKIP, NULL,
                    "add srvr to 4lw.commands.whitelist to let the doctor ask",
                    "connected, but \"srvr\" was not answered (not whitelisted?)");
            answered++;
            continue;
        }
        answered++;
        field(reply, "Zookeeper version: ", v, sizeof v);
        field(reply, "Mode: ", mode, sizeof mode);
        field(reply, "Node count: ", n, sizeof n);
        v[strcspn(v, ",")] = '\0';
        standalone |= strcmp(mode, "standalone") == 0;
        doc_add(m, "member", DOC_OK, NULL, NULL, "ZooKeeper %s, %s, %s znodes", v, mode, n);
    }
    if (answered * 2 <= members)
        doc_add(red, "quorum", DOC_FAIL, "ZooKeeper needs a majority of its members to keep a "
                "session and to create or delete a node", NULL, "%d of %d members answered",
                answered, members);
    else if (members == 1 || standalone)
        doc_add(red, "quorum", DOC_WARN, "when that one server stops, no lock can be taken, and "
                "every hold is lost once its session times out",
                "run an ensemble of 3 or 5 members", "one ZooKeeper server (standalone)");
    else
        doc_add(red, "quorum", DOC_OK, NULL, NULL, "%d of %d members answered", answered,
                members);
    if (answered * 2 > members)
        lock_round_trip(url, red, s);
    return answered;
}
