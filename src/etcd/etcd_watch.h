/* SPDX-License-Identifier: BSD-3-Clause */
/* A watch for one key's deletion (or any of a range's) as a request on a loop: a streaming POST
 * of /v3/watch (one JSON message per line, read by etcd_http.c's sink as
 * it comes), its transfer's sockets and timers records on that loop
 * (etcd_transfer.h), so nothing waits for it. It ends by itself, once,
 * through ended() from the loop: the key went (a DELETE event, or etcd
 * cancelled the watch: compaction; either way "look again"), or the
 * stream failed or was closed. The waiter (etcd_wait.c) stops it when its
 * wait is over.
 *
 * One endpoint, no failover: the waiter looks at the line again when a
 * stream the member took breaks (created below), which also sends the
 * next watch to the member its look reached. Nor does it authenticate: it sends the client's token, which
 * the waiter's own requests got; without one it is not started. */
#ifndef DLOCK_ETCD_WATCH_H
#define DLOCK_ETCD_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "etcd_exchange.h"
#include "loop.h"

typedef struct dlock__etcd_watch {
    /* The caller's, set before the start: once, from the loop, unless
     * stopped first. */
    void (*ended)(struct dlock__etcd_watch *w);
    /* The caller's, or NULL: once, from the loop, when the member took
     * the stream at a revision later than read_rev (the store changed
     * between the caller's read and the stream's start, and what changed
     * then is not in the stream: read again; the stream stays and covers
     * every change after that read). */
    void (*moved)(struct dlock__etcd_watch *w);
    /* The caller's, set before the start: 0 a deletion ends the watch
     * (the waits); 1 any event does, a put too (an election's observer,
     * etcd_elect.c: a proclaim is a put), and a range is watched without
     * the NOPUT filter. */
    int every_event;
    /* When ended() runs: 1 the key went (look again), 0 the stream ended
     * without saying so; deleted: a DELETE event said so (not a
     * cancelled watch). */
    int look, deleted;
    /* The member took the stream (its first message said "created"), and
     * when it started: a stream that breaks after that was cut (a reset,
     * a member restarting), not refused. */
    int created;
    int64_t started_ns;
    /* The revision of the caller's read (start's read_rev), and the one
     * the member took the stream at (its "created" message's header). */
    int64_t read_rev, created_rev;
    /* The request's own. */
    int running;
    dlock__etcd *e;
    dlock__etcd_transfer *h;
    dlock__etcd_sink s;
    struct curl_slist *hdrs;
    char *text;
    char *key; /* what is watched */
    size_t key_len;
} dlock__etcd_watch;

/* Watch key's deletion on loop from the member's current revision on
 * (no start revision: a "synced" watcher, whose events etcd sends as
 * they happen; one that starts at an earlier revision is caught up by
 * etcd 3.4 only every 100 ms, which every hand-over waited for), until
 * deadline_ns at most; with end (not NULL), any deletion of a key of
 * [key, end) (a semaphore's line: etcd_wait.c). read_rev is the revision
 * of the caller's read of what it watches: a stream taken later calls
 * moved(). DLOCK_OK: running, ended() follows unless
 * dlock__etcd_watch_stop() comes first; else (DLOCK_ENOMEM, DLOCK_EAUTH
 * with no token yet) nothing runs and ended() never comes. */
int dlock__etcd_watch_start(dlock__etcd_watch *w, dlock__etcd *e, dlock__loop *loop,
                            const char *key, size_t key_len, const char *end, size_t end_len,
                            int64_t read_rev, int64_t deadline_ns);

/* From the loop (or with the loop not turning): end it without ended(),
 * its transfer back in the pool. Nothing if it is not running. */
void dlock__etcd_watch_stop(dlock__etcd_watch *w);

#endif
