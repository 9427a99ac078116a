/* SPDX-License-Identifier: BSD-3-Clause */
/* One connection to one Redis node: a non-blocking hiredis context driven by
 * poll() from the caller's thread.
 *
 * Commands are pipelined. Every command sent pushes an entry on the
 * connection's expected-reply queue saying what its reply is for: a
 * handshake step (AUTH, SELECT, SCRIPT LOAD, INFO), the caller, or nobody
 * (DISCARD: the caller stopped waiting, e.g. after a Redlock quorum was
 * reached without this node). Replies are matched to entries in order, so a
 * connection with stale replies in flight can be reused safely.
 *
 * A connection that saw any error is never reused (hiredis contexts are not
 * reusable after an error).
 *
 * TLS (src/redis/tls.c) sits between the socket and hiredis: hiredis still formats
 * the commands and parses the replies, but the bytes go through SSL_write
 * and come back through SSL_read into the hiredis reader (redisReaderFeed).
 * The TLS handshake is part of CONNECTING, so the connect timeout bounds it
 * too. */
#ifndef DLOCK_CONN_H
#define DLOCK_CONN_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "scripts.h"
#include "tls.h"
#include "url.h"

typedef enum {
    DLOCK__CS_CONNECTING, /* non-blocking connect() (then TLS handshake) */
    DLOCK__CS_OPEN,       /* connected (handshake replies may be pending) */
    DLOCK__CS_BROKEN      /* failed; free it */
} dlock__conn_state;

typedef enum {
    DLOCK__R_DISCARD, /* nobody waits for this reply */
    DLOCK__R_CHECK,   /* handshake step whose error fails the connection */
    DLOCK__R_LOAD,    /* SCRIPT LOAD: an error only costs an EVAL later */
    DLOCK__R_INFO,    /* INFO server: learn the node's uptime */
    DLOCK__R_ROLE,    /* ROLE: a check that the server is a primary */
    DLOCK__R_CALLER   /* the caller's command number `idx` */
} dlock__reply_kind;

/* A caller of a shared connection (pipe.h): how many of the replies
 * expected are its own. */
typedef struct dlock__conn_tag {
    uint32_t owed;
} dlock__conn_tag;

typedef struct dlock__expect {
    uint8_t kind;
    uint32_t idx;
    /* Whose reply it is on a shared connection (pipe.h): the tag the
     * connection carried when the command was appended. */
    dlock__conn_tag *tag;
} dlock__expect;

typedef struct dlock__conn {
    redisContext *ctx;
    dlock__conn_state state;
    /* TLS session, or NULL on a plain connection. */
    dlock__tls *tls;
    int tcp_open; /* TCP connect done (a TLS handshake may still run) */
    int tls_read_wants_write; /* the last TLS read waits for POLLOUT */
    /* Ring of expected replies. */
    dlock__expect *q;
    size_t q_cap, q_head, q_len;
    /* Commands formatted by hiredis but not yet written. dlock writes them
     * itself with send(MSG_NOSIGNAL), so a peer that went away gives EPIPE
     * and never raises SIGPIPE, with no signal-mask system calls. */
    char *out;
    size_t out_len, out_off, out_cap;
    /* AUTH and SELECT replies not yet seen. Until they are, the caller's
     * commands wait in `held`: Redis runs every command of a pipeline, so
     * after a refused AUTH or SELECT a pipelined EVALSHA would still run,
     * as the default user or in db 0. New authenticating connections pay
     * one round trip for this; the rest of the handshake is pipelined. */
    unsigned checks_pending;
    char *held;
    size_t held_len, held_cap;
    /* A caller command has been (at least partly) written: from now on an
     * I/O failure means "outcome unknown", not "not sent". */
    int caller_sent;
    /* Uptime reported by INFO in the handshake, as a monotonic start time;
     * 0 if not asked. */
    int64_t server_start_ns;
    /* The server's run_id from that INFO ("" if not asked): two node URLs
     * that reach the same server show the same run_id. */
    char run_id[41];
    /* From the same INFO: the server is Redis 7.0 or later, whose SET takes
     * NX and GET together (the unfenced first try, first_try.c). 0: older,
     * or not known (INFO refused by an ACL, or not asked). */
    int set_get;
    int run_id_noted; /* copied to the node (fanout.c), with set_get */
    /* The receive timeout the socket has (0: none; the socket is then
     * still non-blocking), see dlock__conn_read_blocking(). */
    int rcvtimeo_ms;
    /* Monotonic time of the last check-in to the pool (node.c). */
    int64_t checkin_ns;
    /* Its reply timed out (fanout.c): it carries the attempt's undo, then
     * is closed, never pooled. A path that lost the reply may lose the
     * next one too (a blackhole stays one for that connection). */
    int retire;
    struct dlock__conn *next; /* pool link */
    char err[160];            /* why it broke */
    int err_code;             /* and the code it broke with (0: none) */
    int route;                /* Cluster: its master (src/redis/cluster.c); 0: none */
    /* A shared connection (pipe.h): the requests of many callers go out
     * on it together. `tag` names the caller whose commands are appended
     * now (each expected reply keeps it); `fmt_bytes` counts every byte
     * ever queued and `sent_bytes` every byte written, in the same order,
     * so a caller whose first byte was queued at offset m was (at least
     * partly) sent once sent_bytes > m. `shared` is its pipe.h record. */
    dlock__conn_tag *tag;
    uint64_t fmt_bytes, sent_bytes;
    void *shared;
} dlock__conn;

typedef struct dlock__conn_config {
    const dlock__url *url;
    int load_scripts; /* SCRIPT LOAD every embedded script in the handshake */
    int ask_uptime;   /* INFO server in the handshake */
    dlock__tls_ctx *tls_ctx; /* non-NULL: speak TLS */
    /* ROLE in the handshake, before any caller command: a server that is
     * not a primary fails the connection with DLOCK_EIO, nothing of the
     * caller's sent (Sentinel: the address may be stale). */
    int verify_master;
    dlock__tls_cache *tls_cache; /* the node's session to resume, or NULL
                                    (single nodes and Redlock only) */
} dlock__conn_config;

/* Start connecting and queue the handshake. Never returns NULL except on
 * out-of-memory: an immediate failure gives a DLOCK__CS_BROKEN connection
 * whose err says why (so the caller reports it like any other failure). */
dlock__conn *dlock__conn_new(const dlock__conn_config *cfg);
void dlock__conn_free(dlock__conn *c);

/* Append a plain command; its reply goes to the caller as number idx. */
int dlock__conn_append(dlock__conn *c, int argc, const char **argv,
                       const size_t *argvlen, uint32_t idx);

/* Append EVALSHA (or EVAL when use_eval) of script with numkeys keys
 * followed by args; its reply goes to the caller as number idx. */
int dlock__conn_append_script(dlock__conn *c, const dlock__script *s,
                              int numkeys, int nargs, const char **args,
                              const size_t *arglens, int use_eval,
                              uint32_t idx);

/* Append a command whose reply the caller reads itself (pub/sub traffic on
 * a subscriber connection): no expected-reply entry. */
int dlock__conn_append_raw(dlock__conn *c, int argc, const char **argv,
                           const size_t *argvlen);

/* Whether formatted commands are waiting to be written. */
int dlock__conn_has_output(const dlock__conn *c);

/* poll() events this connection waits for now (0: nothing pending). */
short dlock__conn_events(const dlock__conn *c);

/* Handle poll() revents: finish connecting, write, read. On failure the
 * connection becomes BROKEN and the dlock code is returned (DLOCK_EIO if no
 * caller command went out, DLOCK_EUNKNOWN if one did, DLOCK_EAUTH or
 * another mapped code if a handshake step was refused). */
int dlock__conn_io(dlock__conn *c, short revents);

/* One recv() into the hiredis reader on a plain connection. flags is
 * MSG_DONTWAIT, or 0 for the blocking read of dlock__conn_read_blocking().
 * Nothing to read (EAGAIN: also the receive timeout of a blocking read;
 * EINTR) is not an error: the caller's deadline decides. On failure the
 * connection is BROKEN (DLOCK_EUNKNOWN once a caller command went out). */
int dlock__conn_recv(dlock__conn *c, int flags);

/* Wait in one blocking recv() (src/redis/conn_wait.c) of at most io_timeout_ms for bytes from an
 * open plain (not TLS) connection whose output is all written, and feed
 * them to the reader. The first call turns the socket blocking and sets
 * its receive timeout; every other read and write passes MSG_DONTWAIT.
 * DLOCK_OK also when nothing came (timeout or signal): the caller checks
 * its deadline. On failure the connection is BROKEN, as for
 * dlock__conn_io(). */
int dlock__conn_read_blocking(dlock__conn *c, int io_timeout_ms);

/* Take the next reply meant for the caller, if one has arrived.
 * Returns 1 with *reply and *idx set (caller frees with freeReplyObject),
 * 0 if none is buffered yet, or a negative dlock code (connection BROKEN). */
int dlock__conn_take(dlock__conn *c, redisReply **reply, uint32_t *idx);

/* dlock__conn_take() that also gives the tag the reply's command was
 * appended under (a shared connection, pipe.h). */
int dlock__conn_take_tagged(dlock__conn *c, redisReply **reply, uint32_t *idx,
                            dlock__conn_tag **tag);

/* On a shared connection: the caller `tag` gives up waiting; its
 * outstanding entries become DISCARD (the others' stay). */
void dlock__conn_abandon_tag(dlock__conn *c, dlock__conn_tag *tag);

/* What a connection waits for, for messages: "connect", "TLS handshake"
 * or "reply". */
const char *dlock__conn_phase(const dlock__conn *c);

/* The caller gives up waiting: turn its outstanding entries into DISCARD so
 * the connection can go back to the pool. */
void dlock__conn_abandon(dlock__conn *c);

/* Number of replies still expected (any kind). */
size_t dlock__conn_pending(const dlock__conn *c);

/* Cheap liveness check for an idle pooled connection: 0 if it looks usable,
 * -1 if the peer closed it or it failed. One non-blocking recv(MSG_PEEK);
 * on a TLS connection, bytes that arrived while idle are TLS records (a
 * session ticket, a stale reply, an alert or close_notify): they are read
 * through TLS like any reply, and the connection is usable unless that
 * read found the session closed or failed. */
int dlock__conn_probe(dlock__conn *c);

/* Mark broken with a message. Returns code. */
int dlock__conn_fail(dlock__conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
